// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// Reductions (which iterate over the SOURCE's valid region) and broadcasts (which iterate over the
// destination's). Reductions of 16-bit floats accumulate in float and round once.
#ifndef PTODSL_CPU_SUBSET_OPS_REDUCE_HPP
#define PTODSL_CPU_SUBSET_OPS_REDUCE_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common.hpp"
#include "convert.hpp"
#include "ops_vector.hpp"
#include "tile.hpp"

namespace pto {
namespace cpu {

enum class Reduce { Sum, Max, Min };

template <typename V>
inline V combine(Reduce kind, V acc, V x) {
    switch (kind) {
        case Reduce::Sum: return acc + x;
        case Reduce::Max: return x > acc ? x : acc;
        case Reduce::Min: return x < acc ? x : acc;
    }
    return acc;
}

// A row sum in numpy's pairwise order (blocks of 8 partial sums, halved above 128 elements), so
// reductions on the CPU round exactly as the simulator's do, and like the hardware's tree rather
// than a long left-to-right chain.
template <typename V, typename Get>
inline V pairwise_sum(Get get, unsigned lo, unsigned n) {
    if (n < 8) {
        V acc = get(lo);
        for (unsigned i = 1; i < n; ++i) {
            acc = acc + get(lo + i);
        }
        return acc;
    }
    if (n <= 128) {
        V r[8];
        for (unsigned j = 0; j < 8; ++j) {
            r[j] = get(lo + j);
        }
        unsigned i = 8;
        for (; i + 8 <= n; i += 8) {
            for (unsigned j = 0; j < 8; ++j) {
                r[j] = r[j] + get(lo + i + j);
            }
        }
        V acc = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) {
            acc = acc + get(lo + i);
        }
        return acc;
    }
    unsigned half = n / 2;
    half -= half % 8;
    return pairwise_sum<V>(get, lo, half) + pairwise_sum<V>(get, lo + half, n - half);
}

// pairwise_sum over n contiguous elements: the same additions in the same order, written so that
// g++ keeps the 8 partial sums in one vector register. The leaf (n <= 128) is inlined; the halving
// above it is a call, so that a row length known at compile time does not unfold the recursion.
template <typename V, typename T>
inline V pairwise_leaf(const T* p, std::size_t n) {
    if (n < 8) {
        V acc = widen(p[0]);
        for (std::size_t i = 1; i < n; ++i) {
            acc = acc + widen(p[i]);
        }
        return acc;
    }
    V r[8];
    for (std::size_t j = 0; j < 8; ++j) {
        r[j] = widen(p[j]);
    }
    std::size_t i = 8;
    for (; i + 8 <= n; i += 8) {
#pragma GCC unroll 8
        for (std::size_t j = 0; j < 8; ++j) {
            r[j] = r[j] + widen(p[i + j]);
        }
    }
    V acc = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) {
        acc = acc + widen(p[i]);
    }
    return acc;
}

template <typename V, typename T>
[[gnu::noinline]] V pairwise_split(const T* p, std::size_t n);

template <typename V, typename T>
inline V pairwise_sum_run(const T* p, std::size_t n) {
    return n <= 128 ? pairwise_leaf<V>(p, n) : pairwise_split<V>(p, n);
}

template <typename V, typename T>
[[gnu::noinline]] V pairwise_split(const T* p, std::size_t n) {
    std::size_t half = n / 2;
    half -= half % 8;
    return pairwise_sum_run<V>(p, half) + pairwise_sum_run<V>(p + half, n - half);
}

// A float's bits as an integer that orders like the float (negative floats count down from -1),
// for every float but NaN; the map is its own inverse.
inline std::int32_t order_key(float x) {
    const auto i = static_cast<std::int32_t>(float_bits(x));
    return i >= 0 ? i : i ^ 0x7fffffff;
}

inline float from_order_key(std::int32_t k) {
    return float_from_bits(static_cast<std::uint32_t>(k >= 0 ? k : k ^ 0x7fffffff));
}

// acc = p[0], then acc = combine(Kind, acc, p[c]) for c = 1 .. n-1: the scalar fold. A max or min
// of floats is the same in any order except where the order decides which of several candidates
// is kept: a NaN (kept only at p[0], skipped after it) and zeros of either sign (the first of the
// extreme zeros is kept). So floats are folded as integers that order like them (a reduction g++
// vectorises, which it may not do to float compares that must keep NaN rules), and a row where a
// NaN turned up or the extreme is a zero is folded again in order, the exact rule. Integers fold
// as they are (their max and min have no such cases).
template <Reduce Kind, typename V, typename T>
inline V fold_run(const T* p, std::size_t n) {
    if constexpr (std::is_same_v<V, float>) {
        std::int32_t best = order_key(widen(p[0]));
        int unordered = 0;
        for (std::size_t c = 0; c < n; ++c) {
            const float x = widen(p[c]);
            unordered |= x != x;
            const std::int32_t k = order_key(x);
            best = Kind == Reduce::Max ? (k > best ? k : best) : (k < best ? k : best);
        }
        const float result = from_order_key(best);
        if (!unordered && result != 0.0f) {
            return result;
        }
    }
    V acc = widen(p[0]);
    for (std::size_t c = 1; c < n; ++c) {
        acc = combine(Kind, acc, widen(p[c]));
    }
    return acc;
}

// The operand rules pto-isa's row reductions share: its CPU simulation needs equal static rows
// (so a column of per-row values has as many rows as its source, not a padded count), and the
// A2/A3 NPU takes an unboxed row-major source and a row-major or single-column DN destination.
template <typename Dst, typename Src>
constexpr void check_row_reduce() {
    static_assert(Dst::Loc == TileType::Vec && Src::Loc == TileType::Vec, "row reductions take Vec tiles");
    static_assert(Src::Rows == Dst::Rows,
                  "row reductions need the destination's static Rows to equal the source's");
    static_assert(Src::isRowMajor && !Src::isBoxedLayout, "row reductions need an unboxed row-major source");
    static_assert(!Dst::isBoxedLayout && (Dst::isRowMajor || Dst::Cols == 1),
                  "row reductions need a row-major destination (or a single-column ColMajor one)");
}

// dst(r, 0) = reduce over c of src(r, c), for the source's valid rows and columns.
template <typename Dst, typename Src>
inline void reduce_rows(Dst& dst, Src& src, Reduce kind, const char* op) {
    using T = typename Dst::DType;
    static_assert(std::is_same_v<T, typename Src::DType>, "row reductions keep the element type");
    check_row_reduce<Dst, Src>();
    T* out = elements(dst, op);
    const T* in = elements(src, op);
    const unsigned rows = src.GetValidRow();
    const unsigned cols = src.GetValidCol();
    require_covers<Dst>(rows, 1, op, "the destination");
    using V = calc_t<T>;
    if constexpr (row_runs_v<Src>) {
        for (unsigned r = 0; r < rows; ++r) {
            const T* row = in + static_cast<std::size_t>(r) * Src::Cols;
            V acc;
            switch (kind) {
                case Reduce::Sum: acc = pairwise_sum_run<V>(row, cols); break;
                case Reduce::Max: acc = fold_run<Reduce::Max, V>(row, cols); break;
                default: acc = fold_run<Reduce::Min, V>(row, cols); break;
            }
            out[element_offset<Dst>(r, 0)] = T(acc);
        }
        return;
    }
    for (unsigned r = 0; r < rows; ++r) {
        auto acc = widen(in[element_offset<Src>(r, 0)]);
        if (kind == Reduce::Sum) {
            acc = pairwise_sum<decltype(acc)>([&](unsigned c) { return widen(in[element_offset<Src>(r, c)]); },
                                              0, cols);
        } else {
            for (unsigned c = 1; c < cols; ++c) {
                acc = combine(kind, acc, widen(in[element_offset<Src>(r, c)]));
            }
        }
        out[element_offset<Dst>(r, 0)] = T(acc);
    }
}

template <Reduce Kind, typename V, typename T>
inline void fold_row(V* __restrict__ acc, const T* __restrict__ row, unsigned cols) {
    for (unsigned c = 0; c < cols; ++c) {
        acc[c] = combine(Kind, acc[c], widen(row[c]));
    }
}

// dst(0, c) = reduce over r of src(r, c), for the source's valid rows and columns.
template <typename Dst, typename Src>
inline void reduce_cols(Dst& dst, Src& src, Reduce kind, const char* op) {
    using T = typename Dst::DType;
    static_assert(std::is_same_v<T, typename Src::DType>, "column reductions keep the element type");
    T* out = elements(dst, op);
    const T* in = elements(src, op);
    const unsigned rows = src.GetValidRow();
    const unsigned cols = src.GetValidCol();
    require_covers<Dst>(1, cols, op, "the destination");
    using V = calc_t<T>;
    if constexpr (row_runs_v<Src>) {
        // each column folds its rows in order, as below, but a row at a time, so the columns
        // vectorise
        static thread_local std::vector<V> acc;
        acc.resize(cols);
        V* a = acc.data();
        for (unsigned c = 0; c < cols; ++c) {
            a[c] = widen(in[c]);
        }
        for (unsigned r = 1; r < rows; ++r) {
            const T* row = in + static_cast<std::size_t>(r) * Src::Cols;
            switch (kind) {
                case Reduce::Sum: fold_row<Reduce::Sum>(a, row, cols); break;
                case Reduce::Max: fold_row<Reduce::Max>(a, row, cols); break;
                default: fold_row<Reduce::Min>(a, row, cols); break;
            }
        }
        for (unsigned c = 0; c < cols; ++c) {
            out[element_offset<Dst>(0, c)] = T(a[c]);
        }
        return;
    }
    for (unsigned c = 0; c < cols; ++c) {
        auto acc = widen(in[element_offset<Src>(0, c)]);
        for (unsigned r = 1; r < rows; ++r) {
            acc = combine(kind, acc, widen(in[element_offset<Src>(r, c)]));
        }
        out[element_offset<Dst>(0, c)] = T(acc);
    }
}

}  // namespace cpu

// ---------------------------------------------------------------------------- row reductions
// The tmp tile is the NPU's scratch; the CPU does not need it.

template <typename TileDataOut, typename TileDataIn, typename TileDataTmp>
AICORE inline RecordEvent TROWSUM(TileDataOut& dst, TileDataIn& src, TileDataTmp& tmp) {
    (void)tmp;
    cpu::reduce_rows(dst, src, cpu::Reduce::Sum, "TROWSUM");
    return {};
}

template <typename TileDataOut, typename TileDataIn, typename TileDataTmp>
AICORE inline RecordEvent TROWMAX(TileDataOut& dst, TileDataIn& src, TileDataTmp& tmp) {
    (void)tmp;
    cpu::reduce_rows(dst, src, cpu::Reduce::Max, "TROWMAX");
    return {};
}

template <typename TileDataOut, typename TileDataIn, typename TileDataTmp>
AICORE inline RecordEvent TROWMIN(TileDataOut& dst, TileDataIn& src, TileDataTmp& tmp) {
    (void)tmp;
    cpu::reduce_rows(dst, src, cpu::Reduce::Min, "TROWMIN");
    return {};
}

// ---------------------------------------------------------------------------- column reductions

template <typename TileDataOut, typename TileDataIn>
AICORE inline RecordEvent TCOLSUM(TileDataOut& dst, TileDataIn& src) {
    cpu::reduce_cols(dst, src, cpu::Reduce::Sum, "TCOLSUM");
    return {};
}

// The older form with a scratch tile and a binary-tree flag; the sum is the same on the CPU.
template <typename TileDataOut, typename TileDataIn, typename TileDataTmp>
AICORE inline RecordEvent TCOLSUM(TileDataOut& dst, TileDataIn& src, TileDataTmp& tmp, bool isBinary) {
    (void)tmp;
    (void)isBinary;
    cpu::reduce_cols(dst, src, cpu::Reduce::Sum, "TCOLSUM");
    return {};
}

template <typename TileDataOut, typename TileDataIn>
AICORE inline RecordEvent TCOLMAX(TileDataOut& dst, TileDataIn& src) {
    cpu::reduce_cols(dst, src, cpu::Reduce::Max, "TCOLMAX");
    return {};
}

template <typename TileDataOut, typename TileDataIn>
AICORE inline RecordEvent TCOLMIN(TileDataOut& dst, TileDataIn& src) {
    cpu::reduce_cols(dst, src, cpu::Reduce::Min, "TCOLMIN");
    return {};
}

// ---------------------------------------------------------------------------- broadcasts

// dst(r, c) = src(r, 0): one value per row.
template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TROWEXPAND(TileDataDst& dst, TileDataSrc& src) {
    using T = typename TileDataDst::DType;
    // pto-isa's CPU simulation converts to dst's type here, but the A2/A3 NPU requires one element
    // type; this header keeps the stricter rule.
    static_assert(std::is_same_v<T, typename TileDataSrc::DType>, "TROWEXPAND keeps the element type");
    T* out = cpu::elements(dst, "TROWEXPAND");
    const T* in = cpu::elements(src, "TROWEXPAND");
    const unsigned rows = dst.GetValidRow();
    const unsigned cols = dst.GetValidCol();
    cpu::require_covers<TileDataSrc>(rows, 1, "TROWEXPAND", "the source");
    for (unsigned r = 0; r < rows; ++r) {
        const T value = in[cpu::element_offset<TileDataSrc>(r, 0)];
        if constexpr (cpu::row_runs_v<TileDataDst>) {
            T* row = out + static_cast<std::size_t>(r) * TileDataDst::Cols;
            for (unsigned c = 0; c < cols; ++c) {
                row[c] = value;
            }
        } else {
            for (unsigned c = 0; c < cols; ++c) {
                out[cpu::element_offset<TileDataDst>(r, c)] = value;
            }
        }
    }
    return {};
}

// dst(r, c) = src(0, c): one value per column.
template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TCOLEXPAND(TileDataDst& dst, TileDataSrc& src) {
    using T = typename TileDataDst::DType;
    static_assert(std::is_same_v<T, typename TileDataSrc::DType>, "TCOLEXPAND keeps the element type");
    T* out = cpu::elements(dst, "TCOLEXPAND");
    const T* in = cpu::elements(src, "TCOLEXPAND");
    const unsigned rows = dst.GetValidRow();
    const unsigned cols = dst.GetValidCol();
    cpu::require_covers<TileDataSrc>(1, cols, "TCOLEXPAND", "the source");
    if constexpr (cpu::row_runs_v<TileDataDst> && cpu::row_runs_v<TileDataSrc>) {
        for (unsigned r = 0; r < rows; ++r) {
            T* row = out + static_cast<std::size_t>(r) * TileDataDst::Cols;
            if (cpu::any_order(row, in, cols)) {
                std::memmove(row, in, cols * sizeof(T));
            } else {
                for (unsigned c = 0; c < cols; ++c) {
                    row[c] = in[c];
                }
            }
        }
        return {};
    }
    for (unsigned r = 0; r < rows; ++r) {
        for (unsigned c = 0; c < cols; ++c) {
            out[cpu::element_offset<TileDataDst>(r, c)] = in[cpu::element_offset<TileDataSrc>(0, c)];
        }
    }
    return {};
}

}  // namespace pto

#endif
