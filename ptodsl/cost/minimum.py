"""The compulsory GM traffic of a call: the bytes any correct kernel must move.

Every input is read once and every output written once, except a tensor the kernel touches only
through an index: the source of a gather (``index_select``, ``gather``) is read only at the
slices the index names, as many as the gather's result holds, and the destination of a
``scatter_update`` is written only at the slices its source fills (its other slices keep their
values, so it need not be read at all). Counting such a tensor whole would set the minimum far
above what an embedding lookup or a paged KV-cache write moves, and call a kernel faster than the
roofline.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import prod

from .. import sym
from ..dtypes import DTYPES
from ..ir import Func, Op

# (op, operand index of the indexed tensor, whether it is read; the bytes come from the result or
# from the operand named by the last element)
_INDEXED = {"index_select": (0, True), "gather": (0, True), "scatter_update": (0, False)}


def _bytes(shape, dtype: str, symbols: Mapping[str, int]) -> int:
    return prod(int(sym.evaluate(d, symbols)) for d in shape) * DTYPES[dtype].itemsize


def _touched(op: Op, symbols: Mapping[str, int]) -> int:
    """The bytes of the indexed tensor ``op`` moves: a gather's result, a scatter's source."""
    t = op.result.type if op.results else op.operands[2].type
    return _bytes(t.shape, t.dtype, symbols)


def compulsory_bytes(func: Func, symbols: Mapping[str, int]) -> int:
    """The compulsory GM bytes of a call of ``func`` (a tensor-level kernel) with dims ``symbols``
    (module docstring)."""
    indexed: dict[str, list[Op]] = {}
    other: set[str] = set()
    for op in func.walk():
        for i, v in enumerate(op.operands):
            if _INDEXED.get(op.name, (None,))[0] == i:
                indexed.setdefault(v.name, []).append(op)
            else:
                other.add(v.name)
    total = 0
    for p in func.params:
        if not p.is_tensor:
            continue
        ops = indexed.get(p.name, [])
        if ops and p.name not in other:
            reads = [o for o in ops if _INDEXED[o.name][1]]
            writes = [o for o in ops if not _INDEXED[o.name][1]]
            whole = _bytes(p.type.shape, p.type.dtype, symbols)
            if p.mode != "out":
                total += min(whole, sum(_touched(o, symbols) for o in reads))
            if p.mode != "in":
                total += min(whole, sum(_touched(o, symbols) for o in writes))
            continue
        whole = _bytes(p.type.shape, p.type.dtype, symbols)
        total += whole * ((p.mode != "out") + (p.mode != "in"))
    return total


__all__ = ["compulsory_bytes"]
