// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// Element-wise instructions added for the ops of PyPTO's models: TPOW / TPOWS (a power, with the
// scratch tile pto-isa's signature takes) and TAND / TOR (bitwise on integers; ptodsl applies them
// to the packed bytes of comparison masks). TNOT is in ops_vector.hpp, TCVT in ops_vector.hpp and
// convert.hpp (a conversion to the same float type rounds to an integral value).
#ifndef PTODSL_CPU_SUBSET_OPS_ELEM_HPP
#define PTODSL_CPU_SUBSET_OPS_ELEM_HPP

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common.hpp"
#include "ops_vector.hpp"
#include "tile.hpp"

namespace pto {

// TPOW's algorithm choice: the A5 implementation has a slower, more precise form; A2/A3 and this
// header compute one way (float math's pow, rounded once to the element type).
enum class PowAlgorithm : std::uint8_t { DEFAULT, HIGH_PRECISION };

namespace cpu {

// C's pow for floats: NaN for a negative base and an exponent that is not an integer, pow(x, 0) is
// 1 even for NaN, 1 ** y is 1; the 16-bit types compute in float and round once.
template <typename V>
inline V power(V base, V exponent) {
    static_assert(std::is_floating_point_v<V>, "TPOW: ptodsl's CPU subset implements floating-point powers only");
    return std::pow(base, exponent);
}

template <typename Tmp, typename Dst>
inline void require_scratch(const Dst& dst, const char* op) {
    static_assert(is_tile_data_v<Tmp>, "the scratch operand must be a tile");
    require_covers<Tmp>(dst.GetValidRow(), dst.GetValidCol(), op, "tmp");
}

}  // namespace cpu

// dst = base ** exp over dst's valid region; tmp is the NPU's scratch.
template <auto PrecisionType = PowAlgorithm::DEFAULT, typename DstTile, typename BaseTile, typename ExpTile,
          typename TmpTile>
AICORE inline RecordEvent TPOW(DstTile& dst, BaseTile& base, ExpTile& exp, TmpTile& tmp) {
    (void)tmp;
    cpu::require_float<typename DstTile::DType>("TPOW");
    cpu::require_scratch<TmpTile>(dst, "TPOW");
    cpu::binary(dst, base, exp, "TPOW", [](auto a, auto b) { return cpu::power(a, b); });
    return {};
}

// dst = base ** exp (a scalar exponent) over dst's valid region; tmp is the NPU's scratch.
template <auto PrecisionType = PowAlgorithm::DEFAULT, typename DstTile, typename BaseTile, typename TmpTile>
AICORE inline RecordEvent TPOWS(DstTile& dst, BaseTile& base, typename DstTile::DType exp, TmpTile& tmp) {
    (void)tmp;
    cpu::require_float<typename DstTile::DType>("TPOWS");
    cpu::require_scratch<TmpTile>(dst, "TPOWS");
    const auto e = cpu::widen(exp);
    cpu::unary(dst, base, "TPOWS", [e](auto a) { return cpu::power(a, e); });
    return {};
}

// Bitwise AND / OR of integer tiles of one element type.
template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TAND(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {
    static_assert(std::is_integral_v<typename TileDataDst::DType>, "TAND needs an integer element type");
    cpu::binary(dst, src0, src1, "TAND", [](auto a, auto b) { return a & b; });
    return {};
}

template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TOR(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {
    static_assert(std::is_integral_v<typename TileDataDst::DType>, "TOR needs an integer element type");
    cpu::binary(dst, src0, src1, "TOR", [](auto a, auto b) { return a | b; });
    return {};
}

}  // namespace pto

#endif
