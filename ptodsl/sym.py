"""Symbolic scalar expressions: shapes, offsets, valid shapes, loop bounds and scalar operands.

Constants are plain Python ``int``/``float`` values, so a constant expression and a number compare
equal and print the same. Every compound node is built by a smart constructor that folds constants
and a few identities; the printer parenthesises so that ``parse(str(e))`` rebuilds the same tree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

Number = int | float


def _kept(node: object, name: str, make: Callable[..., Any], *args: Any) -> Any:
    """A fact of a compound node computed once and kept on the (frozen) node: expressions are
    trees that the provers, passes and printers ask the same things of again and again (its hash,
    text, symbols), and a dataclass walks the whole tree for each answer."""
    value = node.__dict__.get(name)
    if value is None:
        value = make(*args)  # a function and its arguments, not a closure: no allocation when kept
        object.__setattr__(node, name, value)
    return value


def _cached_hash(node: object, key: tuple) -> int:
    return _kept(node, "_hash", _hash_of, type(node).__name__, key)


def _hash_of(kind: str, key: tuple) -> int:
    return hash((kind, *key))


@dataclass(frozen=True)
class Sym:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class BinExpr:
    op: str  # + - * / // cdiv %
    left: Expr
    right: Expr

    def __hash__(self) -> int:
        return _cached_hash(self, (self.op, self.left, self.right,))

    def __str__(self) -> str:
        return to_text(self)


@dataclass(frozen=True)
class CallExpr:
    fn: str  # min max cdiv
    args: tuple[Expr, ...]

    def __hash__(self) -> int:
        return _cached_hash(self, (self.fn, self.args,))

    def __str__(self) -> str:
        return to_text(self)


@dataclass(frozen=True)
class NegExpr:
    operand: Expr

    def __hash__(self) -> int:
        return _cached_hash(self, (self.operand,))

    def __str__(self) -> str:
        return to_text(self)


Expr = int | float | Sym | BinExpr | CallExpr | NegExpr

# A symbol's known range, inclusive; None means unbounded on that side.
Bounds = tuple[Number | None, Number | None]


def is_const(e: Expr) -> bool:
    return isinstance(e, (int, float)) and not isinstance(e, bool)


def _norm(v: Number) -> Number:
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return v  # keep floats float: 1.0 and 1 differ in dtype promotion
    return v


def add(a: Expr, b: Expr) -> Expr:
    if is_const(a) and is_const(b):
        return _norm(a + b)
    if is_const(a) and a == 0 and not isinstance(a, float):
        return b
    if is_const(b) and b == 0 and not isinstance(b, float):
        return a
    if is_const(b) and b < 0:
        return sub(a, -b)
    # (x + c1) + c2 -> x + (c1 + c2), keeps tile offsets short
    if is_const(b) and isinstance(a, BinExpr) and a.op in "+-" and is_const(a.right):
        c = a.right if a.op == "+" else -a.right
        return add(a.left, c + b)
    collected = _collected("+", a, b)
    return collected if collected is not None else BinExpr("+", a, b)


# ---------------------------------------------------------------- canonical sums
# A sum of products of integers and symbols (any other node, `min(...)` or `x // 2`, counts as one
# opaque factor) as {monomial: coefficient}; a monomial is a sorted tuple of factors, () for the
# constant. `add` and `sub` rebuild their result from it when terms cancel or merge (`2*H - H` is
# `H`, `(i + e) - i` is `e`), and keep the tree as written otherwise, so printed IR stays familiar.

_Poly = dict[tuple, int]
_MAX_TERMS = 16  # products of sums grow fast; past this the expression is kept as written


def _factor_key(f: Expr) -> tuple:
    return (0, f.name) if isinstance(f, Sym) else (1, to_text(f))


def _poly(e: Expr) -> _Poly | None:
    if isinstance(e, bool) or isinstance(e, float):
        return None
    if isinstance(e, int):
        return {(): e} if e else {}
    if isinstance(e, NegExpr):
        p = _poly(e.operand)
        return None if p is None else {k: -v for k, v in p.items()}
    if isinstance(e, BinExpr) and e.op in ("+", "-", "*"):
        pa, pb = _poly(e.left), _poly(e.right)
        if pa is None or pb is None:
            return None
        if e.op == "*":
            out: _Poly = {}
            for ka, va in pa.items():
                for kb, vb in pb.items():
                    k = tuple(sorted(ka + kb, key=_factor_key))
                    out[k] = out.get(k, 0) + va * vb
        else:
            sign = 1 if e.op == "+" else -1
            out = dict(pa)
            for k, v in pb.items():
                out[k] = out.get(k, 0) + sign * v
        out = {k: v for k, v in out.items() if v}
        return out if len(out) <= _MAX_TERMS else None
    if isinstance(e, BinExpr) and e.op in _CMP or isinstance(e, BinExpr) and e.op in ("and", "or"):
        return None
    return {(e,): 1}


def _monomial(factors: tuple) -> Expr:
    out: Expr | None = None
    for f in factors:
        out = f if out is None else BinExpr("*", out, f)
    assert out is not None
    return out


def _rebuild(p: _Poly) -> Expr:
    """The canonical sum: positive terms first, in the order they came, then the negative ones,
    then the constant; each term a product of its factors times its coefficient."""
    const = p.get((), 0)
    terms = [(k, v) for k, v in p.items() if k != ()]
    terms = [t for t in terms if t[1] > 0] + [t for t in terms if t[1] < 0]
    out: Expr | None = None
    for k, v in terms:
        term = _monomial(k) if abs(v) == 1 else BinExpr("*", _monomial(k), abs(v))
        if out is None:
            out = term if v > 0 else NegExpr(term)
        else:
            out = BinExpr("+" if v > 0 else "-", out, term)
    if out is None:
        return const
    if const:
        out = BinExpr("+" if const > 0 else "-", out, abs(const))
    return out


def _collected(op: str, a: Expr, b: Expr) -> Expr | None:
    """``a op b`` rebuilt in canonical form when some of its terms cancel or merge, else None."""
    pa, pb = _poly(a), _poly(b)
    if pa is None or pb is None:
        return None
    sign = 1 if op == "+" else -1
    out = dict(pa)
    for k, v in pb.items():
        out[k] = out.get(k, 0) + sign * v
    out = {k: v for k, v in out.items() if v}
    if len(out) >= len(pa) + len(pb):
        return None
    return _rebuild(out)


def sub(a: Expr, b: Expr) -> Expr:
    if is_const(a) and is_const(b):
        return _norm(a - b)
    if is_const(b) and b == 0 and not isinstance(b, float):
        return a
    if a == b:
        return 0
    if is_const(b) and b < 0:
        return add(a, -b)
    if is_const(b) and isinstance(a, BinExpr) and a.op in "+-" and is_const(a.right):
        c = a.right if a.op == "+" else -a.right
        return add(a.left, c - b)
    # (x + y) - y -> x and (x + y) - x -> y
    if isinstance(a, BinExpr) and a.op == "+" and a.right == b:
        return a.left
    if isinstance(a, BinExpr) and a.op == "+" and a.left == b:
        return a.right
    collected = _collected("-", a, b)
    return collected if collected is not None else BinExpr("-", a, b)


def mul(a: Expr, b: Expr) -> Expr:
    if is_const(a) and is_const(b):
        return _norm(a * b)
    for x, y in ((a, b), (b, a)):
        if is_const(x) and not isinstance(x, float):
            if x == 0:
                return 0
            if x == 1:
                return y
    if is_const(a) and not is_const(b):
        a, b = b, a  # constants on the right: `j * 1024`
    return BinExpr("*", a, b)


def truediv(a: Expr, b: Expr) -> Expr:
    if is_const(a) and is_const(b) and b != 0:
        return float(a) / float(b)
    if is_const(b) and b == 1 and not isinstance(b, float):
        return a
    return BinExpr("/", a, b)


def floordiv(a: Expr, b: Expr) -> Expr:
    if is_const(a) and is_const(b) and b != 0:
        return _norm(a // b)
    if is_const(b) and b == 1:
        return a
    if isinstance(b, int) and not isinstance(b, bool) and b > 1:
        # (2*F) // 2 -> F: exact when every coefficient (the constant too) is a multiple of b
        p = _poly(a)
        if p and all(v % b == 0 for v in p.values()):
            return _rebuild({k: v // b for k, v in p.items()})
    return BinExpr("//", a, b)


def mod(a: Expr, b: Expr) -> Expr:
    if is_const(a) and is_const(b) and b != 0:
        return _norm(a % b)
    if is_const(b) and b == 1:
        return 0
    return BinExpr("%", a, b)


def ceildiv(a: Expr, b: Expr) -> Expr:
    if is_const(a) and is_const(b) and b != 0:
        return -(-a // b)
    if is_const(b) and b == 1:
        return a
    return CallExpr("cdiv", (a, b))


def neg(a: Expr) -> Expr:
    if is_const(a):
        return -a
    if isinstance(a, NegExpr):
        return a.operand
    return NegExpr(a)


def _absorbs(name: str, a: Expr, b: Expr) -> bool:
    """Whether ``b`` is ``name(a, x)`` or ``name(x, a)``: then ``name(a, b)`` is ``b``."""
    return isinstance(b, CallExpr) and b.fn == name and a in b.args


def min_(a: Expr, b: Expr, ranges: Mapping[str, Bounds] | None = None) -> Expr:
    if a == b:
        return a
    if _absorbs("min", a, b):
        return b
    if _absorbs("min", b, a):
        return a
    if is_const(a) and is_const(b):
        return min(a, b)
    if ranges is not None:
        if prove_le(a, b, ranges):
            return a
        if prove_le(b, a, ranges):
            return b
    return CallExpr("min", (a, b))


def max_(a: Expr, b: Expr, ranges: Mapping[str, Bounds] | None = None) -> Expr:
    if a == b:
        return a
    if _absorbs("max", a, b):
        return b
    if _absorbs("max", b, a):
        return a
    if is_const(a) and is_const(b):
        return max(a, b)
    if ranges is not None:
        if prove_le(a, b, ranges):
            return b
        if prove_le(b, a, ranges):
            return a
    return CallExpr("max", (a, b))


_CMP = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


def compare(op: str, a: Expr, b: Expr) -> Expr:
    """A comparison; folds to a bool when both sides are constant."""
    if is_const(a) and is_const(b):
        return _CMP[op](a, b)
    if a == b and op in ("==", "<=", ">="):
        return True
    return BinExpr(op, a, b)


def logical(op: str, a: Expr, b: Expr) -> Expr:
    if isinstance(a, bool) and isinstance(b, bool):
        return (a and b) if op == "and" else (a or b)
    for x, y in ((a, b), (b, a)):
        if isinstance(x, bool):
            if op == "and":
                return y if x else False
            return True if x else y
    return BinExpr(op, a, b)


def logical_not(a: Expr) -> Expr:
    if isinstance(a, bool):
        return not a
    return CallExpr("not", (a,))


_BIN = {"+": add, "-": sub, "*": mul, "/": truediv, "//": floordiv, "%": mod,
        **{op: (lambda o: lambda a, b: compare(o, a, b))(op) for op in _CMP},
        "and": lambda a, b: logical("and", a, b), "or": lambda a, b: logical("or", a, b)}
_CALL: dict[str, Callable[..., Expr]] = {"min": min_, "max": max_, "cdiv": ceildiv, "not": logical_not}


def binary(op: str, a: Expr, b: Expr) -> Expr:
    return _BIN[op](a, b)


def call(fn: str, *args: Expr) -> Expr:
    return _CALL[fn](*args)


# ---------------------------------------------------------------- evaluation and analysis


def evaluate(e: Expr, env: Mapping[str, Number]) -> Number:
    """Evaluate with concrete symbol values; a missing symbol raises KeyError."""
    if isinstance(e, (BinExpr, CallExpr, NegExpr)):
        # the cost model evaluates the same offsets and extents for every iteration it walks: an
        # expression evaluated a second time is compiled to one Python function, kept on the node
        fn = e.__dict__.get("_eval")
        if callable(fn):
            return fn(env)
        if fn is None or fn is _ONCE:  # walked this time, compiled for the next
            object.__setattr__(e, "_eval", _ONCE if fn is None else _python_function(e) or _WALK)
    return _walk(e, env)


_ONCE = object()  # evaluated once so far (not callable, like _WALK)
_WALK = object()  # too deep to compile: walked every time


def _python_function(e: Expr) -> Callable[[Mapping[str, Number]], Number] | None:
    """``e`` compiled to a Python function of the symbol values that computes what ``_walk``
    does, or None (then ``_walk`` it is) for a tree too deep for Python's compiler."""
    try:
        source = _python(e)
        return eval(compile(f"lambda env: {source}", "<sym>", "eval"), {"__builtins__": {}, **_PY_NAMES})
    except (RecursionError, MemoryError, SyntaxError):
        return None


def _eager_and(a: Number, b: Number) -> bool:
    return bool(a) and bool(b)


def _eager_or(a: Number, b: Number) -> bool:
    return bool(a) or bool(b)


_PY_NAMES = {"_min": min, "_max": max, "_and": _eager_and, "_or": _eager_or, "_inf": math.inf,
             "_nan": math.nan}
_PY_OPS = {"+", "-", "*", "/", "//", "%", "<", "<=", ">", ">=", "==", "!="}


def _python(e: Expr) -> str:
    if isinstance(e, bool):
        return "True" if e else "False"
    if isinstance(e, int):
        return f"({e})"
    if isinstance(e, float):
        if math.isnan(e):
            return "_nan"
        if math.isinf(e):
            return "_inf" if e > 0 else "(-_inf)"
        return f"({e!r})"
    if isinstance(e, Sym):
        return f"env[{e.name!r}]"
    if isinstance(e, NegExpr):
        return f"(-{_python(e.operand)})"
    if isinstance(e, BinExpr):
        a, b = _python(e.left), _python(e.right)
        if e.op in _PY_OPS:
            return f"({a} {e.op} {b})"
        if e.op in ("and", "or"):
            return f"_{e.op}({a}, {b})"
    if isinstance(e, CallExpr):
        args = [_python(x) for x in e.args]
        if e.fn in ("min", "max"):
            return f"_{e.fn}([{', '.join(args)}])"
        if e.fn == "cdiv":
            return f"(-(-{args[0]} // {args[1]}))"
        if e.fn == "not":
            return f"(not {args[0]})"
    raise TypeError(f"not a symbolic expression: {e!r}")


def _walk(e: Expr, env: Mapping[str, Number]) -> Number:
    if is_const(e) or isinstance(e, bool):
        return e
    if isinstance(e, Sym):
        return env[e.name]
    if isinstance(e, NegExpr):
        return -_walk(e.operand, env)
    if isinstance(e, BinExpr):
        a, b = _walk(e.left, env), _walk(e.right, env)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op == "/":
            return a / b
        if e.op == "//":
            return a // b
        if e.op == "%":
            return a % b
        if e.op in _CMP:
            return _CMP[e.op](a, b)
        if e.op == "and":
            return bool(a) and bool(b)
        if e.op == "or":
            return bool(a) or bool(b)
    if isinstance(e, CallExpr):
        args = [_walk(x, env) for x in e.args]
        if e.fn == "min":
            return min(args)
        if e.fn == "max":
            return max(args)
        if e.fn == "cdiv":
            return -(-args[0] // args[1])
        if e.fn == "not":
            return not args[0]
    raise TypeError(f"not a symbolic expression: {e!r}")


def substitute(e: Expr, env: Mapping[str, Expr]) -> Expr:
    """Replace symbols by expressions, re-simplifying on the way up."""
    if isinstance(e, Sym):
        return env.get(e.name, e)
    if isinstance(e, (int, float)) or env.keys().isdisjoint(_free(e)):
        return e  # nothing to replace: the tree is kept, not rebuilt and simplified again
    if isinstance(e, NegExpr):
        return neg(substitute(e.operand, env))
    if isinstance(e, BinExpr):
        return binary(e.op, substitute(e.left, env), substitute(e.right, env))
    if isinstance(e, CallExpr):
        return call(e.fn, *(substitute(x, env) for x in e.args))
    return e


def free_symbols(e: Expr) -> set[str]:
    return set(_free(e))


def symbols_in(e: Expr) -> frozenset[str]:
    """The symbols of ``e``, shared (kept on the node): not to be changed."""
    return _free(e)


_NO_SYMBOLS: frozenset[str] = frozenset()


def _free(e: Expr) -> frozenset[str]:
    """The symbols of ``e``, kept on the node: substitution asks this of every subtree it visits."""
    if isinstance(e, Sym):
        return frozenset((e.name,))
    if not isinstance(e, (BinExpr, CallExpr, NegExpr)):
        return _NO_SYMBOLS
    return _kept(e, "_free", _free_of, e)


def _free_of(e: BinExpr | CallExpr | NegExpr) -> frozenset[str]:
    if isinstance(e, NegExpr):
        return _free(e.operand)
    if isinstance(e, BinExpr):
        return _free(e.left) | _free(e.right)
    return _NO_SYMBOLS.union(*(_free(x) for x in e.args))


def bounds(e: Expr, ranges: Mapping[str, Bounds]) -> Bounds:
    """Interval bounds of e, given symbol ranges (interval arithmetic, conservative)."""
    if is_const(e):
        return (e, e)
    if isinstance(e, Sym):
        return ranges.get(e.name, (None, None))
    if isinstance(e, NegExpr):
        lo, hi = bounds(e.operand, ranges)
        return (None if hi is None else -hi, None if lo is None else -lo)
    if isinstance(e, CallExpr) and e.fn in ("min", "max"):
        bs = [bounds(x, ranges) for x in e.args]
        f = min if e.fn == "min" else max
        los = [b[0] for b in bs]
        his = [b[1] for b in bs]
        if e.fn == "min":
            lo = None if any(v is None for v in los) else f(los)
            hi = f([v for v in his if v is not None]) if any(v is not None for v in his) else None
        else:
            lo = f([v for v in los if v is not None]) if any(v is not None for v in los) else None
            hi = None if any(v is None for v in his) else f(his)
        return (lo, hi)
    division = ((e.args[0], e.args[1], ceildiv) if isinstance(e, CallExpr) and e.fn == "cdiv" else
                (e.left, e.right, floordiv) if isinstance(e, BinExpr) and e.op == "//" else None)
    if division is not None and is_const(division[1]) and division[1] > 0:
        # monotonic in the numerator for a positive constant divisor
        num, den, f = division
        lo, hi = bounds(num, ranges)
        return (None if lo is None else f(lo, den), None if hi is None else f(hi, den))
    if division is not None:
        # a non-negative numerator over a divisor of at least 1: the quotient, rounded either
        # way, lies in [0, num]
        (nlo, nhi), (dlo, _) = bounds(division[0], ranges), bounds(division[1], ranges)
        if nlo is not None and nlo >= 0 and dlo is not None and dlo >= 1:
            return (0, nhi)
    if isinstance(e, BinExpr) and e.op == "%":
        # a non-negative dividend modulo at least 1: in [0, min(dividend, divisor - 1)]
        (nlo, nhi), (dlo, dhi) = bounds(e.left, ranges), bounds(e.right, ranges)
        if nlo is not None and nlo >= 0 and dlo is not None and dlo >= 1:
            highs = [v for v in (nhi, None if dhi is None else dhi - 1) if v is not None]
            return (0, min(highs) if highs else None)
    if (isinstance(e, BinExpr) and e.op == "-" and isinstance(e.right, BinExpr) and e.right.op == "//"
            and e.right.left == e.left and is_const(e.right.right) and e.right.right >= 1):
        # x - x // c rises with x (by 0 or 1 per step): the bounds are its values at x's bounds
        # (a concat part's `D - D // 2`, which interval arithmetic would bound by D alone)
        lo, hi = bounds(e.left, ranges)
        c = e.right.right
        return (None if lo is None else lo - floordiv(lo, c), None if hi is None else hi - floordiv(hi, c))
    if isinstance(e, BinExpr):
        (alo, ahi), (blo, bhi) = bounds(e.left, ranges), bounds(e.right, ranges)
        if e.op == "+":
            return (_opt(alo, blo, float.__add__), _opt(ahi, bhi, float.__add__))
        if e.op == "-":
            return (_opt(alo, bhi, float.__sub__), _opt(ahi, blo, float.__sub__))
        if e.op == "*" and None not in (alo, ahi, blo, bhi):
            prods = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
            return (min(prods), max(prods))
        if e.op == "*" and alo is not None and blo is not None and alo >= 0 and blo >= 0:
            return (alo * blo, None)
    return (None, None)


def _opt(a: Number | None, b: Number | None, f) -> Number | None:
    if a is None or b is None:
        return None
    r = f(float(a), float(b))
    return int(r) if isinstance(a, int) and isinstance(b, int) else r


def body_range(lo: Expr, hi: Expr) -> tuple[Expr, Expr]:
    """The values the index of ``loop(lo, hi)`` (step 1) takes inside its body, as a range for the
    provers: ``[lo, hi - 1]``, where a trip count ``max(x, 0)`` or ``max(x, 0) // c`` (an unrolled
    loop's: no negative count) is ``x`` or ``x // c``. In the body the loop runs, so ``hi > lo >= 0``
    and the ``max`` takes ``x``; the provers cannot see through a ``max`` to that."""
    top = hi
    if isinstance(top, BinExpr) and top.op == "//" and isinstance(top.right, int) and top.right > 0:
        top = top.left
    if isinstance(lo, int) and lo >= 0 and isinstance(top, CallExpr) and top.fn == "max" and len(top.args) == 2 \
            and 0 in top.args:
        x = top.args[1] if top.args[0] == 0 else top.args[0]
        hi = floordiv(x, hi.right) if top is not hi else x
    return lo, sub(hi, 1)


def prove_le(a: Expr, b: Expr, ranges: Mapping[str, Bounds]) -> bool:
    """True only when a <= b holds for every symbol value in range.

    Ranges may be symbolic (a loop index ``i`` of ``loop(B)`` lies in ``[0, B - 1]``), so besides
    interval arithmetic this substitutes each symbol of the linear form of ``b - a`` by the bound
    that minimises it, which proves facts like ``B - i >= 1`` inside that loop.
    """
    if a == b:
        return True
    return prove_nonneg(sub(b, a), ranges)


_PROVED: dict[tuple, bool] = {}  # (expression, ranges, depth) -> result: passes ask the same again
_PROVED_LIMIT = 200_000


def prove_nonneg(e: Expr, ranges: Mapping[str, Bounds], depth: int = 0) -> bool:
    try:
        key = (e, tuple(sorted(ranges.items())), depth)
        hash(key)
    except TypeError:  # a range given as a list: prove without the memo
        return _prove_nonneg(e, ranges, depth)
    got = _PROVED.get(key)
    if got is None:
        if len(_PROVED) >= _PROVED_LIMIT:
            _PROVED.clear()
        got = _PROVED[key] = _prove_nonneg(e, ranges, depth)
    return got


def _prove_nonneg(e: Expr, ranges: Mapping[str, Bounds], depth: int = 0) -> bool:
    if isinstance(e, CallExpr) and e.fn == "min":
        return all(prove_nonneg(x, ranges, depth) for x in e.args)
    if isinstance(e, CallExpr) and e.fn == "max":
        return any(prove_nonneg(x, ranges, depth) for x in e.args)
    lo, _ = bounds(e, {k: v for k, v in ranges.items() if all(x is None or is_const(x) for x in v)})
    if lo is not None and lo >= 0:
        return True
    if _split_minmax(e, ranges, depth):
        return True
    if depth < _SPLITS and (split := _floor_products(e, ranges)) is not None:
        return prove_nonneg(split[0], split[1], depth + 1)
    # a floor or ceiling division is bounded below by a linear form (``D - D // 2 >= D / 2``)
    form = linear(e) or linear_bound(e, upper=False)
    if form is None:
        return False
    coeffs, const = form
    for _ in range(8):  # bounds may mention other symbols; a few rounds reach the dims
        changed = False
        for name in sorted(coeffs):
            c = coeffs[name]
            if name not in ranges or c == 0:
                continue
            lo_b, hi_b = ranges[name]
            bound = lo_b if c > 0 else hi_b
            if bound is None or (is_const(bound) and c > 0 and bound >= 0 and _nonneg_symbol(name, ranges)):
                continue
            # a bound through a division (a loop of `cdiv(L, BL)` blocks) is replaced by the linear
            # form that bounds it on the side that minimises the sum
            sub_form = linear(bound) or linear_bound(bound, upper=c < 0)
            if sub_form is None or name in sub_form[0]:
                continue
            del coeffs[name]
            for k, v in sub_form[0].items():
                coeffs[k] = coeffs.get(k, 0) + c * v
            const += c * sub_form[1]
            coeffs = {k: v for k, v in coeffs.items() if v != 0}
            changed = True
            break
        if not changed:
            break
    if not all(c > 0 and _nonneg_symbol(k, ranges) for k, c in coeffs.items()):
        return False
    # each c * x is at least c times x's constant lower bound (kept as a symbol above, where a
    # constant bound of at least 0 is left alone): `D // 2 - 1 >= 0` for D in [2, ...]
    low = {k: ranges[k][0] for k in coeffs if k in ranges and is_const(ranges[k][0])}
    return const + sum(c * low[k] for k, c in coeffs.items() if k in low) >= 0


# stands for a min or max inside an expression while its coefficient there is found
_HOLE = "\x00m"
_SPLITS = 1  # nested min/max splits per proof: each doubles the work


def _first_minmax(e: Expr) -> CallExpr | None:
    if isinstance(e, CallExpr):
        if e.fn in ("min", "max") and len(e.args) == 2:
            return e
        return next((m for m in map(_first_minmax, e.args) if m is not None), None)
    if isinstance(e, NegExpr):
        return _first_minmax(e.operand)
    if isinstance(e, BinExpr):
        return _first_minmax(e.left) or _first_minmax(e.right)
    return None


def replace(e: Expr, old: Expr, new: Expr) -> Expr:
    """``e`` with every subexpression equal to ``old`` replaced by ``new``."""
    if e == old:
        return new
    if isinstance(e, NegExpr):
        return neg(replace(e.operand, old, new))
    if isinstance(e, BinExpr):
        return binary(e.op, replace(e.left, old, new), replace(e.right, old, new))
    if isinstance(e, CallExpr):
        return call(e.fn, *(replace(x, old, new) for x in e.args))
    return e


def _split_minmax(e: Expr, ranges: Mapping[str, Bounds], depth: int) -> bool:
    """``e >= 0`` proved through a ``min(a, b)`` or ``max(a, b)`` inside it (a clamped extent in a
    sum: ``D - (D - D // 2 + min(D, D // 2))``). The min equals one of its arguments, so ``e`` is
    non-negative when it is with every argument in its place; and where ``e`` falls as the min
    grows (a constant negative coefficient), with any one argument in its place, since the min is
    at most each (a max: rising, at least each)."""
    m = _first_minmax(e) if depth < _SPLITS else None
    if m is None:
        return False
    hole = Sym(_HOLE)
    h = replace(e, m, hole)
    k = sub(substitute(h, {_HOLE: add(hole, 1)}), h)
    cases = [substitute(h, {_HOLE: a}) for a in m.args]
    if is_const(k) and (k == 0 or (k < 0) == (m.fn == "min")):
        return any(prove_nonneg(c, ranges, depth + 1) for c in cases)
    return all(prove_nonneg(c, ranges, depth + 1) for c in cases)


_REM = "\x00r"  # the remainder a floor product leaves: a fresh symbol per product


def _floor_products(e: Expr, ranges: Mapping[str, Bounds]) -> tuple[Expr, dict[str, Bounds]] | None:
    """``e`` with each product ``(x // y) * y`` (``y`` a factor of the same term, or a constant
    dividing its coefficient) written ``x - r``, a fresh ``r`` ranging over ``[0, y - 1]``: exact for
    a divisor ``y >= 1``, which ``ranges`` must prove. A mixed-radix offset's band
    (``n * (NQ // n) + g``, ``passes/parallel.py``) needs it. None when there is no such product."""
    p = _poly(e)
    if p is None:
        return None
    out: _Poly = {}
    fresh = dict(ranges)
    changed = False
    for factors, v in p.items():
        term: Expr = v
        for i, f in enumerate(factors):
            if not (isinstance(f, BinExpr) and f.op == "//"):
                continue
            y, rest = f.right, list(factors[:i] + factors[i + 1:])
            if isinstance(y, int) and y >= 1 and v % y == 0:
                coeff = v // y
            elif y in rest and prove_nonneg(sub(y, 1), ranges):
                rest.remove(y)
                coeff = v
            else:
                continue
            r = f"{_REM}{len(fresh)}"
            fresh[r] = (0, sub(y, 1))
            term = mul(sub(f.left, Sym(r)), coeff)
            for g in rest:
                term = mul(term, g)
            changed = True
            break
        else:
            term = mul(_monomial(factors), v) if factors else v
        q = _poly(term)
        if q is None:
            return None
        for k, c in q.items():
            out[k] = out.get(k, 0) + c
    if not changed:
        return None
    return _rebuild({k: c for k, c in out.items() if c}), fresh


def _nonneg_symbol(name: str, ranges: Mapping[str, Bounds]) -> bool:
    lo = ranges.get(name, (None, None))[0]
    if lo is None:
        return False
    if is_const(lo):
        return lo >= 0
    return prove_nonneg(lo, {k: v for k, v in ranges.items() if k != name})


def linear(e: Expr) -> tuple[dict[str, Number], Number] | None:
    """``e`` as ({symbol: coefficient}, constant), or None when it is not linear."""
    if is_const(e):
        return {}, e
    if isinstance(e, Sym):
        return {e.name: 1}, 0
    if isinstance(e, NegExpr):
        f = linear(e.operand)
        return None if f is None else ({k: -v for k, v in f[0].items()}, -f[1])
    if isinstance(e, BinExpr) and e.op in ("+", "-"):
        fa, fb = linear(e.left), linear(e.right)
        if fa is None or fb is None:
            return None
        sign = 1 if e.op == "+" else -1
        out = dict(fa[0])
        for k, v in fb[0].items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v != 0}, fa[1] + sign * fb[1]
    if isinstance(e, BinExpr) and e.op == "*":
        for x, y in ((e.left, e.right), (e.right, e.left)):
            if is_const(y):
                f = linear(x)
                return None if f is None else ({k: v * y for k, v in f[0].items()}, f[1] * y)
    return None


def linear_bound(e: Expr, upper: bool) -> tuple[dict[str, Number], Number] | None:
    """A linear form (possibly with fractional coefficients) that is >= ``e`` (``upper``) or <= it,
    for every integer value of its symbols, looking through floor and ceiling divisions by a
    positive constant: ``a // k <= a / k``, ``a // k >= (a - k + 1) / k``, ``cdiv(a, k) <= (a + k - 1) / k``
    and ``cdiv(a, k) >= a / k``. None when ``e`` is neither linear nor such a division of one."""
    f = linear(e)
    if f is not None:
        return f
    if isinstance(e, NegExpr):
        f = linear_bound(e.operand, not upper)
        return None if f is None else ({k: -v for k, v in f[0].items()}, -f[1])
    if isinstance(e, BinExpr) and e.op in ("+", "-"):
        fa, fb = linear_bound(e.left, upper), linear_bound(e.right, upper if e.op == "+" else not upper)
        if fa is None or fb is None:
            return None
        sign = 1 if e.op == "+" else -1
        out = dict(fa[0])
        for k, v in fb[0].items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v != 0}, fa[1] + sign * fb[1]
    if isinstance(e, BinExpr) and e.op == "*":
        for x, y in ((e.left, e.right), (e.right, e.left)):
            if is_const(y) and isinstance(y, int):
                f = linear_bound(x, upper if y >= 0 else not upper)
                return None if f is None else ({k: v * y for k, v in f[0].items()}, f[1] * y)
        return None
    if isinstance(e, CallExpr) and e.fn == "cdiv" and len(e.args) == 2:
        num, den, ceiling = e.args[0], e.args[1], True
    elif isinstance(e, BinExpr) and e.op == "//":
        num, den, ceiling = e.left, e.right, False
    else:
        return None
    if not isinstance(den, int) or den <= 0:
        return None
    f = linear_bound(num, upper)  # both divisions grow with the numerator
    if f is None:
        return None
    slack = (den - 1) if ceiling and upper else -(den - 1) if not ceiling and not upper else 0
    return {k: Fraction(v) / den for k, v in f[0].items()}, Fraction(f[1] + slack) / den
@dataclass(frozen=True)
class Unsatisfied:
    """A dim definition (``D = 2*H``) the bound dims break: ``dim`` is ``given`` but its definition
    makes it ``defined`` (None when no integer value of the definition's unbound dim gives it)."""

    dim: str
    definition: Expr
    given: Number
    defined: Number | None
    values: dict[str, Number]  # the dims of the definition that were bound

    def message(self) -> str:
        shown = ", ".join(f"{k} = {v}" for k, v in sorted(self.values.items()))
        if self.defined is None:
            return (f"`{self.dim}` is {self.given}, but `{self.dim} = {to_text(self.definition)}` has no "
                    f"solution in whole dims{' with ' + shown if shown else ''}")
        return (f"`{self.dim}` is {self.given}, but `{self.dim} = {to_text(self.definition)}` makes it "
                f"{self.defined} ({shown})")


def bind_defined(defined: Mapping[str, Expr], values: dict[str, Number]) -> Unsatisfied | None:
    """Complete ``values`` with the dims ``defined`` gives (``{"D": 2*H}`` sets D from H, or H from
    D when only D is bound: a definition with one unbound dim is solved for it), and return the
    first definition the values break, or None. ``values`` is updated in place."""
    changed = True
    while changed:
        changed = False
        for dim, e in defined.items():
            free = free_symbols(e)
            missing = sorted(free - set(values))
            if not missing:
                v = evaluate(e, values)
                if dim not in values:
                    values[dim] = v
                    changed = True
                elif values[dim] != v:
                    return Unsatisfied(dim, e, values[dim], v, {k: values[k] for k in free})
            elif len(missing) == 1 and dim in values:
                form = linear(e)
                if form is None or not form[0].get(missing[0]):
                    continue
                coeffs, const = form
                rest = const + sum(c * values[k] for k, c in coeffs.items() if k != missing[0])
                solved, left = divmod(values[dim] - rest, coeffs[missing[0]])
                if left or solved < 0:
                    return Unsatisfied(dim, e, values[dim], None, {k: values[k] for k in free if k in values})
                values[missing[0]] = solved
                changed = True
    return None


class NotInteger(ValueError):
    """An expression used as an integer folds to a constant that is not one."""

    def __init__(self, value: float):
        super().__init__(f"{value!r} is not an integer")
        self.value = value


def as_integer(e: Expr) -> tuple[Expr, list[tuple[str, Expr, Expr]]]:
    """``e`` rewritten for a place that needs an integer (a loop bound, a shape, an offset).

    Python's ``/`` is true division; where an integer is needed, ``a / b`` stands for the integer
    it equals, so it becomes ``a // b`` under the condition that ``b`` divides ``a``. Returns the
    rewritten expression and the divisions it relies on, as ``(kind, num, den)`` with kind
    ``exact`` (``b`` must divide ``a``) or ``nonzero`` (``//``, ``%`` and ``cdiv`` need ``b != 0``).
    Raises :class:`NotInteger` for a constant that is not integral (``100 / 64``).
    """
    conds: list[tuple[str, Expr, Expr]] = []

    def go(x: Expr) -> Expr:
        if isinstance(x, bool):
            return x
        if isinstance(x, float):
            if not x.is_integer():
                raise NotInteger(x)
            return int(x)
        if isinstance(x, NegExpr):
            return neg(go(x.operand))
        if isinstance(x, BinExpr):
            a, b = go(x.left), go(x.right)
            if x.op == "/":
                if is_const(a) and is_const(b) and b != 0 and a % b:
                    raise NotInteger(a / b)
                conds.append(("exact", a, b))
                return floordiv(a, b)
            if x.op in ("//", "%"):
                conds.append(("nonzero", a, b))
            return binary(x.op, a, b)
        if isinstance(x, CallExpr):
            args = tuple(go(a) for a in x.args)
            if x.fn == "cdiv":
                conds.append(("nonzero", args[0], args[1]))
            return call(x.fn, *args)
        return x

    out = go(e)
    return out, [c for c in conds if not (is_const(c[2]) and c[2] != 0 and (c[0] != "exact" or is_const(c[1])))]


# ---------------------------------------------------------------- text

_PREC = {"or": -2, "and": -1, "<": 0, "<=": 0, ">": 0, ">=": 0, "==": 0, "!=": 0,
         "+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2}


def to_text(e: Expr) -> str:
    if isinstance(e, (BinExpr, CallExpr, NegExpr)):
        # printing IR and ordering a sum's factors print the same subtrees often
        return _kept(e, "_text", _text, e)
    return _text(e)


def _text(e: Expr) -> str:
    if isinstance(e, bool):
        return "true" if e else "false"
    if isinstance(e, int):
        return str(e)
    if isinstance(e, float):
        return _float_text(e)
    if isinstance(e, Sym):
        return e.name
    if isinstance(e, NegExpr):
        inner = to_text(e.operand)
        return f"-({inner})" if isinstance(e.operand, BinExpr) else f"-{inner}"
    if isinstance(e, CallExpr):
        return f"{e.fn}({', '.join(to_text(a) for a in e.args)})"
    if isinstance(e, BinExpr):
        p = _PREC[e.op]
        left = to_text(e.left)
        right = to_text(e.right)
        if isinstance(e.left, BinExpr) and _PREC[e.left.op] < p:
            left = f"({left})"
        if (isinstance(e.right, BinExpr) and _PREC[e.right.op] <= p) or _negative_const(e.right):
            right = f"({right})"
        if _negative_const(e.left):
            left = f"({left})"
        return f"{left} {e.op} {right}"
    raise TypeError(f"not a symbolic expression: {e!r}")


def _negative_const(e: Expr) -> bool:
    return is_const(e) and e < 0


def _float_text(v: float) -> str:
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if math.isnan(v):
        return "nan"
    text = repr(v)
    return text if any(c in text for c in ".en") else text + ".0"


class ExprSyntaxError(ValueError):
    pass


def parse(text: str) -> Expr:
    """Parse the printer's infix form (also accepts ordinary user expressions like ``S - 1``)."""
    p = ExprParser(tokenize(text), text)
    e = p.cond()
    p.expect_end()
    return e


class ExprParser:
    """Recursive descent over a token list; the IR parser shares it for attribute values."""

    def __init__(self, toks: list[str], text: str = "", pos: int = 0):
        self.toks = toks
        self.i = pos
        self.text = text

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise ExprSyntaxError(f"expected {want or 'a token'} in {self.text!r}")
        self.i += 1
        return tok

    def expect_end(self) -> None:
        if self.peek() is not None:
            raise ExprSyntaxError(f"unexpected {self.peek()!r} in {self.text!r}")

    def cond(self) -> Expr:
        e = self.conj()
        while self.peek() == "or":
            self.take()
            e = logical("or", e, self.conj())
        return e

    def conj(self) -> Expr:
        e = self.comparison()
        while self.peek() == "and":
            self.take()
            e = logical("and", e, self.comparison())
        return e

    def comparison(self) -> Expr:
        e = self.expr()
        while self.peek() in _CMP:
            op = self.take()
            e = compare(op, e, self.expr())
        return e

    def expr(self) -> Expr:
        e = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            e = binary(op, e, self.term())
        return e

    def term(self) -> Expr:
        e = self.unary()
        while self.peek() in ("*", "/", "//", "%"):
            op = self.take()
            e = binary(op, e, self.unary())
        return e

    def unary(self) -> Expr:
        if self.peek() == "-":
            self.take()
            return neg(self.unary())
        return self.atom()

    def atom(self) -> Expr:
        tok = self.take()
        if tok == "(":
            e = self.cond()
            self.take(")")
            return e
        if tok[0].isdigit() or tok[0] == ".":
            return float(tok) if any(c in tok for c in ".eE") else int(tok)
        if tok in ("inf", "nan"):
            return float(tok)
        if tok in ("true", "false"):
            return tok == "true"
        if tok[0].isalpha() or tok[0] == "_":
            if self.peek() == "(" and tok in _CALL:
                self.take("(")
                args = [self.cond()]
                while self.peek() == ",":
                    self.take(",")
                    args.append(self.cond())
                self.take(")")
                return call(tok, *args)
            return Sym(tok)
        raise ExprSyntaxError(f"unexpected {tok!r} in {self.text!r}")


_NUMBER = re.compile(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def tokenize(text: str) -> list[str]:
    toks: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif m := _NUMBER.match(text, i):
            toks.append(m.group())
            i = m.end()
        elif c.isalpha() or c == "_":
            j = i
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
            toks.append(text[i:j])
            i = j
        elif text[i:i + 2] in ("//", "<=", ">=", "==", "!="):
            toks.append(text[i:i + 2])
            i += 2
        elif c in "+-*/%(),<>":
            toks.append(c)
            i += 1
        else:
            raise ExprSyntaxError(f"unexpected character {c!r} in {text!r}")
    return toks
