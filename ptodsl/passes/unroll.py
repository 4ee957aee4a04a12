"""Unroll: expand the YAML's ``unroll:`` lists and ``loop_unroll`` loops (Tensor IR -> Tensor IR).

Requires: a verified ``level tensor`` module; unroll factors validated by the checker.
Produces: for a loop with ``unroll: [4, 2, 1]``, one sub-loop per factor in descending order. The
sub-loop of factor f runs ``(remaining) // f`` times and holds f copies of the body (index
``lo + (base + u * f + c) * step`` in copy c); what remains falls to the smaller factors, and 1 is
always there, so every trip count, including a runtime one and zero, is covered exactly. A
``loop_unroll`` loop gets the same sub-loops, but with one body per iteration that handles ``k = f``
steps. Copies get fresh value names; the verifier's SSA rule holds after the pass.
"""

from __future__ import annotations

import itertools
from typing import Any

from .. import sym
from ..check.paths import unroll_factors
from ..ir import Func, Module, Op, TensorType, TileType, Value
from ..ir.schedule import schedule_of
from ..schedule import LoopSchedule
from .context import Pass, PassContext


def _subst_attr(v: Any, env: dict[str, sym.Expr]) -> Any:
    """Substitute inside any attribute value: names (strings) stay, every expression anywhere in a
    tuple, list or dict is rewritten, so no use of a loop index can be missed by attribute name."""
    if isinstance(v, str):
        return v
    if isinstance(v, (tuple, list)):
        return tuple(_subst_attr(x, env) for x in v)
    if isinstance(v, dict):
        return {k: _subst_attr(x, env) for k, x in v.items()}
    return sym.substitute(v, env)


def _subst_type(t, env):
    if isinstance(t, TensorType):
        valid = None if t.valid is None else tuple(sym.substitute(d, env) for d in t.valid)
        return TensorType(t.dtype, tuple(sym.substitute(d, env) for d in t.shape), valid)
    if isinstance(t, TileType):
        return TileType(t.space, t.dtype, t.shape, tuple(sym.substitute(d, env) for d in t.valid))
    return t


class _Cloner:
    """Deep-copies ops, substituting symbols and renaming every value they define."""

    def __init__(self, env: dict[str, sym.Expr], suffix: str, values: dict[str, Value]):
        self.env = env
        self.suffix = suffix
        self.values = values  # old name -> value in the copy

    def op(self, op: Op) -> Op:
        operands = [self.values.get(v.name, v) for v in op.operands]
        attrs = {}
        for k, v in op.attrs.items():
            if k == "sym":
                new = f"{v}{self.suffix}"
                self.env[v] = sym.Sym(new)
                attrs[k] = new
            else:
                attrs[k] = _subst_attr(v, self.env)
        results = []
        for r in op.results:
            nv = Value(f"{r.name}{self.suffix}", _subst_type(r.type, self.env))
            self.values[r.name] = nv
            results.append(nv)
        regions = [[self.op(x) for x in region] for region in op.regions]
        return Op(op.name, operands, attrs, results, regions, op.span)


class _Unroller:
    def __init__(self, loops: dict[str, LoopSchedule]):
        self.loops = loops
        self.counter = itertools.count()

    def block(self, ops: list[Op]) -> list[Op]:
        out: list[Op] = []
        for op in ops:
            op = Op(op.name, op.operands, op.attrs, op.results, [self.block(r) for r in op.regions], op.span)
            # a peeled copy runs once: unrolling it would only compile dead copies of the body
            if op.name == "loop" and op.attrs.get("kind") not in ("grid", "peeled"):
                out.extend(self.loop(op))
            else:
                out.append(op)
        return out

    def factors(self, op: Op) -> list[int] | None:
        ls = self.loops.get(op.attrs["name"])
        if ls is None or not ls.unroll:
            return [1] if "unroll_var" in op.attrs else None
        return unroll_factors(ls.unroll)

    def loop(self, op: Op) -> list[Op]:
        fs = self.factors(op)
        if fs is None or (fs == [1] and "unroll_var" not in op.attrs):
            return [op]
        a = op.attrs
        idx, lo, step = a["index"], a["lo"], a["step"]
        trips = sym.max_(sym.ceildiv(sym.sub(a["hi"], lo), step), 0)  # an empty range has no trips
        handles_k = "unroll_var" in a
        out: list[Op] = []
        base: sym.Expr = 0
        for f in fs:
            n = sym.floordiv(sym.sub(trips, base), f) if f != 1 else sym.sub(trips, base)
            u = f"{idx}_u{f}"
            body: list[Op] = []
            copies = 1 if handles_k else f
            for c in range(copies):
                pos = sym.add(sym.add(base, sym.mul(sym.Sym(u), f)), c)
                env: dict[str, sym.Expr] = {idx: sym.add(lo, sym.mul(pos, step))}
                if handles_k:
                    env[a["unroll_var"]] = f
                cl = _Cloner(env, f"_u{f}c{c}" if copies > 1 or len(fs) > 1 else "", {})
                body.extend(cl.op(x) for x in op.regions[0])
            # the sub-loops keep the loop's name: the YAML's per-loop schedule still applies to them
            attrs = {"index": u, "lo": 0, "hi": n, "step": 1, "name": a["name"], "unrolled": f}
            out.append(Op("loop", [], attrs, [], [body], op.span))
            base = sym.add(base, sym.mul(n, f)) if f != 1 else base
        return out


def run(module: Module, ctx: PassContext) -> Module:
    u = _Unroller(schedule_of(module).loops)
    funcs = [Func(f.name, f.params, u.block(f.body), f.kind, f.attrs, f.span) for f in module.funcs]
    return Module(module.name, module.level, funcs, dict(module.attrs))


PASS = Pass("unroll", "tensor", "tensor", run, frozenset({"peeled"}), frozenset({"unrolled"}))
