// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// Fused vector instructions: a binary op with one operand broadcast along the rows or the columns
// of the destination (TROWEXPAND<op>, TCOLEXPAND<op>, with <op> ADD SUB MUL DIV MAX MIN, and
// EXPDIF: exp(src0 - src1)), and the multiply-adds TMULADDDST (dst = src0 * src1 + dst) and
// TFUSEDMULADD (dst = src0 * dst + src1). Each computes exactly what its unfused instructions do
// (a TROWEXPAND or TCOLEXPAND, then the binary instruction; TSUB then TEXP; TMUL then TADD): every
// intermediate is rounded to the element type, as the A2/A3 implementations run those instructions
// one after another (a multiply-add's product too: see below).
#ifndef PTODSL_CPU_SUBSET_OPS_FUSED_HPP
#define PTODSL_CPU_SUBSET_OPS_FUSED_HPP

#include <cmath>
#include <type_traits>

#include "common.hpp"
#include "convert.hpp"
#include "ops_vector.hpp"
#include "tile.hpp"

namespace pto {
namespace cpu {

// The operand of a broadcast instruction whose valid shape is dst's is the full one (src0 when
// both are, as pto-isa decides); the other is spread over dst: one value per row or per column.
template <typename Src>
inline bool covers_dst(Src& src, unsigned rows, unsigned cols) {
    return src.GetValidRow() == rows && src.GetValidCol() == cols;
}

// The value of a per-row operand for row r and column c: a column-major operand has one valid
// column; a row-major one a 32-byte block per row, read at column c % its valid columns.
template <typename Vec>
inline void check_row_operand(Vec& vec, unsigned rows, const char* op) {
    using T = typename Vec::DType;
    const unsigned vc = vec.GetValidCol();
    if (Vec::isRowMajor ? vc != 32 / sizeof(T) : vc != 1) {
        fail("%s: a %s per-row operand must have %u valid columns, got %u", op, Vec::isRowMajor ? "row-major" : "ColMajor",
             Vec::isRowMajor ? unsigned(32 / sizeof(T)) : 1u, vc);
    }
    if (vec.GetValidRow() != rows) {
        fail("%s: the per-row operand has %u valid rows, the destination %u", op, vec.GetValidRow(), rows);
    }
    require_covers<Vec>(rows, vc, op, "the per-row operand");
}

// dst(r, c) = f(a, b) over dst's valid region, where one of src0, src1 is spread over dst: along
// its rows (PerRow: its value for row r) or its columns (its value for column c).
template <bool PerRow, typename Dst, typename Src0, typename Src1, typename F>
inline void expand_binary(Dst& dst, Src0& src0, Src1& src1, const char* op, F f) {
    using T = typename Dst::DType;
    static_assert(std::is_same_v<T, typename Src0::DType> && std::is_same_v<T, typename Src1::DType>,
                  "broadcast instructions need one element type for all operands");
    static_assert(Dst::isRowMajor, "a broadcast instruction needs a row-major destination");
    T* out = elements(dst, op);
    const T* a = elements(src0, op);
    const T* b = elements(src1, op);
    const unsigned rows = dst.GetValidRow();
    const unsigned cols = dst.GetValidCol();
    const bool full0 = covers_dst(src0, rows, cols);
    if (!full0 && !covers_dst(src1, rows, cols)) {
        fail("%s: neither operand has the destination's %ux%u valid shape", op, rows, cols);
    }
    if (full0) {
        require_covers<Src0>(rows, cols, op, "src0");
    } else {
        require_covers<Src1>(rows, cols, op, "src1");
    }
    if constexpr (PerRow) {
        if (full0) {
            check_row_operand(src1, rows, op);
        } else {
            check_row_operand(src0, rows, op);
        }
    } else if (full0) {
        require_covers<Src1>(1, cols, op, "the per-column operand");
    } else {
        require_covers<Src0>(1, cols, op, "the per-column operand");
    }
    const unsigned vc0 = src0.GetValidCol(), vc1 = src1.GetValidCol();
    if constexpr (row_runs_v<Dst> && row_runs_v<Src0> && row_runs_v<Src1>) {
        // Rows stored contiguously (the common layout): whole-row runs the compiler vectorises,
        // element for element what the loop below computes.
        const T* full = full0 ? a : b;
        const T* spread = full0 ? b : a;
        const unsigned vcs = full0 ? vc1 : vc0;
        const std::size_t full_cols = full0 ? Src0::Cols : Src1::Cols;
        const std::size_t spread_cols = full0 ? Src1::Cols : Src0::Cols;
        auto g = [&f, full0](auto x, auto s) { return full0 ? f(T(x), T(s)) : f(T(s), T(x)); };
        for (unsigned r = 0; r < rows; ++r) {
            T* out_row = out + static_cast<std::size_t>(r) * Dst::Cols;
            const T* x_row = full + static_cast<std::size_t>(r) * full_cols;
            if constexpr (!PerRow) {
                binary_run(out_row, x_row, spread, cols, g);  // row 0 of the spread operand
                continue;
            }
            // per row: the operand's block of vcs values for row r, read at column c % vcs; one
            // value repeated (what a row reduction leaves) is a constant for the whole run
            const T* block = spread + static_cast<std::size_t>(r) * spread_cols;
            bool same = true;
            for (unsigned k = 1; k < vcs; ++k) {
                same = same && std::memcmp(&block[k], &block[0], sizeof(T)) == 0;
            }
            if (same) {
                const T s = block[0];
                auto with_s = [&g, s](auto x) { return g(x, s); };
                unary_run(out_row, x_row, cols, with_s);
            } else {
                for (unsigned c = 0; c < cols; ++c) {
                    out_row[c] = g(x_row[c], block[c % vcs]);
                }
            }
        }
        return;
    }
    for (unsigned r = 0; r < rows; ++r) {
        for (unsigned c = 0; c < cols; ++c) {
            // the spread operand's element for (r, c): its row r (PerRow) or its column c
            const std::size_t i0 = full0 ? element_offset<Src0>(r, c)
                                         : PerRow ? element_offset<Src0>(r, c % vc0) : element_offset<Src0>(0, c);
            const std::size_t i1 = !full0 ? element_offset<Src1>(r, c)
                                          : PerRow ? element_offset<Src1>(r, c % vc1) : element_offset<Src1>(0, c);
            out[element_offset<Dst>(r, c)] = f(a[i0], b[i1]);
        }
    }
}

// The element results of the unfused instructions, each rounded to T.
template <typename T, typename F>
inline T rounded(F f, T a, T b) {
    return T(f(widen(a), widen(b)));
}

template <typename T>
inline T exp_dif(T a, T b) {
    const T d = T(widen(a) - widen(b));  // TSUB
    return T(exp_of(widen(d)));          // TEXP, as its own instruction computes it
}

// dst(r, c) = f(dst(r, c), src0(r, c), src1(r, c)) over dst's valid region, all of one shape.
template <typename Dst, typename Src0, typename Src1, typename F>
inline void ternary(Dst& dst, Src0& src0, Src1& src1, const char* op, F f) {
    using T = typename Dst::DType;
    static_assert(std::is_same_v<T, typename Src0::DType> && std::is_same_v<T, typename Src1::DType>,
                  "multiply-add instructions need one element type for all operands");
    static_assert(is_float_like_v<T>, "multiply-add instructions take half or float");
    T* out = elements(dst, op);
    const T* a = elements(src0, op);
    const T* b = elements(src1, op);
    const unsigned rows = dst.GetValidRow();
    const unsigned cols = dst.GetValidCol();
    require_covers<Src0>(rows, cols, op, "src0");
    require_covers<Src1>(rows, cols, op, "src1");
    for (unsigned r = 0; r < rows; ++r) {
        for (unsigned c = 0; c < cols; ++c) {
            T& d = out[element_offset<Dst>(r, c)];
            d = f(d, a[element_offset<Src0>(r, c)], b[element_offset<Src1>(r, c)]);
        }
    }
}

}  // namespace cpu

// ---------------------------------------------------------------------------- broadcasts with an op
// The forms with a trailing tmp tile are the NPU's scratch variants (A2/A3 broadcasts a
// column-major per-row operand into it); the CPU does not need it.

#define PTO_CPU_EXPAND_BINARY(NAME, PER_ROW, ELEMENT)                                                          \
    template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>                              \
    AICORE inline RecordEvent NAME(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {                 \
        using T = typename TileDataDst::DType;                                                                 \
        cpu::expand_binary<PER_ROW>(dst, src0, src1, #NAME, [](T a, T b) { return ELEMENT; });                 \
        return {};                                                                                             \
    }                                                                                                          \
    template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1, typename TileDataTmp>        \
    AICORE inline RecordEvent NAME(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1, TileDataTmp& tmp) { \
        (void)tmp;                                                                                             \
        return NAME(dst, src0, src1);                                                                          \
    }

#define PTO_CPU_ROUNDED(EXPR) cpu::rounded([](auto x, auto y) { return EXPR; }, a, b)

PTO_CPU_EXPAND_BINARY(TROWEXPANDADD, true, PTO_CPU_ROUNDED(x + y))
PTO_CPU_EXPAND_BINARY(TROWEXPANDSUB, true, PTO_CPU_ROUNDED(x - y))
PTO_CPU_EXPAND_BINARY(TROWEXPANDMUL, true, PTO_CPU_ROUNDED(x * y))
PTO_CPU_EXPAND_BINARY(TROWEXPANDDIV, true, PTO_CPU_ROUNDED(x / y))
PTO_CPU_EXPAND_BINARY(TROWEXPANDMAX, true, PTO_CPU_ROUNDED(cpu::max_of(x, y)))
PTO_CPU_EXPAND_BINARY(TROWEXPANDMIN, true, PTO_CPU_ROUNDED(cpu::min_of(x, y)))
PTO_CPU_EXPAND_BINARY(TROWEXPANDEXPDIF, true, cpu::exp_dif(a, b))
PTO_CPU_EXPAND_BINARY(TCOLEXPANDADD, false, PTO_CPU_ROUNDED(x + y))
PTO_CPU_EXPAND_BINARY(TCOLEXPANDSUB, false, PTO_CPU_ROUNDED(x - y))
PTO_CPU_EXPAND_BINARY(TCOLEXPANDMUL, false, PTO_CPU_ROUNDED(x * y))
PTO_CPU_EXPAND_BINARY(TCOLEXPANDDIV, false, PTO_CPU_ROUNDED(x / y))
PTO_CPU_EXPAND_BINARY(TCOLEXPANDMAX, false, PTO_CPU_ROUNDED(cpu::max_of(x, y)))
PTO_CPU_EXPAND_BINARY(TCOLEXPANDMIN, false, PTO_CPU_ROUNDED(cpu::min_of(x, y)))
PTO_CPU_EXPAND_BINARY(TCOLEXPANDEXPDIF, false, cpu::exp_dif(a, b))

#undef PTO_CPU_ROUNDED
#undef PTO_CPU_EXPAND_BINARY

// ---------------------------------------------------------------------------- multiply-add
// The product is rounded to the element type before the add (TMUL then TADD), as the simulator
// does. pto-isa's CPU simulation has no TMULADDDST or TFUSEDMULADD, and its NPU headers do not say
// whether vmla / vmadd round once, which is why the compiler selects them only on request.

template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TMULADDDST(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {
    using T = typename TileDataDst::DType;
    cpu::ternary(dst, src0, src1, "TMULADDDST", [](T d, T a, T b) {
        const T p = T(cpu::widen(a) * cpu::widen(b));
        return T(cpu::widen(p) + cpu::widen(d));
    });
    return {};
}

template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TFUSEDMULADD(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {
    using T = typename TileDataDst::DType;
    cpu::ternary(dst, src0, src1, "TFUSEDMULADD", [](T d, T a, T b) {
        const T p = T(cpu::widen(a) * cpu::widen(d));
        return T(cpu::widen(p) + cpu::widen(b));
    });
    return {};
}

}  // namespace pto

#endif
