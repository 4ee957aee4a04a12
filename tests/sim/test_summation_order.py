"""Golden cases must pass under every legitimate summation order of a reduction, not only ours.

pto-isa documents TROWSUM as a plain sum: its CPU simulation adds left to right, our CPU header
and the simulator add pairwise (numpy's order), the A2/A3 vector unit in a tree of 64-lane
repeats. A case whose tolerance admits only one of them fails against the real pto-isa headers
(layernorm_bwd's f32 tails case did, in 2 of 777 dgamma values). Here every f32 case of a spec that
sums runs on the simulator with left-to-right sums, the order whose rounding error grows fastest
with the length, so a tolerance too tight for it shows without pto-isa.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import ptodsl.backends.sim as sim
from ptodsl.cases import TestCase
from ptodsl.golden import compare, load, load_reference, make_inputs, run_case
from ptodsl.ops import OPS

SPECS = Path(__file__).resolve().parents[2] / "specs"
SUMMING = sorted(p for p in SPECS.glob("*.yaml")
                 if re.search(r"\b(sum|mean)\(", p.with_suffix(".pto").read_text("utf-8")))


def _left_to_right(vals: np.ndarray, axis: int, keepdims: bool = True) -> np.ndarray:
    # ufunc.accumulate adds strictly in index order, in the array's own dtype
    return np.take(np.add.accumulate(vals, axis=axis, dtype=vals.dtype), [-1], axis=axis)


@pytest.fixture
def left_to_right_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim, "OPS", dict(OPS, sum=dataclasses.replace(OPS["sum"], sim=_left_to_right)))


def _f32_cases(op) -> list[TestCase]:
    return [c for c in op.spec.tests if set(c.dtypes.values()) <= {"f32"}]


def test_the_specs_that_sum_are_found() -> None:
    names = {p.stem for p in SUMMING}
    assert {"layernorm", "layernorm_bwd", "sum_rows", "softmax", "sum_cols"} <= names


# flash attention's cases take about 14 s: under -m slow
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.stem == "flash_attn" else p
                                  for p in SUMMING], ids=[p.stem for p in SUMMING])
def test_f32_cases_pass_with_left_to_right_sums(path: Path, left_to_right_sums: None) -> None:
    op = load(str(path))
    cases = _f32_cases(op)
    if not cases:
        pytest.skip("no f32 case")
    failed = [f"{c.name or c.index}: {r.report}" for c in cases if not (r := run_case(op, c, "sim")).ok]
    assert not failed, "\n".join(failed)


def test_left_to_right_sums_change_results_and_need_layernorm_bwd_atol(left_to_right_sums: None) -> None:
    """The order above is really another order: at the default f32 tolerance layernorm_bwd's
    tails case fails with it (as against pto-isa), and passes with the atol its YAML derives."""
    op = load(str(SPECS / "layernorm_bwd.yaml"))
    (case,) = [c for c in _f32_cases(op) if c.name == "tails"]
    assert case.atol == 1e-5 and case.rtol is None
    assert run_case(op, case, "sim").ok
    result = run_case(op, dataclasses.replace(case, atol=None), "sim")
    assert not result.ok and "output `dgamma`" in result.report


def test_layernorm_bwd_atol_still_catches_a_wrong_eps() -> None:
    """The widened atol must not hide a real mistake: outputs computed with eps 1e-5 where the
    case says 1e-3 (a scalar not passed through) fail the case's tolerance."""
    op = load(str(SPECS / "layernorm_bwd.yaml"))
    (case,) = [c for c in _f32_cases(op) if c.name == "tails"]
    wrong = run_case(op, dataclasses.replace(case, scalars={"eps": 1e-5}), "sim")
    arrays, scalars = make_inputs(op, case)
    want = load_reference(op.spec)(**{k: arrays[k] for k in ("x", "gamma", "dy")}, **scalars)
    reports = [compare(name, wrong.outputs[name], w, 1e-5, case.atol)
               for name, w in zip(("dx", "dgamma", "dbeta"), want)]
    assert reports[0] and reports[1] and not reports[2]  # dbeta does not depend on eps
