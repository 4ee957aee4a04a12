"""Every golden case of the library on the cpu backend: against the spec's reference, and against
the simulator (the reference semantics of the IR) within the output dtype's tolerance.

Each variant of a spec is a C++ build, and the library's 200 do not fit the everyday suite's time:
it runs the cases of one variant of one spec per kernel family (:data:`EVERYDAY`); the cases of the
others are marked ``full`` and run with ``pytest -m full`` (CI runs both)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from library_families import EVERYDAY  # tests/library_families.py

from ptodsl.dtypes import from_numpy
from ptodsl.frontend.spec import load_spec
from ptodsl.golden import case_id, compare, run_case, tolerance

ROOT = Path(__file__).resolve().parents[3]
SPECS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "specs").glob("*.yaml"))

pytestmark = pytest.mark.cpu

# Cases the cpu backend is known to miss, with the reason; strict, so a fix shows up as a failure
# that asks for the entry to go.
KNOWN: dict[str, str] = {}


def _variant_text(variant: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in variant.items())


def _cases() -> list:
    params = []
    for path in SPECS:
        spec = load_spec(str(ROOT / path))
        everyday = EVERYDAY.get(Path(path).stem)
        for index, case in enumerate(spec.tests):
            cid = case_id(spec, case)
            marks = [pytest.mark.xfail(strict=True, reason=KNOWN[cid])] if cid in KNOWN else []
            if _variant_text(spec.variant_of(case)) != everyday:
                marks.append(pytest.mark.full)
            params.append(pytest.param(path, index, id=cid, marks=marks))
    return params


def test_every_everyday_entry_names_a_variant_with_cases():
    """An entry naming a spec or variant that has gone would silently drop its family from the suite."""
    for name, variant in EVERYDAY.items():
        path = ROOT / "specs" / f"{name}.yaml"
        assert path.exists(), f"EVERYDAY names `{name}`, which is not a library spec"
        spec = load_spec(str(path))
        assert variant in {_variant_text(spec.variant_of(c)) for c in spec.tests}, f"{name}: no case of {variant!r}"


@pytest.mark.parametrize(("spec_file", "index"), _cases())
def test_case_on_cpu(library, spec_file: str, index: int):
    op = library[spec_file]
    case = op.spec.tests[index]
    cpu = run_case(op, case, backend="cpu", poison=True)
    assert cpu.ok, cpu.report
    sim = run_case(op, case, backend="sim", poison=True)
    for name, got in cpu.outputs.items():
        want = sim.outputs[name]
        assert got.dtype == want.dtype
        # the case's own tolerance: a case widens it where summation order legitimately differs
        rtol, atol = tolerance(case, from_numpy(got.dtype))
        report = compare(name, got, want, rtol, atol)
        assert not report, f"cpu and sim disagree:\n{report}"


def test_no_poison_gives_the_same_answer(library):
    """Poisoning only changes what unwritten data reads as: a correct kernel gives equal outputs."""
    op = library["specs/softmax_long.yaml"]
    case = op.spec.tests[0]
    a = run_case(op, case, backend="cpu", poison=True)
    b = run_case(op, case, backend="cpu", poison=False)
    np.testing.assert_array_equal(a.outputs["y"], b.outputs["y"])
