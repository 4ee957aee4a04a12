"""Compiled paths: one model shared by the checker (E0509) and ``ptodsl ir --stats``.

The model works on a skeleton of the control flow: branches (``Branch``), loops (``Loop``) and the
other operations (``Work``, whose position only matters at the top level). ``paths`` counts the
paths through one body: the arms of a branch add, consecutive branches multiply, a branch whose
condition is decided at compile time keeps its taken arm, and a nested loop is a body of its own.
The compiled paths of a function are the most paths of any of its bodies (``max_body_paths``).

``ptodsl ir --stats`` reads the skeleton off the compiled IR (``from_ops``), the last Tile IR:
partitioning may then move a branch into a kernel as loops of 0 or 1 trips
(``passes/branches.py``), which leaves the program's paths as they were. The checker builds it
from the source and runs ``compile_skeleton``, which applies the same transformations as the Tensor
IR passes, reading their decisions from the same functions:

* loops: top-level work is wrapped in implicit one-trip loops, and adjacent one-trip loops of the
  same schedule merge (their bodies concatenate, so their paths multiply);
* paths: a loop whose body branches on its own first or last iteration (``peel_plan``) becomes a
  first copy, a middle loop and a last copy, each with those branches decided; the first and last
  copies sit in runtime guards (``n >= 1``, ``n >= 2``) in the enclosing body;
* unroll: a loop with unroll factors (``unroll_factors``) becomes one sub-loop per factor holding
  that many copies of the body, so a body of p paths unrolled by f has p**f paths.

A test compiles a spread of kernels and checks that both sides agree exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .. import sym

LOOP_PREDICATES = ("is_loop_begin", "is_loop_end")
ALLOC_OPS = ("alloc", "view", "reshape", "permute")  # may precede top-level work without being wrapped


def stays_top_level(op: str, pending: bool) -> bool:
    """Whether a top-level op stays outside the implicit one-trip loops of the loops pass.

    Loops do; so does a scalar read (after the work before it, which it may read), since later
    loops may use its value as a bound and a read inside an implicit loop would scope it away; and
    declarations that every later loop may see, when no work is pending before them."""
    return op in ("loop", "read") or (op in ALLOC_OPS and not pending)


@dataclass
class Branch:
    cond: Any  # a sym.Expr; a bool when decided at compile time
    arms: tuple[list[Node], list[Node]]
    span: Any = None  # of the condition in the source


@dataclass
class Loop:
    index: str
    lo: Any
    hi: Any
    step: Any
    name: str
    body: list[Node]
    kind: str | None = None  # None, "implicit", "peeled", "grid"
    unroll_var: str | None = None
    source: Any = None  # the source loop this body was compiled from; None for the top level
    factor: int | None = None  # of an unrolled sub-loop
    copy_paths: tuple[int, ...] = ()  # paths of each copy in an unrolled sub-loop


@dataclass
class Work:
    op: str = "op"


Node = Branch | Loop | Work


# ------------------------------------------------------------------ counting


def paths(block: Sequence[Node]) -> int:
    """Paths through one body: arms add, consecutive branches multiply, nested loops are not entered."""
    total = 1
    for n in block:
        if isinstance(n, Branch):
            if isinstance(n.cond, bool):
                total *= paths(n.arms[0] if n.cond else n.arms[1])
            else:
                total *= paths(n.arms[0]) + paths(n.arms[1])
    return total


def bodies(block: Sequence[Node], owner: Loop | None = None) -> Iterator[tuple[Loop | None, list[Node]]]:
    """Every body: ``block`` itself (owned by ``owner``), then the body of every loop inside it."""
    yield owner, list(block)
    for n in block:
        if isinstance(n, Loop):
            yield from bodies(n.body, n)
        elif isinstance(n, Branch):
            for arm in n.arms:
                for loop, body in bodies(arm, owner):
                    if loop is not owner:
                        yield loop, body


def max_body_paths(block: Sequence[Node]) -> int:
    return max(paths(body) for _, body in bodies(block))


def branches(block: Sequence[Node]) -> list[Branch]:
    """The runtime branches that add paths to one body."""
    out: list[Branch] = []
    for n in block:
        if isinstance(n, Branch):
            if isinstance(n.cond, bool):
                out += branches(n.arms[0] if n.cond else n.arms[1])
            else:
                out += [n, *branches(n.arms[0]), *branches(n.arms[1])]
    return out


def from_ops(ops: Sequence[Any]) -> list[Node]:
    """The skeleton of IR ops (anything with ``name``, ``attrs`` and ``regions``)."""
    out: list[Node] = []
    for op in ops:
        if op.name == "if":
            out.append(Branch(op.attrs["cond"], (from_ops(op.regions[0]), from_ops(op.regions[1])), op.span))
        elif op.name == "loop":
            a = op.attrs
            out.append(Loop(a["index"], a["lo"], a["hi"], a["step"], a["name"], from_ops(op.regions[0]),
                            a.get("kind"), a.get("unroll_var"), factor=a.get("unrolled")))
        else:
            out.append(Work(op.name))
    return out


# ------------------------------------------------------------------ decisions shared with the passes


def unroll_factors(factors: Sequence[int]) -> list[int]:
    """The sub-loops an unroll list compiles into: its distinct positive factors, and 1."""
    out = sorted({f for f in factors if f > 0}, reverse=True)
    return out if 1 in out else [*out, 1]


def loop_conditions(index: str, lo: Any, hi: Any, step: Any) -> tuple[Any, Any, Any, Any, Any]:
    """(trip count, first index, last index, is_loop_begin, is_loop_end) of a loop, built exactly as
    the checker builds the conditions, so that conditions in the body compare equal to them."""
    i = sym.Sym(index)
    n = sym.ceildiv(sym.sub(hi, lo), step)
    last = sym.add(lo, sym.mul(sym.sub(n, 1), step))
    return n, lo, last, sym.compare("==", i, lo), sym.compare("==", i, last)


@dataclass(frozen=True)
class PeelCopy:
    """One copy of a peeled loop body: the index bound to ``value`` (None: left free) and the
    loop's own first/last-iteration conditions replaced by ``decisions``."""

    which: str  # "first", "middle" or "last"
    value: Any
    decisions: dict = field(hash=False)


def peel_plan(index: str, lo: Any, hi: Any, step: Any) -> tuple[Any, list[PeelCopy]]:
    """The trip count and the three copies a loop branching on its first/last iteration becomes."""
    n, lo, last, is_begin, is_end = loop_conditions(index, lo, hi, step)
    return n, [
        PeelCopy("first", lo, {is_begin: True, is_end: sym.compare("==", n, 1)}),
        PeelCopy("middle", None, {is_begin: False, is_end: False}),
        PeelCopy("last", last, {is_begin: False, is_end: True}),
    ]


def mentions(conds: Sequence[Any], index: str, lo: Any, hi: Any, step: Any) -> bool:
    """Whether a loop is peeled: some condition in its body (at any depth) is one of its own
    first/last-iteration conditions."""
    _, _, _, is_begin, is_end = loop_conditions(index, lo, hi, step)
    targets = {is_begin, is_end}
    return any(not isinstance(c, bool) and c in targets for c in conds)


# ------------------------------------------------------------------ the passes, on the skeleton


def _conds(block: Sequence[Node]) -> Iterator[Any]:
    for n in block:
        if isinstance(n, Branch):
            yield n.cond
            for arm in n.arms:
                yield from _conds(arm)
        elif isinstance(n, Loop):
            yield from _conds(n.body)


def _subst(block: Sequence[Node], env: Mapping[str, Any], decisions: Mapping | None = None) -> list[Node]:
    out: list[Node] = []
    for n in block:
        if isinstance(n, Branch):
            cond = sym.substitute(n.cond, env) if env else n.cond
            if decisions is not None:
                cond = decisions.get(cond, cond)
            out.append(Branch(cond, (_subst(n.arms[0], env, decisions), _subst(n.arms[1], env, decisions)),
                              n.span))
        elif isinstance(n, Loop):
            out.append(replace(n, lo=sym.substitute(n.lo, env), hi=sym.substitute(n.hi, env),
                               step=sym.substitute(n.step, env), body=_subst(n.body, env, decisions)))
        else:
            out.append(n)
    return out


def _single(n: Node) -> bool:
    return isinstance(n, Loop) and n.kind != "grid" and n.lo == 0 and n.hi == 1 and n.step == 1 \
        and n.unroll_var is None


def wrap_and_merge(top: Sequence[Node], schedule_of: Callable[[str], Any]) -> list[Node]:
    """The loops pass: implicit one-trip loops around top-level work, then adjacent one-trip loops
    of one schedule merged."""
    wrapped: list[Node] = []
    pending: list[Node] = []
    count = 0
    for n in [*top, None]:
        if n is None or isinstance(n, Loop) or (isinstance(n, Work) and stays_top_level(n.op, bool(pending))):
            if pending:
                name = f"_top{count}"
                count += 1
                wrapped.append(Loop(name, 0, 1, 1, name, pending, "implicit"))
                pending = []
            if n is not None:
                wrapped.append(n)
        else:
            pending.append(n)
    merged: list[Node] = []
    for n in wrapped:
        prev = merged[-1] if merged else None
        if isinstance(prev, Loop) and isinstance(n, Loop) and _single(prev) and _single(n) \
                and schedule_of(prev.name) == schedule_of(n.name):
            merged[-1] = replace(prev, body=_subst(prev.body, {prev.index: 0}) + _subst(n.body, {n.index: 0}))
            continue
        merged.append(n)
    return merged


def peel(block: Sequence[Node]) -> list[Node]:
    """The paths pass: innermost loops first, as the pass recurses before it peels."""
    out: list[Node] = []
    for n in block:
        if isinstance(n, Branch):
            out.append(Branch(n.cond, (peel(n.arms[0]), peel(n.arms[1])), n.span))
            continue
        if not isinstance(n, Loop):
            out.append(n)
            continue
        n = replace(n, body=peel(n.body))
        if n.kind == "grid" or not mentions(list(_conds(n.body)), n.index, n.lo, n.hi, n.step):
            out.append(n)
            continue
        trips, copies = peel_plan(n.index, n.lo, n.hi, n.step)
        parts: dict[str, Node] = {}
        for c in copies:
            env = {} if c.value is None else {n.index: c.value}
            decisions = {sym.substitute(k, env): v for k, v in c.decisions.items()}
            body = _subst(n.body, env, decisions)
            if c.which == "middle":
                parts[c.which] = replace(n, lo=sym.add(n.lo, n.step), hi=copies[2].value, body=body)
            else:
                parts[c.which] = Loop(f"_{n.index}_{c.which}", 0, 1, 1, n.name, body, "peeled", source=n.source)
        out += [Branch(sym.compare(">=", trips, 1), ([parts["first"]], [])), parts["middle"],
                Branch(sym.compare(">=", trips, 2), ([parts["last"]], []))]
    return out


def unroll(block: Sequence[Node], factors_of: Callable[[str], Sequence[int] | None]) -> list[Node]:
    """The unroll pass: a loop with unroll factors becomes one sub-loop per factor."""
    out: list[Node] = []
    for n in block:
        if isinstance(n, Branch):
            out.append(Branch(n.cond, (unroll(n.arms[0], factors_of), unroll(n.arms[1], factors_of)), n.span))
            continue
        if not isinstance(n, Loop):
            out.append(n)
            continue
        n = replace(n, body=unroll(n.body, factors_of))
        given = factors_of(n.name) if n.kind not in ("grid", "peeled") else None
        fs = unroll_factors(given) if given else ([1] if n.unroll_var else None)
        if n.kind in ("grid", "peeled") or fs is None or (fs == [1] and n.unroll_var is None):
            out.append(n)
            continue
        trips = sym.max_(sym.ceildiv(sym.sub(n.hi, n.lo), n.step), 0)
        base: Any = 0
        for f in fs:
            u = f"{n.index}_u{f}"
            count = sym.floordiv(sym.sub(trips, base), f) if f != 1 else sym.sub(trips, base)
            body: list[Node] = []
            copy_paths = []
            for c in range(1 if n.unroll_var else f):
                pos = sym.add(sym.add(base, sym.mul(sym.Sym(u), f)), c)
                env = {n.index: sym.add(n.lo, sym.mul(pos, n.step))}
                if n.unroll_var:
                    env[n.unroll_var] = f
                copy = _subst(n.body, env)
                copy_paths.append(paths(copy))
                body += copy
            out.append(Loop(u, 0, count, 1, n.name, body, n.kind, source=n.source, factor=f,
                            copy_paths=tuple(copy_paths)))
            base = sym.add(base, sym.mul(count, f)) if f != 1 else base
    return out


def compile_skeleton(top: Sequence[Node], schedule_of: Callable[[str], Any],
                     factors_of: Callable[[str], Sequence[int] | None]) -> list[Node]:
    """The skeleton of the source after the loops, paths and unroll passes."""
    return unroll(peel(wrap_and_merge(top, schedule_of)), factors_of)
