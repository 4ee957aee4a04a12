"""Branches on integers as loops of 0 or 1 trips, so a loop holding them may run inside a kernel.

Partitioning keeps an ``if`` in the control program (the kernel emitter writes loops, not
branches, and the sync pass balances flags per loop body). The branches left once loops are
peeled (``passes/paths.py``: the first iteration runs when ``n >= 1``, the last when ``n >= 2``,
the first is also the last when ``n == 1``) compare integers only: trip counts, loop indices,
dims and elements of integer tensors. Such a condition has a 0/1 value that is an integer
expression (``a >= b`` is ``min(max(a - b + 1, 0), 1)`` on integers), and ``if c: A else: B``
runs as ``loop(c): A`` then ``loop(1 - c): B``. The condition names only scalars bound before
the branch, which neither arm can rebind, so both loops see the value the branch would.
A condition on a float (a scalar parameter, a float element) stays a branch.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import sym
from ..dtypes import DTYPES
from ..ir import Op

# what a 0/1 integer expression of ``a OP b`` is, for integers a and b (d = a - b)
_COMPARE = {
    ">=": lambda d: sym.min_(sym.max_(sym.add(d, 1), 0), 1),
    ">": lambda d: sym.min_(sym.max_(d, 0), 1),
    "<=": lambda d: sym.min_(sym.max_(sym.sub(1, d), 0), 1),
    "<": lambda d: sym.min_(sym.max_(sym.neg(d), 0), 1),
    # (min with 1: what proves the loop runs at most once, passes/merge.py at_most_once)
    "==": lambda d: sym.min_(sym.max_(sym.sub(1, sym.max_(d, sym.neg(d))), 0), 1),
    "!=": lambda d: sym.min_(sym.max_(d, sym.neg(d)), 1),
}
_INTEGER_OPS = frozenset({"+", "-", "*", "//", "%", "cdiv"})
_INTEGER_CALLS = frozenset({"min", "max", "cdiv"})


def _integer(e: sym.Expr, dtypes: Mapping[str, str]) -> bool:
    """Whether ``e`` has an integer value: integer constants and symbols (a symbol not in
    ``dtypes`` is a dim or a loop index), and + - * // % cdiv min max of such."""
    if isinstance(e, bool) or isinstance(e, float):
        return False
    if isinstance(e, int):
        return True
    if isinstance(e, sym.Sym):
        dtype = DTYPES.get(dtypes.get(e.name, "i64"))
        return dtype is not None and not dtype.is_float
    if isinstance(e, sym.NegExpr):
        return _integer(e.operand, dtypes)
    if isinstance(e, sym.BinExpr):
        return e.op in _INTEGER_OPS and _integer(e.left, dtypes) and _integer(e.right, dtypes)
    if isinstance(e, sym.CallExpr):
        return e.fn in _INTEGER_CALLS and all(_integer(a, dtypes) for a in e.args)
    return False


def trips_of(cond: sym.Expr, dtypes: Mapping[str, str]) -> sym.Expr | None:
    """The condition as an integer expression that is 1 where it holds and 0 where not, or None
    when it is not a comparison of integers (``dtypes``: the scalar symbols' element types)."""
    if isinstance(cond, bool):
        return int(cond)
    if isinstance(cond, sym.CallExpr) and cond.fn == "not":
        inner = trips_of(cond.args[0], dtypes)
        return None if inner is None else sym.sub(1, inner)
    if not isinstance(cond, sym.BinExpr):
        return None
    if cond.op in ("and", "or"):
        a, b = trips_of(cond.left, dtypes), trips_of(cond.right, dtypes)
        if a is None or b is None:
            return None
        return sym.min_(a, b) if cond.op == "and" else sym.max_(a, b)
    if cond.op in _COMPARE and _integer(cond.left, dtypes) and _integer(cond.right, dtypes):
        return _COMPARE[cond.op](sym.sub(cond.left, cond.right))
    return None


def as_loops(ops: list[Op], dtypes: Mapping[str, str], counter: list[int], nested: bool = False) -> list[Op]:
    """``ops`` with every branch on integers inside a loop of the user's turned into loops of 0 or
    1 trips. A branch outside every loop stays: it chooses between versions of whole kernels (a
    one-pass row loop or the multi-pass one, ``passes/tile_fit.py``), each of which may run as
    blocks, which one kernel holding both could not."""
    out: list[Op] = []
    for op in ops:
        inner = nested or (op.name == "loop" and op.attrs.get("kind") is None)
        op.regions = [as_loops(r, dtypes, counter, inner) for r in op.regions]
        trips = trips_of(op.attrs["cond"], dtypes) if op.name == "if" and nested else None
        if trips is None:
            out.append(op)
            continue
        for arm, count in zip(op.regions, (trips, sym.sub(1, trips))):
            if not arm or count == 0:
                continue
            index = f"_br{counter[0]}"
            counter[0] += 1
            out.append(Op("loop", [], {"index": index, "lo": 0, "hi": count, "step": 1, "name": index,
                                       "kind": "peeled"}, [], [arm], op.span))
    return out


__all__ = ["as_loops", "trips_of"]
