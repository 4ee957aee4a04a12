"""The accuracy bounds the op table and docs/LANGUAGE.md state for composite ops, measured.

Each composite's template (``ptodsl/ops.py``) is evaluated as a device computes it: every
primitive on float32 values, its result rounded to float32 (the simulator's and the CPU header's
arithmetic), and compared with numpy's float64 function over the op's domain. The bound in
``BOUNDS`` must be the one the op's doc line and LANGUAGE.md give; special values (zeros,
infinities, NaN, the ends of a domain) must come out as numpy's do."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from ptodsl.ops import COMPARE_SIM, OPS, TEMPLATE_COMPARES

LANGUAGE = (Path(__file__).resolve().parents[1] / "docs" / "LANGUAGE.md").read_text(encoding="utf-8")
F32 = np.float32


def evaluate_f32(node, names: dict):
    """A template on float32 arrays, each primitive rounded to float32 as the device stores it."""
    if isinstance(node, str):
        return names[node]
    if isinstance(node, float):
        return F32(node)
    name, *args = node
    if name == "let":
        var, value, body = args
        return evaluate_f32(body, names | {var: evaluate_f32(value, names)})
    vals = [evaluate_f32(a, names) for a in args]
    if name in TEMPLATE_COMPARES:
        return COMPARE_SIM[name](*vals)
    od = OPS[name]
    if od.expand is not None:
        return evaluate_f32(od.expand, dict(zip("xyz", vals)))
    with np.errstate(all="ignore"):
        return np.asarray(od.sim(*vals)).astype(F32)


def _grid(lo: float, hi: float, n: int = 400_001) -> np.ndarray:
    return np.linspace(lo, hi, n).astype(F32)


def _tiny(hi: float) -> np.ndarray:
    mags = np.geomspace(1e-30, hi, 20_001)
    return np.concatenate([mags, -mags]).astype(F32)


# op -> [(domain, kind of error, bound)], the bound as the op's doc states it
BOUNDS = {
    "exp2": [(_grid(-126.0, 127.99), "relative", 4e-7), (_grid(-1.0, 1.0), "relative", 4e-7)],
    "log1p": [(_grid(-0.9999999, 1.0), "relative", 4e-7), (_grid(1.0, 1e6), "relative", 4e-7),
              (_tiny(0.5), "relative", 4e-7), (_grid(1e3, 3e38, 100_001), "relative", 4e-7)],
    "sin": [(_grid(-1e4, 1e4, 2_000_001), "absolute", 2e-7), (_grid(-1e5, 1e5, 2_000_001), "absolute", 1e-6),
            (_tiny(1.0), "relative", 4e-7)],
    "cos": [(_grid(-1e4, 1e4, 2_000_001), "absolute", 2e-7), (_grid(-1e5, 1e5, 2_000_001), "absolute", 1e-6)],
    "erf": [(_grid(-6.0, 6.0), "absolute", 3e-7)],
    "sign": [(_grid(-3.0, 3.0, 1001), "absolute", 0.0)],
}
REFERENCE = {"exp2": np.exp2, "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "sign": np.sign,
             "erf": np.vectorize(math.erf, otypes=[np.float64])}
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-45, -1e-45, 3e38, -3e38], F32)


@pytest.mark.parametrize("name", list(BOUNDS))
def test_a_composite_is_within_its_documented_bound(name: str):
    od = OPS[name]
    for x, kind, bound in BOUNDS[name]:
        got = evaluate_f32(od.expand, {"x": x}).astype(np.float64)
        want = REFERENCE[name](x.astype(np.float64))
        err = np.abs(got - want)
        if kind == "relative":
            err = err / np.abs(want)
        worst = int(np.argmax(err))
        assert err[worst] <= bound, f"{name}({x[worst]!r}) = {got[worst]!r}, numpy {want[worst]!r}: {kind} error {err[worst]:.3g} > {bound:g}"


def test_the_bounds_are_the_documented_ones():
    """The figures the op table's docs and LANGUAGE.md give are the ones tested here."""
    stated = {"exp2": "4e-7", "log1p": "4e-7", "sin": "2e-7", "cos": "2e-7", "erf": "3e-7"}
    for name, figure in stated.items():
        assert figure in OPS[name].doc, f"`{name}`'s doc line states no bound of {figure}"
        assert float(figure) == max(b for _, _, b in BOUNDS[name] if b <= float(figure))
    for name in ("exp2", "log1p", "sin", "cos"):
        line = next(ln for ln in LANGUAGE.splitlines() if re.search(rf"`{name}\(x\)`", ln))
        assert line, f"LANGUAGE.md has no line for `{name}`"
    assert "1e-6 for |x| <= 1e5" in LANGUAGE and "at most 2e-7" in LANGUAGE and "at most 4e-7" in LANGUAGE


@pytest.mark.parametrize("name", ["exp2", "log1p", "sin", "cos", "sign"])
def test_special_values_come_out_as_numpys(name: str):
    got = evaluate_f32(OPS[name].expand, {"x": SPECIAL})
    with np.errstate(all="ignore"):
        want = REFERENCE[name](SPECIAL.astype(np.float64)).astype(F32)
    if name in ("sin", "cos"):  # beyond the reduction's range (see the op's doc): bounded, not accurate
        big = np.abs(SPECIAL) > 1e7
        assert np.all(np.abs(got[big & np.isfinite(SPECIAL)]) <= 1.0)
        got, want = got[~big | ~np.isfinite(SPECIAL)], want[~big | ~np.isfinite(SPECIAL)]
    np.testing.assert_allclose(got, want, rtol=4e-7, atol=2e-7, equal_nan=True)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), np.isinf(want))
