"""Loops (Tensor IR -> Tensor IR): every statement runs inside a loop, as on the device.

Requires: a verified ``level tensor`` module.
Produces: top-level ops outside any loop are wrapped in an implicit ``loop(1)`` (``kind =
"implicit"``), and adjacent ``loop(1)``s, the user's and the implicit ones, merge into one, their
index replaced by 0 (PyPTO leaves that merge to the user). Loops with their own YAML schedule merge
only with loops of the same schedule, so a merge never changes how a body is tiled.
"""

from __future__ import annotations

import itertools

from ..ir import Func, Module, Op
from .context import PassContext
from .unroll import _Cloner

def _is_single(op: Op) -> bool:
    a = op.attrs
    return op.name == "loop" and a.get("kind") != "grid" and a["lo"] == 0 and a["hi"] == 1 and a["step"] == 1 \
        and "unroll_var" not in a


def _body_at_zero(op: Op) -> list[Op]:
    cloner = _Cloner({op.attrs["index"]: 0}, "", {})
    return [cloner.op(x) for x in op.regions[0]]


def run(module: Module, ctx: PassContext) -> Module:
    from ..ir import parse

    fresh = parse(str(module))
    loops = ctx.spec.schedule.loops
    counter = itertools.count()
    for f in fresh.funcs:
        body: list[Op] = []
        run_ops: list[Op] = []

        def flush() -> None:
            if run_ops:
                name = f"_top{next(counter)}"
                body.append(Op("loop", [], {"index": name, "lo": 0, "hi": 1, "step": 1, "name": name,
                                            "kind": "implicit"}, [], [list(run_ops)], run_ops[0].span))
                run_ops.clear()

        for op in f.body:
            if op.name == "loop":
                flush()
                body.append(op)
            elif op.name in ("alloc", "view", "reshape") and not run_ops:
                body.append(op)  # declarations stay at the top level, visible to every loop
            else:
                run_ops.append(op)
        flush()
        merged: list[Op] = []
        for op in body:
            prev = merged[-1] if merged else None
            if prev is not None and _is_single(prev) and _is_single(op) and \
                    loops.get(prev.attrs["name"]) == loops.get(op.attrs["name"]):
                prev.regions[0] = _body_at_zero(prev) + _body_at_zero(op)
                prev.attrs = dict(prev.attrs) | {"hi": 1}
                continue
            merged.append(op)
        f.body = merged
    return fresh


__all__ = ["run", "Func"]
