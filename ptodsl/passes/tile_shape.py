"""Tile shapes every backend can express.

pto-isa tiles are 2-D: a tile of rank 3 or 4 is stored as rows (the product of every dim but the
last) of its last dim, and each instruction works on a valid region of whole rows. Two things
the Tile IR could otherwise hold have no such region:

- a row dim after the first whose tile may be partial (``[2, 4, 64]`` valid ``[2, 3, 64]``: rows
  0-2 and 4-6 of 8). The dims before the innermost such dim are then tiled by 1, so the partial
  dim is the outermost of the tile's rows;
- an operand that broadcasts along some row dims of the tile but not along others (``[2, 1, 64]``
  spread over ``[2, 4, 64]``): neither one value per row (TROWEXPAND) nor one row for all
  (TCOLEXPAND). The row dims before the innermost run of dims the operand treats alike are then
  tiled by 1.

Both only shrink tiles (more grid steps, the same work); a spec's schedule never makes a
kernel the C++ emitter refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import sym


def _tile_extent(s: sym.Expr, t: int) -> int:
    return min(t, s) if sym.is_const(s) else t


def _may_be_partial(s: sym.Expr, v: sym.Expr, t: int) -> bool:
    """Whether some tile of a grid of ``t`` over a valid extent ``v`` covers less than ``t``."""
    return not (sym.is_const(v) and v % t == 0)


def whole_rows(shape: Sequence[sym.Expr], valid: Sequence[sym.Expr], tile: Sequence[int],
               operands: Sequence[Sequence[sym.Expr]] = ()) -> tuple[int, ...]:
    """``tile`` with the row dims tiled by 1 that keep every tile's valid region whole rows and
    every operand's broadcast one TROWEXPAND or TCOLEXPAND (``operands``: their shapes, aligned
    to ``shape``'s rank or shorter)."""
    n = len(tile)
    ts = [_tile_extent(s, t) for s, t in zip(shape, tile)]
    start = 0  # row dims before it are tiled by 1
    for k in range(n - 1):
        if ts[k] > 1 and _may_be_partial(shape[k], valid[k], ts[k]):
            start = k
    for oshape in operands:
        pad = n - len(oshape)
        spread = [k < pad or (oshape[k - pad] == 1 and shape[k] != 1) for k in range(n)]
        rows = [k for k in range(start, n - 1) if ts[k] > 1]
        if not rows:
            continue
        j = len(rows) - 1
        while j > 0 and spread[rows[j - 1]] == spread[rows[-1]]:
            j -= 1
        start = max(start, rows[j])
    return tuple(1 if k < start else t for k, t in enumerate(tile))


__all__ = ["whole_rows"]
