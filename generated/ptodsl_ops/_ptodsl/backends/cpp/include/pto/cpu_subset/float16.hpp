// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// `half` (IEEE binary16) and `bfloat16_t` as plain 16-bit storage types. Arithmetic happens in
// float: both convert to float implicitly and are built from float with round-to-nearest-even,
// the rounding the NPU's vector unit and numpy use. The conversions are written out with integer
// operations, so they do not depend on the compiler's _Float16 support or on the FPU's rounding mode.
#ifndef PTODSL_CPU_SUBSET_FLOAT16_HPP
#define PTODSL_CPU_SUBSET_FLOAT16_HPP

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace pto {
namespace cpu {

inline std::uint32_t float_bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

inline float float_from_bits(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// float -> binary16, round to nearest, ties to even.
inline std::uint16_t float_to_half_bits(float value) {
    const std::uint32_t x = float_bits(value);
    const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) {
        // NaN: keep the top payload bits and force the quiet bit so the result stays a NaN.
        return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    }
    if (a >= 0x47800000u) {
        return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 2^16 (or inf): rounds to inf
    }
    if (a >= 0x38800000u) {
        // Normal result (>= 2^-14): rebias the exponent (127 -> 15), then round the 23-bit
        // mantissa to 10 bits. Adding 0xfff plus the kept lsb rounds half to even; a carry out of
        // the mantissa bumps the exponent, which is exactly right (up to inf at the top).
        std::uint32_t r = a - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return static_cast<std::uint16_t>(sign | (r >> 13));
    }
    if (a < 0x33000000u) {
        return sign;  // below 2^-25: rounds to (signed) zero
    }
    // Subnormal result: count in units of 2^-24, the smallest subnormal.
    const std::uint32_t exponent = a >> 23;                     // 102..112
    const std::uint32_t mantissa = (a & 0x7fffffu) | 0x800000u;  // value = mantissa * 2^(exponent-150)
    const std::uint32_t shift = 126u - exponent;                // 14..24
    std::uint32_t q = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (q & 1u))) {
        ++q;  // may carry into the smallest normal, whose encoding is the next integer
    }
    return static_cast<std::uint16_t>(sign | q);
}

inline float half_bits_to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu;
    const std::uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1fu) {
        return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
    }
    if (exponent != 0) {
        return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    }
    // Zero or subnormal: mantissa * 2^-24 is exact in float.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign ? -magnitude : magnitude;
}

// float -> bfloat16 (the top half of a float), round to nearest, ties to even.
inline std::uint16_t float_to_bfloat16_bits(float value) {
    const std::uint32_t x = float_bits(value);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return static_cast<std::uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
    }
    const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
    return static_cast<std::uint16_t>(rounded >> 16);
}

inline float bfloat16_bits_to_float(std::uint16_t b) {
    return float_from_bits(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace cpu
}  // namespace pto

// Global names, as on the NPU compiler. The members stay trivial so arrays of them are plain
// 16-bit buffers that numpy (float16, ml_dtypes.bfloat16) can share through a pointer.
struct half {
    std::uint16_t bits;

    half() = default;
    half(float value) : bits(pto::cpu::float_to_half_bits(value)) {}
    operator float() const { return pto::cpu::half_bits_to_float(bits); }

    static half from_bits(std::uint16_t raw) {
        half h;
        h.bits = raw;
        return h;
    }
    half& operator+=(float v) { return *this = half(static_cast<float>(*this) + v); }
    half& operator-=(float v) { return *this = half(static_cast<float>(*this) - v); }
    half& operator*=(float v) { return *this = half(static_cast<float>(*this) * v); }
    half& operator/=(float v) { return *this = half(static_cast<float>(*this) / v); }
};

struct bfloat16_t {
    std::uint16_t bits;

    bfloat16_t() = default;
    bfloat16_t(float value) : bits(pto::cpu::float_to_bfloat16_bits(value)) {}
    operator float() const { return pto::cpu::bfloat16_bits_to_float(bits); }

    static bfloat16_t from_bits(std::uint16_t raw) {
        bfloat16_t b;
        b.bits = raw;
        return b;
    }
    bfloat16_t& operator+=(float v) { return *this = bfloat16_t(static_cast<float>(*this) + v); }
    bfloat16_t& operator-=(float v) { return *this = bfloat16_t(static_cast<float>(*this) - v); }
    bfloat16_t& operator*=(float v) { return *this = bfloat16_t(static_cast<float>(*this) * v); }
    bfloat16_t& operator/=(float v) { return *this = bfloat16_t(static_cast<float>(*this) / v); }
};

static_assert(sizeof(half) == 2 && sizeof(bfloat16_t) == 2, "16-bit float types must be 2 bytes");

namespace pto {
namespace cpu {

// Floating types whose arithmetic runs in float; everything else is integer arithmetic.
template <typename T>
inline constexpr bool is_float_like_v =
    std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16_t>;

// The type an element is computed in: float for the 16-bit floats, int for the narrow integers.
template <typename T>
using calc_t = std::conditional_t<
    std::is_same_v<T, half> || std::is_same_v<T, bfloat16_t>, float,
    std::conditional_t<std::is_integral_v<T> && (sizeof(T) < sizeof(int)), int, T>>;

}  // namespace cpu
}  // namespace pto

#endif
