// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// Data movement: TLOAD / TSTORE between GM and tiles, TMOV / TEXTRACT between tiles, TFILLPAD.
#ifndef PTODSL_CPU_SUBSET_OPS_MEMORY_HPP
#define PTODSL_CPU_SUBSET_OPS_MEMORY_HPP

#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "common.hpp"
#include "convert.hpp"
#include "tile.hpp"

namespace pto {
namespace cpu {

// The 2-D view TLOAD and TSTORE move: rows run over the first four dimensions (the last of them
// fastest) and columns over the fifth, as in the real library.
template <typename GlobalT>
struct GmView {
    const std::int64_t* shape;
    const std::int64_t* stride;
    std::int64_t rows;
    std::int64_t cols;

    explicit GmView(const GlobalT& tensor)
        : shape(Access::shape(tensor)), stride(Access::stride(tensor)),
          rows(shape[0] * shape[1] * shape[2] * shape[3]), cols(shape[4]) {}

    std::int64_t row_offset(std::int64_t r) const {
        const std::int64_t i3 = r % shape[3];
        std::int64_t rest = r / shape[3];
        const std::int64_t i2 = rest % shape[2];
        rest /= shape[2];
        const std::int64_t i1 = rest % shape[1];
        const std::int64_t i0 = rest / shape[1];
        return i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
    }
};

template <typename TileT, typename GlobalT>
inline void check_transfer(const TileT& tile, const GmView<GlobalT>& view, const char* op) {
    for (int d = 0; d < 5; ++d) {
        if (view.shape[d] <= 0) {
            fail("%s: GM dimension %d has extent %lld; every extent must be positive", op, d,
                 static_cast<long long>(view.shape[d]));
        }
    }
    const unsigned vr = tile.GetValidRow();
    const unsigned vc = tile.GetValidCol();
    if (view.rows != static_cast<std::int64_t>(vr) || view.cols != static_cast<std::int64_t>(vc)) {
        fail("%s: the GM view is %lldx%lld (shape [%lld, %lld, %lld, %lld, %lld]) but the tile's valid region is "
             "%ux%u; they must match",
             op, static_cast<long long>(view.rows), static_cast<long long>(view.cols),
             static_cast<long long>(view.shape[0]), static_cast<long long>(view.shape[1]),
             static_cast<long long>(view.shape[2]), static_cast<long long>(view.shape[3]),
             static_cast<long long>(view.shape[4]), vr, vc);
    }
}

template <typename To, typename From>
inline To move_element(From value) {
    if constexpr (std::is_same_v<To, From>) {
        return value;
    } else {
        static_assert(sizeof(To) == sizeof(From), "moved elements must keep their size");
        To out;
        std::memcpy(&out, &value, sizeof out);
        return out;
    }
}

template <typename T>
using same_size_bits_t = std::conditional_t<
    sizeof(T) == 1, std::uint8_t,
    std::conditional_t<sizeof(T) == 2, std::uint16_t, std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;

// GM += value, atomically: blocks running on other threads may add to the same element.
template <typename T>
inline void atomic_add(T* target, T value) {
    using Bits = same_size_bits_t<T>;
    static_assert(sizeof(Bits) == sizeof(T), "no integer type of this element's size");
    Bits* raw = reinterpret_cast<Bits*>(target);
    Bits expected = __atomic_load_n(raw, __ATOMIC_RELAXED);
    for (;;) {
        T current;
        std::memcpy(&current, &expected, sizeof current);
        const T next = T(widen(current) + widen(value));
        Bits desired;
        std::memcpy(&desired, &next, sizeof desired);
        if (__atomic_compare_exchange_n(raw, &expected, desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            return;
        }
    }
}

// How many consecutive columns of a tile row lie next to each other in memory: the whole row of
// an unboxed row-major tile, one box row of a boxed tile whose boxes are row-major inside, else 1.
template <typename TileT>
constexpr unsigned row_run_cols() {
    if constexpr (!TileT::isBoxedLayout) {
        return TileT::isRowMajor ? static_cast<unsigned>(TileT::Cols) : 1u;
    } else {
        return TileT::isInnerRowMajor ? static_cast<unsigned>(TileT::InnerCols) : 1u;
    }
}

// memcpy of n <= Run elements, with a constant size when the run is whole (a few vector moves
// instead of a copy loop of unknown length).
template <unsigned Run, typename T>
inline void copy_run(T* to, const T* from, unsigned n) {
    if (n == Run) {
        std::memcpy(to, from, Run * sizeof(T));
    } else {
        std::memcpy(to, from, n * sizeof(T));
    }
}

// Columns (r, c), (r, c + 1), ... lie col_step elements apart in a tile, for col_span columns from
// any multiple of col_span: a whole row of an unboxed tile, one box row of a boxed one.
template <typename TileT>
constexpr unsigned col_step() {
    if constexpr (!TileT::isBoxedLayout) {
        return TileT::isRowMajor ? 1u : static_cast<unsigned>(TileT::Rows);
    } else {
        return TileT::isInnerRowMajor ? 1u : static_cast<unsigned>(TileT::InnerRows);
    }
}

template <typename TileT>
constexpr unsigned col_span() {
    return static_cast<unsigned>(TileT::isBoxedLayout ? TileT::InnerCols : TileT::Cols);
}

// fn(r, c, n, src_at, dst_at): columns c .. c+n-1 of row r start at src_at in Src and dst_at in Dst
// and step by col_step of each, for every row r < rows and every such run of the first `cols`
// columns, in the order of the element loop (rows, then columns).
template <typename Dst, typename Src, typename Fn>
inline void for_matching_runs(unsigned rows, unsigned cols, Fn fn) {
    constexpr unsigned run = std::gcd(col_span<Dst>(), col_span<Src>());
    for (unsigned r = 0; r < rows; ++r) {
        for (unsigned c = 0; c < cols; c += run) {
            fn(r, c, cols - c < run ? cols - c : run, element_offset<Src>(r, c), element_offset<Dst>(r, c));
        }
    }
}

// Whether element (r, c) sits at the same offset in both tile types.
template <typename A, typename B>
inline constexpr bool same_layout_v =
    A::Rows == B::Rows && A::Cols == B::Cols && A::isRowMajor == B::isRowMajor && A::SFractal == B::SFractal &&
    A::InnerRows == B::InnerRows && A::InnerCols == B::InnerCols;

// fn(r, c, n, at): columns c .. c+n-1 of row r are the n elements of the tile starting at `at`, for
// every row r < rows and every such run of the first `cols` columns.
template <typename TileT, typename Fn>
inline void for_row_runs(unsigned rows, unsigned cols, Fn fn) {
    constexpr unsigned run = row_run_cols<TileT>();
    for (unsigned r = 0; r < rows; ++r) {
        for (unsigned c = 0; c < cols; c += run) {
            const unsigned n = cols - c < run ? cols - c : run;
            fn(r, c, n, element_offset<TileT>(r, c));
        }
    }
}

template <typename TileT, typename GlobalT>
constexpr bool vec_layouts_match() {
    return !TileT::isBoxedLayout &&
           (TileT::isRowMajor ? GlobalT::layout == Layout::ND : GlobalT::layout == Layout::DN);
}

}  // namespace cpu

// Load exactly the destination's valid region; the rest of the tile keeps what it held (on the NPU
// the padding after a load is not dependable, so nothing may rely on it). pto-isa's CPU simulation
// fills the whole tile with the pad value (0 for PadValue::Null) first; this header is stricter on
// purpose: padding keeps its poison, so a kernel that reads it shows NaNs here instead of zeros.
template <typename TileData, typename GlobalData>
AICORE inline RecordEvent TLOAD(TileData& dst, GlobalData& src) {
    static_assert(is_tile_data_v<TileData>, "TLOAD: the destination must be a Tile");
    static_assert(is_global_data_v<GlobalData>, "TLOAD: the source must be a GlobalTensor");
    static_assert(TileData::Loc == TileType::Vec || TileData::Loc == TileType::Mat,
                  "TLOAD: the destination must be a Vec or Mat tile");
    static_assert(sizeof(typename TileData::DType) == sizeof(typename GlobalData::DType),
                  "TLOAD: GM and tile elements must have the same size");
    static_assert(GlobalData::layout == Layout::ND || GlobalData::layout == Layout::DN,
                  "TLOAD: this CPU header moves ND and DN GM data only");
    static_assert(TileData::Loc != TileType::Vec || cpu::vec_layouts_match<TileData, GlobalData>(),
                  "TLOAD: a Vec tile takes ND data into an unboxed RowMajor tile, DN data into an unboxed "
                  "ColMajor tile");
    using T = typename TileData::DType;
    T* out = cpu::elements(dst, "TLOAD");
    const typename GlobalData::DType* in = src.data();
    if (in == nullptr) {
        cpu::fail("TLOAD: the GlobalTensor points at no data");
    }
    const cpu::GmView<GlobalData> view(src);
    cpu::check_transfer(dst, view, "TLOAD");
    const std::int64_t col_stride = view.stride[4];
    if (col_stride == 1 && cpu::row_run_cols<TileData>() > 1) {
        // contiguous GM columns into contiguous runs of the tile: plain copies of the bytes
        const typename GlobalData::DType* row = nullptr;
        std::int64_t last = -1;
        cpu::for_row_runs<TileData>(dst.GetValidRow(), dst.GetValidCol(),
                                    [&](unsigned r, unsigned c, unsigned n, std::size_t at) {
                                        if (static_cast<std::int64_t>(r) != last) {
                                            row = in + view.row_offset(r);
                                            last = r;
                                        }
                                        cpu::copy_run<cpu::row_run_cols<TileData>()>(
                                            out + at, reinterpret_cast<const T*>(row + c), n);
                                    });
        return {};
    }
    for (std::int64_t r = 0; r < view.rows; ++r) {
        const typename GlobalData::DType* row = in + view.row_offset(r);
        for (std::int64_t c = 0; c < view.cols; ++c) {
            out[cpu::element_offset<TileData>(r, c)] = cpu::move_element<T>(row[c * col_stride]);
        }
    }
    return {};
}

// Store exactly the source's valid region. An Acc tile stores through the fixpipe, which may apply
// relu (reluPreMode) and narrow an f32 accumulator to f16 / bf16 on the way (rounding to nearest even).
template <typename TileData, typename GlobalData, AtomicType atomicType = AtomicType::AtomicNone,
          ReluPreMode reluPreMode = ReluPreMode::NoRelu>
AICORE inline RecordEvent TSTORE(GlobalData& dst, TileData& src) {
    static_assert(is_tile_data_v<TileData>, "TSTORE: the source must be a Tile");
    static_assert(is_global_data_v<GlobalData>, "TSTORE: the destination must be a GlobalTensor");
    static_assert(TileData::Loc == TileType::Vec || TileData::Loc == TileType::Mat ||
                      TileData::Loc == TileType::Acc,
                  "TSTORE: the source must be a Vec, Mat or Acc tile");
    static_assert(GlobalData::layout == Layout::ND || GlobalData::layout == Layout::DN,
                  "TSTORE: this CPU header moves ND and DN GM data only");
    static_assert(TileData::Loc != TileType::Vec || cpu::vec_layouts_match<TileData, GlobalData>(),
                  "TSTORE: a Vec tile stores an unboxed RowMajor tile to ND data, an unboxed ColMajor tile "
                  "to DN data");
    using T = typename TileData::DType;
    using G = typename GlobalData::DType;
    constexpr bool narrows = TileData::Loc == TileType::Acc && !std::is_same_v<T, G>;
    static_assert(!narrows || (std::is_same_v<T, float> && (std::is_same_v<G, half> || std::is_same_v<G, bfloat16_t>)),
                  "TSTORE: an Acc tile stores as its own type, or f32 as f16 / bf16");
    static_assert(narrows || sizeof(T) == sizeof(G), "TSTORE: GM and tile elements must have the same size");
    constexpr bool relu = reluPreMode == ReluPreMode::NormalRelu;
    static_assert(!relu || TileData::Loc == TileType::Acc, "TSTORE: only an Acc tile stores through the relu");
    const T* in = cpu::elements(src, "TSTORE");
    G* out = dst.data();
    if (out == nullptr) {
        cpu::fail("TSTORE: the GlobalTensor points at no data");
    }
    const cpu::GmView<GlobalData> view(dst);
    cpu::check_transfer(src, view, "TSTORE");
    const std::int64_t col_stride = view.stride[4];
    if (col_stride == 1 && cpu::row_run_cols<TileData>() > 1 && atomicType == AtomicType::AtomicNone && !relu) {
        // contiguous runs of the tile into contiguous GM columns; narrowing converts as it goes
        G* row = nullptr;
        std::int64_t last = -1;
        cpu::for_row_runs<TileData>(src.GetValidRow(), src.GetValidCol(),
                                    [&](unsigned r, unsigned c, unsigned n, std::size_t at) {
                                        if (static_cast<std::int64_t>(r) != last) {
                                            row = out + view.row_offset(r);
                                            last = r;
                                        }
                                        if constexpr (narrows) {
                                            for (unsigned j = 0; j < n; ++j) {
                                                row[c + j] = cpu::convert_default<G>(in[at + j]);
                                            }
                                        } else {
                                            cpu::copy_run<cpu::row_run_cols<TileData>()>(
                                                reinterpret_cast<T*>(row + c), in + at, n);
                                        }
                                    });
        return {};
    }
    for (std::int64_t r = 0; r < view.rows; ++r) {
        G* row = out + view.row_offset(r);
        for (std::int64_t c = 0; c < view.cols; ++c) {
            T value = in[cpu::element_offset<TileData>(r, c)];
            if constexpr (relu) {
                value = value > T(0) ? value : T(0);  // as TRELU here
            }
            G converted;
            if constexpr (narrows) {
                converted = cpu::convert_default<G>(value);
            } else {
                converted = cpu::move_element<G>(value);
            }
            if constexpr (atomicType == AtomicType::AtomicAdd) {
                cpu::atomic_add(&row[c * col_stride], converted);
            } else {
                row[c * col_stride] = converted;
            }
        }
    }
    return {};
}

// Copy the valid region to the same indices (L1 -> L0A/L0B/Bias, and between vector tiles); as in
// pto-isa, source and destination have the same valid shape. Moving out of an Acc tile may narrow
// f32 to f16 / bf16; moving an L1 row into the bias table may widen f16 / bf16 to f32 (which
// targets convert which is the target file's rule, not this header's).
template <typename DstTileData, typename SrcTileData>
AICORE inline RecordEvent TMOV(DstTileData& dst, SrcTileData& src) {
    static_assert(is_tile_data_v<DstTileData> && is_tile_data_v<SrcTileData>, "TMOV: both operands must be tiles");
    using D = typename DstTileData::DType;
    using S = typename SrcTileData::DType;
    constexpr bool widens_bias = DstTileData::Loc == TileType::Bias && SrcTileData::Loc == TileType::Mat &&
                                 std::is_same_v<D, float> &&
                                 (std::is_same_v<S, half> || std::is_same_v<S, bfloat16_t>);
    static_assert(std::is_same_v<D, S> || (SrcTileData::Loc == TileType::Acc && std::is_same_v<S, float>) ||
                      widens_bias,
                  "TMOV: the element types must match (only an f32 Acc tile may narrow on the way out, and an "
                  "f16 / bf16 row widen to f32 into the bias table)");
    static_assert(DstTileData::Loc != TileType::Bias ||
                      (SrcTileData::Loc == TileType::Mat && DstTileData::Rows == 1 && SrcTileData::Rows == 1 &&
                       DstTileData::Cols == SrcTileData::Cols),
                  "TMOV: a Bias tile is filled from a one-row Mat tile of the same static shape");
    D* out = cpu::elements(dst, "TMOV");
    const S* in = cpu::elements(src, "TMOV");
    const unsigned rows = dst.GetValidRow();
    const unsigned cols = dst.GetValidCol();
    if (src.GetValidRow() != rows || src.GetValidCol() != cols) {
        cpu::fail("TMOV: the source's valid shape is %ux%u, the destination's %ux%u; they must be equal",
                  src.GetValidRow(), src.GetValidCol(), rows, cols);
    }
    if constexpr (std::is_same_v<D, S> && cpu::same_layout_v<DstTileData, SrcTileData> &&
                  (cpu::row_run_cols<DstTileData>() > 1)) {
        // one layout on both sides (L1 -> L0A): the runs of a row are copies of bytes
        cpu::for_row_runs<DstTileData>(rows, cols, [&](unsigned, unsigned, unsigned n, std::size_t at) {
            std::memmove(out + at, in + at, n * sizeof(D));
        });
        return {};
    }
    // runs of columns with a constant step on both sides (L1 -> L0B changes the box order)
    constexpr unsigned src_step = cpu::col_step<SrcTileData>();
    constexpr unsigned dst_step = cpu::col_step<DstTileData>();
    cpu::for_matching_runs<DstTileData, SrcTileData>(
        rows, cols, [&](unsigned, unsigned, unsigned n, std::size_t src_at, std::size_t dst_at) {
            for (unsigned x = 0; x < n; ++x) {
                out[dst_at + x * dst_step] = cpu::convert_default<D>(in[src_at + x * src_step]);
            }
        });
    return {};
}

// Copy the destination's valid region from the source, starting at (indexRow, indexCol).
template <typename DstTileData, typename SrcTileData>
AICORE inline RecordEvent TEXTRACT(DstTileData& dst, SrcTileData& src, std::uint16_t indexRow = 0,
                                   std::uint16_t indexCol = 0) {
    static_assert(is_tile_data_v<DstTileData> && is_tile_data_v<SrcTileData>,
                  "TEXTRACT: both operands must be tiles");
    using D = typename DstTileData::DType;
    using S = typename SrcTileData::DType;
    static_assert(std::is_same_v<D, S> || (SrcTileData::Loc == TileType::Acc && std::is_same_v<S, float>),
                  "TEXTRACT: the element types must match (only an f32 Acc tile may narrow on the way out)");
    D* out = cpu::elements(dst, "TEXTRACT");
    const S* in = cpu::elements(src, "TEXTRACT");
    const unsigned rows = dst.GetValidRow();
    const unsigned cols = dst.GetValidCol();
    if (indexRow + rows > static_cast<unsigned>(SrcTileData::Rows) ||
        indexCol + cols > static_cast<unsigned>(SrcTileData::Cols)) {
        cpu::fail("TEXTRACT: a %ux%u region at (%u, %u) does not fit in the %dx%d source tile", rows, cols,
                  static_cast<unsigned>(indexRow), static_cast<unsigned>(indexCol), SrcTileData::Rows,
                  SrcTileData::Cols);
    }
    for (unsigned r = 0; r < rows; ++r) {
        for (unsigned c = 0; c < cols; ++c) {
            out[cpu::element_offset<DstTileData>(r, c)] =
                cpu::convert_default<D>(in[cpu::element_offset<SrcTileData>(indexRow + r, indexCol + c)]);
        }
    }
    return {};
}

namespace cpu {

// dst = src inside the source's valid region, the pad value everywhere else in dst's full shape.
template <typename DstTileData, typename SrcTileData>
inline void fill_pad(DstTileData& dst, SrcTileData& src, PadValue pad, const char* op) {
    static_assert(DstTileData::Rows == SrcTileData::Rows && DstTileData::Cols == SrcTileData::Cols,
                  "TFILLPAD: source and destination must have the same static shape");
    static_assert(sizeof(typename DstTileData::DType) == sizeof(typename SrcTileData::DType),
                  "TFILLPAD: source and destination elements must have the same size");
    using D = typename DstTileData::DType;
    D* out = elements(dst, op);
    const typename SrcTileData::DType* in = elements(src, op);
    const unsigned valid_rows = src.GetValidRow();
    const unsigned valid_cols = src.GetValidCol();
    const D fill = pad_value<D>(pad);
    for (unsigned r = 0; r < static_cast<unsigned>(DstTileData::Rows); ++r) {
        for (unsigned c = 0; c < static_cast<unsigned>(DstTileData::Cols); ++c) {
            out[element_offset<DstTileData>(r, c)] =
                r < valid_rows && c < valid_cols ? move_element<D>(in[element_offset<SrcTileData>(r, c)]) : fill;
        }
    }
}

}  // namespace cpu

// Vector form: the pad value is the destination's PadVal.
template <typename DstTileData, typename SrcTileData,
          std::enable_if_t<(DstTileData::Loc == TileType::Vec) && (SrcTileData::Loc == TileType::Vec), int> = 0>
AICORE inline RecordEvent TFILLPAD(DstTileData& dst, SrcTileData& src) {
    static_assert(DstTileData::PadVal != PadValue::Null, "TFILLPAD: the destination's PadVal must not be Null");
    cpu::fill_pad(dst, src, DstTileData::PadVal, "TFILLPAD");
    return {};
}

// L1 form: the pad value is a template argument, zero by default.
template <typename TileData, PadValue PadVal = PadValue::Zero,
          std::enable_if_t<(TileData::Loc == TileType::Mat), int> = 0>
AICORE inline RecordEvent TFILLPAD(TileData& dst, TileData& src) {
    cpu::fill_pad(dst, src, PadVal, "TFILLPAD");
    return {};
}

template <typename DstTileData, typename SrcTileData>
AICORE inline RecordEvent TFILLPAD_INPLACE(DstTileData& dst, SrcTileData& src) {
    static_assert(DstTileData::PadVal != PadValue::Null,
                  "TFILLPAD_INPLACE: the destination's PadVal must not be Null");
    cpu::fill_pad(dst, src, DstTileData::PadVal, "TFILLPAD_INPLACE");
    return {};
}

}  // namespace pto

#endif
