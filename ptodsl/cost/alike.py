"""Which loop iterations (or blocks) of a dry run cost the same, so that one can stand for many.

An iteration's cost is decided by the values the dry run evaluates in it: the valid extents of its
tiles, the trip counts of its inner loops, its branch conditions, its launches' block counts and,
through them, the same inside the kernels it launches. Two iterations that evaluate the same
values, in the same order, cost the same (the dry run records them: its *trace*).

The dry run compares the traces of the second, third and second-to-last iterations. Equal traces
at two points say nothing about the iterations between them in general (``i % 2`` would fool it),
but they do when every expression that decides the cost is *monotone* in the index: a monotone
value equal at both ends of a range is constant over it. :func:`monotone_in` checks that
statically, once the symbols known at that point are replaced by their values: linear forms,
``min``/``max`` of monotone terms alike in direction, divisions by constants and comparisons of
such terms are monotone; ``%``, ``==`` and ``!=`` of the index are not. So a grid
whose last tile is partial (``min(N - g * 256, 256)``) samples; a loop that branches on the index's
parity walks every iteration.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping

from .. import sym
from ..ir import Func, Op, TileType
from ..ir.opdefs import launched_params

# Directions: +1 non-decreasing, -1 non-increasing, 0 constant in the variable; None: not monotone
# (or not provably so).
Direction = int | None


def _join(a: Direction, b: Direction) -> Direction:
    if a is None or b is None:
        return None
    if a == 0:
        return b
    if b == 0 or a == b:
        return a
    return None


def _flip(a: Direction) -> Direction:
    return None if a is None else -a


def direction(e: sym.Expr, var: str, env: Mapping[str, sym.Number]) -> Direction:
    """How ``e`` moves as ``var`` grows, every other symbol held (see the module docstring); the
    symbols ``env`` gives are replaced by their values first."""
    known = {k: v for k, v in env.items() if k != var and not isinstance(v, bool)}
    return _direction(sym.substitute(e, known) if known else e, var)


def _direction(e: sym.Expr, var: str) -> Direction:
    if isinstance(e, bool) or sym.is_const(e) or var not in sym.free_symbols(e):
        return 0
    form = sym.linear(e)
    if form is not None:
        c = form[0].get(var, 0)
        return (c > 0) - (c < 0)
    if isinstance(e, sym.NegExpr):
        return _flip(_direction(e.operand, var))
    if isinstance(e, sym.CallExpr):
        if e.fn in ("min", "max"):
            out: Direction = 0
            for a in e.args:
                out = _join(out, _direction(a, var))
            return out
        if e.fn == "not":
            return _flip(_direction(e.args[0], var))
        if e.fn == "cdiv":
            return _divided(e.args[0], e.args[1], var)
        return None
    if isinstance(e, sym.BinExpr):
        a, b = e.left, e.right
        if e.op in ("+", "-"):
            # min(x, y) - z is min(x - z, y - z): each arm may be linear where the whole is not
            for i, side in enumerate((a, b)):
                if isinstance(side, sym.CallExpr) and side.fn in ("min", "max"):
                    other = b if i == 0 else a
                    arms = [sym.binary(e.op, x, other) if i == 0 else sym.binary(e.op, other, x) for x in side.args]
                    fn = side.fn if e.op == "+" or i == 0 else ("max" if side.fn == "min" else "min")
                    return _direction(sym.CallExpr(fn, tuple(arms)), var)
            db = _direction(b, var)
            return _join(_direction(a, var), db if e.op == "+" else _flip(db))
        if e.op in ("and", "or"):
            return _join(_direction(a, var), _direction(b, var))
        if e.op == "*":
            for x, y in ((a, b), (b, a)):
                if sym.is_const(y):
                    d = _direction(x, var)
                    return None if d is None else d * ((y > 0) - (y < 0))
            return None
        if e.op in ("/", "//"):
            return _divided(a, b, var)
        if e.op in ("<", "<="):  # true once b - a has grown past 0 (or until it shrinks below)
            return _direction(sym.sub(b, a), var)
        if e.op in (">", ">="):
            return _direction(sym.sub(a, b), var)
        if e.op == "%" and sym.is_const(b) and b != 0 and _steps_by(a, var, b):
            return 0  # the index moves the dividend by whole periods: a block grid's column
        return None  # %, ==, !=
    return None


def _steps_by(e: sym.Expr, var: str, period: sym.Number) -> bool:
    """Whether ``e`` is linear with a coefficient of ``var`` that is a multiple of ``period``."""
    form = sym.linear(e)
    if form is None:
        return False
    c = form[0].get(var, 0)
    return isinstance(c, int) and isinstance(period, int) and c % period == 0


def _divided(a: sym.Expr, b: sym.Expr, var: str) -> Direction:
    if not sym.is_const(b) or b == 0:
        return None
    d = _direction(a, var)
    return None if d is None else d * ((b > 0) - (b < 0))


def trips(lo: sym.Expr, hi: sym.Expr, step: sym.Expr) -> sym.Expr:
    """The trip count of a loop, as the dry run records it (not its bounds: a loop over [b * R,
    b * R + R) costs the same for every b)."""
    return sym.call("cdiv", sym.sub(hi, lo), step)


def cost_exprs(ops: list[Op], kernels: Mapping[str, Func]) -> Iterator[sym.Expr]:
    """The expressions whose values decide what ``ops`` cost, a launched kernel's written in the
    launching program's symbols (its parameters replaced by the scalars the launch passes), and
    an inner loop's index written as its lower bound plus its iteration number times its step
    (the iteration number a symbol of its own)."""
    for op in ops:
        yield from _own_exprs(op)
        if op.name == "loop":
            a = op.attrs
            at = {a["index"]: sym.add(a["lo"], sym.mul(sym.Sym(a["index"] + "#k"), a["step"]))}
            for e in cost_exprs(op.regions[0], kernels):
                yield sym.substitute(e, at)
            continue
        if op.name == "launch":
            kernel = kernels[op.attrs["kernel"]]
            env = {p.name: e for p, e in zip(launched_params(kernel), op.attrs["scalars"])}
            if "block_count" in kernel.attrs:  # every block sees the launch's block count
                env[kernel.attrs["block_count"]] = op.attrs.get("block_dim", 1)
            for e in kernel_exprs(kernel):
                yield sym.substitute(e, env)
        for region in op.regions:
            yield from cost_exprs(region, kernels)


def kernel_exprs(kernel: Func) -> list[sym.Expr]:
    """The cost-deciding expressions of a compute kernel's body, in its parameters' symbols."""
    out = _KERNEL_EXPRS.get(kernel)  # a kernel's body does not change once it is dry run
    if out is None:
        out = _KERNEL_EXPRS[kernel] = list(cost_exprs(kernel.body, {}))
    return out


_KERNEL_EXPRS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _own_exprs(op: Op) -> Iterator[sym.Expr]:
    a = op.attrs
    if op.name == "tile.alloc":
        t: TileType = op.result.type
        yield from t.valid
    elif op.name == "loop":
        yield trips(a["lo"], a["hi"], a["step"])
    elif op.name == "if":
        yield a["cond"]
    elif op.name == "launch":
        if "block_dim" in a:
            yield a["block_dim"]


def monotone_in(exprs: list[sym.Expr], var: str, env: Mapping[str, sym.Number]) -> bool:
    """Whether every expression of ``exprs`` is monotone in ``var`` (given the symbols of ``env``)."""
    return all(direction(e, var, env) is not None for e in exprs)


__all__ = ["cost_exprs", "direction", "kernel_exprs", "monotone_in", "trips"]
