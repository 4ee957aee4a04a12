"""The tiles of rank-3 and rank-4 tensors, as pto-isa can hold them.

A pto-isa tile is 2-D: a rank-3 or rank-4 tile folds its leading dims into rows. Its valid region
is then a rectangle only while every leading dim after the first one the tile spans (extent > 1)
is valid whole: a tail in a middle dim (a [2, 4, 64] tile over 7 rows of dim 1) leaves holes in
the folded rows, which no instruction can express. So a tile whose middle dims could end in a tail
keeps a single leading dim, the last but one, with the rows of all of them (:func:`whole_rows`);
the grid walks the other leading dims one index at a time.

Reductions need more (:func:`reduction_tile`): TROWSUM reduces the folded rows' columns, so the
last axis needs whole rows; TCOLSUM reduces the rows, which is a reduction over a leading axis
only when that axis is the tile's single leading dim.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from .. import sym


def _folded(tile: Sequence[int], keep: int) -> tuple[int, ...]:
    """``tile`` with all its rows on leading dim ``keep``."""
    out = [1] * len(tile)
    out[-1] = tile[-1]
    out[keep] = prod(tile[:-1])
    return tuple(out)


def whole_rows(tile: Sequence[int], shape: Sequence[sym.Expr], valid: Sequence[sym.Expr],
               skip_axis: int | None = None) -> tuple[int, ...]:
    """``tile``, or its rows folded onto the last but one dim when a leading dim after the first
    it spans may end in a tail (``skip_axis``: a dim the grid gives extent 1 anyway)."""
    rank = len(tile)
    if rank < 3:
        return tuple(tile)

    def spans(k: int) -> bool:
        return k != skip_axis and tile[k] > 1 and not (sym.is_const(shape[k]) and shape[k] == 1)

    lead = [k for k in range(rank - 1) if spans(k)]
    for k in lead[1:]:
        s, t = shape[k], tile[k]
        whole = sym.is_const(s) and (s <= t or s % t == 0) and valid[k] == s
        if not whole:
            return _folded(tile, rank - 2)
    return tuple(tile)


def reduction_tile(tile: Sequence[int], axis: int) -> tuple[int, ...]:
    """The tile a reduction over ``axis`` reads its input in: from rank 3 on, one leading dim,
    the reduced axis (a column reduction) or the last but one (a row reduction over whole rows),
    with as many rows as the schedule's tile has."""
    rank = len(tile)
    if rank < 3:
        return tuple(tile)
    return _folded(tile, axis if axis < rank - 1 else rank - 2)


__all__ = ["reduction_tile", "whole_rows"]
