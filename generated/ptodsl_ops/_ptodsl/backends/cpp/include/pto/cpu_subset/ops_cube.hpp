// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// The cube unit: C (Acc, L0C) = A (Left, L0A) x B (Right, L0B), accumulated in the accumulator's
// type (f32, or i32 for i8 inputs). m, k and n come from A's valid rows and columns and B's valid
// columns; only the m x n corner of C is written.
#ifndef PTODSL_CPU_SUBSET_OPS_CUBE_HPP
#define PTODSL_CPU_SUBSET_OPS_CUBE_HPP

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common.hpp"
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

// C[i][j] = (acc ? acc[i][j] : 0) + sum over kk of A[i][kk] * B[kk][j], summed from 0 in order of kk
// (fused multiply-adds for f32), then added to acc: pto-isa's CPU order.
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
    // Unpack the fractal operands into dense row-major scratch once, then run a cache-friendly
    // i-k-j loop; per (i, j) the products still add up in order of k.
    static thread_local std::vector<C> dense_a, dense_b, dense_c;
    dense_a.resize(static_cast<std::size_t>(m) * k);
    dense_b.resize(static_cast<std::size_t>(k) * n);
    dense_c.assign(static_cast<std::size_t>(m) * n, C(0));
    for (unsigned i = 0; i < m; ++i) {
        for (unsigned kk = 0; kk < k; ++kk) {
            dense_a[static_cast<std::size_t>(i) * k + kk] = static_cast<C>(lhs[element_offset<TileA>(i, kk)]);
        }
    }
    for (unsigned kk = 0; kk < k; ++kk) {
        for (unsigned j = 0; j < n; ++j) {
            dense_b[static_cast<std::size_t>(kk) * n + j] = static_cast<C>(rhs[element_offset<TileB>(kk, j)]);
        }
    }
    for (unsigned i = 0; i < m; ++i) {
        C* row = &dense_c[static_cast<std::size_t>(i) * n];
        for (unsigned kk = 0; kk < k; ++kk) {
            const C scale = dense_a[static_cast<std::size_t>(i) * k + kk];
            const C* b_row = &dense_b[static_cast<std::size_t>(kk) * n];
            for (unsigned j = 0; j < n; ++j) {
                // fused for float accumulators, as pto-isa's CPU simulation does, so both round alike
                if constexpr (std::is_same_v<C, float>) {
                    row[j] = std::fma(scale, b_row[j], row[j]);
                } else {
                    row[j] += scale * b_row[j];
                }
            }
        }
    }
    for (unsigned i = 0; i < m; ++i) {
        for (unsigned j = 0; j < n; ++j) {
            const std::size_t at = element_offset<TileAcc>(i, j);
            const C sum = dense_c[static_cast<std::size_t>(i) * n + j];
            out[at] = acc_in != nullptr ? C(acc_in[at] + sum) : sum;
        }
    }
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
