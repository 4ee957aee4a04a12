"""The simulator's meaning of the layout ops' tile and GM families (``ir/opdefs.py``)."""

from __future__ import annotations

import numpy as np

from ... import shapes
from ...ir import Op
from . import SIM, Machine, SimError, _tiles, _timed


def reshaped(base: np.ndarray, shape: tuple[int, ...], new_shape: tuple[int, ...]) -> np.ndarray:
    """``base`` (a tensor of ``shape``) under ``new_shape``, sharing its memory. A view that reaches
    past its parent holds only the part inside it (``_view``): its reshape keeps the same part,
    the rows of a clipped outermost dim merged with the whole dims inside it (the checker allows
    a partial dim no other way, E0832)."""
    if base.shape == shape:
        return base.reshape(new_shape)
    strides = shapes.reshape_strides(shape, [s // base.itemsize for s in base.strides], new_shape)
    if strides is None:
        raise SimError(f"a reshape of a {list(shape)} view to {list(new_shape)} that is no relabelling")
    inside = list(new_shape)
    for a, b, _ in shapes.reshape_groups(shape, new_shape):
        if len(b) == 1 and a:
            inside[b[0]] = base.shape[a[0]] * int(np.prod([shape[i] for i in a[1:]], dtype=np.int64))
        elif any(base.shape[i] != shape[i] for i in a):
            inside = [0] * len(new_shape)  # a clipped dim split: no part of it is valid
    return np.lib.stride_tricks.as_strided(base, tuple(inside), tuple(s * base.itemsize for s in strides))


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
