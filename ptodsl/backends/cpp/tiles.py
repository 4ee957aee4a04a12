"""pto-isa tile types for the Block IR's ``tile.alloc`` results.

A tile has a logical shape of rank 1 to 4 and a physical 2-D storage shape chosen by the memory
plan (``rows`` x ``cols``, row-major; a column of per-row values is ``R`` rows of one block). pto-isa tiles are 2-D: rows are the product of
every logical dim but the last, columns the last dim. That mapping keeps a valid region
rectangular only while the valid region is whole rows of the inner dims, which
:func:`valid_2d` checks.

Cube tiles use the fractal layouts pto-isa's matmul path expects: ``Mat`` tiles in NZ layout
(column-major boxes of row-major 16 x 32-byte fractals) when loaded from row-major (ND) data, in
ZN layout when loaded from column-major (DN) data, which is how a transposed operand reaches the
cube; ``TileLeft`` / ``TileRight`` / ``TileAcc`` for L0A / L0B / L0C. A bias row is a one-row,
row-major ``Mat`` tile moved into a ``Bias`` tile (the bias table), as pto-isa's TMATMUL_BIAS
tests place it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import sym
from ...diagnostics import Span
from ...dtypes import itemsize
from ...ir import Op, TileType
from ...targets import Target
from .cxx import cxx_type, unsupported
from .kernel_mixed import AIV1_UB

SPACE_KIND = {"ub": "Vec", "l1": "Mat", "l0a": "Left", "l0b": "Right", "l0c": "Acc", "bt": "Bias"}


@dataclass
class TileInfo:
    value: str  # the IR value name
    var: str  # the C++ variable
    alias: str  # the C++ type alias
    tile_type: TileType
    rows: int  # physical storage shape
    cols: int
    offset: int | str  # bytes into its space; C++ for a second vector core's tile (kernel_mixed.AIV1_UB)
    span: Span | None
    transposed: bool = False  # a Mat tile holding its IR shape transposed (for a transposed TMOV)
    bias_row: bool = False  # a Mat tile holding a bias row on its way to the bias table (plain row-major)

    @property
    def kind(self) -> str:
        return SPACE_KIND[self.tile_type.space]

    @property
    def dtype(self) -> str:
        return self.tile_type.dtype

    @property
    def static_shape(self) -> tuple[int, int]:
        return (self.cols, self.rows) if self.transposed else (self.rows, self.cols)

    def valid(self) -> tuple[sym.Expr, sym.Expr]:
        """The 2-D valid extents, in the C++ tile's orientation."""
        vr, vc = valid_2d(self.tile_type, self.span)
        return (vc, vr) if self.transposed else (vr, vc)


def logical_2d(shape: tuple[int, ...]) -> tuple[int, int]:
    rows = 1
    for d in shape[:-1]:
        rows *= d
    return rows, shape[-1]


def valid_2d(t: TileType, span: Span | None) -> tuple[sym.Expr, sym.Expr]:
    """The valid rows and columns of a tile seen as 2-D (see the module docstring)."""
    if t.rank == 1:
        return 1, t.valid[0]
    row_valid = row_dims_valid(t)
    first = next((k for k, d in enumerate(t.shape[:-1]) if d != 1), None)
    if first is not None:
        for k in range(first + 1, t.rank - 1):
            if row_valid[k] != t.shape[k]:
                raise unsupported(
                    f"a rank-{t.rank} tile whose valid region is not whole inner rows "
                    f"(shape {list(t.shape)}, valid [{', '.join(map(sym.to_text, t.valid))}])", span)
    rows: sym.Expr = 1
    for v in row_valid:
        rows = sym.mul(rows, v)
    return rows, t.valid[-1]


def row_dims_valid(t: TileType) -> list[sym.Expr]:
    """Valid extents of the row dims; a dim of static size 1 holds exactly one index whenever the
    tile exists (an empty region has no tile), so its extent is 1."""
    return [1 if d == 1 else v for d, v in zip(t.shape[:-1], t.valid[:-1])]


def gm_extents(t: TileType) -> list[sym.Expr]:
    """Per logical dim, the extent the tile's GM transfer covers."""
    return [*row_dims_valid(t), t.valid[-1]] if t.rank > 1 else [t.valid[0]]


def describe(op: Op, var: str, alias: str) -> TileInfo:
    t: TileType = op.result.type
    if t.space not in SPACE_KIND:
        raise unsupported(f"tiles in `{t.space}`", op.span)
    if not 1 <= t.rank <= 4:
        raise unsupported(f"a rank-{t.rank} tile", op.span)
    rows, cols = int(op.attrs["rows"]), int(op.attrs["cols"])
    if op.attrs.get("layout", "row") != "row":
        raise unsupported(f"a {op.attrs['layout']}-major tile (the memory plan lays tiles out row-major)", op.span)
    lr, lc = logical_2d(t.shape)
    if rows < lr or cols < lc:
        raise unsupported(f"a tile stored as {rows}x{cols} for the logical shape {list(t.shape)}", op.span)
    if rows * cols * itemsize(t.dtype) != int(op.attrs.get("bytes", rows * cols * itemsize(t.dtype))):
        raise unsupported(f"a tile whose planned bytes differ from {rows}x{cols} {t.dtype}", op.span)
    offset: int | str = int(op.attrs.get("offset", 0))
    if op.attrs.get("aiv") == 1:
        offset = f"{AIV1_UB} + {offset}"
    return TileInfo(op.result.name, var, alias, t, rows, cols, offset, op.span)


def _extent(e: sym.Expr) -> str:
    return str(e) if isinstance(e, int) else "DYNAMIC"


def cxx_tile_type(info: TileInfo, target: Target) -> str:
    """The pto-isa type of a tile, checked against the API's compile-time rules first: an unboxed
    row (or column) is a whole number of UB blocks; boxed cube tiles are made of fractals of
    ``cube_fractal_rows`` rows of ``cube_c0_bytes`` bytes, all from the target."""
    align, fractal_rows = target.ub_block_bytes, target.cube_fractal_rows
    fractal_bytes = fractal_rows * target.cube_c0_bytes
    ctype = cxx_type(info.dtype)
    rows, cols = info.static_shape
    vr, vc = (_extent(v) for v in info.valid())
    size = itemsize(info.dtype)
    kind = info.kind
    if kind == "Vec":
        _require((cols * size) % align == 0, info, f"a row-major tile row of {cols * size} bytes")
        return f"Tile<TileType::Vec, {ctype}, {rows}, {cols}, BLayout::RowMajor, {vr}, {vc}>"
    if kind == "Bias" or info.bias_row:
        # a bias row: one row, a whole number of the bias table's bursts, no fractals (TMovToBt)
        _require(rows == 1 and (cols * size) % target.bias_row_bytes == 0, info, "a bias row of this shape")
        return f"Tile<TileType::{'Bias' if kind == 'Bias' else 'Mat'}, {ctype}, 1, {cols}, BLayout::RowMajor, 1, {vc}>"
    # Boxed cube layouts: 16-row fractals of 32 bytes (or the transpose for ZN / TileRight).
    c0 = target.cube_c0_bytes // size
    if kind == "Mat":
        if info.transposed:  # ZN: what a DN (column-major) load produces
            _require(rows % c0 == 0 and cols % fractal_rows == 0, info, "a ZN Mat tile of this shape")
            return (f"Tile<TileType::Mat, {ctype}, {rows}, {cols}, BLayout::RowMajor, {vr}, {vc}, "
                    f"SLayout::ColMajor, {fractal_bytes}>")
        _require(rows % fractal_rows == 0 and cols % c0 == 0, info, "an NZ Mat tile of this shape")
        return f"Tile<TileType::Mat, {ctype}, {rows}, {cols}, BLayout::ColMajor, {vr}, {vc}, SLayout::RowMajor, {fractal_bytes}>"
    if kind == "Left":
        _require(rows % fractal_rows == 0 and cols % c0 == 0, info, "a TileLeft of this shape")
        return f"TileLeft<{ctype}, {rows}, {cols}, {vr}, {vc}>"
    if kind == "Right":
        _require(rows % c0 == 0 and cols % fractal_rows == 0, info, "a TileRight of this shape")
        return f"TileRight<{ctype}, {rows}, {cols}, {vr}, {vc}>"
    _require(rows % fractal_rows == 0 and cols % fractal_rows == 0, info, "a TileAcc of this shape")
    return f"TileAcc<{ctype}, {rows}, {cols}, {vr}, {vc}>"


def scratch_type(dtype: str, rows: int, cols: int) -> str:
    """A row-major Vec scratch tile with a static, whole valid region."""
    return f"Tile<TileType::Vec, {cxx_type(dtype)}, {rows}, {cols}, BLayout::RowMajor>"


def _require(ok: bool, info: TileInfo, what: str) -> None:
    if not ok:
        rows, cols = info.static_shape
        raise unsupported(f"{what} ({rows}x{cols} {info.dtype} in {info.tile_type.space}); "
                          "pto-isa's layout rules reject it", info.span)


__all__ = ["TileInfo", "cxx_tile_type", "describe", "gm_extents", "logical_2d", "scratch_type", "valid_2d"]
