// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// Value conversion between element types under a RoundMode, as TCVT does. Every source value
// (float, half, bfloat16, 32-bit or narrower integers) is exact in double, so each conversion is
// "exact double -> round once to the target", whatever the mode.
#ifndef PTODSL_CPU_SUBSET_CONVERT_HPP
#define PTODSL_CPU_SUBSET_CONVERT_HPP

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common.hpp"
#include "float16.hpp"

namespace pto {
namespace cpu {

// A binary floating-point format: significand bits (with the implicit one) and exponent range.
struct FloatFormat {
    int precision;
    int min_exponent;  // exponent of the smallest normal
    int max_exponent;  // exponent of the largest finite
};

template <typename T>
constexpr FloatFormat float_format() {
    if constexpr (std::is_same_v<T, half>) {
        return {11, -14, 15};
    } else if constexpr (std::is_same_v<T, bfloat16_t>) {
        return {8, -126, 127};
    } else {
        static_assert(std::is_same_v<T, float>, "no float format for this type");
        return {24, -126, 127};
    }
}

inline bool is_odd(double integral) { return std::fmod(integral, 2.0) != 0.0; }

// Whether |x| = n + frac (0 <= frac < 1) rounds away from zero to n + 1 under `mode`.
inline bool rounds_up(double n, double frac, bool negative, RoundMode mode) {
    switch (mode) {
        case RoundMode::CAST_ROUND: return frac >= 0.5;
        case RoundMode::CAST_FLOOR: return negative && frac > 0.0;
        case RoundMode::CAST_CEIL: return !negative && frac > 0.0;
        case RoundMode::CAST_TRUNC: return false;
        case RoundMode::CAST_ODD: return frac > 0.0 && !is_odd(n);
        case RoundMode::CAST_NONE:  // no explicit mode: the hardware default, to nearest even
        case RoundMode::CAST_RINT: break;
    }
    return frac > 0.5 || (frac == 0.5 && is_odd(n));
}

// Round a double to a value representable in `fmt`, following IEEE 754 for overflow: the modes
// that round toward the overflowing side give infinity, the others the largest finite value.
inline double round_to_format(double x, FloatFormat fmt, RoundMode mode) {
    if (!std::isfinite(x) || x == 0.0) {
        return x;
    }
    const bool negative = x < 0.0;
    const double magnitude = negative ? -x : x;
    int exponent = 0;
    std::frexp(magnitude, &exponent);  // magnitude = m * 2^exponent with m in [0.5, 1)
    const int lead = exponent - 1;
    const int quantum = (lead < fmt.min_exponent ? fmt.min_exponent : lead) - (fmt.precision - 1);
    const double scaled = std::ldexp(magnitude, -quantum);  // exact: a power-of-two scaling
    double n = std::floor(scaled);
    if (rounds_up(n, scaled - n, negative, mode)) {
        n += 1.0;
    }
    double result = std::ldexp(n, quantum);
    const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - fmt.precision), fmt.max_exponent);
    if (result > max_finite) {
        bool to_infinity = false;
        switch (mode) {
            case RoundMode::CAST_FLOOR: to_infinity = negative; break;
            case RoundMode::CAST_CEIL: to_infinity = !negative; break;
            case RoundMode::CAST_TRUNC:
            case RoundMode::CAST_ODD: to_infinity = false; break;
            default: to_infinity = true; break;
        }
        result = to_infinity ? std::numeric_limits<double>::infinity() : max_finite;
    }
    return negative ? -result : result;
}

inline double round_to_integer(double x, RoundMode mode) {
    const bool negative = x < 0.0;
    const double magnitude = negative ? -x : x;
    double n = std::floor(magnitude);
    if (rounds_up(n, magnitude - n, negative, mode)) {
        n += 1.0;
    }
    return negative ? -n : n;
}

template <typename T>
inline double to_double(T value) {
    if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16_t>) {
        return static_cast<double>(static_cast<float>(value));
    } else {
        return static_cast<double>(value);
    }
}

// Convert one element. Floating targets round under `mode`; integer targets round under `mode`
// and saturate to their range (NaN gives 0), as the vector unit's conversions do. An element kept
// in its own type is unchanged (TCVT itself rounds a float to its own type: see rint_to_integral).
template <typename To, typename From>
inline To convert(From value, RoundMode mode) {
    if constexpr (std::is_same_v<To, From>) {
        return value;
    } else if constexpr (is_float_like_v<To>) {
        if constexpr ((std::is_same_v<To, float> || std::is_same_v<To, double>) &&
                      (std::is_same_v<From, half> || std::is_same_v<From, bfloat16_t> ||
                       std::is_same_v<From, float>)) {
            return To(static_cast<float>(value));  // widening is exact: every mode gives the value itself
        }
        if constexpr (std::is_same_v<From, float>) {
            if (mode == RoundMode::CAST_RINT || mode == RoundMode::CAST_NONE) {
                return To(value);  // the bit-exact fast path of the 16-bit types
            }
        }
        const double rounded = round_to_format(to_double(value), float_format<To>(), mode);
        return To(static_cast<float>(rounded));  // exact: already representable in To
    } else {
        static_assert(std::is_integral_v<To>, "TCVT: unsupported destination element type");
        const double x = to_double(value);
        if (std::isnan(x)) {
            return To(0);
        }
        const double r = is_float_like_v<From> ? round_to_integer(x, mode) : x;
        const double lo = static_cast<double>(std::numeric_limits<To>::lowest());
        const double hi = static_cast<double>(std::numeric_limits<To>::max());
        if (r <= lo) {
            return std::numeric_limits<To>::lowest();
        }
        if (r >= hi) {
            return std::numeric_limits<To>::max();
        }
        return static_cast<To>(r);
    }
}

// TCVT from a float type to itself: pto-isa's "round-only" conversion (f32 -> f32 on A2/A3),
// rounding to an integral value under `mode` (CAST_FLOOR is floor); infinities and NaN stay.
template <typename T>
inline T rint_to_integral(T value, RoundMode mode) {
    static_assert(is_float_like_v<T>, "rint_to_integral takes a floating-point type");
    const double x = to_double(value);
    return std::isfinite(x) ? T(static_cast<float>(std::copysign(round_to_integer(x, mode), x))) : value;
}

// Element conversion on moves that change the type (an f32 accumulator stored as f16): the
// fixpipe rounds to nearest even.
template <typename To, typename From>
inline To convert_default(From value) {
    return convert<To, From>(value, RoundMode::CAST_RINT);
}

template <typename T>
inline calc_t<T> widen(T value) {
    return static_cast<calc_t<T>>(value);
}

// The value TFILLPAD writes for a PadValue: zero, or the type's extreme (infinities for floats).
template <typename T>
inline T pad_value(PadValue pad) {
    switch (pad) {
        case PadValue::Max:
            if constexpr (is_float_like_v<T>) {
                return T(std::numeric_limits<float>::infinity());
            } else {
                return std::numeric_limits<T>::max();
            }
        case PadValue::Min:
            if constexpr (is_float_like_v<T>) {
                return T(-std::numeric_limits<float>::infinity());
            } else {
                return std::numeric_limits<T>::lowest();
            }
        default: return T(0);
    }
}

}  // namespace cpu
}  // namespace pto

#endif
