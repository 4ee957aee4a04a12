"""Tiling of the layout ops (``passes/tensorize_layout.py`` made them).

``permute`` (like ``view`` and ``reshape``) is GM bookkeeping of the control program and passes
through. ``transpose`` swaps the last two dims tile by tile: each output tile ``[.., r, c]`` (the
leading dims tiled by 1: pto-isa's TTRANS is 2-D) loads the source's ``[.., c, r]`` tile at the
mirrored offsets and transposes it. ``concat`` along the last dim, where the whole result row fits
one tile of the schedule's width, loads each part's tile of the row and joins them with TCONCAT,
so the row leaves as one tile (and a consumer of the same grid reads it from UB); otherwise each
part is copied tile by tile into its region of the result.
"""

from __future__ import annotations

from .. import sym
from ..dtypes import itemsize
from ..ir import Op, TensorType
from .tile import COMPUTE, TILING, _Tiler

TRANS, CONCAT = "TTRANS", "TCONCAT"


@TILING.on("permute")
def permute(self, op: Op, nxt: Op | None) -> None:
    self.emit(op)


# computations: stored straight into an assemble's region when that is their only use
TILING.on("transpose", "concat")(_Tiler.computation)


def _takes(self, instruction: str, op: Op, dtype: str) -> bool:
    """Whether the target's rule for ``instruction`` takes ``dtype``; E0608 when it does not."""
    rule = self.ctx.target.vector_rule(instruction)
    if rule is not None and rule.takes(dtype):
        return True
    self.unsupported(op, [instruction], dtype)
    return False


def _fit(self, tile: tuple[int, int], dtype: str) -> tuple[int, int]:
    """The output tile of a transpose, halved along its longer side while the source or the
    destination tile (rows of whole UB blocks) would span more elements than TTRANS indexes."""
    limit = self.ctx.target.vector_rule(TRANS).max_elements
    block = max(1, self.ctx.target.ub_block_bytes // itemsize(dtype))

    def span(r: int, c: int) -> int:
        return r * (-(-c // block) * block)

    r, c = tile
    while limit is not None and max(span(r, c), span(c, r)) > limit and max(r, c) > 1:
        r, c = (r // 2, c) if r >= c else (r, c // 2)
    return r, c


@COMPUTE.on("transpose")
def transpose(self, op: Op, dest) -> None:
    src = op.operands[0]
    rt: TensorType = op.result.type
    tile = self.vec_tile(rt.rank, op)
    if tile is None or not _takes(self, TRANS, op, rt.dtype):
        return
    tile = (1,) * (rt.rank - 2) + _fit(self, tuple(tile[-2:]), rt.dtype)
    tshape, offs, tvalid, depth = self.grid(rt.shape, rt.valid_shape, tile, op.span)
    # a tile dim of 1 inside the grid holds its one index: say so, so the C++ tile types of the
    # source and the destination mirror each other (TTRANS's rule) where an extent is static
    tvalid = [1 if t == 1 else v for t, v in zip(tshape, tvalid)]

    def swap(xs):
        return [*xs[:-2], xs[-1], xs[-2]]

    t_in = self.tile(rt.dtype, swap(tshape), swap(tvalid), op.span)
    self.emit(Op("tile.load", [t_in, src], {"offsets": tuple(swap(offs))}, span=op.span))
    t_out = self.tile(rt.dtype, tshape, tvalid, op.span)
    self.emit(Op("tile.trans", [t_out, t_in], {}, span=op.span))
    self.store(dest, t_out, offs, op.span)
    self.close(depth)


def _part_tiles(self, op: Op) -> list[int] | None:
    """Each concat part's tile width: its width, or inside a fit version (``passes/tile_fit.py``)
    the largest width its fit dims allow, where it provably has a column."""
    out = []
    for p in op.operands:
        w = p.type.shape[-1]
        if isinstance(w, int):
            out.append(w)
            continue
        wide = self.fit_width(w)
        if wide is None or not sym.prove_le(1, w, self.fit):
            return None
        out.append(wide)
    return out


def _row_concat(self, op: Op) -> int | None:
    """The width of the joined row's tile when TCONCAT can build it in one tile, else None."""
    rt: TensorType = op.result.type
    parts = op.operands
    if op.attrs["axis"] != rt.rank - 1 or len(parts) < 2:
        return None
    tiles = _part_tiles(self, op)
    if tiles is None:
        return None
    # every part whole along the row: a part of no valid column would be a tile of none, which
    # pto-isa refuses (the copies into regions skip it instead)
    if any(p.type.valid_shape[-1] != p.type.shape[-1]
           and not (self.fit and sym.prove_le(p.type.shape[-1], p.type.valid_shape[-1], self.fit)) for p in parts):
        return None
    tile = self.vec_tile(rt.rank, op)
    rule = self.ctx.target.vector_rule(CONCAT)
    if tile is None or rule is None or not rule.takes(rt.dtype):
        return None
    last = rt.shape[-1]
    if isinstance(last, int):
        return sum(tiles) if sum(tiles) <= tile[-1] else None
    # a runtime row inside a fit version: one tile of its fit width, or of the parts' tiles
    # together where their bounds add up to more (each is rounded up on its own)
    wide = self.fit_width(last)
    if wide is None or not sym.prove_le(last, wide, self.fit):
        return None
    block = max(1, self.ctx.target.ub_block_bytes // itemsize(rt.dtype))
    return max(wide, -(-sum(tiles) // block) * block)


@COMPUTE.on("concat")
def concat(self, op: Op, dest) -> None:
    rt: TensorType = op.result.type
    width = _row_concat(self, op)
    if width is not None:
        tile = tuple(self.vec_tile(rt.rank, op)[:-1]) + (width,)
        tshape, offs, tvalid, depth = self.grid(rt.shape, rt.valid_shape, tile, op.span)
        joined = None
        at, at_valid = 0, 0  # the joined tile's columns so far, and its valid columns
        for k, (part, w) in enumerate(zip(op.operands, _part_tiles(self, op))):
            pt: TensorType = part.type
            t = self.tile(pt.dtype, [*tshape[:-1], w], [*tvalid[:-1], pt.valid_shape[-1]], op.span)
            self.emit(Op("tile.load", [t, part], {"offsets": (*offs[:-1], 0)}, span=op.span))
            if joined is None:
                joined = t
            else:
                last = k == len(op.operands) - 1
                cols = width if last else at + w
                into = self.tile(rt.dtype, [*tshape[:-1], cols],
                                 tvalid if last else [*tvalid[:-1], sym.add(at_valid, pt.valid_shape[-1])], op.span)
                self.emit(Op("tile.concat", [into, joined, t], {}, span=op.span))
                joined = into
            at += w
            at_valid = sym.add(at_valid, pt.valid_shape[-1])
        self.store(dest, joined, offs, op.span)
        self.close(depth)
        return
    axis = op.attrs["axis"]
    at: sym.Expr = 0
    for part in op.operands:
        pt = part.type
        tile = self.vec_tile(pt.rank, op)
        if tile is None:
            return
        tshape, offs, tvalid, depth = self.grid(pt.shape, pt.valid_shape, tile, op.span)
        t = self.tile(pt.dtype, tshape, tvalid, op.span)
        self.emit(Op("tile.load", [t, part], {"offsets": tuple(offs)}, span=op.span))
        shifted = list(offs)
        shifted[axis] = sym.add(shifted[axis], at)
        self.store(dest, t, shifted, op.span)
        self.close(depth)
        at = sym.add(at, pt.shape[axis])


__all__ = ["concat", "permute", "transpose"]
