"""TTRANS and TCONCAT of ptodsl's CPU pto-isa header against numpy: the valid region moved, the
rest of the destination untouched, and the checks that catch operands whose valid extents do not
fit (a transpose into a destination that is not its mirror, a concat that overflows its row)."""

from __future__ import annotations

import ctypes
import signal

import numpy as np
import pytest

SOURCE = r"""
#include <pto/pto-inst.hpp>
#include <cstdint>
using namespace pto;

template <typename T, int R, int C> using V = Tile<TileType::Vec, T, R, C, BLayout::RowMajor, DYNAMIC, DYNAMIC>;
template <typename T, int R, int C> using G = GlobalTensor<T, Shape<1, 1, 1, R, C>, Stride<1, 1, 1, C, 1>>;
template <typename T, int R, int C> using Tmp = Tile<TileType::Vec, T, R, C>;

// src is 16 x 32 (vr x vc valid), dst 32 x 32 (vc x vr valid): dst(c, r) = src(r, c).
template <typename T>
void trans(T* dst, T* src, int vr, int vc, int dr, int dc) {
    V<T, 16, 32> s(vr, vc);
    V<T, 32, 32> d(dr, dc);
    Tmp<T, 32, 32> tmp;
    TASSIGN(s, 0);
    TASSIGN(d, 4096);
    TASSIGN(tmp, 8192);
    G<T, 16, 32> gs(src);
    G<T, 32, 32> gd(dst);
    V<T, 16, 32> whole_s(16, 32);
    TASSIGN(whole_s, 0);
    TLOAD(whole_s, gs);
    V<T, 32, 32> whole_d(32, 32);
    TASSIGN(whole_d, 4096);
    TLOAD(whole_d, gd);
    TTRANS(d, s, tmp);
    TSTORE(gd, whole_d);
}
extern "C" void trans_f32(float* dst, float* src, int vr, int vc) { trans(dst, src, vr, vc, vc, vr); }
extern "C" void trans_f16(half* dst, half* src, int vr, int vc) { trans(dst, src, vr, vc, vc, vr); }
extern "C" void trans_i8(int8_t* dst, int8_t* src, int vr, int vc) { trans(dst, src, vr, vc, vc, vr); }
extern "C" void trans_not_mirrored() {
    float buf[32 * 32] = {};
    trans(buf, buf, 4, 5, 4, 5);
}

// a is 8 x 16 (rows x ca valid), b 8 x 16 (rows x cb), dst 8 x 32 (rows x ca + cb).
extern "C" void concat_f32(float* dst, float* a, float* b, int rows, int ca, int cb) {
    V<float, 8, 16> ta(rows, ca), tb(rows, cb);
    V<float, 8, 32> td(rows, ca + cb), whole(8, 32);
    V<float, 8, 16> wa(8, 16), wb(8, 16);
    TASSIGN(ta, 0);
    TASSIGN(wa, 0);
    TASSIGN(tb, 512);
    TASSIGN(wb, 512);
    TASSIGN(td, 1024);
    TASSIGN(whole, 1024);
    G<float, 8, 16> ga(a), gb(b);
    G<float, 8, 32> gd(dst);
    TLOAD(wa, ga);
    TLOAD(wb, gb);
    TLOAD(whole, gd);
    TCONCAT(td, ta, tb);
    TSTORE(gd, whole);
}
extern "C" void concat_rows_differ() {
    V<float, 8, 16> ta(4, 8), tb(3, 8);
    V<float, 8, 32> td(4, 16);
    TASSIGN(ta, 0);
    TASSIGN(tb, 512);
    TASSIGN(td, 1024);
    TCONCAT(td, ta, tb);
}
extern "C" void concat_overflows() {
    V<float, 8, 16> ta(4, 16), tb(4, 16);
    V<float, 8, 16> td(4, 16);
    TASSIGN(ta, 0);
    TASSIGN(tb, 512);
    TASSIGN(td, 1024);
    TCONCAT(td, ta, tb);
}
"""

RNG = np.random.default_rng(23)


@pytest.fixture(scope="module")
def built(cpp):
    return cpp.build({"layout_ops.cpp": SOURCE}, "layout_ops", flags=("-O1", "-Wall", "-Wextra", "-Werror"))


def _call(lib, name: str, *args) -> None:
    getattr(lib, name)(*[ctypes.c_void_p(a.ctypes.data) if isinstance(a, np.ndarray) else ctypes.c_int(a)
                         for a in args])


@pytest.mark.parametrize("vr, vc", [(16, 32), (5, 7), (1, 1), (16, 1)])
@pytest.mark.parametrize("name, dtype", [("f32", np.float32), ("f16", np.float16), ("i8", np.int8)])
def test_ttrans_moves_the_valid_region_and_nothing_else(built, vr, vc, name, dtype):
    src = RNG.integers(-100, 100, (16, 32)).astype(dtype)
    dst = np.full((32, 32), 77, dtype)
    _call(built[1], f"trans_{name}", dst, src, vr, vc)
    want = np.full((32, 32), 77, dtype)
    want[:vc, :vr] = src[:vr, :vc].T
    np.testing.assert_array_equal(dst, want)


@pytest.mark.parametrize("rows, ca, cb", [(8, 16, 16), (3, 5, 9), (1, 1, 1)])
def test_tconcat_puts_the_second_row_right_after_the_first_ones_valid_columns(built, rows, ca, cb):
    a = RNG.standard_normal((8, 16)).astype(np.float32)
    b = RNG.standard_normal((8, 16)).astype(np.float32)
    dst = np.full((8, 32), 5.0, np.float32)
    _call(built[1], "concat_f32", dst, a, b, rows, ca, cb)
    want = np.full((8, 32), 5.0, np.float32)
    want[:rows, :ca] = a[:rows, :ca]
    want[:rows, ca:ca + cb] = b[:rows, :cb]
    np.testing.assert_array_equal(dst, want)


@pytest.mark.parametrize("function, reason", [
    ("trans_not_mirrored", "TTRANS: a 4x5 source needs a 5x4 destination, not 4x5"),
    ("concat_rows_differ", "TCONCAT: the sources have 4 and 3 valid rows, the destination 4"),
    ("concat_overflows", "TCONCAT: 16 + 16 columns exceed the destination's 16"),
])
def test_operands_that_do_not_fit_abort_with_a_reason(cpp, built, function, reason):
    result = cpp.run_in_subprocess(built[0], function)
    assert result.returncode == -signal.SIGABRT, (result.returncode, result.stderr)
    assert reason in result.stderr
