// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// Indexed data movement and index generation: MGATHER / MSCATTER (GM rows or elements at the
// positions an index tile holds), TCI (a ramp), TTRI (a triangular 0/1 mask) and the row
// arg-reductions TROWARGMAX / TROWARGMIN.
//
// MGATHER and MSCATTER take an out-of-bounds mode (GatherOOB / ScatterOOB). This header is stricter
// than every mode: an index outside the table fails the call (pto::cpu::Failure), because ptodsl's
// control programs check every index read from data before the kernel runs, so reaching one here
// is a compiler bug to report, not data to clamp.
#ifndef PTODSL_CPU_SUBSET_OPS_INDEX_HPP
#define PTODSL_CPU_SUBSET_OPS_INDEX_HPP

#include <cstdint>
#include <type_traits>

#include "common.hpp"
#include "convert.hpp"
#include "ops_memory.hpp"
#include "tile.hpp"

namespace pto {

enum class Coalesce : std::uint8_t { Row = 0, Elem = 1 };
enum class GatherOOB : std::uint8_t { Undefined = 0, Clamp = 1, Wrap = 2, Zero = 3 };
enum class ScatterAtomicOp : std::uint8_t { None = 0, Add = 1, Max = 2, Min = 3 };
enum class ScatterOOB : std::uint8_t { Undefined = 0, Skip = 1, Clamp = 2, Wrap = 3 };
enum class ScatterConflict : std::uint8_t { Last = 0, Default = 1 };

namespace cpu {

template <typename TileIdx>
inline std::int64_t index_at(TileIdx& idx, unsigned k, const char* op) {
    static_assert(std::is_same_v<typename TileIdx::DType, std::int32_t> ||
                      std::is_same_v<typename TileIdx::DType, std::uint32_t>,
                  "the index tile of MGATHER / MSCATTER holds int32_t or uint32_t");
    static_assert(TileIdx::Loc == TileType::Vec && TileIdx::isRowMajor && !TileIdx::isBoxedLayout,
                  "the index tile of MGATHER / MSCATTER is an unboxed RowMajor Vec tile");
    const unsigned cols = idx.GetValidCol();
    return static_cast<std::int64_t>(elements(idx, op)[element_offset<TileIdx>(k / cols, k % cols)]);
}

inline std::int64_t checked(std::int64_t i, std::int64_t cap, const char* op) {
    if (i < 0 || i >= cap) {
        fail("%s: index %lld is outside a table of %lld (the control program's guards check every index first; "
             "this is a compiler bug)", op, static_cast<long long>(i), static_cast<long long>(cap));
    }
    return i;
}

// Row mode: the index tile is the valid shape [1, R] of the R data rows.
template <typename TileData, typename TileIdx>
inline unsigned row_indices(TileData& data, TileIdx& idx, const char* op) {
    const unsigned rows = data.GetValidRow();
    if (idx.GetValidRow() != 1 || idx.GetValidCol() != rows) {
        fail("%s: Coalesce::Row needs an index tile of valid shape [1, %u], not [%u, %u]", op, rows,
             idx.GetValidRow(), idx.GetValidCol());
    }
    return rows;
}

template <typename TileData, typename GlobalData>
inline void check_table(const GmView<GlobalData>& table, TileData& data, const char* op) {
    static_assert(TileData::Loc == TileType::Vec && TileData::isRowMajor && !TileData::isBoxedLayout,
                  "MGATHER / MSCATTER move an unboxed RowMajor Vec tile");
    static_assert(GlobalData::layout == Layout::ND, "this CPU header's MGATHER / MSCATTER take ND tables");
    static_assert(sizeof(typename TileData::DType) == sizeof(typename GlobalData::DType),
                  "GM and tile elements must have the same size");
    for (int d = 0; d < 5; ++d) {
        if (table.shape[d] <= 0) {
            fail("%s: table dimension %d has extent %lld; every extent must be positive", op, d,
                 static_cast<long long>(table.shape[d]));
        }
    }
    (void)data;
}

}  // namespace cpu

// dst row r = table row indexes[r] (Coalesce::Row), or dst(r, c) = the element at linear position
// indexes(r, c) of the table (Coalesce::Elem).
template <Coalesce CMode, GatherOOB Mode, typename TileDst, typename GlobalData, typename TileInd>
AICORE inline RecordEvent MGATHER(TileDst& dst, GlobalData& table, TileInd& indexes) {
    static_assert(is_tile_data_v<TileDst> && is_tile_data_v<TileInd>, "MGATHER: dst and indexes are tiles");
    static_assert(is_global_data_v<GlobalData>, "MGATHER: the table is a GlobalTensor");
    using T = typename TileDst::DType;
    const cpu::GmView<GlobalData> view(table);
    cpu::check_table(view, dst, "MGATHER");
    const typename GlobalData::DType* in = table.data();
    T* out = cpu::elements(dst, "MGATHER");
    const unsigned cols = dst.GetValidCol();
    if constexpr (CMode == Coalesce::Row) {
        const unsigned rows = cpu::row_indices(dst, indexes, "MGATHER");
        if (view.cols < static_cast<std::int64_t>(cols)) {
            cpu::fail("MGATHER: table rows of %lld elements are shorter than the %u columns gathered",
                      static_cast<long long>(view.cols), cols);
        }
        for (unsigned r = 0; r < rows; ++r) {
            const std::int64_t i = cpu::checked(cpu::index_at(indexes, r, "MGATHER"), view.rows, "MGATHER");
            const typename GlobalData::DType* row = in + view.row_offset(i);
            for (unsigned c = 0; c < cols; ++c) {
                out[cpu::element_offset<TileDst>(r, c)] = cpu::move_element<T>(row[c * view.stride[4]]);
            }
        }
    } else {
        const unsigned rows = dst.GetValidRow();
        if (indexes.GetValidRow() != rows || indexes.GetValidCol() != cols) {
            cpu::fail("MGATHER: Coalesce::Elem needs an index tile of the destination's valid shape [%u, %u], not "
                      "[%u, %u]", rows, cols, indexes.GetValidRow(), indexes.GetValidCol());
        }
        for (unsigned r = 0; r < rows; ++r) {
            for (unsigned c = 0; c < cols; ++c) {
                const std::int64_t i = cpu::checked(cpu::index_at(indexes, r * cols + c, "MGATHER"),
                                                    view.rows * view.cols, "MGATHER");
                out[cpu::element_offset<TileDst>(r, c)] =
                    cpu::move_element<T>(in[view.row_offset(i / view.cols) + (i % view.cols) * view.stride[4]]);
            }
        }
    }
    return {};
}

// table row indexes[r] = src row r (Coalesce::Row), in order: of rows sent to one place, the last
// stays. Only plain replacement (ScatterAtomicOp::None) is implemented.
template <Coalesce Mode, ScatterAtomicOp Atomic, ScatterOOB Oob, typename GlobalData, typename TileSrc,
          typename TileInd>
AICORE inline RecordEvent MSCATTER(GlobalData& table, TileSrc& src, TileInd& indexes) {
    static_assert(is_tile_data_v<TileSrc> && is_tile_data_v<TileInd>, "MSCATTER: src and indexes are tiles");
    static_assert(is_global_data_v<GlobalData>, "MSCATTER: the table is a GlobalTensor");
    static_assert(Mode == Coalesce::Row, "this CPU header's MSCATTER moves whole rows (Coalesce::Row)");
    static_assert(Atomic == ScatterAtomicOp::None, "this CPU header's MSCATTER replaces rows (ScatterAtomicOp::None)");
    using G = typename GlobalData::DType;
    const cpu::GmView<GlobalData> view(table);
    cpu::check_table(view, src, "MSCATTER");
    G* out = table.data();
    const typename TileSrc::DType* in = cpu::elements(src, "MSCATTER");
    const unsigned cols = src.GetValidCol();
    const unsigned rows = cpu::row_indices(src, indexes, "MSCATTER");
    if (view.cols < static_cast<std::int64_t>(cols)) {
        cpu::fail("MSCATTER: table rows of %lld elements are shorter than the %u columns scattered",
                  static_cast<long long>(view.cols), cols);
    }
    for (unsigned r = 0; r < rows; ++r) {
        const std::int64_t i = cpu::checked(cpu::index_at(indexes, r, "MSCATTER"), view.rows, "MSCATTER");
        G* row = out + view.row_offset(i);
        for (unsigned c = 0; c < cols; ++c) {
            row[c * view.stride[4]] = cpu::move_element<G>(in[cpu::element_offset<TileSrc>(r, c)]);
        }
    }
    return {};
}

// dst(0, k) = start + k (descending: start - k) over the valid columns of a one-row tile.
template <typename TileData, typename T, int descending>
AICORE inline RecordEvent TCI(TileData& dst, T start) {
    static_assert(std::is_same_v<typename TileData::DType, T>, "TCI: the start has the tile's element type");
    static_assert(TileData::Rows == 1, "TCI: the sequence runs along the one row of the tile");
    static_assert(TileData::Loc == TileType::Vec, "TCI: the destination is a Vec tile");
    T* out = cpu::elements(dst, "TCI");
    const unsigned cols = dst.GetValidCol();
    const auto base = cpu::widen(start);
    for (unsigned k = 0; k < cols; ++k) {
        out[cpu::element_offset<TileData>(0, k)] = T(descending ? base - decltype(base)(k) : base + decltype(base)(k));
    }
    return {};
}

// dst(i, j) = 1 when j <= i + diagonal (lower, isUpperOrLower = 0) or j >= i + diagonal (upper, 1), else 0.
template <typename TileData, int isUpperOrLower>
AICORE inline RecordEvent TTRI(TileData& dst, int diagonal) {
    static_assert(isUpperOrLower == 0 || isUpperOrLower == 1, "TTRI: isUpperOrLower is 0 (lower) or 1 (upper)");
    static_assert(TileData::Loc == TileType::Vec && TileData::isRowMajor && !TileData::isBoxedLayout,
                  "TTRI: the destination is an unboxed RowMajor Vec tile");
    using T = typename TileData::DType;
    T* out = cpu::elements(dst, "TTRI");
    const long rows = dst.GetValidRow();
    const long cols = dst.GetValidCol();
    for (long i = 0; i < rows; ++i) {
        for (long j = 0; j < cols; ++j) {
            const bool one = isUpperOrLower == 0 ? j <= i + diagonal : j >= i + diagonal;
            out[cpu::element_offset<TileData>(i, j)] = T(one ? 1 : 0);
        }
    }
    return {};
}

namespace cpu {
// dst(r, 0) = the first column of row r holding its maximum (minimum): a left-to-right scan that
// moves only on a strictly greater (smaller) value, as pto-isa's reference does.
template <bool Max, typename TileOut, typename TileIn>
inline void row_arg(TileOut& dst, TileIn& src, const char* op) {
    static_assert(std::is_same_v<typename TileOut::DType, std::int32_t> ||
                      std::is_same_v<typename TileOut::DType, std::uint32_t>,
                  "row arg-reductions write int32_t or uint32_t indices");
    static_assert(TileIn::isRowMajor && !TileIn::isBoxedLayout, "row arg-reductions read an unboxed row-major tile");
    static_assert(!TileOut::isBoxedLayout && (TileOut::isRowMajor || TileOut::Cols == 1),
                  "row arg-reductions write a row-major tile (or a single-column ColMajor one)");
    const auto* in = elements(src, op);
    auto* out = elements(dst, op);
    const unsigned rows = src.GetValidRow();
    const unsigned cols = src.GetValidCol();
    if (rows == 0 || cols == 0 || dst.GetValidRow() != rows) {
        fail("%s: a %ux%u source for %u destination rows", op, rows, cols, dst.GetValidRow());
    }
    for (unsigned r = 0; r < rows; ++r) {
        auto best = widen(in[element_offset<TileIn>(r, 0)]);
        unsigned at = 0;
        for (unsigned c = 1; c < cols; ++c) {
            const auto v = widen(in[element_offset<TileIn>(r, c)]);
            if (Max ? v > best : v < best) {
                best = v;
                at = c;
            }
        }
        out[element_offset<TileOut>(r, 0)] = static_cast<typename TileOut::DType>(at);
    }
}
}  // namespace cpu

template <typename TileDataOut, typename TileDataIn, typename TileDataTmp>
AICORE inline RecordEvent TROWARGMAX(TileDataOut& dst, TileDataIn& src, TileDataTmp& tmp) {
    (void)tmp;
    cpu::row_arg<true>(dst, src, "TROWARGMAX");
    return {};
}

template <typename TileDataOut, typename TileDataIn, typename TileDataTmp>
AICORE inline RecordEvent TROWARGMIN(TileDataOut& dst, TileDataIn& src, TileDataTmp& tmp) {
    (void)tmp;
    cpu::row_arg<false>(dst, src, "TROWARGMIN");
    return {};
}

}  // namespace pto

#endif
