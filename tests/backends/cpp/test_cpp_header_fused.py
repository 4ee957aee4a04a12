"""The fused vector instructions of ptodsl's CPU pto-isa header (``cpu_subset/ops_fused.hpp``).

Each fused instruction must compute, bit for bit, what the unfused instructions it stands for
compute (a broadcast then the binary instruction; TSUB then TEXP; TMUL then TADD), in both operand
orders and for both forms of a per-row operand pto-isa takes (a column-major single column, or a
row-major 32-byte block per row read at column ``c % 8``). The kernels below run both and return
both results; the tests compare their bytes.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

R, C = 16, 48
DTYPES = {"float": np.dtype(np.float32), "half": np.dtype(np.float16)}

SOURCE = r"""
#include <pto/pto-inst.hpp>
#include <cstdint>
using namespace pto;

constexpr int R = 16;
constexpr int C = 48;
constexpr int SLOT = 4096;  // bytes apart in UB, more than one R x C tile of 4-byte elements

template <typename T> using V = Tile<TileType::Vec, T, R, C, BLayout::RowMajor, DYNAMIC, DYNAMIC>;
template <typename T> using G = GlobalTensor<T, Shape<1, 1, 1, R, C>, Stride<1, 1, 1, C, 1>>;
// a per-row operand: a column-major column, or a row-major 32-byte block per row
template <typename T> using Col = Tile<TileType::Vec, T, R, 1, BLayout::ColMajor, DYNAMIC, 1>;
template <typename T> using GCol = GlobalTensor<T, Shape<1, 1, 1, R, 1>, Stride<1, 1, 1, 1, R>, Layout::DN>;
template <typename T> constexpr int B = 32 / sizeof(T);
template <typename T> using Blk = Tile<TileType::Vec, T, R, B<T>, BLayout::RowMajor, DYNAMIC, B<T>>;
template <typename T> using GBlk = GlobalTensor<T, Shape<1, 1, 1, R, B<T>>, Stride<1, 1, 1, B<T>, 1>>;
// a per-column operand: one row
template <typename T> using Row = Tile<TileType::Vec, T, 1, C, BLayout::RowMajor, 1, DYNAMIC>;
template <typename T> using GRow = GlobalTensor<T, Shape<1, 1, 1, 1, C>, Stride<1, 1, 1, C, 1>>;

template <typename T> void load(V<T>& t, T* p, int slot, int vr, int vc) {
    TASSIGN(t, slot * SLOT); G<T> g(p); t.SetValidShape(R, C); TLOAD(t, g); t.SetValidShape(vr, vc);
}
template <typename T> void store(V<T>& t, T* p) { G<T> g(p); t.SetValidShape(R, C); TSTORE(g, t); }

"""

# The binary instruction each broadcast form fuses; the kernels are written out per case (not
# through macros), so a compile error names its line.
ROW_OPS = {"ADD": "TADD", "SUB": "TSUB", "MUL": "TMUL", "DIV": "TDIV", "MAX": "TMAX", "MIN": "TMIN"}


def _row_case(op: str, t: str, form: str) -> str:
    """fused vs unfused for a row broadcast: ``form`` is col (ColMajor column) or blk (32-byte
    blocks); ``first`` puts the per-row operand first."""
    vt, gvt = ("Col", "GCol") if form == "col" else ("Blk", "GBlk")
    if op == "EXPDIF":
        unfused = "{ if (first) TSUB(tu, te, ta); else TSUB(tu, ta, te); pipe_barrier(PIPE_V); TEXP(tu, tu); }"
    else:
        unfused = f"{{ if (first) {ROW_OPS[op]}(tu, te, ta); else {ROW_OPS[op]}(tu, ta, te); }}"
    return f"""
extern "C" void row_{op}_{form}_{t}({t}* fused, {t}* unfused, {t}* a, {t}* vec, int vr, int vc, int first) {{
    V<{t}> ta(R, C), td(R, C), te(R, C), tu(R, C);
    load(ta, a, 0, vr, vc);
    {vt}<{t}> tv(R);
    TASSIGN(tv, 1 * SLOT); {gvt}<{t}> gv(vec); TLOAD(tv, gv); tv.SetValidRow(vr);
    TASSIGN(td, 2 * SLOT); TASSIGN(te, 3 * SLOT); TASSIGN(tu, 4 * SLOT);
    td.SetValidShape(vr, vc); te.SetValidShape(vr, vc); tu.SetValidShape(vr, vc);
    V<{t}> tmp(R, C); TASSIGN(tmp, 5 * SLOT);
    if (first) TROWEXPAND{op}(td, tv, ta, tmp); else TROWEXPAND{op}(td, ta, tv);
    TROWEXPAND(te, tv);
    {unfused}
    store(td, fused); store(tu, unfused);
}}"""


def _col_case(op: str, t: str) -> str:
    if op == "EXPDIF":
        unfused = "{ if (first) TSUB(tu, te, ta); else TSUB(tu, ta, te); pipe_barrier(PIPE_V); TEXP(tu, tu); }"
    else:
        unfused = f"{{ if (first) {ROW_OPS[op]}(tu, te, ta); else {ROW_OPS[op]}(tu, ta, te); }}"
    return f"""
extern "C" void col_{op}_{t}({t}* fused, {t}* unfused, {t}* a, {t}* vec, int vr, int vc, int first) {{
    V<{t}> ta(R, C), td(R, C), te(R, C), tu(R, C);
    load(ta, a, 0, vr, vc);
    Row<{t}> tv(C);
    TASSIGN(tv, 1 * SLOT); GRow<{t}> gv(vec); TLOAD(tv, gv); tv.SetValidCol(vc);
    TASSIGN(td, 2 * SLOT); TASSIGN(te, 3 * SLOT); TASSIGN(tu, 4 * SLOT);
    td.SetValidShape(vr, vc); te.SetValidShape(vr, vc); tu.SetValidShape(vr, vc);
    if (first) TCOLEXPAND{op}(td, tv, ta); else TCOLEXPAND{op}(td, ta, tv);
    TCOLEXPAND(te, tv);
    {unfused}
    store(td, fused); store(tu, unfused);
}}"""


def _muladd_case(t: str) -> str:
    return f"""
extern "C" void muladd_{t}({t}* fused, {t}* unfused, {t}* a, {t}* b, {t}* c, int vr, int vc, int which) {{
    V<{t}> ta(R, C), tb(R, C), tc(R, C), tu(R, C), tp(R, C);
    load(ta, a, 0, vr, vc); load(tb, b, 1, vr, vc); load(tc, c, 2, vr, vc);
    TASSIGN(tu, 3 * SLOT); TASSIGN(tp, 4 * SLOT); tu.SetValidShape(vr, vc); tp.SetValidShape(vr, vc);
    TMUL(tp, ta, tb); TADD(tu, tp, tc);              // a * b + c, unfused
    if (which == 0) {{ TMULADDDST(tc, ta, tb); store(tc, fused); }}   // c = a * b + c
    else {{ TFUSEDMULADD(tb, ta, tc); store(tb, fused); }}            // b = a * b + c
    store(tu, unfused);
}}"""


# The 32-byte-block form reads column c % B of its row: checked against numpy directly.
BLOCK_SOURCE = r"""
extern "C" void row_block_sub_float(float* d, float* a, float* blk, int vr, int vc) {
    V<float> ta(R, C), td(R, C);
    load(ta, a, 0, vr, vc);
    Blk<float> tv(R);
    TASSIGN(tv, 1 * SLOT); GBlk<float> gv(blk); TLOAD(tv, gv); tv.SetValidRow(vr);
    TASSIGN(td, 2 * SLOT); td.SetValidShape(vr, vc);
    TROWEXPANDSUB(td, ta, tv);
    store(td, d);
}
"""


def _source() -> str:
    parts = [SOURCE]
    for t in DTYPES:
        for op in [*ROW_OPS, "EXPDIF"]:
            parts += [_row_case(op, t, "col"), _col_case(op, t)]
        parts.append(_muladd_case(t))
    parts.append(BLOCK_SOURCE)
    return "\n".join(parts)


@pytest.fixture(scope="module")
def lib(cpp):
    return cpp.build({"fused_ops.cpp": _source()}, "fused_ops", flags=("-O1", "-Wall", "-Wextra", "-Werror"))[1]


RNG = np.random.default_rng(7)


def rand(dt: np.dtype, shape=(R, C), lo=-3.0, hi=3.0) -> np.ndarray:
    return RNG.uniform(lo, hi, size=shape).astype(dt)


def call(lib, name: str, *args) -> None:
    getattr(lib, name)(*[ctypes.c_void_p(a.ctypes.data) if isinstance(a, np.ndarray) else ctypes.c_int(a)
                         for a in args])


def same_bytes(x: np.ndarray, y: np.ndarray, vr: int, vc: int) -> None:
    np.testing.assert_array_equal(x[:vr, :vc].view(np.uint8), y[:vr, :vc].view(np.uint8))


@pytest.mark.parametrize("first", [0, 1], ids=["full-first", "spread-first"])
@pytest.mark.parametrize("op", [*ROW_OPS, "EXPDIF"])
@pytest.mark.parametrize("t", list(DTYPES))
def test_row_broadcast_instructions_match_the_unfused_ones(lib, t, op, first):
    dt = DTYPES[t]
    a, vec = rand(dt), rand(dt, shape=(R,), lo=0.5, hi=2.5)
    fused, unfused = np.zeros((R, C), dt), np.ones((R, C), dt)
    # a one-column region with the column first is the tie pto-isa breaks its own ways (its CPU
    # simulation takes src0 as the full operand, A2/A3 the one with the longer rows); the
    # compiler never emits it (a per-row operand that comes first goes in 32-byte blocks)
    for vr, vc in [(R, C), (5, 33), *([] if first else [(1, 1)])]:
        call(lib, f"row_{op}_col_{t}", fused, unfused, a, vec, vr, vc, first)
        same_bytes(fused, unfused, vr, vc)
        ref = {"SUB": np.subtract, "EXPDIF": lambda x, y: np.exp(x - y)}.get(op)
        if ref is not None:  # and both are what the op means
            x, y = (vec[:, None], a) if first else (a, vec[:, None])
            np.testing.assert_allclose(fused[:vr, :vc].astype(np.float32),
                                       ref(x.astype(np.float32), y.astype(np.float32))[:vr, :vc],
                                       rtol=1e-2 if t == "half" else 2e-6)


@pytest.mark.parametrize("first", [0, 1], ids=["full-first", "spread-first"])
@pytest.mark.parametrize("op", [*ROW_OPS, "EXPDIF"])
@pytest.mark.parametrize("t", list(DTYPES))
def test_column_broadcast_instructions_match_the_unfused_ones(lib, t, op, first):
    dt = DTYPES[t]
    a, vec = rand(dt), rand(dt, shape=(C,), lo=0.5, hi=2.5)
    fused, unfused = np.zeros((R, C), dt), np.ones((R, C), dt)
    for vr, vc in [(R, C), (3, 17)]:
        call(lib, f"col_{op}_{t}", fused, unfused, a, vec, vr, vc, first)
        same_bytes(fused, unfused, vr, vc)


@pytest.mark.parametrize("which", [0, 1], ids=["TMULADDDST", "TFUSEDMULADD"])
@pytest.mark.parametrize("t", list(DTYPES))
def test_multiply_adds_round_the_product_as_tmul_then_tadd(lib, t, which):
    dt = DTYPES[t]
    a, b, c = rand(dt), rand(dt), rand(dt)
    fused, unfused = np.zeros((R, C), dt), np.ones((R, C), dt)
    call(lib, f"muladd_{t}", fused, unfused, a, b, c, 6, 29, which)
    same_bytes(fused, unfused, 6, 29)
    # ...which differs from one rounding of a * b + c somewhere in these values
    exact = (a.astype(np.float64) * b + c).astype(dt)
    assert not np.array_equal(exact[:6, :29], fused[:6, :29])


def test_a_per_row_block_is_read_at_column_c_mod_8(lib):
    a = rand(np.dtype(np.float32))
    blk = rand(np.dtype(np.float32), shape=(R, 8))
    d = np.zeros((R, C), np.float32)
    call(lib, "row_block_sub_float", d, a, blk, 7, 37)
    want = a - blk[:, np.arange(C) % 8]
    np.testing.assert_array_equal(d[:7, :37], want[:7, :37])

