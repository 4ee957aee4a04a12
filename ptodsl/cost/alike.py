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
such terms are monotone; ``==`` and ``!=`` of the index are not, nor is ``%`` in general. So a grid
whose last tile is partial (``min(N - g * 256, 256)``) samples; a loop that branches on the index's
parity walks every iteration. A ``%`` is monotone where it cannot wrap: its dividend steps by
whole periods (a block grid's column), or stays inside one period over the range the index and the
inner loops' iteration numbers take (a flattened nest, passes/dbuf.py, whose rows a block's share
never crosses).
"""

from __future__ import annotations

import math
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


def direction(e: sym.Expr, var: str, env: Mapping[str, sym.Number],
              ranges: Mapping[str, sym.Bounds] | None = None) -> Direction:
    """How ``e`` moves as ``var`` grows, every other symbol held (see the module docstring); the
    symbols ``env`` gives are replaced by their values first, and ``ranges`` bounds the others
    (the index's own range among them)."""
    known = _known(env, var)
    return _direction(sym.substitute(e, known) if known else e, var, ranges or {})


def _known(env: Mapping[str, sym.Number], var: str) -> dict[str, sym.Number]:
    return {k: v for k, v in env.items() if k != var and not isinstance(v, bool)}


def _direction(e: sym.Expr, var: str, ranges: Mapping[str, sym.Bounds]) -> Direction:
    if isinstance(e, bool) or sym.is_const(e) or var not in sym.free_symbols(e):
        return 0
    form = sym.linear(e)
    if form is not None:
        c = form[0].get(var, 0)
        return (c > 0) - (c < 0)
    if isinstance(e, sym.NegExpr):
        return _flip(_direction(e.operand, var, ranges))
    if isinstance(e, sym.CallExpr):
        if e.fn in ("min", "max"):
            out: Direction = 0
            for a in e.args:
                out = _join(out, _direction(a, var, ranges))
            return out
        if e.fn == "not":
            return _flip(_direction(e.args[0], var, ranges))
        if e.fn == "cdiv":
            return _divided(e.args[0], e.args[1], var, ranges)
        return _still(e.args, var, ranges)
    if isinstance(e, sym.BinExpr):
        a, b = e.left, e.right
        if e.op in ("+", "-"):
            # min(x, y) - z is min(x - z, y - z): each arm may be linear where the whole is not
            for i, side in enumerate((a, b)):
                if isinstance(side, sym.CallExpr) and side.fn in ("min", "max"):
                    other = b if i == 0 else a
                    arms = [sym.binary(e.op, x, other) if i == 0 else sym.binary(e.op, other, x) for x in side.args]
                    fn = side.fn if e.op == "+" or i == 0 else ("max" if side.fn == "min" else "min")
                    return _direction(sym.CallExpr(fn, tuple(arms)), var, ranges)
            db = _direction(b, var, ranges)
            return _join(_direction(a, var, ranges), db if e.op == "+" else _flip(db))
        if e.op in ("and", "or"):
            return _join(_direction(a, var, ranges), _direction(b, var, ranges))
        if e.op == "*":
            return _product(a, b, var, ranges)
        if e.op in ("/", "//"):
            return _divided(a, b, var, ranges)
        if e.op in ("<", "<="):  # true once b - a has grown past 0 (or until it shrinks below)
            return _direction(sym.sub(b, a), var, ranges)
        if e.op in (">", ">="):
            return _direction(sym.sub(a, b), var, ranges)
        if e.op == "%" and sym.is_const(b) and b != 0:
            if _steps_by(a, var, b):
                return 0  # the index moves the dividend by whole periods: a block grid's column
            if _never_wraps(a, b, ranges):
                return _direction(a, var, ranges)  # the dividend less a constant
        return _still((a, b), var, ranges)  # %, ==, !=
    return None


def _still(args: tuple[sym.Expr, ...], var: str, ranges: Mapping[str, sym.Bounds]) -> Direction:
    """0 where no argument moves with ``var`` (written with it all the same: ``(3 * r) % 3``),
    else None."""
    return 0 if all(_direction(x, var, ranges) == 0 for x in args) else None


def _never_wraps(a: sym.Expr, m: sym.Number, ranges: Mapping[str, sym.Bounds]) -> bool:
    """Whether ``a`` stays inside one period of ``% m`` over ``ranges``."""
    lo, hi = sym.bounds(a, ranges)
    return lo is not None and hi is not None and lo // m == hi // m


def _steps_by(e: sym.Expr, var: str, period: sym.Number) -> bool:
    """Whether ``e`` is linear with a coefficient of ``var`` that is a multiple of ``period``, or
    is such a form over a positive constant ``d`` whose coefficient is a multiple of ``d *
    period`` (the row of a flattened nest: ``(c * v + r) // d`` is ``c / d * v + r // d``)."""
    if isinstance(e, sym.BinExpr) and e.op == "//" and isinstance(e.right, int) and e.right > 0 \
            and isinstance(period, int):
        return _steps_by(e.left, var, e.right * period)
    form = sym.linear(e)
    if form is None:
        return False
    c = form[0].get(var, 0)
    return isinstance(c, int) and isinstance(period, int) and c % period == 0


def _sign(e: sym.Expr, ranges: Mapping[str, sym.Bounds]) -> int | None:
    """+1 where ``e`` is never negative, -1 where never positive, else None."""
    lo, hi = sym.bounds(e, ranges)
    return 1 if lo is not None and lo >= 0 else -1 if hi is not None and hi <= 0 else None


def _product(a: sym.Expr, b: sym.Expr, var: str, ranges: Mapping[str, sym.Bounds]) -> Direction:
    da, db = _direction(a, var, ranges), _direction(b, var, ranges)
    if da is None or db is None:
        return None
    # a factor that does not move scales the other's moves by its sign; two that move alike
    # and are never negative move their product that way too
    if db == 0:
        sb = _sign(b, ranges)
        return None if sb is None else da * sb
    if da == 0:
        sa = _sign(a, ranges)
        return None if sa is None else db * sa
    if da == db and _sign(a, ranges) == 1 and _sign(b, ranges) == 1:
        return da
    return None


def _divided(a: sym.Expr, b: sym.Expr, var: str, ranges: Mapping[str, sym.Bounds]) -> Direction:
    # a divisor that does not move and keeps its sign (a constant, or a tile count) keeps the
    # quotient moving with the dividend
    if sym.is_const(b):
        sb = (b > 0) - (b < 0)
    else:
        sb = _sign(b, ranges) if _direction(b, var, ranges) == 0 else None
    if not sb:
        return None
    d = _direction(a, var, ranges)
    return None if d is None else d * sb


def period(exprs: list[sym.Expr], var: str, env: Mapping[str, sym.Number], step: int,
           ranges: Mapping[str, sym.Bounds] | None = None) -> int | None:
    """The least number of iterations (the index moving by ``step`` each) after which every ``%``
    of ``exprs`` whose dividend moves with the index is back where it was: each dividend linear in
    the index, or such a dividend divided by a constant (a flattened nest's row and column); None
    where some ``%`` is neither (a ``%`` that provably does not wrap over ``ranges`` counts for
    nothing). Iterations that many apart are alike in every ``%``."""
    known = _known(env, var)
    out = 1
    for e in exprs:
        for t in _terms(sym.substitute(e, known) if known else e):
            if not (isinstance(t, sym.BinExpr) and t.op == "%") or _direction(t, var, ranges or {}) is not None:
                continue
            m, a = t.right, t.left
            if isinstance(a, sym.BinExpr) and a.op == "//" and isinstance(a.right, int) and a.right > 0:
                m, a = a.right * m if isinstance(m, int) else m, a.left
            form = sym.linear(a)
            c = None if form is None else form[0].get(var)
            if not (isinstance(m, int) and m != 0 and isinstance(c, int) and not isinstance(m, bool)):
                return None
            p = abs(m) // math.gcd(c * step, m)
            out = out * p // math.gcd(out, p)
    return out


def _terms(e: sym.Expr) -> Iterator[sym.Expr]:
    yield e
    if isinstance(e, sym.BinExpr):
        yield from _terms(e.left)
        yield from _terms(e.right)
    elif isinstance(e, sym.CallExpr):
        for a in e.args:
            yield from _terms(a)
    elif isinstance(e, sym.NegExpr):
        yield from _terms(e.operand)


def trips(lo: sym.Expr, hi: sym.Expr, step: sym.Expr) -> sym.Expr:
    """The trip count of a loop, as the dry run records it (not its bounds: a loop over [b * R,
    b * R + R) costs the same for every b)."""
    return sym.call("cdiv", sym.sub(hi, lo), step)


def cost_exprs(ops: list[Op], kernels: Mapping[str, Func]) -> tuple[list[sym.Expr], dict[str, sym.Expr]]:
    """The expressions whose values decide what ``ops`` cost, a launched kernel's written in the
    launching program's symbols (its parameters replaced by the scalars the launch passes), and
    an inner loop's index written as its lower bound plus its iteration number times its step
    (the iteration number a symbol of its own); and, per such symbol, outermost first, the trip
    count of its loop in the same terms (its iteration numbers' range, for :func:`index_ranges`)."""
    exprs: list[sym.Expr] = []
    counts: dict[str, sym.Expr] = {}
    for op in ops:
        exprs.extend(_own_exprs(op))
        if op.name == "loop":
            a = op.attrs
            k = a["index"] + "#k"
            _count(counts, k, trips(a["lo"], a["hi"], a["step"]))
            _nested(exprs, counts, cost_exprs(op.regions[0], kernels),
                    {a["index"]: sym.add(a["lo"], sym.mul(sym.Sym(k), a["step"]))})
            continue
        if op.name == "launch":
            kernel = kernels[op.attrs["kernel"]]
            env = {p.name: e for p, e in zip(launched_params(kernel), op.attrs["scalars"])}
            if "block_count" in kernel.attrs:  # every block sees the launch's block count
                env[kernel.attrs["block_count"]] = op.attrs.get("block_dim", 1)
            _nested(exprs, counts, kernel_exprs(kernel), env)
        for region in op.regions:
            _nested(exprs, counts, cost_exprs(region, kernels), {})
    return exprs, counts


def _nested(exprs: list[sym.Expr], counts: dict[str, sym.Expr],
            inner: tuple[list[sym.Expr], dict[str, sym.Expr]], at: Mapping[str, sym.Expr]) -> None:
    exprs.extend(sym.substitute(e, at) for e in inner[0])
    for k, n in inner[1].items():
        _count(counts, k, sym.substitute(n, at))


def _count(counts: dict[str, sym.Expr], k: str, n: sym.Expr) -> None:
    # two loops of one name (in two kernels) share the symbol: it ranges over both
    counts[k] = sym.call("max", counts[k], n) if k in counts else n


def kernel_exprs(kernel: Func) -> tuple[list[sym.Expr], dict[str, sym.Expr]]:
    """The cost-deciding expressions of a compute kernel's body, in its parameters' symbols, and
    its loops' trip counts (:func:`cost_exprs`)."""
    out = _KERNEL_EXPRS.get(kernel)  # a kernel's body does not change once it is dry run
    if out is None:
        out = _KERNEL_EXPRS[kernel] = cost_exprs(kernel.body, {})
    return out


_KERNEL_EXPRS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def index_ranges(var: str, first: sym.Number, last: sym.Number, counts: Mapping[str, sym.Expr],
                 env: Mapping[str, sym.Number]) -> dict[str, sym.Bounds]:
    """The range of ``var`` (from ``first`` to ``last``) and of every inner loop's iteration
    number, given the symbols ``env`` gives."""
    ranges: dict[str, sym.Bounds] = {var: (min(first, last), max(first, last))}
    known = _known(env, var)
    for k, n in counts.items():
        hi = sym.bounds(sym.substitute(n, known), ranges)[1]
        ranges[k] = (0, None if hi is None else max(hi - 1, 0))
    return ranges


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


def monotone_in(exprs: list[sym.Expr], var: str, env: Mapping[str, sym.Number],
                ranges: Mapping[str, sym.Bounds] | None = None) -> bool:
    """Whether every expression of ``exprs`` is monotone in ``var`` (given the symbols of ``env``
    and the ranges of ``ranges``)."""
    return all(direction(e, var, env, ranges) is not None for e in exprs)


__all__ = ["cost_exprs", "direction", "index_ranges", "kernel_exprs", "monotone_in", "period", "trips"]
