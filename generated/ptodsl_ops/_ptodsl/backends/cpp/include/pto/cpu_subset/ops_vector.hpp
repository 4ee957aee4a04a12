// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// Element-wise vector instructions. Each iterates over the destination's valid region and reads its
// sources at the same (row, column); nothing checks that the operands' valid regions agree, as on
// the NPU. 16-bit floats compute in float and round once per result.
#ifndef PTODSL_CPU_SUBSET_OPS_VECTOR_HPP
#define PTODSL_CPU_SUBSET_OPS_VECTOR_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common.hpp"
#include "convert.hpp"
#include "tile.hpp"

namespace pto {
namespace cpu {

// The element loops below are written so that g++ -O3 vectorises them: every operand of a row-major
// unboxed tile is walked as one contiguous run per row (or per tile, when the valid rows fill the
// rows), the checks run once per instruction, and the per-element work is an inlined lambda. The
// order of the arithmetic of each element is the scalar loop's, so the results are bit for bit
// those of the element-at-a-time loop.

// Tiles whose element (r, c) sits at r * Cols + c.
template <typename TileT>
inline constexpr bool row_runs_v = !TileT::isBoxedLayout && TileT::isRowMajor;

// Whether a loop writing n elements at `out` while reading n at `in` may run its elements in any
// order (as a vector loop does): the two runs are the same elements or do not meet. A run that
// starts inside the other one must go element by element, as the instruction is defined.
template <typename A, typename B>
inline bool any_order(const A* out, const B* in, std::size_t n) {
    const auto o = reinterpret_cast<std::uintptr_t>(out);
    const auto i = reinterpret_cast<std::uintptr_t>(in);
    return (o == i && sizeof(A) == sizeof(B)) || o + n * sizeof(A) <= i || i + n * sizeof(B) <= o;
}

// out[c] = f(a[c], b[c]) for c < n.
template <typename T, typename A, typename B, typename F>
inline void binary_run(T* out, const A* a, const B* b, std::size_t n, F& f) {
    if (any_order(out, a, n) && any_order(out, b, n)) {
#pragma GCC ivdep
        for (std::size_t c = 0; c < n; ++c) {
            out[c] = T(f(widen(a[c]), widen(b[c])));
        }
    } else {
        for (std::size_t c = 0; c < n; ++c) {
            out[c] = T(f(widen(a[c]), widen(b[c])));
        }
    }
}

// out[c] = f(a[c]) for c < n.
template <typename T, typename A, typename F>
inline void unary_run(T* out, const A* a, std::size_t n, F& f) {
    if (any_order(out, a, n)) {
#pragma GCC ivdep
        for (std::size_t c = 0; c < n; ++c) {
            out[c] = T(f(widen(a[c])));
        }
    } else {
        for (std::size_t c = 0; c < n; ++c) {
            out[c] = T(f(widen(a[c])));
        }
    }
}

// The rows x cols region of row-major tiles as runs: one run of rows * cols elements when every
// operand's valid columns fill its rows (a dense block), else one run per row.
template <typename... Tiles>
inline bool one_block(unsigned rows, unsigned cols) {
    return rows <= 1 || ((cols == static_cast<unsigned>(Tiles::Cols)) && ...);
}

// dst(r, c) = f(src0(r, c), src1(r, c)) over dst's valid region.
template <typename Dst, typename Src0, typename Src1, typename F>
inline void binary(Dst& dst, Src0& src0, Src1& src1, const char* op, F f) {
    using T = typename Dst::DType;
    static_assert(std::is_same_v<T, typename Src0::DType> && std::is_same_v<T, typename Src1::DType>,
                  "binary tile instructions need one element type for all operands");
    T* out = elements(dst, op);
    const T* a = elements(src0, op);
    const T* b = elements(src1, op);
    const unsigned rows = dst.GetValidRow();
    const unsigned cols = dst.GetValidCol();
    require_covers<Src0>(rows, cols, op, "src0");
    require_covers<Src1>(rows, cols, op, "src1");
    if constexpr (row_runs_v<Dst> && row_runs_v<Src0> && row_runs_v<Src1>) {
        if (one_block<Dst, Src0, Src1>(rows, cols)) {
            binary_run(out, a, b, static_cast<std::size_t>(rows) * cols, f);
            return;
        }
        for (unsigned r = 0; r < rows; ++r) {
            binary_run(out + static_cast<std::size_t>(r) * Dst::Cols, a + static_cast<std::size_t>(r) * Src0::Cols,
                       b + static_cast<std::size_t>(r) * Src1::Cols, cols, f);
        }
    } else {
        for (unsigned r = 0; r < rows; ++r) {
            for (unsigned c = 0; c < cols; ++c) {
                out[element_offset<Dst>(r, c)] =
                    T(f(widen(a[element_offset<Src0>(r, c)]), widen(b[element_offset<Src1>(r, c)])));
            }
        }
    }
}

// dst(r, c) = f(src(r, c)) over dst's valid region.
template <typename Dst, typename Src, typename F>
inline void unary(Dst& dst, Src& src, const char* op, F f) {
    using T = typename Dst::DType;
    static_assert(std::is_same_v<T, typename Src::DType>, "unary tile instructions keep the element type");
    T* out = elements(dst, op);
    const T* in = elements(src, op);
    const unsigned rows = dst.GetValidRow();
    const unsigned cols = dst.GetValidCol();
    require_covers<Src>(rows, cols, op, "src");
    if constexpr (row_runs_v<Dst> && row_runs_v<Src>) {
        if (one_block<Dst, Src>(rows, cols)) {
            unary_run(out, in, static_cast<std::size_t>(rows) * cols, f);
            return;
        }
        for (unsigned r = 0; r < rows; ++r) {
            unary_run(out + static_cast<std::size_t>(r) * Dst::Cols, in + static_cast<std::size_t>(r) * Src::Cols,
                      cols, f);
        }
    } else {
        for (unsigned r = 0; r < rows; ++r) {
            for (unsigned c = 0; c < cols; ++c) {
                out[element_offset<Dst>(r, c)] = T(f(widen(in[element_offset<Src>(r, c)])));
            }
        }
    }
}

// e^x of a float, computed in double and rounded to float once: e^x = 2^k * 2^r with k the integer
// nearest x * log2(e) and |r| <= 1/2 (x * log2(e) carried to about 2^-100 through a two-part
// constant and the exact error of the product), and 2^r by its Taylor series to degree 11 in fused
// multiply-adds (relative error near 1e-15, far under the 6e-8 of a float's half ulp). So the
// result is the correctly rounded float unless e^x lies within about 1e-15 of a rounding boundary
// (none does among the floats between -110 and 90, every one of which was checked). Overflow gives
// inf, underflow 0 or the correctly rounded subnormal, NaN stays NaN. Branch-free and call-free on
// a machine with FMA, so element loops vectorise it (std::exp of a float is a library call per
// element, and glibc's expf is off by one ulp for about one float in 10^4); std::fma is exact
// everywhere, so the result is the same on every instruction set.
// Always inlined: a call per element (g++ declines to inline it into large kernels) cannot vectorise.
[[gnu::always_inline]] inline float exp_f32(float x) {
    double t = static_cast<double>(x);
    t = t < -160.0 ? -160.0 : t;  // beyond these e^x is 0 or inf in float; NaN passes both
    t = t > 130.0 ? 130.0 : t;
    constexpr double log2e_hi = 0x1.71547652b82fep+0;  // log2(e) = hi + lo
    constexpr double log2e_lo = 0x1.777d0ffda0d24p-56;
    const double y = t * log2e_hi;
    const double y_err = std::fma(t, log2e_hi, -y) + t * log2e_lo;  // t * log2(e) = y + y_err
    constexpr double shifter = 0x1.8p52;  // adding it rounds |y| < 2^51 to an integer in the low bits
    const double shifted = y + shifter;
    std::uint64_t bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    const double r = (y - (shifted - shifter)) + y_err;
    // ln(2)^n / n!, the Taylor coefficients of 2^r
    double p = 4.4455382718708114976e-10;
    p = std::fma(p, r, 7.0549116208011233299e-9);
    p = std::fma(p, r, 1.0178086009239699727e-7);
    p = std::fma(p, r, 1.3215486790144309488e-6);
    p = std::fma(p, r, 1.5252733804059840280e-5);
    p = std::fma(p, r, 1.5403530393381609954e-4);
    p = std::fma(p, r, 1.3333558146428443423e-3);
    p = std::fma(p, r, 9.6181291076284771620e-3);
    p = std::fma(p, r, 5.5504108664821579953e-2);
    p = std::fma(p, r, 2.4022650695910071233e-1);
    p = std::fma(p, r, 6.9314718055994530942e-1);
    p = std::fma(p, r, 1.0);
    // the low 12 bits of (k + 1023), k in [-231, 188], are the biased exponent of 2^k
    const std::uint64_t scale_bits = (bits + 1023u) << 52;
    double scale;
    std::memcpy(&scale, &scale_bits, sizeof scale);
    return static_cast<float>(p * scale);
}

template <typename V>
[[gnu::always_inline]] inline V exp_of(V x) {
    if constexpr (std::is_same_v<V, float>) {
        return exp_f32(x);
    } else {
        return std::exp(x);
    }
}

template <typename T>
constexpr void require_float(const char*) {
    static_assert(is_float_like_v<T>, "this instruction needs a floating-point element type");
}

template <typename V>
inline V max_of(V a, V b) {
    return a > b ? a : b;
}
template <typename V>
inline V min_of(V a, V b) {
    return a < b ? a : b;
}

}  // namespace cpu

// ---------------------------------------------------------------------------- tile (op) tile

template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TADD(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {
    cpu::binary(dst, src0, src1, "TADD", [](auto a, auto b) { return a + b; });
    return {};
}

template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TSUB(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {
    cpu::binary(dst, src0, src1, "TSUB", [](auto a, auto b) { return a - b; });
    return {};
}

template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TMUL(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {
    cpu::binary(dst, src0, src1, "TMUL", [](auto a, auto b) { return a * b; });
    return {};
}

template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TDIV(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {
    cpu::require_float<typename TileDataDst::DType>("TDIV");
    cpu::binary(dst, src0, src1, "TDIV", [](auto a, auto b) { return a / b; });
    return {};
}

template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TMAX(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {
    cpu::binary(dst, src0, src1, "TMAX", [](auto a, auto b) { return cpu::max_of(a, b); });
    return {};
}

template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TMIN(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {
    cpu::binary(dst, src0, src1, "TMIN", [](auto a, auto b) { return cpu::min_of(a, b); });
    return {};
}

// ---------------------------------------------------------------------------- tile (op) scalar

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TADDS(TileDataDst& dst, TileDataSrc& src0, typename TileDataSrc::DType scalar) {
    const auto s = cpu::widen(scalar);
    cpu::unary(dst, src0, "TADDS", [s](auto a) { return a + s; });
    return {};
}

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TSUBS(TileDataDst& dst, TileDataSrc& src0, typename TileDataSrc::DType scalar) {
    const auto s = cpu::widen(scalar);
    cpu::unary(dst, src0, "TSUBS", [s](auto a) { return a - s; });
    return {};
}

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TMULS(TileDataDst& dst, TileDataSrc& src0, typename TileDataSrc::DType scalar) {
    const auto s = cpu::widen(scalar);
    cpu::unary(dst, src0, "TMULS", [s](auto a) { return a * s; });
    return {};
}

// tile / scalar
template <typename TileDataDst, typename TileDataSrc,
          std::enable_if_t<is_tile_data_v<TileDataSrc>, int> = 0>
AICORE inline RecordEvent TDIVS(TileDataDst& dst, TileDataSrc& src0, typename TileDataSrc::DType scalar) {
    cpu::require_float<typename TileDataDst::DType>("TDIVS");
    const auto s = cpu::widen(scalar);
    cpu::unary(dst, src0, "TDIVS", [s](auto a) { return a / s; });
    return {};
}

// scalar / tile
template <typename TileDataDst, typename TileDataSrc,
          std::enable_if_t<is_tile_data_v<TileDataSrc>, int> = 0>
AICORE inline RecordEvent TDIVS(TileDataDst& dst, typename TileDataDst::DType scalar, TileDataSrc& src0) {
    cpu::require_float<typename TileDataDst::DType>("TDIVS");
    const auto s = cpu::widen(scalar);
    cpu::unary(dst, src0, "TDIVS", [s](auto a) { return s / a; });
    return {};
}

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TMAXS(TileDataDst& dst, TileDataSrc& src0, typename TileDataSrc::DType scalar) {
    const auto s = cpu::widen(scalar);
    cpu::unary(dst, src0, "TMAXS", [s](auto a) { return cpu::max_of(a, s); });
    return {};
}

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TMINS(TileDataDst& dst, TileDataSrc& src0, typename TileDataSrc::DType scalar) {
    const auto s = cpu::widen(scalar);
    cpu::unary(dst, src0, "TMINS", [s](auto a) { return cpu::min_of(a, s); });
    return {};
}

// dst = scalar over dst's valid region.
template <typename TileData>
AICORE inline RecordEvent TEXPANDS(TileData& dst, typename TileData::DType scalar) {
    typename TileData::DType* out = cpu::elements(dst, "TEXPANDS");
    const unsigned rows = dst.GetValidRow();
    const unsigned cols = dst.GetValidCol();
    if constexpr (cpu::row_runs_v<TileData>) {
        const std::size_t n = cpu::one_block<TileData>(rows, cols) ? static_cast<std::size_t>(rows) * cols : cols;
        for (unsigned r = 0; r < (n == cols ? rows : 1u); ++r) {
            typename TileData::DType* row = out + static_cast<std::size_t>(r) * TileData::Cols;
            for (std::size_t c = 0; c < n; ++c) {
                row[c] = scalar;
            }
        }
    } else {
        for (unsigned r = 0; r < rows; ++r) {
            for (unsigned c = 0; c < cols; ++c) {
                out[cpu::element_offset<TileData>(r, c)] = scalar;
            }
        }
    }
    return {};
}

// ---------------------------------------------------------------------------- unary

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TEXP(TileDataDst& dst, TileDataSrc& src) {
    cpu::require_float<typename TileDataDst::DType>("TEXP");
    cpu::unary(dst, src, "TEXP", [](auto a) { return cpu::exp_of(a); });
    return {};
}

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TLOG(TileDataDst& dst, TileDataSrc& src) {
    cpu::require_float<typename TileDataDst::DType>("TLOG");
    cpu::unary(dst, src, "TLOG", [](auto a) { return std::log(a); });
    return {};
}

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TSQRT(TileDataDst& dst, TileDataSrc& src) {
    cpu::require_float<typename TileDataDst::DType>("TSQRT");
    cpu::unary(dst, src, "TSQRT", [](auto a) { return std::sqrt(a); });
    return {};
}

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TRSQRT(TileDataDst& dst, TileDataSrc& src) {
    cpu::require_float<typename TileDataDst::DType>("TRSQRT");
    cpu::unary(dst, src, "TRSQRT", [](auto a) { return decltype(a)(1) / std::sqrt(a); });
    return {};
}

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TRECIP(TileDataDst& dst, TileDataSrc& src) {
    cpu::require_float<typename TileDataDst::DType>("TRECIP");
    cpu::unary(dst, src, "TRECIP", [](auto a) { return decltype(a)(1) / a; });
    return {};
}

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TABS(TileDataDst& dst, TileDataSrc& src) {
    cpu::unary(dst, src, "TABS", [](auto a) {
        if constexpr (std::is_floating_point_v<decltype(a)>) {
            return std::fabs(a);  // also clears the sign of -0.0
        } else {
            return a < decltype(a)(0) ? -a : a;
        }
    });
    return {};
}

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TNEG(TileDataDst& dst, TileDataSrc& src) {
    cpu::unary(dst, src, "TNEG", [](auto a) { return -a; });
    return {};
}

template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TRELU(TileDataDst& dst, TileDataSrc& src) {
    cpu::unary(dst, src, "TRELU", [](auto a) { return a > decltype(a)(0) ? a : decltype(a)(0); });
    return {};
}

// Bitwise NOT; pto-isa defines it for 8-, 16- and 32-bit integers only.
template <typename TileDataDst, typename TileDataSrc>
AICORE inline RecordEvent TNOT(TileDataDst& dst, TileDataSrc& src) {
    using T = typename TileDataDst::DType;
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) <= 4,
                  "TNOT needs an 8-, 16- or 32-bit integer element type");
    cpu::unary(dst, src, "TNOT", [](auto a) { return ~a; });
    return {};
}

// ---------------------------------------------------------------------------- conversion

// dst = src converted to dst's element type, rounded under `mode`, over the source's valid region;
// a float converted to its own type is rounded to an integral value (pto-isa's f32 -> f32 form).
template <typename TileDataD, typename TileDataS>
AICORE inline RecordEvent TCVT(TileDataD& dst, TileDataS& src, RoundMode mode) {
    using D = typename TileDataD::DType;
    using S = typename TileDataS::DType;
    D* out = cpu::elements(dst, "TCVT");
    const S* in = cpu::elements(src, "TCVT");
    // pto-isa's CPU simulation iterates over the source's valid region.
    const unsigned rows = src.GetValidRow();
    const unsigned cols = src.GetValidCol();
    cpu::require_covers<TileDataD>(rows, cols, "TCVT", "dst");
    if constexpr (cpu::row_runs_v<TileDataD> && cpu::row_runs_v<TileDataS>) {
        // a conversion loop per mode, so that each loop is branch-free and vectorises
        auto run = [&](auto convert_one) {
            for (unsigned r = 0; r < rows; ++r) {
                D* o = out + static_cast<std::size_t>(r) * TileDataD::Cols;
                const S* i = in + static_cast<std::size_t>(r) * TileDataS::Cols;
                if (cpu::any_order(o, i, cols)) {
#pragma GCC ivdep
                    for (unsigned c = 0; c < cols; ++c) {
                        o[c] = convert_one(i[c]);
                    }
                } else {
                    for (unsigned c = 0; c < cols; ++c) {
                        o[c] = convert_one(i[c]);
                    }
                }
            }
        };
        if constexpr (std::is_same_v<D, S> && cpu::is_float_like_v<D>) {
            run([mode](S v) { return cpu::rint_to_integral(v, mode); });
        } else if constexpr (cpu::is_float_like_v<D> && cpu::is_float_like_v<S>) {
            if (mode == RoundMode::CAST_RINT || mode == RoundMode::CAST_NONE) {
                run([](S v) { return cpu::convert<D>(v, RoundMode::CAST_RINT); });
            } else {
                run([mode](S v) { return cpu::convert<D>(v, mode); });
            }
        } else {
            run([mode](S v) { return cpu::convert<D>(v, mode); });
        }
        return {};
    }
    for (unsigned r = 0; r < rows; ++r) {
        for (unsigned c = 0; c < cols; ++c) {
            const S value = in[cpu::element_offset<TileDataS>(r, c)];
            if constexpr (std::is_same_v<D, S> && cpu::is_float_like_v<D>) {
                out[cpu::element_offset<TileDataD>(r, c)] = cpu::rint_to_integral(value, mode);
            } else {
                out[cpu::element_offset<TileDataD>(r, c)] = cpu::convert<D>(value, mode);
            }
        }
    }
    return {};
}

template <typename TileDataD, typename TileDataS, typename TmpTileData,
          std::enable_if_t<is_tile_data_v<TmpTileData>, int> = 0>
AICORE inline RecordEvent TCVT(TileDataD& dst, TileDataS& src, TmpTileData& tmp, RoundMode mode) {
    (void)tmp;  // scratch for the NPU's multi-step conversions; the CPU converts directly
    return TCVT(dst, src, mode);
}

// ---------------------------------------------------------------------------- compare and select
//
// A mask is a packed predicate in a uint8_t RowMajor tile: bit b (least significant first) of byte
// w holds the predicate of one element. As in pto-isa's CPU simulation:
//   TCMP writes, for each valid source row r, the bits of the source's valid columns into bytes
//     (r, 0..) of the mask, at most the mask's valid column count of them;
//   TCMPS packs every source row as Src::Cols / 8 bytes (the static width, padding bits zero) and
//     lays that byte stream out in mask rows of the mask's valid column count;
//   TSEL walks the destination's valid region row by row as ONE bit stream, moving to the next mask
//     row after the mask's valid column count of bytes.
// All three zero the whole mask tile first (TCMP and TCMPS) or read it as is (TSEL). So rows line up
// only when TCMPS's mask has Src::Cols / 8 valid bytes and TSEL's destination has 8 x (mask valid
// bytes) valid columns: a partial tile must compare and select over whole rows. pto-isa does not
// check either; this header does (stricter, to catch a kernel whose mask rows would drift apart).

namespace cpu {

template <typename MaskTile>
inline unsigned char* mask_bytes(MaskTile& mask, const char* op) {
    static_assert(std::is_same_v<typename MaskTile::DType, uint8_t>, "a mask tile holds uint8_t");
    static_assert(MaskTile::isRowMajor && !MaskTile::isBoxedLayout, "a mask tile must be an unboxed RowMajor tile");
    return reinterpret_cast<unsigned char*>(elements(mask, op));
}

template <typename V>
inline bool compare(V a, V b, CmpMode mode) {
    switch (mode) {
        case CmpMode::EQ: return a == b;
        case CmpMode::NE: return a != b;
        case CmpMode::LT: return a < b;
        case CmpMode::LE: return a <= b;
        case CmpMode::GT: return a > b;
        case CmpMode::GE: return a >= b;
    }
    return false;
}

template <typename MaskTile>
inline void clear_mask(MaskTile& mask, const char* op) {
    std::memset(mask_bytes(mask, op), 0, static_cast<std::size_t>(MaskTile::Numel));
}

}  // namespace cpu

namespace cpu {
// The mask rows TCMP and TCMPS write: bit `c % 8` of byte `c / 8` of row r holds pred(r, c), for
// the first `words` bytes of each row (pto-isa's packing, which TSEL reads back row by row).
template <typename TileDataDst, typename Pred>
inline void pack_mask(unsigned char* out, unsigned rows, unsigned cols, unsigned words, Pred pred) {
    for (unsigned r = 0; r < rows; ++r) {
        for (unsigned w = 0; w < words; ++w) {
            unsigned char packed = 0;
            for (unsigned bit = 0; bit < 8 && w * 8 + bit < cols; ++bit) {
                packed = static_cast<unsigned char>(packed | (pred(r, w * 8 + bit) ? 1u << bit : 0u));
            }
            out[element_offset<TileDataDst>(r, w)] = packed;
        }
    }
}
}  // namespace cpu

template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TCMP(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1, CmpMode cmpMode) {
    static_assert(std::is_same_v<typename TileDataSrc0::DType, typename TileDataSrc1::DType>,
                  "TCMP: both sources need one element type");
    const auto* a = cpu::elements(src0, "TCMP");
    const auto* b = cpu::elements(src1, "TCMP");
    unsigned char* out = cpu::mask_bytes(dst, "TCMP");
    const unsigned rows = src0.GetValidRow();
    const unsigned cols = src0.GetValidCol();
    if (src1.GetValidRow() != rows || src1.GetValidCol() != cols || dst.GetValidRow() != rows) {
        cpu::fail("TCMP: src0, src1 and the mask need the same valid rows (and the sources the same columns)");
    }
    const unsigned words = std::min<unsigned>((cols + 7) / 8, dst.GetValidCol());
    cpu::clear_mask(dst, "TCMP");
    cpu::pack_mask<TileDataDst>(out, rows, cols, words, [&](unsigned r, unsigned c) {
        return cpu::compare(cpu::widen(a[cpu::element_offset<TileDataSrc0>(r, c)]),
                            cpu::widen(b[cpu::element_offset<TileDataSrc1>(r, c)]), cmpMode);
    });
    return {};
}

template <typename TileDataDst, typename TileDataSrc, std::enable_if_t<is_tile_data_v<TileDataSrc>, int> = 0>
AICORE inline RecordEvent TCMPS(TileDataDst& dst, TileDataSrc& src0, typename TileDataSrc::DType src1,
                                CmpMode cmpMode) {
    constexpr unsigned row_bytes = TileDataSrc::Cols / 8;
    static_assert(TileDataSrc::Cols % 8 == 0, "TCMPS: the source's static Cols must be a whole number of bytes");
    const auto* in = cpu::elements(src0, "TCMPS");
    unsigned char* out = cpu::mask_bytes(dst, "TCMPS");
    const auto s = cpu::widen(src1);
    const unsigned rows = src0.GetValidRow();
    const unsigned cols = src0.GetValidCol();
    if (dst.GetValidCol() != row_bytes) {  // stricter than pto-isa, see above
        cpu::fail("TCMPS: the mask needs %u valid columns (Cols / 8 of the %d-column source) so that its rows "
                  "line up with the source's, got %u", row_bytes, TileDataSrc::Cols, dst.GetValidCol());
    }
    if (dst.GetValidRow() < rows) {
        cpu::fail("TCMPS: the mask has %u valid rows, the source %u", dst.GetValidRow(), rows);
    }
    cpu::clear_mask(dst, "TCMPS");
    cpu::pack_mask<TileDataDst>(out, rows, cols, row_bytes, [&](unsigned r, unsigned c) {
        return cpu::compare(cpu::widen(in[cpu::element_offset<TileDataSrc>(r, c)]), s, cmpMode);
    });
    return {};
}

template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1,
          std::enable_if_t<is_tile_data_v<TileDataSrc1>, int> = 0>
AICORE inline RecordEvent TCMPS(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1, CmpMode cmpMode) {
    return TCMP(dst, src0, src1, cmpMode);
}

// dst = mask ? src0 : src1 over dst's valid region; dst and both sources are one tile type, as in
// pto-isa, which also needs the trailing scratch tile.
template <typename TileData, typename MaskTile, typename TmpTile>
AICORE inline RecordEvent TSEL(TileData& dst, MaskTile& selMask, TileData& src0, TileData& src1, TmpTile& tmp) {
    (void)tmp;  // scratch on the NPU
    using T = typename TileData::DType;
    T* out = cpu::elements(dst, "TSEL");
    const T* a = cpu::elements(src0, "TSEL");
    const T* b = cpu::elements(src1, "TSEL");
    const unsigned char* bits = cpu::mask_bytes(selMask, "TSEL");
    const unsigned rows = dst.GetValidRow();
    const unsigned cols = dst.GetValidCol();
    const unsigned mask_cols = selMask.GetValidCol();
    cpu::require_covers<TileData>(rows, cols, "TSEL", "src0");  // one type: the sources cover what dst does
    if (cols != 8 * mask_cols) {  // stricter than pto-isa, see above
        cpu::fail("TSEL: a destination row of %u valid columns reads %u mask bits, but the mask's rows hold %u "
                  "bytes (%u bits): its rows would drift from the destination's", cols, cols, mask_cols,
                  8 * mask_cols);
    }
    if (selMask.GetValidRow() < rows) {
        cpu::fail("TSEL: the mask has %u valid rows, the destination %u", selMask.GetValidRow(), rows);
    }
    unsigned mask_row = 0, mask_col = 0, bit = 0;
    for (unsigned r = 0; r < rows; ++r) {
        for (unsigned c = 0; c < cols; ++c) {
            const bool take_first = (bits[cpu::element_offset<MaskTile>(mask_row, mask_col)] >> bit) & 1u;
            if (++bit == 8) {
                bit = 0;
                if (++mask_col == mask_cols) {
                    mask_col = 0;
                    ++mask_row;
                }
            }
            const std::size_t at = cpu::element_offset<TileData>(r, c);
            out[at] = take_first ? a[at] : b[at];
        }
    }
    return {};
}

}  // namespace pto

#endif
