"""Loops (Tensor IR -> Tensor IR): every statement runs inside a loop, as on the device.

Requires: a verified ``level tensor`` module.
Produces: top-level ops outside any loop are wrapped in an implicit ``loop(1)`` (``kind =
"implicit"``), and adjacent ``loop(1)``s, the user's and the implicit ones, merge into one, their
index replaced by 0 (PyPTO leaves that merge to the user). Loops with their own YAML schedule merge
only with loops of the same schedule, so a merge never changes how a body is tiled.
"""

from __future__ import annotations

import itertools

from ..check.paths import stays_top_level
from ..ir import Module, Op
from ..ir.schedule import schedule_of
from .context import Pass, PassContext
from .unroll import _Cloner


def _is_single(op: Op) -> bool:
    a = op.attrs
    return op.name == "loop" and a.get("kind") != "grid" and a["lo"] == 0 and a["hi"] == 1 and a["step"] == 1 \
        and "unroll_var" not in a


def _body_at_zero(op: Op) -> list[Op]:
    cloner = _Cloner({op.attrs["index"]: 0}, "", {})
    return [cloner.op(x) for x in op.regions[0]]


def wrap_top_level(ops: list[Op], counter) -> list[Op]:
    """Wrap each maximal run of top-level work in an implicit loop(1)."""
    body: list[Op] = []
    pending: list[Op] = []
    for op in ops + [None]:
        # a trip-count guard belongs to the loop right after it (the checker's model leaves it out);
        # a guard on an index's repeats reads a whole input, in the control program
        if op is None or stays_top_level(op.name, bool(pending)) or op.attrs.get("access") in ("trips", "repeat"):
            if pending:
                name = f"_top{next(counter)}"
                body.append(Op("loop", [], {"index": name, "lo": 0, "hi": 1, "step": 1, "name": name,
                                            "kind": "implicit"}, [], [pending], pending[0].span))
                pending = []
            if op is not None:
                body.append(op)  # loops, and declarations that every later loop may see
        else:
            pending.append(op)
    return body


def merge_implicit(ops: list[Op]) -> list[Op]:
    """Adjacent implicit ``loop(1)``s as one (a later pass moved what stood between them away)."""
    merged: list[Op] = []
    for op in ops:
        prev = merged[-1] if merged else None
        if prev is not None and all(_is_single(x) and x.attrs.get("kind") == "implicit" for x in (prev, op)):
            prev.regions[0] = _body_at_zero(prev) + _body_at_zero(op)
            continue
        merged.append(op)
    return merged


def merge_single_trip(ops: list[Op], loops: dict) -> list[Op]:
    merged: list[Op] = []
    for op in ops:
        prev = merged[-1] if merged else None
        if prev is not None and _is_single(prev) and _is_single(op) and \
                loops.get(prev.attrs["name"]) == loops.get(op.attrs["name"]):
            prev.regions[0] = _body_at_zero(prev) + _body_at_zero(op)
            continue
        merged.append(op)
    return merged


def run(module: Module, ctx: PassContext) -> Module:

    fresh = module.clone()
    counter = itertools.count()
    for f in fresh.funcs:
        f.body = merge_single_trip(wrap_top_level(f.body, counter), schedule_of(module).loops)
    return fresh


PASS = Pass("loops", "tensor", "tensor", run, frozenset(), frozenset({"in-loops"}))
