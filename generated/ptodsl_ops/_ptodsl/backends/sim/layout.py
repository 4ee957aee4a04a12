"""The simulator's meaning of the layout ops' tile and GM families (``ir/opdefs.py``)."""

from __future__ import annotations

import numpy as np

from ...ir import Op
from . import SIM, Machine, SimError, _tiles, _timed


@SIM.on("permute")
def _permute(m: Machine, op: Op) -> None:
    # a numpy view: the same memory with its axes in another order, as the C++ strides label it
    base = m.tensors[op.operands[0].name]
    m.tensors[op.result.name] = np.transpose(base, [int(p) for p in op.attrs["perm"]])


@SIM.on("trans")
@_timed
def _trans(m: Machine, op: Op) -> None:
    """The source's valid region, its last two dims swapped, into the destination (TTRANS reads
    the source's valid rows and columns)."""
    dst, (src,) = _tiles(m, op)
    piece = np.swapaxes(src.data[src.region()], -1, -2)
    if tuple(piece.shape) != tuple(dst.valid):
        raise SimError(f"a transpose of a {list(src.valid)} region into a {list(dst.valid)} one", op)
    dst.data[dst.region()] = piece


@SIM.on("concat_tile")
@_timed
def _concat(m: Machine, op: Op) -> None:
    """b's valid columns right after a's, in the destination's valid rows (TCONCAT)."""
    dst, (a, b) = _tiles(m, op)
    rows = tuple(slice(0, v) for v in dst.valid[:-1])
    ca, cb = a.valid[-1], b.valid[-1]
    if ca + cb > dst.data.shape[-1]:
        raise SimError(f"a concat of {ca} and {cb} columns into a tile of {dst.data.shape[-1]}", op)
    dst.data[(*rows, slice(0, ca))] = a.data[(*rows, slice(0, ca))]
    dst.data[(*rows, slice(ca, ca + cb))] = b.data[(*rows, slice(0, cb))]
