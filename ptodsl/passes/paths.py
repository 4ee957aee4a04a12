"""Paths (Tensor IR -> Tensor IR): ``is_loop_begin``/``is_loop_end`` become peeled iterations.

Requires: a verified ``level tensor`` module (before unrolling).
Produces: a loop whose body branches on its own first or last iteration is split into the first
iteration, the middle iterations and the last iteration, each a copy of the body with those
branches decided, so the middle loop's body has no such branch and the compiled paths do not
multiply. With ``n`` the trip count: the first copy runs when ``n >= 1`` (and is also the last
when ``n == 1``), the middle loop runs ``n - 2`` times, the last copy runs when ``n >= 2``.
"""

from __future__ import annotations

from .. import sym
from ..check.paths import mentions, peel_plan
from ..ir import Module, Op
from .context import Pass, PassContext
from .unroll import _Cloner


def _decide(ops: list[Op], decisions: dict) -> list[Op]:
    """Inline the arm of every ``if`` whose condition is decided (or folded to a constant)."""
    out: list[Op] = []
    for op in ops:
        op.regions = [_decide(r, decisions) for r in op.regions]
        if op.name == "if":
            cond = decisions.get(op.attrs["cond"], op.attrs["cond"])
            if isinstance(cond, bool):
                out.extend(op.regions[0] if cond else op.regions[1])
                continue
            op.attrs = dict(op.attrs) | {"cond": cond}
        out.append(op)
    return out


def _copy(loop: Op, index_value: sym.Expr | None, decisions: dict, suffix: str) -> list[Op]:
    env = {} if index_value is None else {loop.attrs["index"]: index_value}
    if index_value is not None and "unroll_var" in loop.attrs:
        env[loop.attrs["unroll_var"]] = 1  # a peeled copy of a ``loop_unroll`` body handles one step
    cloner = _Cloner(dict(env), suffix, {})  # one cloner: later ops must see earlier copies
    body = [cloner.op(x) for x in loop.regions[0]]
    return _decide(body, {sym.substitute(k, env): v for k, v in decisions.items()})


def _defined(ops: list[Op]) -> set[str]:
    """The names of the values and read symbols the ops define, nested regions included."""
    out: set[str] = set()
    for op in ops:
        for o in op.walk():
            out.update(r.name for r in o.results)
            if "sym" in o.attrs:
                out.add(o.attrs["sym"])
    return out


def _suffix(names: set[str], which: str) -> str:
    """``_first``, unless a name of the body plus it is another name of the body: an inner loop
    peeled already left ``row`` and ``row_first`` in the middle copy, whose outer first copy
    would make two ``row_first`` (then ``_first2``, ...)."""
    suffix, k = f"_{which}", 1
    while any(n + suffix in names for n in names):
        k += 1
        suffix = f"_{which}{k}"
    return suffix


def peel(loop: Op) -> list[Op] | None:
    a = loop.attrs
    conds = [o.attrs["cond"] for op in loop.regions[0] for o in op.walk() if o.name == "if"]
    if not mentions(conds, a["index"], a["lo"], a["hi"], a["step"]):
        return None
    n, plan = peel_plan(a["index"], a["lo"], a["hi"], a["step"])
    names = _defined(loop.regions[0])
    first, middle, final = (_copy(loop, c.value, c.decisions, "" if c.value is None else _suffix(names, c.which))
                            for c in plan)
    span = loop.span
    mid_attrs = dict(a) | {"lo": sym.add(a["lo"], a["step"]), "hi": plan[2].value}
    name = a["name"]

    def single(body: list[Op], which: str) -> Op:
        # a one-trip loop keeps the loop's name around a peeled copy, so its schedule still applies
        index = f"_{a['index']}_{which}"
        return Op("loop", [], {"index": index, "lo": 0, "hi": 1, "step": 1, "name": name, "kind": "peeled"},
                  [], [body], span)

    return [
        Op("if", [], {"cond": sym.compare(">=", n, 1)}, [], [[single(first, "first")], []], span),
        Op("loop", [], mid_attrs, [], [middle], span),
        Op("if", [], {"cond": sym.compare(">=", n, 2)}, [], [[single(final, "last")], []], span),
    ]


def _region(ops: list[Op]) -> list[Op]:
    out: list[Op] = []
    for op in ops:
        op.regions = [_region(r) for r in op.regions]
        if op.name == "loop" and op.attrs.get("kind") != "grid":
            peeled = peel(op)
            if peeled is not None:
                out.extend(peeled)
                continue
        out.append(op)
    return out


def run(module: Module, ctx: PassContext) -> Module:
    del ctx

    fresh = module.clone()
    for f in fresh.funcs:
        f.body = _region(f.body)
    return fresh


PASS = Pass("paths", "tensor", "tensor", run, frozenset({"in-loops"}), frozenset({"peeled"}))
