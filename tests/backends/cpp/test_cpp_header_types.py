"""16-bit float types of ptodsl's CPU pto-isa header, and the checks that abort a broken kernel.

half and bfloat16_t must round exactly like numpy's float16 and ml_dtypes.bfloat16 (round to
nearest, ties to even), checked over every 16-bit pattern and a large set of f32 values. The
failure cases run in a subprocess each, since they end the process with abort().
"""

from __future__ import annotations

import ctypes
import signal

import ml_dtypes
import numpy as np
import pytest

CONVERSIONS = r"""
#include <pto/pto-inst.hpp>
#include <cstdint>
#include <cstring>

template <typename T>
void from_float(uint16_t* out, const float* in, long n) {
    for (long i = 0; i < n; ++i) {
        const T value = in[i];
        std::memcpy(&out[i], &value, sizeof value);
    }
}
template <typename T>
void to_float(float* out, const uint16_t* in, long n) {
    for (long i = 0; i < n; ++i) {
        T value;
        std::memcpy(&value, &in[i], sizeof value);
        out[i] = value;
    }
}
extern "C" void f32_to_f16(uint16_t* out, const float* in, long n) { from_float<half>(out, in, n); }
extern "C" void f16_to_f32(float* out, const uint16_t* in, long n) { to_float<half>(out, in, n); }
extern "C" void f32_to_bf16(uint16_t* out, const float* in, long n) { from_float<bfloat16_t>(out, in, n); }
extern "C" void bf16_to_f32(float* out, const uint16_t* in, long n) { to_float<bfloat16_t>(out, in, n); }

// Blocks on several OpenMP threads, all placing their tiles at the same UB addresses: each thread
// has its own arenas, as each NPU core has its own buffers. Returns how many threads took part.
#ifdef _OPENMP
#include <omp.h>
#endif
extern "C" int parallel_blocks(float* out, float* in, int blocks) {
    using T = pto::Tile<pto::TileType::Vec, float, 8, 64>;
    using G = pto::GlobalTensor<float, pto::Shape<1, 1, 1, 8, 64>, pto::Stride<1, 1, 1, 64, 1>>;
    int threads = 1;
#pragma omp parallel for num_threads(4) schedule(static, 1) reduction(max : threads)
    for (int b = 0; b < blocks; ++b) {
        T x, y;
        pto::TASSIGN(x, 0);
        pto::TASSIGN(y, 8 * 64 * 4);
        G gi(in + b * 512), go(out + b * 512);
        for (int repeat = 0; repeat < 50; ++repeat) {  // long enough for the threads to overlap
            pto::TLOAD(x, gi);
            pto::TMULS(y, x, float(b));
            pto::TADD(y, y, x);
            pto::TSTORE(go, y);
        }
#ifdef _OPENMP
        threads = omp_get_num_threads();
#endif
    }
    return threads;
}

// Where this library's UB arena starts (for the test that libraries do not share arenas).
extern "C" void* ub_base() {
    pto::Tile<pto::TileType::Vec, float, 8, 8> t;
    pto::TASSIGN(t, 0);
    return t.data();
}

// Arithmetic goes through float and rounds once when the result is stored.
extern "C" void half_fma_like(uint16_t* out, const uint16_t* a, const uint16_t* b, long n) {
    for (long i = 0; i < n; ++i) {
        half x, y;
        std::memcpy(&x, &a[i], 2);
        std::memcpy(&y, &b[i], 2);
        half r = x * y + x;
        r += 1.0f;
        std::memcpy(&out[i], &r, 2);
    }
}
"""

FAILURES = r"""
#include <pto/pto-inst.hpp>
#include <cstdint>
using namespace pto;

using T16x32 = Tile<TileType::Vec, float, 16, 32>;  // 2048 bytes
using Dyn = Tile<TileType::Vec, float, 16, 32, BLayout::RowMajor, DYNAMIC, DYNAMIC>;

extern "C" void assign_last_fitting() { T16x32 t; TASSIGN(t, 8192 - 2048); TEXPANDS(t, 1.0f); }
extern "C" void assign_past_the_end() { T16x32 t; TASSIGN(t, 8192 - 1024); }
extern "C" void assign_misaligned() { T16x32 t; TASSIGN(t, 16); }
extern "C" void assign_negative() { T16x32 t; TASSIGN(t, -64); }
extern "C" void assign_l0a_past_the_end() { TileLeft<half, 256, 256> t; TASSIGN(t, 0); }
extern "C" void use_before_assign() { T16x32 t; TEXPANDS(t, 1.0f); }
extern "C" void dynamic_valid_never_set() { Dyn t; TASSIGN(t, 0); TEXPANDS(t, 1.0f); }
extern "C" void dynamic_valid_too_large(int rows) { Dyn t(rows, 32); (void)t; }
extern "C" void load_shape_mismatch() {
    static float data[8 * 32];
    T16x32 t;
    TASSIGN(t, 0);
    GlobalTensor<float, Shape<1, 1, 1, 8, 32>, Stride<1, 1, 1, 32, 1>> g(data);
    TLOAD(t, g);
}
extern "C" void operand_too_small() {
    T16x32 d;
    Tile<TileType::Vec, float, 8, 32> s;
    TASSIGN(d, 0);
    TASSIGN(s, 2048);
    TADD(d, s, d);
}
extern "C" void extract_out_of_range() {
    Tile<TileType::Mat, half, 32, 32, BLayout::ColMajor, 32, 32, SLayout::RowMajor> big;
    TileLeft<half, 32, 16> small;
    TASSIGN(big, 0);
    TASSIGN(small, 0);
    TEXTRACT(small, big, 0, 17);
}
extern "C" void mask_too_few_rows() {
    T16x32 s;
    Tile<TileType::Vec, uint8_t, 8, 32, BLayout::RowMajor, 8, 4> m;
    TASSIGN(s, 0);
    TASSIGN(m, 2048);
    TCMPS(m, s, 0.0f, CmpMode::GT);
}
// pto-isa would lay the 4-byte rows of the packed source out as 32-byte mask rows.
extern "C" void mask_rows_misaligned() {
    T16x32 s;
    Tile<TileType::Vec, uint8_t, 16, 32> m;
    TASSIGN(s, 0);
    TASSIGN(m, 2048);
    TCMPS(m, s, 0.0f, CmpMode::GT);
}
// pto-isa's TSEL would read row 1's bits from the end of mask row 0.
extern "C" void select_rows_drift() {
    Tile<TileType::Vec, float, 16, 32, BLayout::RowMajor, 16, 27> d;
    Tile<TileType::Vec, uint8_t, 16, 32, BLayout::RowMajor, 16, 4> m;
    TASSIGN(d, 0);
    TASSIGN(m, 2048);
    TEXPANDS(m, uint8_t(0));
    TSEL(d, m, d, d, d);
}
extern "C" void flags_balanced() {
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID1);
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID1);
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID1);
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID1);
}
extern "C" void wait_without_set() {
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID2);
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID2);
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID2);
}
extern "C" void flag_within_one_pipe() { set_flag(PIPE_V, PIPE_V, EVENT_ID0); }
extern "C" void* ub_base() {
    Tile<TileType::Vec, float, 8, 8> t;
    TASSIGN(t, 0);
    return t.data();
}
extern "C" int poison_again_after_use() {
    // A value written by one launch reads as NaN after poison_buffers().
    Tile<TileType::Vec, float, 8, 8> t;
    TASSIGN(t, 0);
    TEXPANDS(t, 2.0f);
    float out[64];
    GlobalTensor<float, Shape<1, 1, 1, 8, 8>, Stride<1, 1, 1, 8, 1>> g(out);
    TSTORE(g, t);
    const bool written = out[63] == 2.0f;
#ifdef PTO_CPU_SUBSET
    cpu::poison_buffers();
#endif
    TSTORE(g, t);
    return written && out[63] != out[63] ? 1 : 0;
}
extern "C" int poisoned_arena_reads_nan() {
    // Fresh UB bytes are NaN; a region no instruction wrote reads as NaN.
    Tile<TileType::Vec, float, 8, 8> t;
    TASSIGN(t, 4096);
    float out[64];
    GlobalTensor<float, Shape<1, 1, 1, 8, 8>, Stride<1, 1, 1, 8, 1>> g(out);
    TSTORE(g, t);
    return out[0] != out[0] ? 1 : 0;
}
"""


@pytest.fixture(scope="module")
def conversions(cpp):
    return cpp.build({"conversions.cpp": CONVERSIONS}, "conversions")[1]


@pytest.fixture(scope="module")
def failures(cpp):
    # A small UB shows that the arena sizes come from the build's defines; the flag checks are on.
    path, lib = cpp.build({"failures.cpp": FAILURES}, "failures",
                          defines={"PTO_CPU_UB_BYTES": 8192, "PTO_CPU_CHECK_FLAGS": None})
    return path, lib


def convert(lib, name: str, src: np.ndarray, out_dtype) -> np.ndarray:
    out = np.empty(src.size, out_dtype)
    getattr(lib, name)(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(src.ctypes.data),
                       ctypes.c_long(src.size))
    return out


def same_bits_or_both_nan(got: np.ndarray, want: np.ndarray) -> None:
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


def f32_samples() -> np.ndarray:
    rng = np.random.default_rng(99)
    bits = rng.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32)
    # Every f32 whose low 13 (f16) or 16 (bf16) bits make a tie or its neighbours, across exponents.
    exps = np.arange(0, 256, dtype=np.uint32) << 23
    ties = np.array([0x1000, 0x0FFF, 0x1001, 0x3000, 0x8000, 0x7FFF, 0x8001, 0x18000, 0x0, 0x1], np.uint32)
    near = (exps[:, None] | ties[None, :]).ravel()
    edges = np.array([0.0, -0.0, 65504.0, 65519.996, 65520.0, 65536.0, 2.0**-24, 2.0**-25, 1.5 * 2.0**-25,
                      2.0**-14, 3.4e38, np.inf, -np.inf, np.nan], np.float32)
    return np.concatenate([bits.view(np.float32), near.view(np.float32), (near | 0x80000000).view(np.float32),
                           edges])


def test_every_half_widens_exactly(conversions):
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    got = convert(conversions, "f16_to_f32", every, np.float32)
    want = every.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_every_bfloat16_widens_exactly(conversions):
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    got = convert(conversions, "bf16_to_f32", every, np.float32)
    want = every.view(ml_dtypes.bfloat16).astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
    assert np.isnan(got[nan]).all()


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_float_to_half_rounds_like_numpy(conversions):
    values = f32_samples()
    got = convert(conversions, "f32_to_f16", values, np.uint16).view(np.float16)
    same_bits_or_both_nan(got, values.astype(np.float16))


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
def test_float_to_bfloat16_rounds_like_ml_dtypes(conversions):
    values = f32_samples()
    got = convert(conversions, "f32_to_bf16", values, np.uint16).view(ml_dtypes.bfloat16)
    same_bits_or_both_nan(got, values.astype(ml_dtypes.bfloat16))


def test_half_arithmetic_runs_in_float(conversions):
    rng = np.random.default_rng(3)
    a = rng.uniform(-100, 100, 5000).astype(np.float16)
    b = rng.uniform(-2, 2, 5000).astype(np.float16)
    out = np.empty(5000, np.uint16)
    conversions.half_fma_like(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(a.ctypes.data),
                              ctypes.c_void_p(b.ctypes.data), ctypes.c_long(5000))
    # x * y + x is evaluated in f32 and rounded once; += 1 rounds again.
    first = (a.astype(np.float32) * b.astype(np.float32) + a.astype(np.float32)).astype(np.float16)
    want = (first.astype(np.float32) + np.float32(1)).astype(np.float16)
    np.testing.assert_array_equal(out, want.view(np.uint16))


ABORTS = {
    "assign_past_the_end": "a 2048-byte tile at address 7168 overflows UB (Vec), which holds 8192 bytes",
    "assign_misaligned": "address 16 in UB (Vec) is not a multiple of 32 bytes",
    "assign_negative": "negative address -64",
    "assign_l0a_past_the_end": "overflows L0A (Left), which holds 65536 bytes",
    "use_before_assign": "TEXPANDS: a tile in UB (Vec) is used before TASSIGN placed it",
    "dynamic_valid_never_set": "DYNAMIC valid row count is used before the count was set",
    "load_shape_mismatch": "TLOAD: the GM view is 8x32",
    "operand_too_small": "TADD: src0 is a 8x32 tile, too small for the 16x32 region",
    "extract_out_of_range": "TEXTRACT: a 32x16 region at (0, 17) does not fit in the 32x32 source tile",
    "mask_too_few_rows": "TCMPS: the mask has 8 valid rows, the source 16",
    "mask_rows_misaligned": "TCMPS: the mask needs 4 valid columns (Cols / 8 of the 32-column source)",
    "select_rows_drift": "TSEL: a destination row of 27 valid columns reads 27 mask bits",
    "wait_without_set": "wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID2) has no matching set_flag",
    "flag_within_one_pipe": "set_flag(PIPE_V, PIPE_V, ...): a flag orders two different pipes",
}


@pytest.mark.parametrize("function", sorted(ABORTS))
def test_broken_kernels_abort_with_a_reason(cpp, failures, function):
    result = cpp.run_in_subprocess(failures[0], function)
    assert result.returncode == -signal.SIGABRT, (result.returncode, result.stderr)
    assert ABORTS[function] in result.stderr
    assert result.stderr.startswith("pto CPU: ")


def test_valid_extent_larger_than_the_tile_aborts(cpp, failures):
    result = cpp.run_in_subprocess(failures[0], "dynamic_valid_too_large", 17)
    assert result.returncode == -signal.SIGABRT
    assert "valid row count must be in [1, 16], got 17" in result.stderr


def test_legal_calls_do_not_abort(failures):
    lib = failures[1]
    lib.assign_last_fitting()
    lib.flags_balanced()
    lib.dynamic_valid_too_large(ctypes.c_int(16))
    assert lib.poisoned_arena_reads_nan() == 1
    assert lib.poison_again_after_use() == 1


def test_libraries_keep_their_own_arenas(conversions, failures):
    # Built with different UB sizes, two kernel libraries in one process must not share buffers.
    for lib in (conversions, failures[1]):
        lib.ub_base.restype = ctypes.c_void_p
    assert conversions.ub_base() != failures[1].ub_base()


def test_parallel_blocks_get_their_own_buffers(conversions):
    from ptodsl.backends.cpp.build import find_toolchain

    blocks = 16
    src = np.random.default_rng(5).uniform(-1, 1, (blocks, 8, 64)).astype(np.float32)
    out = np.zeros_like(src)
    threads = conversions.parallel_blocks(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(src.ctypes.data),
                                          ctypes.c_int(blocks))
    np.testing.assert_array_equal(out, src * np.arange(blocks, dtype=np.float32)[:, None, None] + src)
    if find_toolchain().openmp:
        assert threads > 1
