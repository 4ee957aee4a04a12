// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// Layout instructions on Vec tiles: TTRANS (a 2-D transpose through a scratch tile) and TCONCAT
// (two tiles side by side along the columns). Both keep the element type, as pto-isa requires.
#ifndef PTODSL_CPU_SUBSET_OPS_LAYOUT_HPP
#define PTODSL_CPU_SUBSET_OPS_LAYOUT_HPP

#include <type_traits>

#include "common.hpp"
#include "tile.hpp"

namespace pto {

// dst(c, r) = src(r, c) over src's valid region. The NPU goes through tmp (at least the source's
// valid columns rounded up to a block, by its valid rows rounded up to 32); the CPU needs no
// scratch but checks that it is placed.
template <typename TileDataDst, typename TileDataSrc, typename TileDataTmp>
AICORE inline RecordEvent TTRANS(TileDataDst& dst, TileDataSrc& src, TileDataTmp& tmp) {
    using T = typename TileDataSrc::DType;
    static_assert(std::is_same_v<T, typename TileDataDst::DType>, "TTRANS keeps the element type");
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "TTRANS takes 1-, 2- and 4-byte elements");
    static_assert(TileDataSrc::Loc == TileType::Vec && TileDataDst::Loc == TileType::Vec,
                  "TTRANS transposes Vec tiles");
    static_assert(TileDataSrc::isRowMajor && !TileDataSrc::isBoxedLayout, "TTRANS takes a row-major source");
    static_assert((TileDataSrc::ValidRow == DYNAMIC) == (TileDataDst::ValidCol == DYNAMIC) &&
                      (TileDataSrc::ValidCol == DYNAMIC) == (TileDataDst::ValidRow == DYNAMIC),
                  "TTRANS: the destination's valid extents mirror the source's");
    T* out = cpu::elements(dst, "TTRANS");
    const T* in = cpu::elements(src, "TTRANS");
    (void)cpu::elements(tmp, "TTRANS");
    const unsigned rows = src.GetValidRow();
    const unsigned cols = src.GetValidCol();
    if (dst.GetValidRow() != cols || dst.GetValidCol() != rows) {
        cpu::fail("TTRANS: a %ux%u source needs a %ux%u destination, not %ux%u", rows, cols, cols, rows,
                  dst.GetValidRow(), dst.GetValidCol());
    }
    cpu::require_covers<TileDataDst>(cols, rows, "TTRANS", "the destination");
    for (unsigned r = 0; r < rows; ++r) {
        for (unsigned c = 0; c < cols; ++c) {
            out[cpu::element_offset<TileDataDst>(c, r)] = in[cpu::element_offset<TileDataSrc>(r, c)];
        }
    }
    return {};
}

// dst(r, c) = src0(r, c) for c < src0's valid columns, then src1's valid columns right after, in
// dst's valid rows (each source has that many valid rows).
template <typename TileDataDst, typename TileDataSrc0, typename TileDataSrc1>
AICORE inline RecordEvent TCONCAT(TileDataDst& dst, TileDataSrc0& src0, TileDataSrc1& src1) {
    using T = typename TileDataDst::DType;
    static_assert(std::is_same_v<T, typename TileDataSrc0::DType> && std::is_same_v<T, typename TileDataSrc1::DType>,
                  "TCONCAT: Data type of dst, src0 and src1 must be the same.");
    static_assert(TileDataDst::Loc == TileType::Vec && TileDataSrc0::Loc == TileType::Vec &&
                      TileDataSrc1::Loc == TileType::Vec,
                  "TCONCAT: TileType of src and dst tiles must be TileType::Vec.");
    T* out = cpu::elements(dst, "TCONCAT");
    const T* a = cpu::elements(src0, "TCONCAT");
    const T* b = cpu::elements(src1, "TCONCAT");
    const unsigned rows = dst.GetValidRow();
    const unsigned c0 = src0.GetValidCol();
    const unsigned c1 = src1.GetValidCol();
    if (src0.GetValidRow() != rows || src1.GetValidRow() != rows) {
        cpu::fail("TCONCAT: the sources have %u and %u valid rows, the destination %u", src0.GetValidRow(),
                  src1.GetValidRow(), rows);
    }
    if (c0 + c1 > static_cast<unsigned>(TileDataDst::Cols)) {
        cpu::fail("TCONCAT: %u + %u columns exceed the destination's %d", c0, c1, TileDataDst::Cols);
    }
    cpu::require_covers<TileDataDst>(rows, c0 + c1, "TCONCAT", "the destination");
    for (unsigned r = 0; r < rows; ++r) {
        for (unsigned c = 0; c < c0; ++c) {
            out[cpu::element_offset<TileDataDst>(r, c)] = a[cpu::element_offset<TileDataSrc0>(r, c)];
        }
        for (unsigned c = 0; c < c1; ++c) {
            out[cpu::element_offset<TileDataDst>(r, c0 + c)] = b[cpu::element_offset<TileDataSrc1>(r, c)];
        }
    }
    return {};
}

}  // namespace pto

#endif
