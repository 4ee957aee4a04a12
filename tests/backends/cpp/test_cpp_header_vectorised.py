"""The CPU header's tile loops vectorise, and vectorising them changed no result.

g++ -O3 vectorises the element loops, reductions and the matrix product's register block of
ptodsl's CPU header (checked with -fopt-info-vec on a kernel of those instructions); where a loop
would have to run in another order than element by element (operands that overlap, a max or min
that meets a NaN or a zero), the header keeps the element-wise order, and TEXP is the correctly
rounded e^x of every float.
"""

from __future__ import annotations

import ctypes
import platform
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ptodsl.backends.cpp import build

HEADERS = build.HEADER_DIR / "pto" / "cpu_subset"

SOURCE = r"""
#include <pto/pto-inst.hpp>
using namespace pto;

constexpr int W = 4096;
using Wide = Tile<TileType::Vec, float, 1, W, BLayout::RowMajor, 1, DYNAMIC>;
using G = GlobalTensor<float, Shape<1, 1, 1, 1, DYNAMIC>, Stride<1, 1, 1, W, 1>>;

// y = e^x for n floats, a tile of W at a time.
extern "C" void exp_run(float* y, float* x, int n) {
    Wide in, out;
    TASSIGN(in, 0);
    TASSIGN(out, W * 4);
    for (int at = 0; at < n; at += W) {
        const int len = n - at < W ? n - at : W;
        in.SetValidCol(len);
        out.SetValidCol(len);
        G gx(x + at, G::Shape(len)), gy(y + at, G::Shape(len));
        TLOAD(in, gx);
        TEXP(out, in);
        TSTORE(gy, out);
    }
}

// TADD(d, a, a) where d starts `shift` floats after a in the buffer, over `cols` columns: each
// element of d is written before a later element of a (the same memory) is read.
using Row = Tile<TileType::Vec, float, 1, 64, BLayout::RowMajor, 1, DYNAMIC>;
using G64 = GlobalTensor<float, Shape<1, 1, 1, 1, DYNAMIC>, Stride<1, 1, 1, 64, 1>>;
extern "C" void overlapping_add(float* buffer, int shift, int cols) {
    Row whole(64), d(cols), a(cols);
    TASSIGN(whole, 0);
    G64 g(buffer, G64::Shape(64));
    TLOAD(whole, g);
    TASSIGN(a, 0);
    TASSIGN(d, shift * 4);
    TADD(d, a, a);
    TSTORE(g, whole);
}

// Row maxima and minima of R rows of n floats.
constexpr int R = 8;
using Rows = Tile<TileType::Vec, float, R, 256, BLayout::RowMajor, R, DYNAMIC>;
using PerRow = Tile<TileType::Vec, float, R, 8, BLayout::RowMajor, R, 1>;
using GR = GlobalTensor<float, Shape<1, 1, 1, R, DYNAMIC>, Stride<1, 1, 1, 256, 1>>;
using GP = GlobalTensor<float, Shape<1, 1, 1, R, 1>, Stride<1, 1, 1, 1, 1>>;
extern "C" void row_extremes(float* maxima, float* minima, float* x, int n) {
    Rows in(n);
    PerRow hi, lo;
    TASSIGN(in, 0);
    TASSIGN(hi, R * 256 * 4);
    TASSIGN(lo, R * 256 * 4 + R * 32);
    GR g(x, GR::Shape(n));
    TLOAD(in, g);
    TROWMAX(hi, in, in);
    TROWMIN(lo, in, in);
    GP gh(maxima), gl(minima);
    TSTORE(gh, hi);
    TSTORE(gl, lo);
}
"""


@pytest.fixture(scope="module")
def lib(cpp):
    # at -O3 whatever the suite builds at (PTODSL_CPU_OPT): the level that vectorises
    return cpp.build({"vectorised.cpp": SOURCE}, "vectorised", flags=("-O3",))[1]


def pointer(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def test_exp_is_the_correctly_rounded_float(lib):
    # a million floats spread over every exponent from underflow to overflow, and the edges
    bits = np.arange(0, 1 << 32, 4093, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x) & (x > -110) & (x < 90)]
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.72283, 88.72284, -87.33655, -103.97208, -104.0,
                        1e-30, -1e-30, 1.0, -1.0], np.float32)
    x = np.concatenate([x, special])
    y = np.empty_like(x)
    lib.exp_run(pointer(y), pointer(x), ctypes.c_int(x.size))
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
    wrong = np.flatnonzero(y.view(np.uint32) != want.view(np.uint32))
    wrong = wrong[~(np.isnan(y[wrong]) & np.isnan(want[wrong]))]
    assert wrong.size == 0, f"{wrong.size} of {x.size} differ, e.g. e^{x[wrong[0]]!r} = {y[wrong[0]]!r}"


@pytest.mark.parametrize("shift,cols", [(8, 56), (8, 17), (16, 48)])
def test_overlapping_operands_keep_the_element_order(lib, shift, cols):
    buffer = np.arange(64, dtype=np.float32) + 1
    want = buffer.copy()
    for c in range(cols):  # the instruction's meaning: element after element
        want[shift + c] = want[c] + want[c]
    lib.overlapping_add(pointer(buffer), ctypes.c_int(shift), ctypes.c_int(cols))
    np.testing.assert_array_equal(buffer, want)


def fold(row: np.ndarray, keep) -> np.float32:
    """The element-wise rule: start from the first element, take a later one when it compares so."""
    acc = row[0]
    for x in row[1:]:
        if keep(x, acc):
            acc = x
    return acc


def test_row_extremes_keep_the_element_order_rules(lib):
    n = 200
    rows = np.random.default_rng(3).uniform(-5, 5, (8, n)).astype(np.float32)
    rows[0, 0] = np.nan  # a NaN first is the result
    rows[1, 77] = np.nan  # a NaN later is passed over
    rows[2] = 0.0
    rows[2, 5] = -0.0  # the extreme is a zero: the first zero of the extreme counts
    rows[2, 150] = -0.0
    rows[3] = -0.0
    rows[3, 9] = 0.0
    rows[4, :] = -np.inf
    rows[5, 100] = np.inf
    x = np.zeros((8, 256), np.float32)
    x[:, :n] = rows
    maxima, minima = np.zeros(8, np.float32), np.zeros(8, np.float32)
    lib.row_extremes(pointer(maxima), pointer(minima), pointer(x), ctypes.c_int(n))
    want_max = np.array([fold(r, lambda a, b: a > b) for r in rows], np.float32)
    want_min = np.array([fold(r, lambda a, b: a < b) for r in rows], np.float32)
    np.testing.assert_array_equal(maxima.view(np.uint32), want_max.view(np.uint32))
    np.testing.assert_array_equal(minima.view(np.uint32), want_min.view(np.uint32))


# --------------------------------------------------------------------------- what vectorises

KERNEL = r"""
#include <pto/pto-inst.hpp>
using namespace pto;
using T = Tile<TileType::Vec, float, 8, 256, BLayout::RowMajor, DYNAMIC, DYNAMIC>;
using S = Tile<TileType::Vec, float, 8, 8, BLayout::RowMajor, DYNAMIC, 1>;
extern "C" void k_add(int r, int c) { T a(r, c), b(r, c), d(r, c); TASSIGN(a, 0); TASSIGN(b, 8192); TASSIGN(d, 16384); TADD(d, a, b); }
extern "C" void k_exp(int r, int c) { T a(r, c), d(r, c); TASSIGN(a, 0); TASSIGN(d, 16384); TEXP(d, a); }
extern "C" void k_sum(int r, int c) { T a(r, c); S s(r); TASSIGN(a, 0); TASSIGN(s, 16384); TROWSUM(s, a, a); }
extern "C" void k_max(int r, int c) { T a(r, c); S s(r); TASSIGN(a, 0); TASSIGN(s, 16384); TROWMAX(s, a, a); }
extern "C" void k_mm(int m, int k, int n) {
    TileLeft<float, 64, 64, DYNAMIC, DYNAMIC> a(m, k);
    TileRight<float, 64, 64, DYNAMIC, DYNAMIC> b(k, n);
    TileAcc<float, 64, 64, DYNAMIC, DYNAMIC> c(m, n);
    TASSIGN(a, 0); TASSIGN(b, 0); TASSIGN(c, 0);
    TMATMUL(c, a, b);
}
"""


def line_after(path: Path, anchor: str, pattern: str) -> int:
    """The number of the first line matching ``pattern`` after the line holding ``anchor``."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if anchor in line)
    return next(i for i in range(start, len(lines)) if re.search(pattern, lines[i])) + 1


@pytest.mark.skipif(shutil.which("g++") is None or platform.machine() not in ("x86_64", "AMD64"),
                    reason="needs g++ on x86-64")
def test_the_hot_loops_vectorise(tmp_path, monkeypatch):
    monkeypatch.delenv("PTODSL_CPU_ARCH", raising=False)
    monkeypatch.delenv("PTODSL_CPU_OPT", raising=False)  # what users build with: -O3
    toolchain = build.find_toolchain()
    flags = build.compile_flags(toolchain, build.include_mode(), (), {}, build.target_arch(toolchain))
    assert any(f.startswith("-march=") for f in flags), "this x86-64 machine should build for a newer level"
    (tmp_path / "k.cpp").write_text(KERNEL)
    flags = [f for f in flags if f not in ("-shared", "-fPIC")]
    out = subprocess.run([toolchain.path, *flags, "-fopt-info-vec-optimized", "-c", "k.cpp", "-o", "k.o"],
                         cwd=tmp_path, capture_output=True, text=True, check=True).stderr
    vectorised = {(Path(m[1]).name, int(m[2])) for m in re.finditer(r"([^\s:]+):(\d+):\d+: optimized: .*vectorized", out)}
    vector = HEADERS / "ops_vector.hpp"
    reduce = HEADERS / "ops_reduce.hpp"
    cube = HEADERS / "ops_cube.hpp"
    wanted = {
        "element-wise (TADD, TEXP)": ("ops_vector.hpp", line_after(vector, "inline void binary_run(", r"for \(")),
        "unary (TEXP)": ("ops_vector.hpp", line_after(vector, "inline void unary_run(", r"for \(")),
        "row sum (8 partial sums)": ("ops_reduce.hpp", line_after(reduce, "inline V pairwise_leaf(", r"i \+= 8")),
        "row max": ("ops_reduce.hpp", line_after(reduce, "inline V fold_run(", r"for \(")),
        # g++ reports the register block (vectorised as straight-line code) at the function's line
        "matmul register block": ("ops_cube.hpp", line_after(cube, "inline void dense_product(", r"dense_product\(")),
    }
    missing = [what for what, at in wanted.items() if at not in vectorised]
    assert not missing, f"not vectorised: {missing}\n{out}"
