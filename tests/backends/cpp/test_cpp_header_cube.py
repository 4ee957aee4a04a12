"""Cube instructions of ptodsl's CPU pto-isa header: GM -> L1 -> L0A/L0B -> matmul -> L0C -> GM.

A is M x K, B is K x N and C is M x N in row-major GM buffers. Columns of A and rows of B past
the valid k hold NaN (or, for i8, large values), so a matmul that reads beyond k shows it.
"""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest

M, K, N = 32, 64, 32

SOURCE = r"""
#include <pto/pto-inst.hpp>
#include <cstdint>
using namespace pto;

constexpr int M = 32;
constexpr int K = 64;
constexpr int N = 32;

// L1 tiles in the cube's NZ layout (column-major boxes of row-major 16 x 32-byte fractals) or plain
// row-major, both with dynamic valid extents.
template <typename T, int Rows, int Cols>
using MatNZ = Tile<TileType::Mat, T, Rows, Cols, BLayout::ColMajor, DYNAMIC, DYNAMIC, SLayout::RowMajor>;
template <typename T, int Rows, int Cols>
using MatND = Tile<TileType::Mat, T, Rows, Cols, BLayout::RowMajor, DYNAMIC, DYNAMIC>;
template <typename T>
using G = GlobalTensor<T, Shape<1, 1, 1, DYNAMIC, DYNAMIC>, Stride<1, 1, 1, DYNAMIC, 1>>;

template <typename T, typename TileT>
void load(TileT& t, T* p, int rows, int cols, int ld) {
    G<T> g(p, typename G<T>::Shape(rows, cols), typename G<T>::Stride(ld));
    TLOAD(t, g);
}

// A (m x kload) and B (kload x n) go to L1 and on to L0A / L0B; the operands are then narrowed to
// the valid k, so the matmul must not touch the k..kload columns of A and rows of B.
template <typename Acc, typename In, typename TileA, typename TileB, typename Left, typename Right>
void operands(Left& la, Right& rb, In* a, In* b, int m, int k, int n, int kload) {
    TileA ma(m, kload);
    TileB mb(kload, n);
    TASSIGN(ma, 0);
    TASSIGN(mb, 65536);
    load<In>(ma, a, m, kload, K);
    load<In>(mb, b, kload, n, N);
    TASSIGN(la, 0);
    TASSIGN(rb, 0);
    la.SetValidShape(m, kload);
    rb.SetValidShape(kload, n);
    TMOV(la, ma);
    TMOV(rb, mb);
    la.SetValidShape(m, k);
    rb.SetValidShape(k, n);
}

template <typename Acc, typename In>
void matmul_case(Acc* c, In* a, In* b, int m, int k, int n, int kload) {
    TileLeft<In, M, K, DYNAMIC, DYNAMIC> la;
    TileRight<In, K, N, DYNAMIC, DYNAMIC> rb;
    operands<Acc, In, MatNZ<In, M, K>, MatND<In, K, N>>(la, rb, a, b, m, k, n, kload);
    TileAcc<Acc, M, N, DYNAMIC, DYNAMIC> acc(m, n);
    TASSIGN(acc, 0);
    set_flag(PIPE_MTE1, PIPE_M, EVENT_ID0);
    wait_flag(PIPE_MTE1, PIPE_M, EVENT_ID0);
    TMATMUL(acc, la, rb);
    set_flag(PIPE_M, PIPE_FIX, EVENT_ID0);
    wait_flag(PIPE_M, PIPE_FIX, EVENT_ID0);
    G<Acc> gc(c, typename G<Acc>::Shape(m, n), typename G<Acc>::Stride(N));
    TSTORE(gc, acc);
}

#define MATMUL(NAME, ACC, IN)                                                                   \
    extern "C" void NAME(ACC* c, IN* a, IN* b, int m, int k, int n, int kload) {                \
        matmul_case<ACC, IN>(c, a, b, m, k, n, kload);                                          \
    }
MATMUL(mm_f16, float, half)
MATMUL(mm_bf16, float, bfloat16_t)
MATMUL(mm_f32, float, float)
MATMUL(mm_i8, int32_t, int8_t)

// C = A1 x B1 + A2 x B2 through TMATMUL then TMATMUL_ACC, in place or into a second Acc tile.
extern "C" void mm_acc(float* c, half* a1, half* b1, half* a2, half* b2, int m, int k1, int k2, int n,
                       int separate_out) {
    TileLeft<half, M, K, DYNAMIC, DYNAMIC> la;
    TileRight<half, K, N, DYNAMIC, DYNAMIC> rb;
    TileAcc<float, M, N, DYNAMIC, DYNAMIC> acc(m, n), acc2(m, n);
    TASSIGN(acc, 0);
    TASSIGN(acc2, M * N * 4);
    operands<float, half, MatNZ<half, M, K>, MatNZ<half, K, N>>(la, rb, a1, b1, m, k1, n, k1);
    TMATMUL(acc, la, rb);
    operands<float, half, MatNZ<half, M, K>, MatNZ<half, K, N>>(la, rb, a2, b2, m, k2, n, k2);
    G<float> gc(c, G<float>::Shape(m, n), G<float>::Stride(N));
    if (separate_out) {
        TMATMUL_ACC(acc2, acc, la, rb);
        TSTORE(gc, acc2);
    } else {
        TMATMUL_ACC(acc, acc, la, rb);
        TSTORE(gc, acc);
    }
}

// The f32 accumulator stored to f16 / bf16 GM: the fixpipe narrows with round-to-nearest-even.
template <typename Out>
void store_narrow(Out* c, half* a, half* b) {
    TileLeft<half, M, K, DYNAMIC, DYNAMIC> la;
    TileRight<half, K, N, DYNAMIC, DYNAMIC> rb;
    operands<float, half, MatNZ<half, M, K>, MatNZ<half, K, N>>(la, rb, a, b, M, K, N, K);
    TileAcc<float, M, N> acc;
    TASSIGN(acc, 0);
    TMATMUL(acc, la, rb);
    GlobalTensor<Out, Shape<1, 1, 1, M, N>, Stride<1, 1, 1, N, 1>> gc(c);
    TSTORE(gc, acc);
}
extern "C" void mm_store_f16(half* c, half* a, half* b) { store_narrow(c, a, b); }
extern "C" void mm_store_bf16(bfloat16_t* c, half* a, half* b) { store_narrow(c, a, b); }

// A second, smaller matmul into the same accumulator writes only its m x n corner.
extern "C" void mm_corner(float* c, half* a, half* a2, half* b, int m, int n) {
    TileLeft<half, M, K, DYNAMIC, DYNAMIC> la;
    TileRight<half, K, N, DYNAMIC, DYNAMIC> rb;
    TileAcc<float, M, N, DYNAMIC, DYNAMIC> acc(M, N);
    TASSIGN(acc, 0);
    operands<float, half, MatNZ<half, M, K>, MatNZ<half, K, N>>(la, rb, a, b, M, K, N, K);
    TMATMUL(acc, la, rb);
    operands<float, half, MatNZ<half, M, K>, MatNZ<half, K, N>>(la, rb, a2, b, m, K, n, K);
    TMATMUL(acc, la, rb);
    acc.SetValidShape(M, N);
    GlobalTensor<float, Shape<1, 1, 1, M, N>, Stride<1, 1, 1, N, 1>> gc(c);
    TSTORE(gc, acc);
}

// TEXTRACT an M x K window at (row0, col0) of a 64 x 128 L1 tile into L0A.
extern "C" void mm_extract(float* c, half* a_big, half* b, int row0, int col0) {
    MatNZ<half, 64, 128> big(64, 128);
    TASSIGN(big, 0);
    load<half>(big, a_big, 64, 128, 128);
    TileLeft<half, M, K> la;
    TASSIGN(la, 0);
    TEXTRACT(la, big, row0, col0);
    MatNZ<half, K, N> mb(K, N);
    TASSIGN(mb, 65536);
    load<half>(mb, b, K, N, N);
    TileRight<half, K, N> rb;
    TASSIGN(rb, 0);
    TEXTRACT(rb, mb);
    TileAcc<float, M, N> acc;
    TASSIGN(acc, 0);
    TMATMUL(acc, la, rb);
    GlobalTensor<float, Shape<1, 1, 1, M, N>, Stride<1, 1, 1, N, 1>> gc(c);
    TSTORE(gc, acc);
}

// C = A x B + bias; the bias row goes GM -> L1 -> bias table, an f16 row widened to f32 on the way.
template <typename B>
void matmul_bias(float* c, half* a, half* b, B* bias) {
    TileLeft<half, M, K, DYNAMIC, DYNAMIC> la;
    TileRight<half, K, N, DYNAMIC, DYNAMIC> rb;
    operands<float, half, MatNZ<half, M, K>, MatNZ<half, K, N>>(la, rb, a, b, M, K, N, K);
    Tile<TileType::Mat, B, 1, N> mbias;
    Tile<TileType::Bias, float, 1, N> tbias;
    TASSIGN(mbias, 131072);
    TASSIGN(tbias, 0);
    GlobalTensor<B, Shape<1, 1, 1, 1, N>, Stride<1, 1, 1, N, 1>> gb(bias);
    TLOAD(mbias, gb);
    TMOV(tbias, mbias);
    TileAcc<float, M, N> acc;
    TASSIGN(acc, 0);
    TMATMUL_BIAS(acc, la, rb, tbias);
    GlobalTensor<float, Shape<1, 1, 1, M, N>, Stride<1, 1, 1, N, 1>> gc(c);
    TSTORE(gc, acc);
}
extern "C" void mm_bias(float* c, half* a, half* b, float* bias) { matmul_bias(c, a, b, bias); }
extern "C" void mm_bias_f16(float* c, half* a, half* b, half* bias) { matmul_bias(c, a, b, bias); }

// An Acc tile moved to L1 and narrowed to f16 on the way (TMOV out of L0C).
extern "C" void acc_to_l1_f16(half* c, half* a, half* b) {
    TileLeft<half, M, K, DYNAMIC, DYNAMIC> la;
    TileRight<half, K, N, DYNAMIC, DYNAMIC> rb;
    operands<float, half, MatNZ<half, M, K>, MatNZ<half, K, N>>(la, rb, a, b, M, K, N, K);
    TileAcc<float, M, N> acc;
    TASSIGN(acc, 0);
    TMATMUL(acc, la, rb);
    MatND<half, M, N> out(M, N);
    TASSIGN(out, 262144);
    TMOV(out, acc);
    G<half> gc(c, G<half>::Shape(M, N), G<half>::Stride(N));
    TSTORE(gc, out);
}

// The rounding contract of TMATMUL, one element at a time: C[i][j] is the chain of fused
// multiply-adds over kk from 0, in order of kk, of the inputs converted to float.
template <typename In>
void reference_product(float* c, const In* a, const In* b, int m, int k, int n) {
    for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (int kk = 0; kk < k; ++kk) {
                acc = std::fma(static_cast<float>(a[i * K + kk]), static_cast<float>(b[kk * N + j]), acc);
            }
            c[i * N + j] = acc;
        }
    }
}
extern "C" void ref_f32(float* c, float* a, float* b, int m, int k, int n) { reference_product(c, a, b, m, k, n); }
extern "C" void ref_f16(float* c, half* a, half* b, int m, int k, int n) { reference_product(c, a, b, m, k, n); }
extern "C" void ref_bf16(float* c, bfloat16_t* a, bfloat16_t* b, int m, int k, int n) {
    reference_product(c, a, b, m, k, n);
}
"""

RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def lib(cpp):
    return cpp.build({"cube_ops.cpp": SOURCE}, "cube_ops", flags=("-Wall", "-Wextra", "-Werror"))[1]


def call(lib, name: str, *args) -> None:
    getattr(lib, name)(*[ctypes.c_void_p(a.ctypes.data) if isinstance(a, np.ndarray) else ctypes.c_int(a)
                         for a in args])


def operands(dtype, k: int, kload: int) -> tuple[np.ndarray, np.ndarray]:
    if np.dtype(dtype) == np.int8:
        a = RNG.integers(-8, 8, (M, K)).astype(np.int8)
        b = RNG.integers(-8, 8, (K, N)).astype(np.int8)
        a[:, k:kload] = 127
        b[k:kload, :] = 127
    else:
        a = RNG.uniform(-1, 1, (M, K)).astype(dtype)
        b = RNG.uniform(-1, 1, (K, N)).astype(dtype)
        a[:, k:kload] = np.nan
        b[k:kload, :] = np.nan
    return a, b


CASES = {"mm_f16": (np.float16, np.float32), "mm_bf16": (ml_dtypes.bfloat16, np.float32),
         "mm_f32": (np.float32, np.float32), "mm_i8": (np.int8, np.int32)}


@pytest.mark.parametrize("fn", sorted(CASES))
@pytest.mark.parametrize("m,k,n,kload", [(M, K, N, K), (20, 40, 24, K), (1, 1, 1, 16), (32, 17, 5, 48)])
def test_matmul_reads_only_the_valid_k(lib, fn, m, k, n, kload):
    in_t, acc_t = CASES[fn]
    a, b = operands(in_t, k, kload)
    c = RNG.uniform(-9, 9, (M, N)).astype(acc_t)
    before = c.copy()
    call(lib, fn, c, a, b, m, k, n, kload)
    if acc_t == np.int32:
        want = a[:m, :k].astype(np.int64) @ b[:k, :n].astype(np.int64)
        np.testing.assert_array_equal(c[:m, :n], want)
    else:
        want = a[:m, :k].astype(np.float64) @ b[:k, :n].astype(np.float64)
        np.testing.assert_allclose(c[:m, :n], want, rtol=1e-5, atol=1e-5)
    outside = np.ones((M, N), bool)
    outside[:m, :n] = False
    np.testing.assert_array_equal(c[outside], before[outside])  # TSTORE moved exactly m x n


@pytest.mark.parametrize("separate_out", [0, 1])
def test_matmul_acc_continues_the_accumulation(lib, separate_out):
    a1, b1 = operands(np.float16, 48, 48)
    a2, b2 = operands(np.float16, 40, 40)
    c = np.zeros((M, N), np.float32)
    call(lib, "mm_acc", c, a1, b1, a2, b2, 30, 48, 40, 29, separate_out)
    want = (a1[:30, :48].astype(np.float64) @ b1[:48, :29]) + (a2[:30, :40].astype(np.float64) @ b2[:40, :29])
    np.testing.assert_allclose(c[:30, :29], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn,dtype", [("mm_store_f16", np.float16), ("mm_store_bf16", ml_dtypes.bfloat16)])
def test_acc_stores_narrowed_with_round_to_nearest_even(lib, fn, dtype):
    a, b = operands(np.float16, K, K)
    c = np.zeros((M, N), dtype)
    call(lib, fn, c, a, b)
    full = np.zeros((M, N), np.float32)
    call(lib, "mm_f16", full, a, b, M, K, N, K)  # the same accumulator, stored as f32
    np.testing.assert_array_equal(c.view(np.uint16), full.astype(dtype).view(np.uint16))


def test_second_matmul_writes_only_its_corner(lib):
    a, b = operands(np.float16, K, K)
    a2 = (a.astype(np.float32) * 2).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    call(lib, "mm_corner", c, a, a2, b, 12, 7)
    first = a.astype(np.float64) @ b.astype(np.float64)
    want = first.copy()
    want[:12, :7] = 2 * first[:12, :7]
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("row0,col0", [(0, 0), (32, 64), (16, 32), (5, 3)])
def test_textract_window(lib, row0, col0):
    big = RNG.uniform(-1, 1, (64, 128)).astype(np.float16)
    b = RNG.uniform(-1, 1, (K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    call(lib, "mm_extract", c, big, b, row0, col0)
    want = big[row0:row0 + M, col0:col0 + K].astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn, dtype", [("mm_bias", np.float32), ("mm_bias_f16", np.float16)])
def test_matmul_bias(lib, fn, dtype):
    a, b = operands(np.float16, K, K)
    bias = RNG.uniform(-3, 3, N).astype(dtype)
    c = np.zeros((M, N), np.float32)
    call(lib, fn, c, a, b, bias)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64) + bias, rtol=1e-5, atol=1e-5)


def test_acc_moved_to_l1_narrows(lib):
    a, b = operands(np.float16, K, K)
    c = np.zeros((M, N), np.float16)
    call(lib, "acc_to_l1_f16", c, a, b)
    full = np.zeros((M, N), np.float32)
    call(lib, "mm_f16", full, a, b, M, K, N, K)
    np.testing.assert_array_equal(c, full.astype(np.float16))


@pytest.mark.parametrize("fn", ["mm_f32", "mm_f16", "mm_bf16"])
@pytest.mark.parametrize("m,k,n", [(M, K, N), (31, 63, 29), (8, 64, 32), (9, 5, 17), (16, 33, 16)])
def test_matmul_rounds_as_a_chain_of_fused_multiply_adds(lib, fn, m, k, n):
    """Register blocks and their tails hold every element to the same chain of roundings."""
    in_t, _ = CASES[fn]
    a, b = operands(in_t, k, k)
    c = np.zeros((M, N), np.float32)
    want = np.zeros((M, N), np.float32)
    call(lib, fn, c, a, b, m, k, n, k)
    call(lib, fn.replace("mm_", "ref_"), want, a, b, m, k, n)
    np.testing.assert_array_equal(c[:m, :n].view(np.uint32), want[:m, :n].view(np.uint32))
