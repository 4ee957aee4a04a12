"""Split reductions (Tensor IR -> Tensor IR): a user loop whose only carried state is an
associative, commutative accumulation runs as independent partial accumulations plus one combine.

Requires: a ``level tensor`` module in loops (before ``paths``, which would peel the first/last
iteration branches this pass reads).
Produces: for each loop of the user's (step 1, not unrolled) that carries locals only as
accumulators, with ``c = cdiv(n, cores)`` (``n`` the trip count, at least 1; ``cores`` the
target's ``chip:`` count of the kind of core the body needs) and ``P = cdiv(n, c)`` partials:

- one GM workspace ``acc_parts: [P, m]`` per accumulator ``acc: [1, m]``, allocated once before
  the loop; partial ``p`` fills its row with the accumulation's identity before its share (so the
  fill runs in the partials' blocks, not as a launch of its own);
- a loop ``NAME_parts`` over ``p < P`` around the user's loop, which now runs the contiguous share
  ``[lo + p * c, min(hi, lo + (p + 1) * c))`` and accumulates into row ``p`` of the workspace. Its
  iterations touch only their own rows, so the parallel pass proves it independent and it runs as
  ``P`` blocks;
- one combine after it: ``acc = acc + sum(acc_parts, axis 0)`` (or ``acc = sum(...)`` when the
  loop's first iteration overwrote ``acc``), then the loop's last-iteration branch, which reads
  the finished accumulator, run once (when ``n >= 1``) with the index at its last value.

An accumulator is a local ``acc: [1, m]`` allocated outside the loop whose every use in the body is
``acc[:] = acc OP x`` at the top level of the body (``x`` free of ``acc``; OP ``+`` on an f32 or
integer accumulator (wrapping integer addition is associative too), or ``maximum`` / ``minimum``
on a floating one, which are exact in any order), or the first-iteration form ``if
is_loop_begin(i): acc[:] = x else: acc[:] = acc OP x`` with the same ``x`` (the identity fill
makes the first iteration of each share the same addition), or a read in a trailing
``if is_loop_end(i):`` branch that uses no other value of the body. Any other local written in the
loop, any other read of ``acc``, any other branch on the loop's first or last iteration, or an
f16/bf16 sum (its rounding depends on the order far more than the golden tolerances allow) leaves
the loop as it is. The body's other work is untouched: if its iterations are not independent
(``passes/parallel.py``), the loop over partials stays sequential and runs the iterations in their
original order, so only the order of the additions changes.

Off with ``pass_options: {split_reduction: false}``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .. import sym
from ..check.paths import loop_conditions
from ..ir import Func, Module, Op, TensorType, Value
from ..ir.schedule import schedule_of
from ..schedule import PASS_OPTION_DEFAULTS
from .context import Pass, PassContext
from .unroll import _Cloner

NOT_USER = frozenset({"grid", "split", "implicit", "peeled"})
FLOATS = frozenset({"f16", "bf16", "f32"})
INTS = frozenset({"i8", "i16", "i32", "i64", "u8"})
COMBINE = {"add": "sum", "maximum": "amax", "minimum": "amin"}
CUBE_OPS = frozenset({"matmul"})


@dataclass
class _Acc:
    value: Value
    op: str | None = None
    begin_init: bool = False
    ops: list[Op] = field(default_factory=list)  # the body's top-level ops that accumulate


def _identity(op: str, dtype: str) -> float | int:
    if op == "add":
        return 0.0 if dtype in FLOATS else 0
    return float("-inf") if op == "maximum" else float("inf")


def _allowed(op: str, dtype: str) -> bool:
    if op == "add":
        return dtype == "f32" or dtype in INTS
    return dtype in FLOATS


def _uses(ops: list[Op]) -> dict[str, list[Op]]:
    out: dict[str, list[Op]] = {}
    for op in ops:
        for o in op.walk():
            for v in o.operands:
                out.setdefault(v.name, []).append(o)
    return out


def _accumulate(op: Op, acc: str) -> Value | None:
    """``x`` when ``op`` is ``acc OP x`` (either order) with OP associative and commutative."""
    if op.name not in COMBINE or len(op.operands) != 2 or op.attrs or len(op.results) != 1:
        return None
    a, b = op.operands
    if a.name == acc and b.name != acc:
        return b
    if b.name == acc and a.name != acc:
        return a
    return None


def _full_write(op: Op, acc: Value, value: Value) -> bool:
    return op.name == "assemble" and len(op.operands) == 2 and op.operands[0].name == acc.name \
        and op.operands[1].name == value.name and all(o == 0 for o in op.attrs.get("offsets", ())) \
        and tuple(value.type.shape) == tuple(acc.type.shape) and value.type.dtype == acc.type.dtype


class _Plan:
    """What a loop's body does with the locals it carries, or why it cannot be split (``ok``)."""

    def __init__(self, loop: Op, locals_: dict[str, Value]):
        self.ok = False
        a = loop.attrs
        if a.get("kind") in NOT_USER or "unroll_var" in a or a.get("step") != 1 or a.get("parallel"):
            return
        _, _, self.last, self.is_begin, self.is_end = loop_conditions(a["index"], a["lo"], a["hi"], 1)
        body = loop.regions[0]
        self.end_ifs: list[Op] = []
        while body[:len(body) - len(self.end_ifs)] and self._is_end_if(body[-1 - len(self.end_ifs)]):
            self.end_ifs.insert(0, body[-1 - len(self.end_ifs)])
        self.core = body[:len(body) - len(self.end_ifs)]
        inner = {r.name for op in self.core for o in op.walk() for r in o.results}
        for op in self.end_ifs:
            if any(v.name in inner for o in op.walk() for v in o.operands):
                return  # the branch reads a value of the last iteration, which no longer exists after it
        self.accs: dict[str, _Acc] = {}
        written = {o.operands[0].name for op in body for o in op.walk() if o.name == "assemble"}
        for name in [n for n in locals_ if n in written]:
            acc = self._plan(locals_[name])
            if acc is None:
                return
            self.accs[name] = acc
        if not self.accs:
            return
        for op in self.end_ifs:  # the last-iteration branch may read accumulators, not write locals
            if any(o.name == "assemble" and o.operands[0].name in locals_ for o in op.walk()):
                return
        claimed = {id(o) for acc in self.accs.values() for o in acc.ops}
        for op in self.core:
            if id(op) in claimed:
                continue
            if any(o.name == "if" and o.attrs["cond"] in (self.is_begin, self.is_end) for o in op.walk()):
                return  # another first/last-iteration branch: it would run once per share
        self.ok = True

    def _is_end_if(self, op: Op) -> bool:
        return op.name == "if" and op.attrs["cond"] == self.is_end and not op.regions[1]

    def _plan(self, acc: Value) -> _Acc | None:
        t = acc.type
        if not isinstance(t, TensorType) or len(t.shape) != 2 or t.shape[0] != 1 or t.valid is not None:
            return None
        out = _Acc(acc)
        uses = _uses(self.core)
        seen: set[int] = set()
        by_result = {r.name: op for op in self.core for r in op.results}
        for op in self.core:
            if op.name == "if" and op.attrs["cond"] == self.is_begin:
                then, other = op.regions
                if not any(v.name == acc.name for o in op.walk() for v in o.operands):
                    continue
                if not then or len(other) != len(then) + 1:
                    return None
                same = _same_ops(then[:-1], other[:-2])  # both arms compute x alike
                x = _accumulate(other[-2], acc.name)
                if same is None or x is None or not then[-1].operands \
                        or not _full_write(then[-1], acc, then[-1].operands[1]) \
                        or same.get(then[-1].operands[1].name, then[-1].operands[1].name) != x.name \
                        or not _full_write(other[-1], acc, other[-2].result) \
                        or len(uses.get(other[-2].result.name, [])) != 1 or out.begin_init or out.ops:
                    return None
                out.begin_init, out.op = True, _merge(out.op, other[-2].name)
                out.ops.append(op)
                seen.update(id(o) for o in op.walk())
            elif op.name == "assemble" and op.operands[0].name == acc.name:
                producer = by_result.get(op.operands[1].name)
                if producer is None or out.begin_init:
                    return None
                x = _accumulate(producer, acc.name)
                if x is None or not _full_write(op, acc, producer.result) \
                        or len(uses.get(producer.result.name, [])) != 1:
                    return None
                out.op = _merge(out.op, producer.name)
                out.ops += [producer, op]
                seen.update({id(producer), id(op)})
        if out.op in (None, "") or not _allowed(out.op, t.dtype):
            return None
        if any(id(o) not in seen for o in uses.get(acc.name, [])):
            return None  # read as something other than the accumulation's operand
        return out


def _same_ops(a: list[Op], b: list[Op]) -> dict[str, str] | None:
    """The names ``b``'s values have for ``a``'s when the two runs of ops compute alike (same ops,
    attributes, types and operands, values of the runs matched), else None."""
    if len(a) != len(b):
        return None
    names: dict[str, str] = {}
    for x, y in zip(a, b):
        if x.name != y.name or x.attrs != y.attrs or x.regions or y.regions or len(x.results) != len(y.results) \
                or [names.get(v.name, v.name) for v in x.operands] != [v.name for v in y.operands] \
                or any(r.type != q.type for r, q in zip(x.results, y.results)):
            return None
        names.update((r.name, q.name) for r, q in zip(x.results, y.results))
    return names


def _merge(have: str | None, new: str) -> str:
    return new if have in (None, new) else ""


class _Names:
    def __init__(self, func: Func):
        self.taken = {p.name for p in func.params}
        for o in func.walk():
            self.taken.update(r.name for r in o.results)
            for k in ("index", "sym", "name", "unroll_var"):
                if isinstance(o.attrs.get(k), str):
                    self.taken.add(o.attrs[k])

    def fresh(self, stem: str) -> str:
        name = stem
        for k in itertools.count(1):
            if name not in self.taken:
                break
            name = f"{stem}{k}"
        self.taken.add(name)
        return name


def _kind(loop: Op) -> str:
    return "cube" if any(o.name in CUBE_OPS for o in loop.walk()) else "vector"


def _split(loop: Op, plan: _Plan, names: _Names, cores: int) -> list[Op]:
    a, span = loop.attrs, loop.span
    trips = sym.sub(a["hi"], a["lo"])
    at_least_one = sym.max_(trips, 1)
    share = sym.ceildiv(at_least_one, cores)
    parts = sym.ceildiv(at_least_one, share)
    p = names.fresh(f"{a['index']}_part")
    first = sym.add(a["lo"], sym.mul(sym.Sym(p), share))
    out: list[Op] = []
    rows: dict[str, Value] = {}
    for name, acc in plan.accs.items():
        t = acc.value.type
        ws = Value(names.fresh(f"{name}_parts"), TensorType(t.dtype, (parts, t.shape[1])))
        rows[name] = ws
        out.append(Op("alloc", [], {}, [ws], [], span))
    claimed = {id(o): name for name, acc in plan.accs.items() for o in acc.ops}
    body: list[Op] = []
    views: list[Op] = []
    for op in plan.core:
        name = claimed.get(id(op))
        if name is None:
            body.append(op)
            continue
        acc, ws = plan.accs[name], rows[name]
        if op.name == "if":  # the first-iteration form: the identity fill stands for the overwrite
            *prefix, producer, write = op.regions[1]
            body.extend(prefix)
        elif op.name == "assemble":
            continue  # emitted with its producer
        else:
            producer = op
            write = None
        row = Value(names.fresh(f"{name}_part"), acc.value.type)
        # views first: one between two grid loops would keep them from fusing
        views.append(Op("view", [ws], {"offsets": [sym.Sym(p), 0]}, [row], [], producer.span))
        body.append(Op(producer.name, [row if v.name == name else v for v in producer.operands], dict(producer.attrs),
                       list(producer.results), [], producer.span))
        body.append(Op("assemble", [ws, producer.result], {"offsets": [sym.Sym(p), 0]}, [], [],
                       (write or op).span))
    inner = Op("loop", [], dict(a) | {"lo": first, "hi": sym.min_(a["hi"], sym.add(first, share))}, [],
               [views + body], span)
    # each partial fills its own row with the identity before its share: the fill is then part of
    # the partial's work (one launch of blocks), not a grid of its own before them
    fills = [Op("fill", [ws], {"offsets": [sym.Sym(p), 0], "shape": [1, ws.type.shape[1]],
                               "scalar": _identity(plan.accs[name].op, ws.type.dtype)}, [], [], span)
             for name, ws in rows.items()]
    out.append(Op("loop", [], {"index": p, "lo": 0, "hi": parts, "step": 1, "name": names.fresh(f"{a['name']}_parts")},
                  [], [fills + [inner]], span))
    combine: list[Op] = []
    for name, acc in plan.accs.items():
        t = acc.value.type
        total = Value(names.fresh(f"{name}_total"), t)
        combine.append(Op(COMBINE[acc.op], [rows[name]], {"axis": 0, "keepdim": True}, [total], [], span))
        if not acc.begin_init:
            summed = Value(names.fresh(f"{name}_sum"), t)
            combine.append(Op(acc.op, [acc.value, total], {}, [summed], [], span))
            total = summed
        combine.append(Op("assemble", [acc.value, total], {"offsets": [0, 0]}, [], [], span))
    if plan.end_ifs:
        cloner = _Cloner({a["index"]: plan.last}, "", {})
        combine += [cloner.op(x) for op in plan.end_ifs for x in op.regions[0]]
    once = _once(combine, names, span)
    if not any(acc.begin_init for acc in plan.accs.values()) and not plan.end_ifs:
        out.append(once)  # with no iteration every partial is the identity: acc keeps its value
    elif not sym.is_const(trips):
        # a loop that runs no iteration neither overwrites acc nor runs its last-iteration branch
        out.append(Op("if", [], {"cond": sym.compare(">=", trips, 1)}, [], [[once], []], span))
    elif trips >= 1:
        out.append(once)
    return out


def _once(ops: list[Op], names: _Names, span) -> Op:
    name = names.fresh("_split")
    return Op("loop", [], {"index": name, "lo": 0, "hi": 1, "step": 1, "name": name, "kind": "implicit"},
              [], [ops], span)


def _region(ops: list[Op], locals_: dict[str, Value], names: _Names, target) -> list[Op]:
    out: list[Op] = []
    scope = dict(locals_)
    for op in ops:
        if op.name == "alloc":
            scope[op.result.name] = op.result
        if op.name == "loop":
            trips = sym.sub(op.attrs["hi"], op.attrs["lo"])
            plan = _Plan(op, scope)
            if plan.ok and not (sym.is_const(trips) and trips < 2):
                out.extend(_split(op, plan, names, target.chip.cores(_kind(op))))
                continue
        op.regions = [_region(r, scope, names, target) for r in op.regions]
        out.append(op)
    return out


def enabled(module: Module) -> bool:
    return bool(schedule_of(module).pass_options.get("split_reduction", PASS_OPTION_DEFAULTS["split_reduction"]))


def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()
    if not enabled(fresh):
        return fresh
    for f in fresh.funcs:
        f.body = _region(f.body, {}, _Names(f), ctx.target)
    return fresh


PASS = Pass("splitred", "tensor", "tensor", run, frozenset({"in-loops"}), frozenset({"reductions-split"}))

__all__ = ["PASS", "enabled", "run"]
