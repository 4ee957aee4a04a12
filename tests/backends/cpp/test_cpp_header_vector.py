"""Vector instructions of ptodsl's CPU pto-isa header, each checked against numpy.

One C++ translation unit (below) wraps every instruction in an extern "C" function that loads
16x32 tiles from numpy buffers, narrows the destination's valid region, runs the instruction and
stores the whole destination back, so each test sees both the valid region and the rest.
"""

from __future__ import annotations

import ctypes
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

# Out-of-range values are converted on purpose (they test saturation and overflow to infinity).
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

R, C = 16, 32
DTYPES = {
    "float": np.dtype(np.float32),
    "half": np.dtype(np.float16),
    "bfloat16_t": np.dtype(ml_dtypes.bfloat16),
    "int32_t": np.dtype(np.int32),
    "int16_t": np.dtype(np.int16),
}
FLOATS = ("float", "half", "bfloat16_t")
REGIONS = [(R, C), (11, 21), (1, 1)]

SOURCE = r"""
#include <pto/pto-inst.hpp>
#include <cstdint>
using namespace pto;

constexpr int R = 16;
constexpr int C = 32;
constexpr int SLOT = R * C * 4;  // bytes of one 16x32 tile of up to 4-byte elements
constexpr BLayout RM = BLayout::RowMajor;
constexpr BLayout CM = BLayout::ColMajor;

template <typename T, BLayout L = RM>
using V = Tile<TileType::Vec, T, R, C, L, DYNAMIC, DYNAMIC>;
template <typename T> using Gnd = GlobalTensor<T, Shape<1, 1, 1, R, C>, Stride<1, 1, 1, C, 1>>;
template <typename T> using Gdn = GlobalTensor<T, Shape<1, 1, 1, R, C>, Stride<1, 1, 1, 1, R>, Layout::DN>;
template <typename T, BLayout L> struct Gm { using type = Gnd<T>; };
template <typename T> struct Gm<T, CM> { using type = Gdn<T>; };

// Per-row and per-column vectors: an R x 1 ColMajor tile and a 1 x C RowMajor tile.
template <typename T> using Col = Tile<TileType::Vec, T, R, 1, CM, DYNAMIC, 1>;
template <typename T> using GCol = GlobalTensor<T, Shape<1, 1, 1, R, 1>, Stride<1, 1, 1, 1, R>, Layout::DN>;
template <typename T> using Row = Tile<TileType::Vec, T, 1, C, RM, 1, DYNAMIC>;
template <typename T> using GRow = GlobalTensor<T, Shape<1, 1, 1, 1, C>, Stride<1, 1, 1, C, 1>>;
using Mask = Tile<TileType::Vec, uint8_t, R, 32>;
// The mask as compare and select see it: each row's C / 8 bytes (pto-isa's row-aligned packing).
using MaskRows = Tile<TileType::Vec, uint8_t, R, 32, RM, DYNAMIC, C / 8>;
using GMask = GlobalTensor<uint8_t, Shape<1, 1, 1, R, 32>, Stride<1, 1, 1, 32, 1>>;

template <typename T, BLayout L>
void load_full(V<T, L>& t, T* p, int slot) {
    TASSIGN(t, slot * SLOT);
    typename Gm<T, L>::type g(p);
    TLOAD(t, g);
}

template <typename T, BLayout L>
void store_full(V<T, L>& t, T* p) {
    t.SetValidShape(R, C);
    typename Gm<T, L>::type g(p);
    TSTORE(g, t);
}

template <typename T, BLayout LD, BLayout LA, BLayout LB, typename Op>
void binary_case(T* d, T* a, T* b, int vr, int vc, Op op) {
    V<T, LD> td(R, C);
    V<T, LA> ta(R, C);
    V<T, LB> tb(R, C);
    load_full(ta, a, 0);
    load_full(tb, b, 1);
    load_full(td, d, 2);
    td.SetValidShape(vr, vc);
    op(td, ta, tb);
    store_full(td, d);
}

template <typename T, typename Op>
void unary_case(T* d, T* a, int vr, int vc, Op op) {
    V<T> td(R, C), ta(R, C);
    load_full(ta, a, 0);
    load_full(td, d, 1);
    td.SetValidShape(vr, vc);
    op(td, ta);
    store_full(td, d);
}

#define BINARY(OP, T)                                                                        \
    extern "C" void OP##_##T(T* d, T* a, T* b, int vr, int vc) {                             \
        binary_case<T, RM, RM, RM>(d, a, b, vr, vc, [](auto& x, auto& y, auto& z) { OP(x, y, z); }); \
    }
#define SCALAR(OP, T)                                                                        \
    extern "C" void OP##_##T(T* d, T* a, float s, int vr, int vc) {                          \
        const T v = T(s);                                                                    \
        unary_case<T>(d, a, vr, vc, [v](auto& x, auto& y) { OP(x, y, v); });                 \
    }
#define UNARY(OP, T)                                                                         \
    extern "C" void OP##_##T(T* d, T* a, int vr, int vc) {                                   \
        unary_case<T>(d, a, vr, vc, [](auto& x, auto& y) { OP(x, y); });                     \
    }
#define FLOAT_TYPES(M, OP) M(OP, float) M(OP, half) M(OP, bfloat16_t)

FLOAT_TYPES(BINARY, TADD) FLOAT_TYPES(BINARY, TSUB) FLOAT_TYPES(BINARY, TMUL)
FLOAT_TYPES(BINARY, TDIV) FLOAT_TYPES(BINARY, TMAX) FLOAT_TYPES(BINARY, TMIN)
BINARY(TADD, int32_t) BINARY(TSUB, int32_t) BINARY(TMUL, int32_t) BINARY(TMAX, int32_t) BINARY(TMIN, int32_t)
BINARY(TADD, int16_t) BINARY(TMAX, int16_t)
FLOAT_TYPES(SCALAR, TADDS) FLOAT_TYPES(SCALAR, TSUBS) FLOAT_TYPES(SCALAR, TMULS)
FLOAT_TYPES(SCALAR, TDIVS) FLOAT_TYPES(SCALAR, TMAXS) FLOAT_TYPES(SCALAR, TMINS)
SCALAR(TADDS, int32_t) SCALAR(TMULS, int32_t) SCALAR(TMAXS, int32_t) SCALAR(TMINS, int32_t)
FLOAT_TYPES(UNARY, TEXP) FLOAT_TYPES(UNARY, TLOG) FLOAT_TYPES(UNARY, TSQRT) FLOAT_TYPES(UNARY, TRSQRT)
FLOAT_TYPES(UNARY, TRECIP) FLOAT_TYPES(UNARY, TABS) FLOAT_TYPES(UNARY, TNEG) FLOAT_TYPES(UNARY, TRELU)
UNARY(TABS, int32_t) UNARY(TNEG, int32_t) UNARY(TRELU, int32_t)

// scalar / tile
#define SCALAR_FIRST(T)                                                                      \
    extern "C" void TDIVS_rev_##T(T* d, T* a, float s, int vr, int vc) {                     \
        const T v = T(s);                                                                    \
        unary_case<T>(d, a, vr, vc, [v](auto& x, auto& y) { TDIVS(x, v, y); });              \
    }
SCALAR_FIRST(float) SCALAR_FIRST(half)

#define EXPANDS(T)                                                                           \
    extern "C" void TEXPANDS_##T(T* d, float s, int vr, int vc) {                            \
        V<T> td(R, C);                                                                       \
        load_full(td, d, 0);                                                                 \
        td.SetValidShape(vr, vc);                                                            \
        TEXPANDS(td, T(s));                                                                  \
        store_full(td, d);                                                                   \
    }
EXPANDS(float) EXPANDS(half) EXPANDS(int32_t)

// Operands in different layouts: dst RowMajor, src0 ColMajor (DN in GM), src1 ColMajor.
extern "C" void TADD_mixed(float* d, float* a_dn, float* b_dn, int vr, int vc) {
    binary_case<float, RM, CM, CM>(d, a_dn, b_dn, vr, vc, [](auto& x, auto& y, auto& z) { TADD(x, y, z); });
}
extern "C" void TMUL_colmajor(float* d_dn, float* a_dn, float* b, int vr, int vc) {
    binary_case<float, CM, CM, RM>(d_dn, a_dn, b, vr, vc, [](auto& x, auto& y, auto& z) { TMUL(x, y, z); });
}
// In place: dst is also the first source.
extern "C" void TSUB_inplace(float* d, float* b, int vr, int vc) {
    V<float> td(R, C), tb(R, C);
    load_full(td, d, 0);
    load_full(tb, b, 1);
    td.SetValidShape(vr, vc);
    TSUB(td, td, tb);
    store_full(td, d);
}

// ------------------------------------------------------------------------------ conversion
template <typename D, typename S>
void cvt_case(D* d, S* s, int vr, int vc, int mode) {
    V<D> td(R, C);
    V<S> ts(R, C);
    load_full(ts, s, 0);
    load_full(td, d, 1);
    ts.SetValidShape(vr, vc);  // TCVT covers the source's valid region, as pto-isa's does
    TCVT(td, ts, static_cast<RoundMode>(mode));
    store_full(td, d);
}
#define CVT(DN, D, SN, S) \
    extern "C" void TCVT_##SN##_##DN(D* d, S* s, int vr, int vc, int mode) { cvt_case<D, S>(d, s, vr, vc, mode); }
CVT(f16, half, f32, float) CVT(bf16, bfloat16_t, f32, float) CVT(f32, float, f16, half)
CVT(f32, float, bf16, bfloat16_t) CVT(i32, int32_t, f32, float) CVT(f32, float, i32, int32_t)
CVT(i32, int32_t, f16, half) CVT(i16, int16_t, f32, float) CVT(f16, half, i32, int32_t)
CVT(bf16, bfloat16_t, f16, half)

// With the scratch-tile overload.
extern "C" void TCVT_tmp_f32_f16(half* d, float* s, int mode) {
    V<half> td(R, C);
    V<float> ts(R, C), tmp(R, C);
    load_full(ts, s, 0);
    TASSIGN(td, SLOT);
    TASSIGN(tmp, 2 * SLOT);
    TCVT(td, ts, tmp, static_cast<RoundMode>(mode));
    store_full(td, d);
}

// ------------------------------------------------------------------------------ compare, select
// Compare over a partial region, select over its whole rows (as emitted kernels do).
template <typename T, typename Cmp>
void select_case(uint8_t* mask, T* d, T* a, T* b, int vr, int vc, Cmp cmp) {
    V<T> ta(R, C), tb(R, C), td(R, C), tmp(R, C);
    Mask m;
    MaskRows rows(vr);
    load_full(ta, a, 0);
    load_full(tb, b, 1);
    load_full(td, d, 2);
    TASSIGN(tmp, 4 * SLOT);
    TASSIGN(m, 3 * SLOT);
    TASSIGN(rows, 3 * SLOT);
    GMask gm(mask);
    TLOAD(m, gm);
    ta.SetValidShape(vr, vc);
    tb.SetValidShape(vr, vc);
    cmp(rows, ta, tb);
    ta.SetValidShape(vr, C);
    tb.SetValidShape(vr, C);
    td.SetValidShape(vr, C);
    TSEL(td, rows, ta, tb, tmp);
    TSTORE(gm, m);
    store_full(td, d);
}
#define SELECT(T)                                                                                   \
    extern "C" void TCMPS_##T(uint8_t* mask, T* d, T* a, T* b, float s, int mode, int vr, int vc) { \
        const T v = T(s);                                                                           \
        select_case<T>(mask, d, a, b, vr, vc, [v, mode](auto& m, auto& x, auto&) {                  \
            TCMPS(m, x, v, static_cast<CmpMode>(mode));                                             \
        });                                                                                         \
    }                                                                                               \
    extern "C" void TCMP_##T(uint8_t* mask, T* d, T* a, T* b, int mode, int vr, int vc) {           \
        select_case<T>(mask, d, a, b, vr, vc, [mode](auto& m, auto& x, auto& y) {                   \
            TCMP(m, x, y, static_cast<CmpMode>(mode));                                              \
        });                                                                                         \
    }
SELECT(float) SELECT(half) SELECT(int32_t)

// TSEL with the scratch tile, mask from a GM buffer.
extern "C" void TSEL_tmp(float* d, uint8_t* mask, float* a, float* b, int vr, int vc) {
    V<float> ta(R, C), tb(R, C), td(R, C), tmp(R, C);
    Mask m;
    MaskRows rows(vr);
    load_full(ta, a, 0);
    load_full(tb, b, 1);
    load_full(td, d, 2);
    TASSIGN(tmp, 3 * SLOT);
    TASSIGN(m, 4 * SLOT);
    TASSIGN(rows, 4 * SLOT);
    GMask gm(mask);
    TLOAD(m, gm);
    td.SetValidShape(vr, vc);
    TSEL(td, rows, ta, tb, tmp);
    store_full(td, d);
}

// ------------------------------------------------------------------------------ reductions
template <typename T, typename Op>
void row_reduce_case(T* out, T* a, int vr, int vc, Op op) {
    V<T> ta(R, C), tmp(R, C);
    Col<T> td(R);
    load_full(ta, a, 0);
    TASSIGN(tmp, SLOT);
    TASSIGN(td, 2 * SLOT);
    GCol<T> go(out);
    TLOAD(td, go);
    ta.SetValidShape(vr, vc);
    op(td, ta, tmp);
    TSTORE(go, td);
}
template <typename T, typename Op>
void col_reduce_case(T* out, T* a, int vr, int vc, Op op) {
    V<T> ta(R, C);
    Row<T> td(C);
    load_full(ta, a, 0);
    TASSIGN(td, 2 * SLOT);
    GRow<T> go(out);
    TLOAD(td, go);
    ta.SetValidShape(vr, vc);
    op(td, ta);
    TSTORE(go, td);
}
#define ROW_REDUCE(OP, T)                                                                    \
    extern "C" void OP##_##T(T* out, T* a, int vr, int vc) {                                 \
        row_reduce_case<T>(out, a, vr, vc, [](auto& d, auto& s, auto& t) { OP(d, s, t); });  \
    }
#define COL_REDUCE(OP, T)                                                                    \
    extern "C" void OP##_##T(T* out, T* a, int vr, int vc) {                                 \
        col_reduce_case<T>(out, a, vr, vc, [](auto& d, auto& s) { OP(d, s); });              \
    }
FLOAT_TYPES(ROW_REDUCE, TROWSUM) FLOAT_TYPES(ROW_REDUCE, TROWMAX) FLOAT_TYPES(ROW_REDUCE, TROWMIN)
FLOAT_TYPES(COL_REDUCE, TCOLSUM) FLOAT_TYPES(COL_REDUCE, TCOLMAX) FLOAT_TYPES(COL_REDUCE, TCOLMIN)
ROW_REDUCE(TROWSUM, int32_t) COL_REDUCE(TCOLMAX, int32_t)
extern "C" void TCOLSUM_tmp_float(float* out, float* a, int vr, int vc) {
    col_reduce_case<float>(out, a, vr, vc, [](auto& d, auto& s) {
        V<float> tmp(R, C);
        TASSIGN(tmp, 3 * SLOT);
        TCOLSUM(d, s, tmp, true);
    });
}

// ------------------------------------------------------------------------------ broadcasts
template <typename T, typename Op>
void row_expand_case(T* d, T* a, T* col, int vr, int vc, Op op) {
    V<T> td(R, C), ta(R, C);
    Col<T> tc(R);
    load_full(ta, a, 0);
    load_full(td, d, 1);
    TASSIGN(tc, 2 * SLOT);
    GCol<T> gc(col);
    TLOAD(tc, gc);
    td.SetValidShape(vr, vc);
    ta.SetValidShape(vr, vc);  // the full operand has dst's valid shape, the per-row one its rows
    tc.SetValidRow(vr);
    op(td, ta, tc);
    store_full(td, d);
}
template <typename T, typename Op>
void col_expand_case(T* d, T* a, T* row, int vr, int vc, Op op) {
    V<T> td(R, C), ta(R, C);
    Row<T> tr(C);
    load_full(ta, a, 0);
    load_full(td, d, 1);
    TASSIGN(tr, 2 * SLOT);
    GRow<T> gr(row);
    TLOAD(tr, gr);
    td.SetValidShape(vr, vc);
    ta.SetValidShape(vr, vc);
    op(td, ta, tr);
    store_full(td, d);
}
#define ROW_EXPAND(OP, T)                                                                    \
    extern "C" void OP##_##T(T* d, T* a, T* v, int vr, int vc) {                             \
        row_expand_case<T>(d, a, v, vr, vc, [](auto& x, auto& y, auto& z) { OP(x, y, z); }); \
    }
#define COL_EXPAND(OP, T)                                                                    \
    extern "C" void OP##_##T(T* d, T* a, T* v, int vr, int vc) {                             \
        col_expand_case<T>(d, a, v, vr, vc, [](auto& x, auto& y, auto& z) { OP(x, y, z); }); \
    }
FLOAT_TYPES(ROW_EXPAND, TROWEXPANDADD) FLOAT_TYPES(ROW_EXPAND, TROWEXPANDSUB)
FLOAT_TYPES(ROW_EXPAND, TROWEXPANDMUL) FLOAT_TYPES(ROW_EXPAND, TROWEXPANDDIV)
FLOAT_TYPES(ROW_EXPAND, TROWEXPANDMAX) FLOAT_TYPES(ROW_EXPAND, TROWEXPANDMIN)
FLOAT_TYPES(COL_EXPAND, TCOLEXPANDADD) FLOAT_TYPES(COL_EXPAND, TCOLEXPANDSUB)
FLOAT_TYPES(COL_EXPAND, TCOLEXPANDMUL) FLOAT_TYPES(COL_EXPAND, TCOLEXPANDDIV)
FLOAT_TYPES(COL_EXPAND, TCOLEXPANDMAX) FLOAT_TYPES(COL_EXPAND, TCOLEXPANDMIN)
extern "C" void TROWEXPAND_float(float* d, float* a, float* v, int vr, int vc) {
    row_expand_case<float>(d, a, v, vr, vc, [](auto& x, auto&, auto& z) { TROWEXPAND(x, z); });
}
extern "C" void TCOLEXPAND_float(float* d, float* a, float* v, int vr, int vc) {
    col_expand_case<float>(d, a, v, vr, vc, [](auto& x, auto&, auto& z) { TCOLEXPAND(x, z); });
}
extern "C" void TROWEXPANDADD_tmp_float(float* d, float* a, float* v, int vr, int vc) {
    row_expand_case<float>(d, a, v, vr, vc, [](auto& x, auto& y, auto& z) {
        V<float> tmp(R, C);
        TASSIGN(tmp, 4 * SLOT);
        TROWEXPANDADD(x, y, z, tmp);
    });
}

// ------------------------------------------------------------------------------ padding
template <typename T, PadValue P>
void fill_pad_case(T* d, T* a, int vr, int vc) {
    using Dst = Tile<TileType::Vec, T, R, C, RM, R, C, SLayout::NoneBox, TileConfig::fractalABSize, P>;
    V<T> ta(R, C);
    Dst td;
    load_full(ta, a, 0);
    TASSIGN(td, SLOT);
    ta.SetValidShape(vr, vc);
    TFILLPAD(td, ta);
    Gnd<T> g(d);
    TSTORE(g, td);
}
#define FILL_PAD(T)                                                                                   \
    extern "C" void TFILLPAD_zero_##T(T* d, T* a, int vr, int vc) { fill_pad_case<T, PadValue::Zero>(d, a, vr, vc); } \
    extern "C" void TFILLPAD_max_##T(T* d, T* a, int vr, int vc) { fill_pad_case<T, PadValue::Max>(d, a, vr, vc); }   \
    extern "C" void TFILLPAD_min_##T(T* d, T* a, int vr, int vc) { fill_pad_case<T, PadValue::Min>(d, a, vr, vc); }
FILL_PAD(float) FILL_PAD(half) FILL_PAD(int32_t)

// ------------------------------------------------------------------------------ GM transfers
// A vr x vc window at (r0, c0) of a row-major GM matrix with leading dimension ld, copied through
// a tile into the same window of another matrix.
extern "C" void copy_window(float* dst, float* src, int ld, int r0, int c0, int vr, int vc) {
    using G = GlobalTensor<float, Shape<1, 1, 1, DYNAMIC, DYNAMIC>, Stride<1, 1, 1, DYNAMIC, 1>>;
    V<float> t(vr, vc);
    TASSIGN(t, 0);
    G in(src + r0 * ld + c0, G::Shape(vr, vc), G::Stride(ld));
    G out(dst + r0 * ld + c0, G::Shape(vr, vc), G::Stride(ld));
    TLOAD(t, in);
    TSTORE(out, t);
}
// The same window of a column-major matrix (leading dimension ld between columns).
extern "C" void copy_window_dn(float* dst, float* src, int ld, int r0, int c0, int vr, int vc) {
    using G = GlobalTensor<float, Shape<1, 1, 1, DYNAMIC, DYNAMIC>, Stride<1, 1, 1, 1, DYNAMIC>, Layout::DN>;
    V<float, CM> t(vr, vc);
    TASSIGN(t, SLOT);
    G in(src + c0 * ld + r0, G::Shape(vr, vc), G::Stride(ld));
    G out(dst + c0 * ld + r0, G::Shape(vr, vc), G::Stride(ld));
    TLOAD(t, in);
    TSTORE(out, t);
}
// A 5-D view: rows run over dims 0..3 (shape 2 x 3 x 1 x 2 = 12 rows), columns over dim 4.
extern "C" void load_5d(float* out, float* src, int s0, int s1, int s3, int vc) {
    using G = GlobalTensor<float, Shape<2, 3, 1, 2, DYNAMIC>, Stride<DYNAMIC, DYNAMIC, 1, DYNAMIC, 1>>;
    Tile<TileType::Vec, float, R, C, RM, 12, DYNAMIC> t(vc);
    TASSIGN(t, 0);
    G in(src, G::Shape(vc), G::Stride(s0, s1, s3));
    TLOAD(t, in);
    using GO = GlobalTensor<float, Shape<1, 1, 1, 12, DYNAMIC>, Stride<1, 1, 1, C, 1>>;
    GO o(out, GO::Shape(vc));
    TSTORE(o, t);
}
extern "C" void store_atomic_add(float* d, float* a) {
    V<float> t(R, C);
    load_full(t, a, 0);
    Gnd<float> g(d);
    TSTORE<V<float>, Gnd<float>, AtomicType::AtomicAdd>(g, t);
}
// TASSIGN re-points a GlobalTensor at other GM data.
extern "C" void retarget_global(float* dst, float* a, float* b, int which) {
    Gnd<float> g(nullptr);
    V<float> t(R, C);
    TASSIGN(t, 0);
    TASSIGN(g, which ? b : a);
    TLOAD(t, g);
    TASSIGN(g, dst);
    TSTORE(g, t);
}
// The 2-D helper types of the tutorial.
extern "C" void copy_shape2d(float* dst, float* src) {
    using G = GlobalTensor<float, TileShape2D<float, R, C>, BaseShape2D<float, R, C>>;
    V<float> t(R, C);
    TASSIGN(t, 0);
    G in(src), out(dst);
    TLOAD(t, in);
    TSTORE(out, t);
}
extern "C" void sync_calls() {
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID7);
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID7);
    set_flag(PIPE_MTE1, PIPE_M, EVENT_ID3);
    wait_flag(PIPE_MTE1, PIPE_M, EVENT_ID3);
    set_flag(PIPE_M, PIPE_FIX, EVENT_ID4);
    wait_flag(PIPE_M, PIPE_FIX, EVENT_ID4);
    pipe_barrier(PIPE_V);
    pipe_barrier(PIPE_ALL);
    pipe_barrier(PIPE_S);
}
"""


@pytest.fixture(scope="module")
def lib(cpp):
    # -O1 keeps this large translation unit quick to build (the cube tests build at the default -O3);
    # -Wall -Wextra -Werror: the header must stay warning-free in the kernels that include it.
    return cpp.build({"vector_ops.cpp": SOURCE}, "vector_ops", flags=("-O1", "-Wall", "-Wextra", "-Werror"))[1]


RNG = np.random.default_rng(20240611)


def rand(dtype: np.dtype, shape=(R, C), lo=-4.0, hi=4.0) -> np.ndarray:
    if dtype.kind == "i":
        return RNG.integers(-1000, 1000, size=shape).astype(dtype)
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def f32(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32)


def call(lib, name: str, *args) -> None:
    converted = []
    for a in args:
        if isinstance(a, np.ndarray):
            assert a.flags.c_contiguous
            converted.append(ctypes.c_void_p(a.ctypes.data))
        elif isinstance(a, float):
            converted.append(ctypes.c_float(a))
        else:
            converted.append(ctypes.c_int(a))
    getattr(lib, name)(*converted)


def check_region(out: np.ndarray, before: np.ndarray, expected: np.ndarray, vr: int, vc: int, *,
                 exact: bool = True, rtol: float = 0.0) -> None:
    """The valid region holds the expected values and everything else what it held before."""
    got = np.ascontiguousarray(out[:vr, :vc])
    want = np.ascontiguousarray(expected[:vr, :vc]).astype(out.dtype)
    if exact:
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    else:
        np.testing.assert_allclose(f32(got), f32(want), rtol=rtol, atol=1e-6)
    keep = np.ones(out.shape, bool)
    keep[:vr, :vc] = False
    np.testing.assert_array_equal(out[keep].view(np.uint8), before[keep].view(np.uint8))


BINARY_REF = {
    "TADD": np.add, "TSUB": np.subtract, "TMUL": np.multiply, "TDIV": np.divide,
    "TMAX": np.maximum, "TMIN": np.minimum,
}


@pytest.mark.parametrize("op", sorted(BINARY_REF))
@pytest.mark.parametrize("tname", FLOATS)
@pytest.mark.parametrize("vr,vc", REGIONS)
def test_binary_float(lib, op, tname, vr, vc):
    dt = DTYPES[tname]
    a, b, d = rand(dt), rand(dt, lo=0.5, hi=4.0), rand(dt)
    before = d.copy()
    call(lib, f"{op}_{tname}", d, a, b, vr, vc)
    # 16-bit floats compute in f32 and round once, exactly as numpy does in f32 then astype.
    check_region(d, before, BINARY_REF[op](f32(a), f32(b)).astype(dt), vr, vc)


@pytest.mark.parametrize("op,tname", [("TADD", "int32_t"), ("TSUB", "int32_t"), ("TMUL", "int32_t"),
                                      ("TMAX", "int32_t"), ("TMIN", "int32_t"), ("TADD", "int16_t"),
                                      ("TMAX", "int16_t")])
def test_binary_int(lib, op, tname):
    dt = DTYPES[tname]
    a, b, d = rand(dt), rand(dt), rand(dt)
    before = d.copy()
    call(lib, f"{op}_{tname}", d, a, b, 11, 21)
    check_region(d, before, BINARY_REF[op](a, b).astype(dt), 11, 21)


SCALAR_REF = {
    "TADDS": np.add, "TSUBS": np.subtract, "TMULS": np.multiply, "TDIVS": np.divide,
    "TMAXS": np.maximum, "TMINS": np.minimum,
}


@pytest.mark.parametrize("op", sorted(SCALAR_REF))
@pytest.mark.parametrize("tname", FLOATS)
def test_scalar_float(lib, op, tname):
    dt = DTYPES[tname]
    a, d = rand(dt), rand(dt)
    before = d.copy()
    s = 1.75
    call(lib, f"{op}_{tname}", d, a, s, 11, 21)
    check_region(d, before, SCALAR_REF[op](f32(a), np.float32(s)).astype(dt), 11, 21)


@pytest.mark.parametrize("op", ["TADDS", "TMULS", "TMAXS", "TMINS"])
def test_scalar_int(lib, op):
    a, d = rand(DTYPES["int32_t"]), rand(DTYPES["int32_t"])
    before = d.copy()
    call(lib, f"{op}_int32_t", d, a, 3.0, 5, 7)
    check_region(d, before, SCALAR_REF[op](a, np.int32(3)), 5, 7)


@pytest.mark.parametrize("tname", ["float", "half"])
def test_scalar_divided_by_tile(lib, tname):
    dt = DTYPES[tname]
    a, d = rand(dt, lo=0.5, hi=4.0), rand(dt)
    before = d.copy()
    call(lib, f"TDIVS_rev_{tname}", d, a, 3.0, 9, 30)
    check_region(d, before, (np.float32(3.0) / f32(a)).astype(dt), 9, 30)


UNARY_REF = {
    "TEXP": np.exp, "TLOG": np.log, "TSQRT": np.sqrt, "TRSQRT": lambda x: np.float32(1) / np.sqrt(x),
    "TRECIP": lambda x: np.float32(1) / x, "TABS": np.abs, "TNEG": np.negative,
    "TRELU": lambda x: np.maximum(x, x.dtype.type(0)),
}
TRANSCENDENTAL = {"TEXP", "TLOG"}


@pytest.mark.parametrize("op", sorted(UNARY_REF))
@pytest.mark.parametrize("tname", FLOATS)
@pytest.mark.parametrize("vr,vc", REGIONS[:2])
def test_unary_float(lib, op, tname, vr, vc):
    dt = DTYPES[tname]
    positive = op in ("TLOG", "TSQRT", "TRSQRT")
    a = rand(dt, lo=0.1 if positive else -4.0, hi=4.0)
    d = rand(dt)
    before = d.copy()
    call(lib, f"{op}_{tname}", d, a, vr, vc)
    want = UNARY_REF[op](f32(a)).astype(dt)
    if op in TRANSCENDENTAL:
        # libm and numpy may differ in the last f32 bit; after rounding to 16 bits, rarely one ulp.
        check_region(d, before, want, vr, vc, exact=False, rtol=1e-6 if tname == "float" else 8e-3)
    else:
        check_region(d, before, want, vr, vc)


@pytest.mark.parametrize("op", ["TABS", "TNEG", "TRELU"])
def test_unary_int(lib, op):
    a, d = rand(DTYPES["int32_t"]), rand(DTYPES["int32_t"])
    before = d.copy()
    call(lib, f"{op}_int32_t", d, a, 16, 3)
    check_region(d, before, UNARY_REF[op](a), 16, 3)


@pytest.mark.parametrize("tname", ["float", "half", "int32_t"])
def test_expands(lib, tname):
    dt = DTYPES[tname]
    d = rand(dt)
    before = d.copy()
    call(lib, f"TEXPANDS_{tname}", d, 2.5 if tname != "int32_t" else 7.0, 4, 9)
    check_region(d, before, np.full((R, C), 2.5 if tname != "int32_t" else 7, dt), 4, 9)


def test_mixed_layouts(lib):
    a, b, d = rand(DTYPES["float"]), rand(DTYPES["float"]), rand(DTYPES["float"])
    before = d.copy()
    # ColMajor tiles load DN data: element (r, c) at r + c * R, i.e. the transpose in C order.
    call(lib, "TADD_mixed", d, np.ascontiguousarray(a.T), np.ascontiguousarray(b.T), 11, 21)
    check_region(d, before, a + b, 11, 21)


def test_colmajor_destination(lib):
    a, b, d = rand(DTYPES["float"]), rand(DTYPES["float"]), rand(DTYPES["float"])
    d_dn = np.ascontiguousarray(d.T)
    call(lib, "TMUL_colmajor", d_dn, np.ascontiguousarray(a.T), b, 7, 30)
    check_region(d_dn.T.copy(), d, a * b, 7, 30)


def test_in_place(lib):
    b, d = rand(DTYPES["float"]), rand(DTYPES["float"])
    before = d.copy()
    call(lib, "TSUB_inplace", d, b, 13, 17)
    check_region(d, before, before - b, 13, 17)


# ------------------------------------------------------------------------------ TCVT

MODES = {"NONE": 0, "RINT": 1, "ROUND": 2, "FLOOR": 3, "CEIL": 4, "TRUNC": 5, "ODD": 6}
FORMATS = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127)}


def round_ref(x: float, fmt: str, mode: str) -> float:
    """Exact rounding of a finite value to a binary format, written with Fractions."""
    p, emin, emax = FORMATS[fmt]
    if x == 0 or not math.isfinite(x):
        return x
    v = Fraction(x)
    mag = abs(v)
    e = math.floor(math.log2(mag))
    while Fraction(2) ** e > mag:
        e -= 1
    while Fraction(2) ** (e + 1) <= mag:
        e += 1
    ulp = Fraction(2) ** (max(e, emin) - (p - 1))
    lo = math.floor(mag / ulp)
    rest = mag / ulp - lo
    neg = v < 0
    up = {
        "NONE": rest > Fraction(1, 2) or (rest == Fraction(1, 2) and lo % 2 == 1),
        "RINT": rest > Fraction(1, 2) or (rest == Fraction(1, 2) and lo % 2 == 1),
        "ROUND": rest >= Fraction(1, 2),
        "FLOOR": neg and rest > 0,
        "CEIL": not neg and rest > 0,
        "TRUNC": False,
        "ODD": rest > 0 and lo % 2 == 0,
    }[mode]
    result = (lo + up) * ulp
    max_finite = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    if result > max_finite:
        to_inf = {"FLOOR": neg, "CEIL": not neg, "TRUNC": False, "ODD": False}.get(mode, True)
        return -math.inf if neg and to_inf else math.inf if to_inf else float(-max_finite if neg else max_finite)
    return float(-result if neg else result)


def int_ref(x: float, mode: str, dtype: np.dtype) -> int:
    info = np.iinfo(dtype)
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return info.max if x > 0 else info.min
    fl = math.floor(x)
    frac = Fraction(x) - fl
    r = {
        "NONE": fl + (frac > Fraction(1, 2) or (frac == Fraction(1, 2) and fl % 2 == 1)),
        "RINT": fl + (frac > Fraction(1, 2) or (frac == Fraction(1, 2) and fl % 2 == 1)),
        "ROUND": (math.floor(abs(x) + 0.5) if frac != 0 else abs(x)) * (1 if x >= 0 else -1),
        "FLOOR": fl,
        "CEIL": math.ceil(x),
        "TRUNC": math.trunc(x),
        "ODD": fl + (frac > 0 and fl % 2 == 0),
    }[mode]
    return int(min(max(r, info.min), info.max))


def tricky_f32() -> np.ndarray:
    """Values around every rounding decision of the 16-bit formats, plus ordinary ones."""
    h = np.array([0x0001, 0x0002, 0x03FF, 0x0400, 0x0401, 0x3C00, 0x3C01, 0x7BFE, 0x7BFF], np.uint16)
    halfs = h.view(np.float16).astype(np.float32)
    mids = (halfs[:-1].astype(np.float64) + halfs[1:]) / 2
    special = np.array([0.0, -0.0, 1.5, 2.5, -2.5, 0.5, -0.5, 65504.0, 65519.0, 65520.0, 65536.0, 1e6, -1e6,
                        1e-8, 3e-8, 6e-8, 2.0 ** -25, -(2.0 ** -25), 3.0e38, np.inf, -np.inf], np.float64)
    ints = np.arange(-6, 6) + 0.5
    values = np.concatenate([halfs, -halfs, mids, -mids, np.nextafter(mids.astype(np.float32), np.inf),
                             special, ints, RNG.uniform(-300, 300, 200)]).astype(np.float32)
    out = np.zeros(R * C, np.float32)
    out[: values.size] = values[: R * C]
    return out.reshape(R, C)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("fmt,dtname", [("f16", "half"), ("bf16", "bfloat16_t")])
def test_tcvt_float_rounding_modes(lib, mode, fmt, dtname):
    src = tricky_f32()
    dst = np.zeros((R, C), DTYPES[dtname])
    call(lib, f"TCVT_f32_{fmt}", dst, src, R, C, MODES[mode])
    want = np.array([[round_ref(float(x), fmt, mode) for x in row] for row in src], np.float64)
    np.testing.assert_array_equal(f32(dst), want.astype(np.float32))
    if mode in ("RINT", "NONE"):
        # The reference itself agrees with numpy / ml_dtypes on round-to-nearest-even.
        np.testing.assert_array_equal(dst.view(np.uint16), src.astype(DTYPES[dtname]).view(np.uint16))


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("src_name,fname", [("float", "TCVT_f32_i32"), ("half", "TCVT_f16_i32")])
def test_tcvt_to_int32(lib, mode, src_name, fname):
    base = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6, 3.7, -3.7, 7.0, -7.0, 1e10, -1e10,
                     np.nan, np.inf, -np.inf, 65504.0, 0.0, 2147483520.0], np.float64)
    src = np.zeros((R, C), DTYPES[src_name])
    src.flat[: base.size] = base
    src.flat[base.size:] = RNG.uniform(-100, 100, R * C - base.size)
    dst = np.zeros((R, C), np.int32)
    call(lib, fname, dst, src, R, C, MODES[mode])
    want = np.array([[int_ref(float(x), mode, np.dtype(np.int32)) for x in row] for row in f32(src)], np.int64)
    np.testing.assert_array_equal(dst, want)


def test_tcvt_saturates_to_int16(lib):
    src = np.zeros((R, C), np.float32)
    src.flat[:4] = [40000.0, -40000.0, 12.5, -12.5]
    dst = np.zeros((R, C), np.int16)
    call(lib, "TCVT_f32_i16", dst, src, R, C, MODES["RINT"])
    assert dst.flat[:4].tolist() == [32767, -32768, 12, -12]


def test_tcvt_widening_and_int_sources(lib):
    h = RNG.uniform(-1000, 1000, (R, C)).astype(np.float16)
    out = np.zeros((R, C), np.float32)
    call(lib, "TCVT_f16_f32", out, h, R, C, MODES["NONE"])
    np.testing.assert_array_equal(out, f32(h))
    b = RNG.uniform(-1000, 1000, (R, C)).astype(ml_dtypes.bfloat16)
    call(lib, "TCVT_bf16_f32", out, b, R, C, MODES["NONE"])
    np.testing.assert_array_equal(out, f32(b))
    ints = RNG.integers(-(2**31), 2**31 - 1, (R, C)).astype(np.int32)
    ints.flat[:3] = [16777217, -16777219, 2147483647]
    call(lib, "TCVT_i32_f32", out, ints, R, C, MODES["RINT"])
    np.testing.assert_array_equal(out, ints.astype(np.float32))  # numpy rounds to nearest even too
    halfs = np.zeros((R, C), np.float16)
    small = RNG.integers(-70000, 70000, (R, C)).astype(np.int32)
    call(lib, "TCVT_i32_f16", halfs, small, R, C, MODES["RINT"])
    np.testing.assert_array_equal(halfs, small.astype(np.float64).astype(np.float16))
    bf = np.zeros((R, C), ml_dtypes.bfloat16)
    call(lib, "TCVT_f16_bf16", bf, h, R, C, MODES["RINT"])
    np.testing.assert_array_equal(bf.view(np.uint16), f32(h).astype(ml_dtypes.bfloat16).view(np.uint16))


def test_tcvt_valid_region_and_scratch_form(lib):
    src = rand(DTYPES["float"])
    dst = rand(DTYPES["half"])
    before = dst.copy()
    call(lib, "TCVT_f32_f16", dst, src, 5, 19, MODES["TRUNC"])
    want = np.array([[round_ref(float(x), "f16", "TRUNC") for x in row] for row in src]).astype(np.float16)
    check_region(dst, before, want, 5, 19)
    full = np.zeros((R, C), np.float16)
    call(lib, "TCVT_tmp_f32_f16", full, src, MODES["RINT"])
    np.testing.assert_array_equal(full, src.astype(np.float16))


# ------------------------------------------------------------------------------ TCMP, TCMPS, TSEL

CMP = {"EQ": (0, np.equal), "NE": (1, np.not_equal), "LT": (2, np.less), "LE": (3, np.less_equal),
       "GT": (4, np.greater), "GE": (5, np.greater_equal)}


def mask_bits(pred: np.ndarray, vr: int, vc: int) -> np.ndarray:
    """The predicate of the compared region, False elsewhere (the bits a compare leaves zero)."""
    bits = np.zeros((R, C), bool)
    bits[:vr, :vc] = pred[:vr, :vc]
    return bits


def mask_expect(pred: np.ndarray, vr: int, vc: int) -> np.ndarray:
    """Packed bits, lsb first, C / 8 bytes per row; the rest of the mask tile is cleared."""
    want = np.zeros((R, 32), np.uint8)
    want[:, :C // 8] = np.packbits(mask_bits(pred, vr, vc), axis=1, bitorder="little")
    return want


@pytest.mark.parametrize("cmp", sorted(CMP))
@pytest.mark.parametrize("tname", ["float", "half", "int32_t"])
@pytest.mark.parametrize("vr,vc", [(R, C), (11, 21)])
def test_tcmps_and_tsel(lib, cmp, tname, vr, vc):
    dt = DTYPES[tname]
    a, b, d = rand(dt), rand(dt), rand(dt)
    a.flat[::5] = 1  # some exact ties with the scalar
    mask = np.full((R, 32), 0xA5, np.uint8)
    before = d.copy()
    code, fn = CMP[cmp]
    call(lib, f"TCMPS_{tname}", mask, d, a, b, 1.0, code, vr, vc)
    pred = fn(f32(a), np.float32(1.0))
    np.testing.assert_array_equal(mask, mask_expect(pred, vr, vc))
    check_region(d, before, np.where(mask_bits(pred, vr, vc), a, b), vr, C)


@pytest.mark.parametrize("cmp", sorted(CMP))
def test_tcmp_tiles(lib, cmp):
    a, b, d = rand(DTYPES["half"]), rand(DTYPES["half"]), rand(DTYPES["half"])
    b.flat[::3] = a.flat[::3]
    mask = np.full((R, 32), 0x5A, np.uint8)
    before = d.copy()
    code, fn = CMP[cmp]
    call(lib, "TCMP_half", mask, d, a, b, code, 13, 29)
    pred = fn(a, b)
    np.testing.assert_array_equal(mask, mask_expect(pred, 13, 29))
    check_region(d, before, np.where(mask_bits(pred, 13, 29), a, b), 13, C)


def test_tsel_with_scratch_reads_mask_bits(lib):
    a, b, d = rand(DTYPES["float"]), rand(DTYPES["float"]), rand(DTYPES["float"])
    pred = RNG.random((R, C)) < 0.5
    mask = np.zeros((R, 32), np.uint8)
    mask[:, :4] = np.packbits(pred, axis=1, bitorder="little")
    before = d.copy()
    call(lib, "TSEL_tmp", d, mask, a, b, 14, C)
    check_region(d, before, np.where(pred, a, b), 14, C)


# ------------------------------------------------------------------------------ reductions

ROW_REF = {"TROWSUM": np.sum, "TROWMAX": np.max, "TROWMIN": np.min}
COL_REF = {"TCOLSUM": np.sum, "TCOLMAX": np.max, "TCOLMIN": np.min}


def poisoned(dt: np.dtype, vr: int, vc: int) -> np.ndarray:
    """Random data inside the valid region, NaN (or a huge integer) outside it."""
    a = rand(dt)
    bad = np.nan if dt.kind == "f" or dt == DTYPES["bfloat16_t"] else 10**6
    a[vr:, :] = bad
    a[:, vc:] = bad
    return a


@pytest.mark.parametrize("op", sorted(ROW_REF))
@pytest.mark.parametrize("tname", FLOATS)
@pytest.mark.parametrize("vr,vc", REGIONS)
def test_row_reductions_read_only_the_source_valid_region(lib, op, tname, vr, vc):
    dt = DTYPES[tname]
    a = poisoned(dt, vr, vc)
    out = rand(dt, shape=(R,))
    before = out.copy()
    call(lib, f"{op}_{tname}", out, a, vr, vc)
    want = ROW_REF[op](f32(a[:vr, :vc]), axis=1)
    tol = 1e-6 if tname == "float" else 1e-2
    np.testing.assert_allclose(f32(out[:vr]), want.astype(dt).astype(np.float32), rtol=tol, atol=tol)
    np.testing.assert_array_equal(out[vr:].view(np.uint8), before[vr:].view(np.uint8))


@pytest.mark.parametrize("op", sorted(COL_REF))
@pytest.mark.parametrize("tname", FLOATS)
@pytest.mark.parametrize("vr,vc", REGIONS)
def test_col_reductions_read_only_the_source_valid_region(lib, op, tname, vr, vc):
    dt = DTYPES[tname]
    a = poisoned(dt, vr, vc)
    out = rand(dt, shape=(C,))
    before = out.copy()
    call(lib, f"{op}_{tname}", out, a, vr, vc)
    want = COL_REF[op](f32(a[:vr, :vc]), axis=0)
    tol = 1e-6 if tname == "float" else 1e-2
    np.testing.assert_allclose(f32(out[:vc]), want.astype(dt).astype(np.float32), rtol=tol, atol=tol)
    np.testing.assert_array_equal(out[vc:].view(np.uint8), before[vc:].view(np.uint8))


def test_half_row_sum_accumulates_in_float(lib):
    # 2048 + 1 + 1 + ... is 2048 forever in f16 arithmetic; an f32 accumulator gets 2048 + 31.
    a = np.ones((R, C), np.float16)
    a[:, 0] = 2048
    out = np.zeros(R, np.float16)
    call(lib, "TROWSUM_half", out, a, R, C)
    assert f32(out).tolist() == [2080.0] * R  # 2079 rounds to the even 2080 once, at the end


def test_int_reductions_and_scratch_colsum(lib):
    a = poisoned(DTYPES["int32_t"], 9, 13)
    out = np.zeros(R, np.int32)
    call(lib, "TROWSUM_int32_t", out, a, 9, 13)
    np.testing.assert_array_equal(out[:9], a[:9, :13].sum(axis=1))
    cols = np.zeros(C, np.int32)
    call(lib, "TCOLMAX_int32_t", cols, a, 9, 13)
    np.testing.assert_array_equal(cols[:13], a[:9, :13].max(axis=0))
    f = poisoned(DTYPES["float"], 7, 25)
    fcols = np.zeros(C, np.float32)
    call(lib, "TCOLSUM_tmp_float", fcols, f, 7, 25)
    np.testing.assert_allclose(fcols[:25], f[:7, :25].sum(axis=0), rtol=1e-6)


# ------------------------------------------------------------------------------ broadcasts

EXPAND_REF = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide,
              "MAX": np.maximum, "MIN": np.minimum}


@pytest.mark.parametrize("op", sorted(EXPAND_REF))
@pytest.mark.parametrize("tname", FLOATS)
def test_row_expand_binary(lib, op, tname):
    dt = DTYPES[tname]
    a, d, v = rand(dt), rand(dt), rand(dt, shape=(R,), lo=0.5, hi=3.0)
    before = d.copy()
    call(lib, f"TROWEXPAND{op}_{tname}", d, a, v, 12, 20)
    check_region(d, before, EXPAND_REF[op](f32(a), f32(v)[:, None]).astype(dt), 12, 20)


@pytest.mark.parametrize("op", sorted(EXPAND_REF))
@pytest.mark.parametrize("tname", FLOATS)
def test_col_expand_binary(lib, op, tname):
    dt = DTYPES[tname]
    a, d, v = rand(dt), rand(dt), rand(dt, shape=(C,), lo=0.5, hi=3.0)
    before = d.copy()
    call(lib, f"TCOLEXPAND{op}_{tname}", d, a, v, 12, 20)
    check_region(d, before, EXPAND_REF[op](f32(a), f32(v)[None, :]).astype(dt), 12, 20)


def test_plain_expands_and_scratch_form(lib):
    a, d = rand(DTYPES["float"]), rand(DTYPES["float"])
    col, row = rand(DTYPES["float"], shape=(R,)), rand(DTYPES["float"], shape=(C,))
    before = d.copy()
    call(lib, "TROWEXPAND_float", d, a, col, 10, 31)
    check_region(d, before, np.broadcast_to(col[:, None], (R, C)), 10, 31)
    d = before.copy()
    call(lib, "TCOLEXPAND_float", d, a, row, 3, 9)
    check_region(d, before, np.broadcast_to(row[None, :], (R, C)), 3, 9)
    d = before.copy()
    call(lib, "TROWEXPANDADD_tmp_float", d, a, col, R, C)
    check_region(d, before, a + col[:, None], R, C)


# ------------------------------------------------------------------------------ TFILLPAD


@pytest.mark.parametrize("pad", ["zero", "max", "min"])
@pytest.mark.parametrize("tname", ["float", "half", "int32_t"])
def test_fill_pad(lib, pad, tname):
    dt = DTYPES[tname]
    a = rand(dt)
    d = np.zeros((R, C), dt)
    call(lib, f"TFILLPAD_{pad}_{tname}", d, a, 9, 14)
    if dt.kind == "f":
        fill = {"zero": 0, "max": np.inf, "min": -np.inf}[pad]
    else:
        fill = {"zero": 0, "max": np.iinfo(dt).max, "min": np.iinfo(dt).min}[pad]
    want = np.full((R, C), fill, dt)
    want[:9, :14] = a[:9, :14]
    np.testing.assert_array_equal(d, want)


# ------------------------------------------------------------------------------ GM transfers


def test_tload_tstore_move_exactly_a_strided_window(lib):
    ld = 45
    src = RNG.uniform(-1, 1, (40, ld)).astype(np.float32)
    dst = RNG.uniform(-1, 1, (40, ld)).astype(np.float32)
    before = dst.copy()
    call(lib, "copy_window", dst, src, ld, 7, 5, 13, 29)
    want = before.copy()
    want[7:20, 5:34] = src[7:20, 5:34]
    np.testing.assert_array_equal(dst, want)


def test_tload_tstore_column_major_window(lib):
    ld = 37  # rows of a column-major matrix: element (r, c) at r + c * ld
    src = RNG.uniform(-1, 1, (40, ld)).astype(np.float32)  # 40 columns of 37 rows, C order
    dst = RNG.uniform(-1, 1, (40, ld)).astype(np.float32)
    before = dst.copy()
    call(lib, "copy_window_dn", dst, src, ld, 3, 8, 16, 20)
    want = before.copy()
    want[8:28, 3:19] = src[8:28, 3:19]  # columns 8..27, rows 3..18
    np.testing.assert_array_equal(dst, want)


def test_tload_five_dimensional_view(lib):
    # GM element (i0, i1, 0, i3, c) at i0 * s0 + i1 * s1 + i3 * s3 + c, rows ordered (i0, i1, i3).
    s0, s1, s3, vc = 500, 100, 40, 23
    src = RNG.uniform(-1, 1, 1200).astype(np.float32)
    out = np.zeros((R, C), np.float32)
    call(lib, "load_5d", out, src, s0, s1, s3, vc)
    rows = [src[i0 * s0 + i1 * s1 + i3 * s3:][:vc] for i0 in range(2) for i1 in range(3) for i3 in range(2)]
    np.testing.assert_array_equal(out[:12, :vc], np.stack(rows))


def test_tstore_atomic_add(lib):
    a = rand(DTYPES["float"])
    d = rand(DTYPES["float"])
    before = d.copy()
    call(lib, "store_atomic_add", d, a)
    np.testing.assert_array_equal(d, before + a)


def test_tassign_repoints_a_global_tensor(lib):
    a, b = rand(DTYPES["float"]), rand(DTYPES["float"])
    dst = np.zeros((R, C), np.float32)
    call(lib, "retarget_global", dst, a, b, 1)
    np.testing.assert_array_equal(dst, b)
    call(lib, "retarget_global", dst, a, b, 0)
    np.testing.assert_array_equal(dst, a)


def test_abs_clears_the_sign_of_negative_zero(lib):
    a = np.full((R, C), -0.0, np.float32)
    d = np.ones((R, C), np.float32)
    call(lib, "TABS_float", d, a, R, C)
    assert not np.signbit(d).any()


def test_shape2d_helpers_and_sync_calls(lib):
    src = rand(DTYPES["float"])
    dst = np.zeros((R, C), np.float32)
    call(lib, "copy_shape2d", dst, src)
    np.testing.assert_array_equal(dst, src)
    call(lib, "sync_calls")  # no-ops on the CPU; this only shows they compile and run
