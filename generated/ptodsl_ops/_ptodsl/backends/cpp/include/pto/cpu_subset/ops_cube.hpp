// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// The cube unit: C (Acc, L0C) = A (Left, L0A) x B (Right, L0B), accumulated in the accumulator's
// type (f32, or i32 for i8 inputs). m, k and n come from A's valid rows and columns and B's valid
// columns; only the m x n corner of C is written.
#ifndef PTODSL_CPU_SUBSET_OPS_CUBE_HPP
#define PTODSL_CPU_SUBSET_OPS_CUBE_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common.hpp"
#include "ops_memory.hpp"
#include "tile.hpp"

namespace pto {
namespace cpu {

constexpr unsigned kMaxMatmulExtent = 4095;

template <typename TileAcc, typename TileA, typename TileB>
constexpr void check_matmul_types() {
    using C = typename TileAcc::DType;
    using A = typename TileA::DType;
    using B = typename TileB::DType;
    static_assert((std::is_same_v<C, float> && std::is_same_v<A, half> && std::is_same_v<B, half>) ||
                      (std::is_same_v<C, float> && std::is_same_v<A, bfloat16_t> && std::is_same_v<B, bfloat16_t>) ||
                      (std::is_same_v<C, float> && std::is_same_v<A, float> && std::is_same_v<B, float>) ||
                      (std::is_same_v<C, std::int32_t> && std::is_same_v<A, std::int8_t> &&
                       std::is_same_v<B, std::int8_t>),
                  "TMATMUL: (C, A, B) element types must be (f32, f16, f16), (f32, bf16, bf16), (f32, f32, f32) "
                  "or (i32, i8, i8)");
    static_assert(TileA::Loc == TileType::Left && TileB::Loc == TileType::Right && TileAcc::Loc == TileType::Acc,
                  "TMATMUL: operands must be Left, Right and Acc tiles");
    static_assert(TileA::Rows == TileAcc::Rows && TileA::Cols == TileB::Rows && TileB::Cols == TileAcc::Cols,
                  "TMATMUL: static shapes must be A: m x k, B: k x n, C: m x n");
    static_assert(TileA::SFractal == SLayout::RowMajor && TileB::isRowMajor && TileB::SFractal == SLayout::ColMajor &&
                      !TileAcc::isRowMajor && TileAcc::SFractal == SLayout::RowMajor,
                  "TMATMUL: operands need the cube fractal layouts (use TileLeft, TileRight and TileAcc)");
}

// c = a * b + c for one element: fused for float accumulators, as pto-isa's CPU simulation does, so
// both round alike; exact for the integer ones.
template <typename C>
inline C multiply_add(C a, C b, C c) {
    if constexpr (std::is_same_v<C, float>) {
        return std::fma(a, b, c);
    } else {
        return c + a * b;
    }
}

// The register block of the product: MR rows by NR columns of C held in registers across the
// whole k loop (g++ vectorises the j loop; with AVX-512 8 x 32 floats are 16 zmm registers, with
// AVX2 4 x 16 are 8 ymm).
#if defined(__AVX512F__)
constexpr unsigned kMatmulRows = 8;
constexpr unsigned kMatmulCols = 32;
#else
constexpr unsigned kMatmulRows = 4;
constexpr unsigned kMatmulCols = 16;
#endif

// dense_c (m x n, row-major) = dense_a (m x k) * dense_b (k x n), each element summed from 0 in
// order of kk. Blocking over rows and columns does not change any element's chain of additions.
template <typename C>
inline void dense_product(const C* __restrict__ a, const C* __restrict__ b, C* __restrict__ c, unsigned m, unsigned k,
                          unsigned n) {
    constexpr unsigned MR = kMatmulRows;
    constexpr unsigned NR = kMatmulCols;
    const unsigned m_blocked = m - m % MR;
    const unsigned n_blocked = n - n % NR;
    for (unsigned i0 = 0; i0 < m_blocked; i0 += MR) {
        for (unsigned j0 = 0; j0 < n_blocked; j0 += NR) {
            C acc[MR][NR] = {};
            for (unsigned kk = 0; kk < k; ++kk) {
                const C* b_row = b + static_cast<std::size_t>(kk) * n + j0;
#pragma GCC unroll 8
                for (unsigned r = 0; r < MR; ++r) {
                    const C scale = a[static_cast<std::size_t>(i0 + r) * k + kk];
#pragma GCC unroll 32
                    for (unsigned j = 0; j < NR; ++j) {
                        acc[r][j] = multiply_add(scale, b_row[j], acc[r][j]);
                    }
                }
            }
            for (unsigned r = 0; r < MR; ++r) {
                for (unsigned j = 0; j < NR; ++j) {
                    c[static_cast<std::size_t>(i0 + r) * n + j0 + j] = acc[r][j];
                }
            }
        }
    }
    // the rest: the columns right of the blocks, then the rows below them, a row at a time
    for (unsigned i = 0; i < m; ++i) {
        const unsigned j_from = i < m_blocked ? n_blocked : 0;
        if (j_from == n) {
            continue;
        }
        C* row = c + static_cast<std::size_t>(i) * n;
        for (unsigned j = j_from; j < n; ++j) {
            row[j] = C(0);
        }
        for (unsigned kk = 0; kk < k; ++kk) {
            const C scale = a[static_cast<std::size_t>(i) * k + kk];
            const C* b_row = b + static_cast<std::size_t>(kk) * n;
            for (unsigned j = j_from; j < n; ++j) {
                row[j] = multiply_add(scale, b_row[j], row[j]);
            }
        }
    }
}

// C[i][j] = (acc ? acc[i][j] : 0) + sum over kk of A[i][kk] * B[kk][j], summed from 0 in order of kk
// (fused multiply-adds for f32), then added to acc: pto-isa's CPU order. The operands are unpacked
// from their fractal layouts into dense row-major scratch once per instruction (16-bit inputs
// converted to the accumulator's type there, once per element), multiplied in register blocks, and
// the result packed back into C's layout.
template <typename TileAcc, typename TileA, typename TileB, typename AccIn>
inline void matmul(TileAcc& c_out, const AccIn* acc_in, TileA& a, TileB& b, const char* op) {
    check_matmul_types<TileAcc, TileA, TileB>();
    using C = typename TileAcc::DType;
    C* out = elements(c_out, op);
    const auto* lhs = elements(a, op);
    const auto* rhs = elements(b, op);
    const unsigned m = a.GetValidRow();
    const unsigned k = a.GetValidCol();
    const unsigned n = b.GetValidCol();
    if (m < 1 || m > kMaxMatmulExtent || k < 1 || k > kMaxMatmulExtent || n < 1 || n > kMaxMatmulExtent) {
        fail("%s: m=%u, k=%u, n=%u; each must be in [1, %u]", op, m, k, n, kMaxMatmulExtent);
    }
    // one thread-local lookup per instruction (each costs a call in a shared library)
    static thread_local std::vector<C> scratch_storage;
    std::vector<C>& scratch = scratch_storage;
    const std::size_t mk = static_cast<std::size_t>(m) * k;
    const std::size_t kn = static_cast<std::size_t>(k) * n;
    const std::size_t mn = static_cast<std::size_t>(m) * n;
    if (scratch.size() < mk + kn + mn) {
        scratch.resize(mk + kn + mn);
    }
    C* dense_a = scratch.data();
    C* dense_b = dense_a + mk;
    C* dense_c = dense_b + kn;
    for_row_runs<TileA>(m, k, [&](unsigned i, unsigned kk, unsigned len, std::size_t at) {
        C* to = dense_a + static_cast<std::size_t>(i) * k + kk;
        for (unsigned x = 0; x < len; ++x) {
            to[x] = static_cast<C>(lhs[at + x]);
        }
    });
    constexpr unsigned b_step = col_step<TileB>();
    constexpr unsigned b_span = col_span<TileB>();
    for (unsigned kk = 0; kk < k; ++kk) {
        C* to = dense_b + static_cast<std::size_t>(kk) * n;
        for (unsigned j = 0; j < n; j += b_span) {
            const auto* from = rhs + element_offset<TileB>(kk, j);
            const unsigned len = n - j < b_span ? n - j : b_span;
            for (unsigned x = 0; x < len; ++x) {
                to[j + x] = static_cast<C>(from[x * b_step]);
            }
        }
    }
    dense_product(dense_a, dense_b, dense_c, m, k, n);
    for_row_runs<TileAcc>(m, n, [&](unsigned i, unsigned j, unsigned len, std::size_t at) {
        const C* from = dense_c + static_cast<std::size_t>(i) * n + j;
        if (acc_in != nullptr) {
            for (unsigned x = 0; x < len; ++x) {
                out[at + x] = C(acc_in[at + x] + from[x]);
            }
        } else {
            for (unsigned x = 0; x < len; ++x) {
                out[at + x] = from[x];
            }
        }
    });
}

}  // namespace cpu

template <typename TileRes, typename TileLeft, typename TileRight>
AICORE inline RecordEvent TMATMUL(TileRes& cMatrix, TileLeft& aMatrix, TileRight& bMatrix) {
    cpu::matmul(cMatrix, static_cast<const typename TileRes::DType*>(nullptr), aMatrix, bMatrix, "TMATMUL");
    return {};
}

// cOut = cIn + A x B. cIn and cOut may be the same tile.
template <typename TileRes, typename TileLeft, typename TileRight>
AICORE inline RecordEvent TMATMUL_ACC(TileRes& cOutMatrix, TileRes& cInMatrix, TileLeft& aMatrix,
                                      TileRight& bMatrix) {
    const typename TileRes::DType* acc_in = cpu::elements(cInMatrix, "TMATMUL_ACC");
    cpu::matmul(cOutMatrix, acc_in, aMatrix, bMatrix, "TMATMUL_ACC");
    return {};
}

// C = A x B + bias, one bias value per column (a 1-row Bias tile).
template <typename TileRes, typename TileLeft, typename TileRight, typename TileBias>
AICORE inline RecordEvent TMATMUL_BIAS(TileRes& cMatrix, TileLeft& aMatrix, TileRight& bMatrix,
                                       TileBias& biasData) {
    static_assert(TileBias::Loc == TileType::Bias && TileBias::Rows == 1,
                  "TMATMUL_BIAS: the bias must be a one-row Bias tile");
    static_assert(std::is_same_v<typename TileBias::DType, typename TileRes::DType>,
                  "TMATMUL_BIAS: the bias has the accumulator's element type");
    cpu::matmul(cMatrix, static_cast<const typename TileRes::DType*>(nullptr), aMatrix, bMatrix, "TMATMUL_BIAS");
    auto* out = cpu::elements(cMatrix, "TMATMUL_BIAS");
    const auto* bias = cpu::elements(biasData, "TMATMUL_BIAS");
    const unsigned m = aMatrix.GetValidRow();
    const unsigned n = bMatrix.GetValidCol();
    cpu::require_covers<TileBias>(1, n, "TMATMUL_BIAS", "the bias");
    for (unsigned i = 0; i < m; ++i) {
        for (unsigned j = 0; j < n; ++j) {
            out[cpu::element_offset<TileRes>(i, j)] += bias[cpu::element_offset<TileBias>(0, j)];
        }
    }
    return {};
}

}  // namespace pto

#endif
