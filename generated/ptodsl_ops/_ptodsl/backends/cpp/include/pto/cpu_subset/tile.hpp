// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// Tile (on-chip data) and GlobalTensor (a view of GM data), their compile-time checks, and TASSIGN.
#ifndef PTODSL_CPU_SUBSET_TILE_HPP
#define PTODSL_CPU_SUBSET_TILE_HPP

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "arena.hpp"
#include "common.hpp"
#include "float16.hpp"

namespace pto {

namespace cpu {
struct Access;
// A dynamic valid extent nobody set yet: reading it is a kernel bug, not a zero-sized tile.
constexpr unsigned kUnsetExtent = ~0u;
}  // namespace cpu

template <TileType Loc_, typename Element_, const int Rows_, const int Cols_,
          const BLayout BFractal_ = BLayout::RowMajor, const int RowValid_ = Rows_, const int ColValid_ = Cols_,
          const SLayout SFractal_ = SLayout::NoneBox, const int SFractalSize_ = TileConfig::fractalABSize,
          auto PadVal_ = PadValue::Null, const CompactMode Compact_ = CompactMode::Null>
struct Tile {
public:
    using DType = Element_;

    static constexpr TileType Loc = Loc_;
    static constexpr int Rows = Rows_;
    static constexpr int Cols = Cols_;
    static constexpr int RowStride = BFractal_ == BLayout::RowMajor ? Cols : 1;
    static constexpr int ColStride = BFractal_ == BLayout::RowMajor ? 1 : Rows;
    static constexpr int ValidRow = RowValid_;
    static constexpr int ValidCol = ColValid_;
    static constexpr BLayout BFractal = BFractal_;
    static constexpr SLayout SFractal = SFractal_;
    static constexpr int Numel = Rows * Cols;
    static constexpr bool isRowMajor = BFractal_ == BLayout::RowMajor;
    static constexpr int SFractalSize = SFractalSize_;
    // pto-isa takes `auto` here; this header accepts only the PadValue enumerators it implements.
    static_assert(std::is_same_v<std::remove_cv_t<decltype(PadVal_)>, PadValue>, "Tile: PadVal must be a PadValue");
    static constexpr auto PadVal = PadVal_;
    static constexpr CompactMode Compact = Compact_;
    static constexpr bool isBoxedLayout = SFractal_ != SLayout::NoneBox;
    static constexpr bool isInnerRowMajor = SFractal_ == SLayout::RowMajor;
    static constexpr bool isInnerColMajor = SFractal_ == SLayout::ColMajor;

    // The box (fractal) shape: 16x16 for accumulators, 16 rows of 32 bytes (or its transpose)
    // for the other boxed layouts, a single element when unboxed.
    static constexpr int getInnerRow() {
        if constexpr (SFractalSize_ == TileConfig::fractalCSize) {
            return TileConfig::fixedRowSize;
        } else if constexpr (SFractalSize_ == TileConfig::fractalMxSize) {
            return TileConfig::fixedMxRowSize;
        } else {
            return isBoxedLayout ? (isInnerRowMajor ? TileConfig::fixedRowSize
                                                    : TileConfig::alignedSize / static_cast<int>(sizeof(DType)))
                                 : 1;
        }
    }
    static constexpr int getInnerCol() {
        if constexpr (SFractalSize_ == TileConfig::fractalCSize) {
            return TileConfig::fixedColSize;
        } else if constexpr (SFractalSize_ == TileConfig::fractalMxSize) {
            return TileConfig::fixedMxColSize;
        } else {
            return isBoxedLayout ? (isInnerRowMajor ? TileConfig::alignedSize / static_cast<int>(sizeof(DType))
                                                    : TileConfig::fixedColSize)
                                 : 1;
        }
    }
    static constexpr int InnerRows = getInnerRow();
    static constexpr int InnerCols = getInnerCol();
    static constexpr int InnerNumel = InnerRows * InnerCols;

    static_assert(Rows > 0 && Cols > 0, "Tile: Rows and Cols must be positive");
    static_assert(ValidRow == DYNAMIC || (ValidRow > 0 && ValidRow <= Rows),
                  "Tile: the static valid row count must be in [1, Rows] (or DYNAMIC)");
    static_assert(ValidCol == DYNAMIC || (ValidCol > 0 && ValidCol <= Cols),
                  "Tile: the static valid column count must be in [1, Cols] (or DYNAMIC)");
    static_assert(SFractalSize_ == TileConfig::fractalABSize || SFractalSize_ == TileConfig::fractalCSize ||
                      SFractalSize_ == TileConfig::fractalMxSize,
                  "Tile: SFractalSize must be 512, 1024 or 32");
    static_assert(!isBoxedLayout || Cols % InnerCols == 0,
                  "Tile: a boxed layout needs Cols to be a multiple of the box's columns");
    static_assert(!isBoxedLayout || Rows % InnerRows == 0,
                  "Tile: a boxed layout needs Rows to be a multiple of the box's rows (this CPU header does "
                  "not model partial boxes)");
    static_assert(isBoxedLayout || !isRowMajor || (Cols * sizeof(DType)) % TileConfig::alignedSize == 0,
                  "Tile: an unboxed RowMajor tile needs Cols * sizeof(DType) to be a multiple of 32 bytes");
    static_assert(isBoxedLayout || isRowMajor || (Rows * sizeof(DType)) % TileConfig::alignedSize == 0,
                  "Tile: an unboxed ColMajor tile needs Rows * sizeof(DType) to be a multiple of 32 bytes");

    using TileDType = DType*;

    // Static valid shape, or dynamic extents to be set before the first instruction reads them.
    AICORE Tile() {}

    template <int RowMask = ValidRow, int ColMask = ValidCol>
    AICORE Tile(std::enable_if_t<RowMask == DYNAMIC && ColMask == DYNAMIC, unsigned> VR,
                std::enable_if_t<RowMask == DYNAMIC && ColMask == DYNAMIC, unsigned> VC) {
        SetValidShape(VR, VC);
    }

    template <int RowMask = ValidRow, int ColMask = ValidCol>
    AICORE Tile(std::enable_if_t<(RowMask == DYNAMIC) && (ColMask > 0), unsigned> VR) {
        SetValidRow(VR);
    }

    template <int RowMask = ValidRow, int ColMask = ValidCol>
    AICORE Tile(std::enable_if_t<(RowMask > 0) && (ColMask == DYNAMIC), unsigned> VC) {
        SetValidCol(VC);
    }

    unsigned RowMaskInternal = cpu::kUnsetExtent;
    unsigned ColMaskInternal = cpu::kUnsetExtent;

    template <int RowMask = ValidRow>
    AICORE static constexpr std::enable_if_t<(RowMask > 0), unsigned> GetValidRow() {
        return RowMask;
    }
    template <int RowMask = ValidRow>
    AICORE std::enable_if_t<RowMask == DYNAMIC, unsigned> GetValidRow() const {
        if (RowMaskInternal == cpu::kUnsetExtent) {
            cpu::fail("a tile with a DYNAMIC valid row count is used before the count was set");
        }
        return RowMaskInternal;
    }

    template <int ColMask = ValidCol>
    AICORE static constexpr std::enable_if_t<(ColMask > 0), unsigned> GetValidCol() {
        return ColMask;
    }
    template <int ColMask = ValidCol>
    AICORE std::enable_if_t<ColMask == DYNAMIC, unsigned> GetValidCol() const {
        if (ColMaskInternal == cpu::kUnsetExtent) {
            cpu::fail("a tile with a DYNAMIC valid column count is used before the count was set");
        }
        return ColMaskInternal;
    }

    AICORE void SetValidRow(unsigned rowMask) {
        static_assert(ValidRow == DYNAMIC, "SetValidRow: only a DYNAMIC valid row count can be set");
        if (rowMask == 0 || rowMask > static_cast<unsigned>(Rows)) {
            cpu::fail("a tile's valid row count must be in [1, %d], got %u", Rows, rowMask);
        }
        RowMaskInternal = rowMask;
    }
    AICORE void SetValidCol(unsigned colMask) {
        static_assert(ValidCol == DYNAMIC, "SetValidCol: only a DYNAMIC valid column count can be set");
        if (colMask == 0 || colMask > static_cast<unsigned>(Cols)) {
            cpu::fail("a tile's valid column count must be in [1, %d], got %u", Cols, colMask);
        }
        ColMaskInternal = colMask;
    }
    AICORE void SetValidShape(unsigned rowMask, unsigned colMask) {
        SetValidRow(rowMask);
        SetValidCol(colMask);
    }

    AICORE TileDType& data() { return data_; }
    AICORE const TileDType& data() const { return data_; }

private:
    friend struct cpu::Access;
    TileDType data_ = nullptr;
};

// The cube operand tiles, with the fractal layouts the CPU simulation of the real library uses.
template <typename Element_, const int Rows_, const int Cols_, const int RowValid_ = Rows_,
          const int ColValid_ = Cols_>
using TileLeft = Tile<TileType::Left, Element_, Rows_, Cols_, BLayout::ColMajor, RowValid_, ColValid_,
                      SLayout::RowMajor, TileConfig::fractalABSize>;

template <typename Element_, const int Rows_, const int Cols_, const int RowValid_ = Rows_,
          const int ColValid_ = Cols_>
using TileRight = Tile<TileType::Right, Element_, Rows_, Cols_, BLayout::RowMajor, RowValid_, ColValid_,
                       SLayout::ColMajor, TileConfig::fractalABSize>;

template <typename Element_, const int Rows_, const int Cols_, const int RowValid_ = Rows_,
          const int ColValid_ = Cols_>
using TileAcc = Tile<TileType::Acc, Element_, Rows_, Cols_, BLayout::ColMajor, RowValid_, ColValid_,
                     SLayout::RowMajor, TileConfig::fractalCSize>;

// ------------------------------------------------------------------------------------------------
// GM views

template <std::int64_t N1 = DYNAMIC, std::int64_t N2 = DYNAMIC, std::int64_t N3 = DYNAMIC, std::int64_t N4 = DYNAMIC,
          std::int64_t N5 = DYNAMIC>
struct Shape {
    static constexpr std::int64_t staticShape[5] = {N1, N2, N3, N4, N5};
    static constexpr int dynamicCount = (N1 == DYNAMIC) + (N2 == DYNAMIC) + (N3 == DYNAMIC) + (N4 == DYNAMIC) +
                                        (N5 == DYNAMIC);

    // All five given: the dynamic entries are taken from their positions, the rest ignored.
    Shape(std::int64_t n1, std::int64_t n2, std::int64_t n3, std::int64_t n4, std::int64_t n5) {
        const std::int64_t given[5] = {n1, n2, n3, n4, n5};
        for (int d = 0; d < 5; ++d) {
            shape[d] = staticShape[d] == DYNAMIC ? given[d] : staticShape[d];
        }
    }
    Shape() { fill_dynamic(nullptr, 0); }
    // Fewer arguments: exactly one per dynamic entry, in order.
    Shape(std::int64_t n) {
        static_assert(dynamicCount == 1, "Shape: a 1-argument constructor needs exactly 1 DYNAMIC entry");
        const std::int64_t v[] = {n};
        fill_dynamic(v, 1);
    }
    Shape(std::int64_t n1, std::int64_t n2) {
        static_assert(dynamicCount == 2, "Shape: a 2-argument constructor needs exactly 2 DYNAMIC entries");
        const std::int64_t v[] = {n1, n2};
        fill_dynamic(v, 2);
    }
    Shape(std::int64_t n1, std::int64_t n2, std::int64_t n3) {
        static_assert(dynamicCount == 3, "Shape: a 3-argument constructor needs exactly 3 DYNAMIC entries");
        const std::int64_t v[] = {n1, n2, n3};
        fill_dynamic(v, 3);
    }
    Shape(std::int64_t n1, std::int64_t n2, std::int64_t n3, std::int64_t n4) {
        static_assert(dynamicCount == 4, "Shape: a 4-argument constructor needs exactly 4 DYNAMIC entries");
        const std::int64_t v[] = {n1, n2, n3, n4};
        fill_dynamic(v, 4);
    }

    std::int64_t shape[5];

private:
    void fill_dynamic(const std::int64_t* values, int count) {
        int next = 0;
        for (int d = 0; d < 5; ++d) {
            shape[d] = staticShape[d] != DYNAMIC ? staticShape[d] : (next < count ? values[next++] : 1);
        }
    }
};

template <std::int64_t SN1 = DYNAMIC, std::int64_t SN2 = DYNAMIC, std::int64_t SN3 = DYNAMIC,
          std::int64_t SN4 = DYNAMIC, std::int64_t SN5 = DYNAMIC>
struct Stride {
    static constexpr std::int64_t staticStride[5] = {SN1, SN2, SN3, SN4, SN5};
    static constexpr int dynamicCount = (SN1 == DYNAMIC) + (SN2 == DYNAMIC) + (SN3 == DYNAMIC) +
                                        (SN4 == DYNAMIC) + (SN5 == DYNAMIC);

    Stride(std::int64_t n1, std::int64_t n2, std::int64_t n3, std::int64_t n4, std::int64_t n5) {
        const std::int64_t given[5] = {n1, n2, n3, n4, n5};
        for (int d = 0; d < 5; ++d) {
            stride[d] = staticStride[d] == DYNAMIC ? given[d] : staticStride[d];
        }
    }
    Stride() { fill_dynamic(nullptr, 0); }
    Stride(std::int64_t n) {
        static_assert(dynamicCount == 1, "Stride: a 1-argument constructor needs exactly 1 DYNAMIC entry");
        const std::int64_t v[] = {n};
        fill_dynamic(v, 1);
    }
    Stride(std::int64_t n1, std::int64_t n2) {
        static_assert(dynamicCount == 2, "Stride: a 2-argument constructor needs exactly 2 DYNAMIC entries");
        const std::int64_t v[] = {n1, n2};
        fill_dynamic(v, 2);
    }
    Stride(std::int64_t n1, std::int64_t n2, std::int64_t n3) {
        static_assert(dynamicCount == 3, "Stride: a 3-argument constructor needs exactly 3 DYNAMIC entries");
        const std::int64_t v[] = {n1, n2, n3};
        fill_dynamic(v, 3);
    }
    Stride(std::int64_t n1, std::int64_t n2, std::int64_t n3, std::int64_t n4) {
        static_assert(dynamicCount == 4, "Stride: a 4-argument constructor needs exactly 4 DYNAMIC entries");
        const std::int64_t v[] = {n1, n2, n3, n4};
        fill_dynamic(v, 4);
    }

    std::int64_t stride[5];

private:
    void fill_dynamic(const std::int64_t* values, int count) {
        int next = 0;
        for (int d = 0; d < 5; ++d) {
            stride[d] = staticStride[d] != DYNAMIC ? staticStride[d] : (next < count ? values[next++] : 1);
        }
    }
};

// GM data seen as 5 dimensions (B, H, W, R, C); strides count elements.
template <typename Element_, typename Shape_, typename Stride_, Layout Layout_ = Layout::ND>
struct GlobalTensor {
    using Shape = Shape_;
    using Stride = Stride_;
    using DType = Element_;
    static constexpr Layout layout = Layout_;
    static constexpr std::int64_t staticShape[5] = {Shape_::staticShape[0], Shape_::staticShape[1], Shape_::staticShape[2],
                                           Shape_::staticShape[3], Shape_::staticShape[4]};
    static constexpr std::int64_t staticStride[5] = {Stride_::staticStride[0], Stride_::staticStride[1],
                                            Stride_::staticStride[2], Stride_::staticStride[3],
                                            Stride_::staticStride[4]};

    AICORE GlobalTensor(DType* data, const Shape& shape = Shape(1, 1, 1, 1, 1),
                        const Stride& stride = Stride(1, 1, 1, 1, 1))
        : data_(data), shape_(shape), stride_(stride) {}

    AICORE std::int64_t GetShape(const int dim) const {
        return dim >= 0 && dim < GlobalTensorDim::TOTAL_DIM ? shape_.shape[dim] : -1;
    }
    AICORE std::int64_t GetStride(const int dim) const {
        return dim >= 0 && dim < GlobalTensorDim::TOTAL_DIM ? stride_.stride[dim] : -1;
    }
    template <int dim>
    AICORE static constexpr std::int64_t GetShape() {
        static_assert(dim >= 0 && dim < GlobalTensorDim::TOTAL_DIM, "GetShape: dim must be in [0, 4]");
        static_assert(staticShape[dim] != DYNAMIC, "GetShape<dim>: the dimension is DYNAMIC");
        return staticShape[dim];
    }
    template <int dim>
    AICORE static constexpr std::int64_t GetStride() {
        static_assert(dim >= 0 && dim < GlobalTensorDim::TOTAL_DIM, "GetStride: dim must be in [0, 4]");
        static_assert(staticStride[dim] != DYNAMIC, "GetStride<dim>: the dimension is DYNAMIC");
        return staticStride[dim];
    }

    AICORE DType* data() { return data_; }

private:
    friend struct cpu::Access;
    DType* data_;
    Shape shape_;
    Stride stride_;
};

// 2-D helpers: the shape and the dense strides of a rows x cols matrix in GM.
template <typename T, int rows = DYNAMIC, int cols = DYNAMIC, Layout Layout_ = Layout::ND>
struct TileShape2D;

template <typename T, int rows, int cols>
struct TileShape2D<T, rows, cols, Layout::ND> : Shape<1, 1, 1, rows, cols> {
    using Parent = Shape<1, 1, 1, rows, cols>;
    TileShape2D() : Parent() {}
    TileShape2D(std::int64_t dynamicRows, std::int64_t dynamicCols) : Parent(1, 1, 1, dynamicRows, dynamicCols) {}
    using Parent::Parent;
};

template <typename T, int rows, int cols>
struct TileShape2D<T, rows, cols, Layout::DN> : Shape<1, 1, 1, rows, cols> {
    using Parent = Shape<1, 1, 1, rows, cols>;
    TileShape2D() : Parent() {}
    TileShape2D(std::int64_t dynamicRows, std::int64_t dynamicCols) : Parent(1, 1, 1, dynamicRows, dynamicCols) {}
    using Parent::Parent;
};

template <typename T, int rows = DYNAMIC, int cols = DYNAMIC, Layout Layout_ = Layout::ND>
struct BaseShape2D;

namespace cpu {
constexpr int product_or_dynamic(int a, int b) { return a == DYNAMIC || b == DYNAMIC ? DYNAMIC : a * b; }
}  // namespace cpu

template <typename T, int rows, int cols>
struct BaseShape2D<T, rows, cols, Layout::ND>
    : Stride<cpu::product_or_dynamic(rows, cols), cpu::product_or_dynamic(rows, cols),
             cpu::product_or_dynamic(rows, cols), cols, 1> {
    static constexpr int rc = cpu::product_or_dynamic(rows, cols);
    using Parent = Stride<rc, rc, rc, cols, 1>;
    BaseShape2D() : Parent() {}
    BaseShape2D(std::int64_t r, std::int64_t c) : Parent(r * c, r * c, r * c, c, 1) {}
    using Parent::Parent;
};

template <typename T, int rows, int cols>
struct BaseShape2D<T, rows, cols, Layout::DN>
    : Stride<cpu::product_or_dynamic(rows, cols), cpu::product_or_dynamic(rows, cols),
             cpu::product_or_dynamic(rows, cols), 1, rows> {
    static constexpr int rc = cpu::product_or_dynamic(rows, cols);
    using Parent = Stride<rc, rc, rc, 1, rows>;
    BaseShape2D() : Parent() {}
    BaseShape2D(std::int64_t r, std::int64_t c) : Parent(r * c, r * c, r * c, 1, r) {}
    using Parent::Parent;
};

// ------------------------------------------------------------------------------------------------
// Traits

template <typename T>
struct is_tile : std::false_type {};
template <TileType L, typename E, int R, int C, BLayout B, int VR, int VC, SLayout S, int SZ, PadValue P, CompactMode M>
struct is_tile<Tile<L, E, R, C, B, VR, VC, S, SZ, P, M>> : std::true_type {};

template <typename T>
struct is_global : std::false_type {};
template <typename E, typename Sh, typename St, Layout L>
struct is_global<GlobalTensor<E, Sh, St, L>> : std::true_type {};

template <typename T>
constexpr bool is_tile_data_v = is_tile<std::remove_cv_t<T>>::value;
template <typename T>
constexpr bool is_global_data_v = is_global<std::remove_cv_t<T>>::value;

namespace cpu {

// Where element (r, c) of a tile sits, in elements from the tile's start. Unboxed tiles are plain
// row- or column-major; boxed tiles order their boxes by BLayout and the elements of a box by SLayout.
template <typename TileT>
constexpr std::size_t element_offset(std::size_t r, std::size_t c) {
    if constexpr (!TileT::isBoxedLayout) {
        return TileT::isRowMajor ? r * TileT::Cols + c : c * TileT::Rows + r;
    } else {
        constexpr std::size_t inner_rows = TileT::InnerRows;
        constexpr std::size_t inner_cols = TileT::InnerCols;
        const std::size_t box_row = r / inner_rows;
        const std::size_t box_col = c / inner_cols;
        const std::size_t box = TileT::isRowMajor ? box_row * (TileT::Cols / inner_cols) + box_col
                                                  : box_col * (TileT::Rows / inner_rows) + box_row;
        const std::size_t in_r = r % inner_rows;
        const std::size_t in_c = c % inner_cols;
        const std::size_t inner = TileT::isInnerRowMajor ? in_r * inner_cols + in_c : in_c * inner_rows + in_r;
        return box * inner_rows * inner_cols + inner;
    }
}

struct Access {
    template <typename TileT>
    static void bind_tile(TileT& tile, void* storage) {
        tile.data_ = static_cast<typename TileT::DType*>(storage);
    }
    template <typename GlobalT, typename Ptr>
    static void bind_global(GlobalT& tensor, Ptr ptr) {
        tensor.data_ = ptr;
    }
    template <typename GlobalT>
    static const std::int64_t* shape(const GlobalT& tensor) {
        return tensor.shape_.shape;
    }
    template <typename GlobalT>
    static const std::int64_t* stride(const GlobalT& tensor) {
        return tensor.stride_.stride;
    }
};

// A tile's elements, or a loud failure when TASSIGN never placed it.
template <typename TileT>
inline typename TileT::DType* elements(TileT& tile, const char* op) {
    typename TileT::DType* p = tile.data();
    if (p == nullptr) {
        fail("%s: a tile in %s is used before TASSIGN placed it", op, space_name(TileT::Loc));
    }
    return p;
}

// Element-wise ops read their sources at the destination's indices; the region must at least lie
// inside the source's storage, or the read would leave the tile.
template <typename TileT>
inline void require_covers(unsigned rows, unsigned cols, const char* op, const char* operand) {
    if (rows > static_cast<unsigned>(TileT::Rows) || cols > static_cast<unsigned>(TileT::Cols)) {
        fail("%s: %s is a %dx%d tile, too small for the %ux%u region the instruction covers", op, operand,
             TileT::Rows, TileT::Cols, rows, cols);
    }
}

}  // namespace cpu

// ------------------------------------------------------------------------------------------------
// TASSIGN: place a tile at a byte address of its memory space, or point a GlobalTensor at GM.

template <typename T, typename AddrType>
AICORE inline void TASSIGN(T& obj, AddrType addr) {
    if constexpr (is_tile_data_v<T>) {
        static_assert(std::is_integral_v<AddrType>, "TASSIGN: a tile's address must be an integral byte offset");
        const long long offset = static_cast<long long>(addr);
        constexpr std::size_t bytes = sizeof(typename T::DType) * static_cast<std::size_t>(T::Numel);
        cpu::Access::bind_tile(obj, cpu::place(T::Loc, offset, bytes));
    } else if constexpr (is_global_data_v<T>) {
        static_assert(std::is_pointer_v<AddrType>, "TASSIGN: a GlobalTensor's address must be a pointer");
        static_assert(std::is_convertible_v<AddrType, typename T::DType*>,
                      "TASSIGN: the pointer's element type must be the GlobalTensor's DType");
        cpu::Access::bind_global(obj, addr);
    } else {
        static_assert(cpu::always_false<T>, "TASSIGN: the object must be a Tile or a GlobalTensor");
    }
}

}  // namespace pto

#endif
