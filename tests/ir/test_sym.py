"""Symbolic expressions: folding, printing that parses back, evaluation and range proofs."""

import math
import random

import pytest

from ptodsl import sym


@pytest.mark.parametrize("text", [
    "min(N - j * 1024, 1024)", "a - (b - 3)", "(a + b) * c", "cdiv(L, BL)", "x * (-2.5)",
    "j == L // BL - 1", "a < 3 and not(b >= 2) or c", "1e-06", "-x", "-(a + b)", "a / b / c", "a // (b * c)",
])
def test_print_parse_roundtrip(text):
    e = sym.parse(text)
    assert sym.parse(str(sym.to_text(e))) == e


def test_constant_folding_and_identities():
    n = sym.Sym("N")
    assert sym.add(n, 0) == n
    assert sym.mul(n, 1) == n
    assert sym.mul(0, n) == 0
    assert sym.sub(n, n) == 0
    assert sym.ceildiv(3000, 1024) == 3
    assert sym.add(sym.add(n, 2), 3) == sym.add(n, 5)
    assert sym.min_(n, sym.add(n, 1), {"N": (0, None)}) == n


def test_random_expressions_roundtrip_and_evaluate():
    rng = random.Random(7)
    names = ["a", "b", "c"]

    def gen(depth):
        if depth == 0 or rng.random() < 0.3:
            return rng.choice([sym.Sym(rng.choice(names)), rng.randint(-5, 9)])
        op = rng.choice(["+", "-", "*", "min", "max", "cdiv"])
        x, y = gen(depth - 1), gen(depth - 1)
        if op == "cdiv":
            return sym.ceildiv(x, rng.randint(1, 7))
        if op in ("min", "max"):
            return sym.call(op, x, y)
        return sym.binary(op, x, y)

    for _ in range(300):
        e = gen(4)
        env = {n: rng.randint(0, 20) for n in names}
        back = sym.parse(sym.to_text(e))
        assert back == e, sym.to_text(e)
        assert sym.evaluate(back, env) == sym.evaluate(e, env)


def test_bounds_prove_le():
    r = {"N": (0, None), "i": (0, 10)}
    assert sym.prove_le(0, sym.Sym("N"), r)
    assert not sym.prove_le(sym.Sym("i"), 5, r)
    assert sym.prove_le(sym.Sym("i"), 10, r)


def test_a_min_of_a_min_holding_the_same_term_is_that_min():
    """min(a, min(a, b)) is min(a, b), either way round, and max alike: a valid extent clamped
    twice by one bound (varlen attention's rows of a query tile) prints as one clamp, so the grid
    loops over it have equal trip counts and fuse."""
    a, b, c = sym.Sym("a"), sym.Sym("b"), sym.Sym("c")
    for f in (sym.min_, sym.max_):
        inner = f(a, b)
        assert f(a, inner) == inner and f(inner, a) == inner and f(b, inner) == inner
        assert f(c, inner) != inner  # another term still clamps
        for va, vb, vc in ((1, 2, 3), (5, -1, 0), (2, 2, 7)):
            env = {"a": va, "b": vb, "c": vc}
            assert sym.evaluate(f(a, inner), env) == sym.evaluate(sym.CallExpr(f.__name__[:3], (a, inner)), env)


def test_a_share_over_a_symbolic_count_is_bounded_below():
    """A block's share of a loop whose trip count only the kernel knows starts at
    ``(b % n) * cdiv(t, n)``: non-negative for a non-negative index and trip count and a count of at
    least 1, and a remainder stays below its divisor; the bounds agree with evaluation."""
    r = {"b": (0, None), "t": (0, None), "H": (1, None)}
    n = sym.max_(sym.floordiv(24, sym.max_(sym.Sym("H"), 1)), 1)
    share = sym.mul(sym.mod(sym.Sym("b"), n), sym.ceildiv(sym.Sym("t"), n))
    assert sym.bounds(share, r) == (0, None)
    assert sym.bounds(sym.mod(sym.Sym("b"), n), r) == (0, 23)
    assert sym.bounds(sym.ceildiv(sym.Sym("t"), sym.Sym("H")), r) == (0, None)
    assert sym.bounds(sym.mod(sym.Sym("b"), 5), {"b": (0, 3)}) == (0, 3)
    assert sym.bounds(sym.mod(sym.Sym("b"), sym.Sym("H")), {"b": (-1, 3), "H": (1, None)}) == (None, None)
    for b, t, h in ((0, 0, 1), (37, 5, 8), (23, 100, 3), (5, 1, 24)):
        v = sym.evaluate(share, {"b": b, "t": t, "H": h})
        assert v >= 0 and b % max(24 // h, 1) <= 23


def test_floor_division_by_a_common_factor_is_exact():
    """(2*F) // 2 is F, so a slice x[:, 0:D // 2] of a dim D = 2*F has width F (RoPE's halves);
    a division that is not exact stays a division."""
    F, G = sym.Sym("F"), sym.Sym("G")
    assert sym.floordiv(sym.mul(F, 2), 2) == F
    assert sym.floordiv(sym.add(sym.mul(F, 4), 6), 2) == sym.add(sym.mul(F, 2), 3)
    assert sym.floordiv(sym.sub(sym.mul(F, 6), sym.mul(G, 3)), 3) == sym.sub(sym.mul(F, 2), G)
    for kept in (sym.add(F, 2), sym.mul(F, 3)):
        assert isinstance(sym.floordiv(kept, 2), sym.BinExpr)
    for f, g in ((5, 7), (1, 0), (-3, 2)):  # the rewrite agrees with integer division everywhere
        env = {"F": f, "G": g}
        e = sym.add(sym.mul(F, 4), sym.mul(G, -6))
        assert sym.evaluate(sym.floordiv(e, 2), env) == sym.evaluate(e, env) // 2


def test_a_clamped_extent_inside_a_sum_is_proved_through_its_min():
    """The width of concat([x[:, D // 2:D], x[:, 0:D // 2]]) is (D - D // 2) + min(D, D // 2): it
    fits in D because the min is at most D // 2, and D - D // 2 >= 0 through the division's linear
    bound. A min that must be large, or a max that must be small, is not proved."""
    D = sym.Sym("D")
    r = {"D": (0, None)}
    half = sym.floordiv(D, 2)
    width = sym.add(sym.sub(D, half), sym.min_(D, half))
    assert sym.prove_le(width, D, r)
    assert sym.prove_le(half, D, r) and sym.prove_le(0, sym.sub(D, half), r)
    assert not sym.prove_le(D, half, r)
    assert not sym.prove_le(D, sym.min_(D, half), r)
    assert not sym.prove_le(sym.max_(D, sym.Sym("E")), D, {"D": (0, None), "E": (0, None)})
    assert sym.prove_le(sym.min_(D, sym.Sym("E")), sym.add(D, 1), {"D": (0, None), "E": (0, None)})


def _random_expr(r: random.Random, depth: int) -> sym.Expr:
    if depth == 0 or r.random() < 0.25:
        c = r.random()
        if c < 0.3:
            return sym.Sym(r.choice("abc"))
        if c < 0.6:
            return r.randint(-5, 9)
        return r.choice([0.5, -2.0, 3.0, math.inf, True])
    k = r.random()
    if k < 0.6:
        op = r.choice(["+", "-", "*", "/", "//", "%", "<", "<=", "==", "!=", "and", "or"])
        return sym.BinExpr(op, _random_expr(r, depth - 1), _random_expr(r, depth - 1))
    if k < 0.8:
        return sym.CallExpr(r.choice(["min", "max", "cdiv"]), (_random_expr(r, depth - 1), _random_expr(r, depth - 1)))
    if k < 0.9:
        return sym.CallExpr("not", (_random_expr(r, depth - 1),))
    return sym.NegExpr(_random_expr(r, depth - 1))


def test_a_compiled_expression_computes_what_the_tree_walk_does():
    """An expression evaluated again runs as a compiled Python function: it must give the same
    value of the same type, or raise the same error, as walking the tree (random trees, both ways)."""
    r = random.Random(5)

    def outcome(fn, e, env):
        try:
            return "ok", fn(e, env)
        except (ArithmeticError, KeyError, TypeError) as exc:
            return "error", type(exc).__name__

    for _ in range(3000):
        e = _random_expr(r, 5)
        env = {"a": r.randint(-4, 6), "b": r.randint(1, 5), "c": r.random()}
        walked = outcome(sym._walk, e, env)
        for _ in range(3):  # the first two evaluations walk (the second compiles), the third calls
            got = outcome(sym.evaluate, e, env)
            nan = got[0] == walked[0] == "ok" and isinstance(got[1], float) and math.isnan(got[1])
            assert (nan and math.isnan(walked[1])) or (got == walked and type(got[1]) is type(walked[1])), \
                (sym.to_text(e), env)


def test_a_floor_product_is_its_numerator_less_a_remainder():
    """``(x // y) * y`` is ``x - r`` with ``0 <= r < y`` for a divisor ``y >= 1``: the query heads of
    one KV head times the KV heads, ``(NQ // n) * n``, fit in ``NQ`` (paged attention's rows)."""
    d, x, g = sym.Sym("d"), sym.Sym("X"), sym.floordiv(64, sym.Sym("d"))
    r = {"d": (1, None)}
    assert sym.bounds(g, r) == (0, 64)
    assert sym.bounds(g, {"d": (0, None)}) == (None, None)  # d may be 0
    assert sym.prove_le(sym.mul(g, d), 64, r)
    assert sym.prove_le(sym.mul(sym.floordiv(g, 16), 16), g, r)
    assert sym.prove_le(sym.mul(sym.floordiv(x, d), d), x, r)  # any x: floor rounds down
    assert not sym.prove_le(64, sym.mul(g, d), r)
    assert not sym.prove_le(sym.mul(sym.floordiv(x, d), d), sym.sub(x, 1), r)
    assert not sym.prove_le(sym.mul(g, d), 64, {"d": (0, None)})  # no divisor proved at least 1
    # the band of (n, g) over n < d and g < (64 // d) // 16, a tile of 16 rows each: 64 rows at most
    band = sym.add(sym.add(16, sym.mul(g, sym.sub(d, 1))), sym.mul(16, sym.sub(sym.floordiv(g, 16), 1)))
    assert sym.prove_le(band, 64, r)
    assert not sym.prove_le(band, 63, r)


def test_floor_products_prove_only_what_holds():
    """Random sums of floor products, quotients and their parts: whatever the prover accepts holds
    at every sampled point."""
    rng = random.Random(7)
    x, y = sym.Sym("x"), sym.Sym("y")
    parts = [sym.mul(sym.floordiv(x, y), y), sym.floordiv(x, y), x, y,
             sym.mul(sym.floordiv(x, 4), 4), sym.floordiv(x, 4)]
    ranges = {"x": (0, 200), "y": (1, 20)}
    points = [(rng.randint(0, 200), rng.randint(1, 20)) for _ in range(300)] + [(0, 1), (200, 20), (199, 1)]
    proved = 0
    for _ in range(400):
        e = rng.randint(-8, 8)
        for p in parts:
            e = sym.add(e, sym.mul(p, rng.randint(-2, 2)))
        if sym.prove_nonneg(e, ranges):
            proved += 1
            for vx, vy in points:
                assert sym.evaluate(e, {"x": vx, "y": vy}) >= 0, (sym.to_text(e), vx, vy)
    assert proved > 20  # the property is not vacuous


def test_an_unrolled_loops_index_is_bounded_in_its_body():
    """Inside `loop(0, max(cdiv(L, 128) - 2, 0) // 2)` (attention's middle KV blocks unrolled by
    two) the loop runs, so the `max` takes its first argument: the provers then see that block
    `1 + 2 j` is whole, which they could not through the `max`."""
    hi = sym.parse("max(cdiv(L, 128) - 2, 0) // 2")
    whole = sym.parse("L - (1 + j * 2) * 128")
    assert not sym.prove_le(128, whole, {"L": (1, None), "j": (0, sym.sub(hi, 1))})
    assert sym.prove_le(128, whole, {"L": (1, None), "j": sym.body_range(0, hi)})
    assert sym.body_range(0, sym.parse("max(0, n - 3)")) == (0, sym.parse("n - 4"))
    # from a start that may be negative, nothing is taken off
    assert sym.body_range(sym.Sym("a"), hi) == (sym.Sym("a"), sym.sub(hi, 1))
