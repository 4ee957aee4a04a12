"""Reduction set-up folding (Tile IR -> Tile IR, a helper of fusion and row interchange).

A reduction over a row is tiled as ``fill(acc, identity)`` before its column loop and
``combine(acc, acc, part)`` in it, ``part`` the reduction of one column tile. Where the column
loop provably runs exactly once (a row one tile wide: attention's KV block), the fill and the
combine are two vector instructions that compute ``acc = part``: the op that computes ``part``
writes ``acc`` instead, and both go. On the NPU a vector instruction on a ``[rows, 1]`` tile
costs its fixed issue cycles whatever its size, so each saved pair is about 90 cycles per row
block of attention's KV loop, two pairs (the max and the sum) per block.

The fold is exact: ``maximum(-inf, x)``, ``minimum(inf, x)`` and ``0 + x`` are ``x`` for every
``x`` (NaN included; ``0 + -0`` is ``+0``, which compares equal). It applies only when

- the fill's value is the combine's identity and nothing touches ``acc`` between them;
- the combine is the first op to touch ``acc`` after the fill, straight after it in the same
  region or at the top of the region of a grid loop between them that provably runs once;
- ``part`` has ``acc``'s type, is allocated in that region, is written by exactly one op
  between the fill and the combine and read by nothing else, and that op does not read ``acc``.
"""

from __future__ import annotations

import math

from .. import sym
from ..ir import Func, Op, Value
from ..ir.gm import walk_ops
from ..ir.opdefs import IR_OPS

# combine op -> the fill value it leaves unchanged
IDENTITY = {"tile.maximum": -math.inf, "tile.minimum": math.inf, "tile.add": 0.0}

Ranges = dict[str, tuple[sym.Expr, sym.Expr]]


def fold_reduction_inits(func: Func) -> int:
    """Fold, in place, every reduction set-up of ``func`` that qualifies; returns how many."""
    return _region(func.body, {})


def _region(ops: list[Op], ranges: Ranges) -> int:
    folded = 0
    for op in ops:
        if op.name == "loop":
            inner = dict(ranges)
            if op.attrs["step"] == 1:
                inner[op.attrs["index"]] = (op.attrs["lo"], sym.sub(op.attrs["hi"], 1))
            folded += sum(_region(r, inner) for r in op.regions)
        else:
            folded += sum(_region(r, ranges) for r in op.regions)
    i = 0
    while i < len(ops):
        if ops[i].name == "tile.fill" and _fold_at(ops, i, ranges):
            folded += 1
            continue  # ops[i] is now the op after the fill
        i += 1
    return folded


def _touches(op: Op, v: Value) -> bool:
    return any(x is v for o in op.walk() for x in o.operands)


def _fold_at(ops: list[Op], i: int, ranges: Ranges) -> bool:
    fill = ops[i]
    acc = fill.operands[0]
    j = next((k for k in range(i + 1, len(ops)) if _touches(ops[k], acc)), None)
    if j is None:
        return False
    body = ops
    at = j
    if ops[j].name == "loop":
        loop = ops[j]
        if loop.attrs.get("kind") != "grid" or not _runs_once(loop, ranges):
            return False
        body = loop.regions[0]
        at = next((k for k, o in enumerate(body) if _touches(o, acc)), None)
        if at is None:
            return False
    combine = body[at]
    part = _part(combine, acc, fill.attrs.get("scalar"))
    if part is None or part.type != acc.type:
        return False
    writers = [k for k, o in enumerate(body[:at]) if o.name in IR_OPS and IR_OPS[o.name].dest == 0
               and o.operands and o.operands[0] is part]
    if len(writers) != 1 or (body is ops and writers[0] < i):
        return False
    if not any(o.name == "tile.alloc" and o.results and o.results[0] is part for o in body):
        return False  # part may be read outside the region the check below walks
    producer = body[writers[0]]
    readers = [o for o in walk_ops(body) if o is not combine and o is not producer and _touches(o, part)
               and o.name != "tile.alloc"]
    if readers or any(x is part or x is acc for x in producer.operands[1:]) or producer.regions:
        return False
    producer.operands[0] = acc
    del body[at]
    del ops[i]
    return True


def _part(combine: Op, acc: Value, value: object) -> Value | None:
    """The operand ``combine`` folds into ``acc`` when it is ``acc = acc op part`` with ``value``
    its identity."""
    if combine.name not in IDENTITY or combine.attrs or len(combine.operands) != 3:
        return None
    if not isinstance(value, (int, float)) or float(value) != IDENTITY[combine.name]:
        return None
    dst, a, b = combine.operands
    if dst is not acc or (a is acc) == (b is acc):
        return None
    return b if a is acc else a


def _runs_once(loop: Op, ranges: Ranges) -> bool:
    a = loop.attrs
    trips = sym.sub(a["hi"], a["lo"])
    return a["step"] == 1 and sym.prove_le(trips, 1, ranges) and sym.prove_le(1, trips, ranges)


__all__ = ["IDENTITY", "fold_reduction_inits"]
