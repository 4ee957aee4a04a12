"""Tiles every backend can express.

pto-isa tiles are 2-D: a tile of rank 3 or 4 is stored as rows (the product of every dim but the
last) of its last dim, and each instruction works on a valid region of whole rows. A row dim whose
tile may be partial is handled by ``tile_rows.whole_rows``; here, the other case the Tile IR could
otherwise hold with no such region:

- an operand that broadcasts along some row dims of the tile but not along others (``[2, 1, 64]``
  spread over ``[2, 4, 64]``): neither one value per row (TROWEXPAND) nor one row for all
  (TCOLEXPAND). :func:`spread_rows` tiles the row dims before the innermost run of dims the
  operand treats alike by 1.

It only shrinks tiles (more grid steps, the same work); a spec's schedule never makes a kernel
the C++ emitter refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import sym


def _tile_extents(shape: Sequence[sym.Expr], tile: Sequence[int]) -> list[int]:
    return [min(t, s) if sym.is_const(s) else t for s, t in zip(shape, tile)]


def _ones_before(tile: Sequence[int], start: int) -> tuple[int, ...]:
    return tuple(1 if k < start else t for k, t in enumerate(tile))


def spread_rows(shape: Sequence[sym.Expr], tile: Sequence[int],
                operands: Sequence[Sequence[sym.Expr]]) -> tuple[int, ...]:
    """``tile`` with the row dims tiled by 1 that keep each operand's broadcast (``operands``:
    their shapes, aligned to ``shape`` from the right) one TROWEXPAND, TCOLEXPAND or copy."""
    n = len(tile)
    ts = _tile_extents(shape, tile)
    start = 0
    for oshape in operands:
        pad = n - len(oshape)
        spread = [k < pad or (oshape[k - pad] == 1 and shape[k] != 1) for k in range(n)]
        rows = [k for k in range(n - 1) if ts[k] > 1]
        if not rows:
            continue
        j = len(rows) - 1
        while j > 0 and spread[rows[j - 1]] == spread[rows[-1]]:
            j -= 1
        start = max(start, rows[j])
    return _ones_before(tile, start)


__all__ = ["spread_rows"]
