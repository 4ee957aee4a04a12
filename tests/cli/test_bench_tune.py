"""``ptodsl bench`` and ``ptodsl tune`` run to the end on every library spec: each spec's scalars,
defaults, ranks and tiles reach the measuring code, not only those of the spec a test picked."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ptodsl import cli
from ptodsl.bench import bench

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(f"specs/{p.name}" for p in (ROOT / "specs").glob("*.yaml"))

# Tuning these models 12 to 17 candidates through the passes for over half a second each (the fuse
# pass dominates); `pytest -m slow` tunes them, the everyday suite tunes every other spec.
@pytest.mark.parametrize("spec", SPECS)
def test_bench_runs_every_case_of_every_library_spec(spec):
    """Every case once on the simulator (one call after the warm-up): the numbers do not matter
    here, only that no case ends in an error or an internal one."""
    rows: list = []
    failed = bench([spec], backend="sim", out=io.StringIO(), rows=rows, min_round_s=0.0, rounds=1)
    errors = [(r.case, r.error) for r in rows if r.error]
    assert failed == 0 and not errors, errors
    assert rows and all(r.seconds is not None and r.numpy_s is not None for r in rows)


def test_bench_uses_a_scalars_default_where_the_case_gives_none(capsys):
    """scale_shift's `tail` case leaves `beta` to its default (0.5)."""
    code = cli.main(["bench", "specs/scale_shift.yaml", "--backend", "sim", "-k", "tail", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert [r["case"] for r in doc["rows"]] == ["scale_shift[f16-tail]"] and doc["rows"][0]["error"] is None


@pytest.mark.parametrize("spec", SPECS)  # the largest specs' tunes are slow (tests/conftest.py HEAVY_FOR)
def test_tune_runs_on_every_library_spec(spec, capsys):
    assert cli.main(["tune", spec, "--jobs", "1", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["candidates"]
    assert [r["compiled"] for r in rows].count(True) == 1 and rows[0]["compiled"]
    assert [r["best"] for r in rows].count(True) == 1
    assert len({r["schedule"] for r in rows}) == len(rows), "a candidate is shown once"
    assert doc["compiled"] == rows[0]["schedule"]
    assert rows[0]["pipe_work"] is not None, rows[0]  # what the spec compiles with is modelled


@pytest.mark.cpu
@pytest.mark.slow  # (README suite time)
def test_tune_measures_a_spec_with_a_scalar_default(capsys):
    """The largest case of scale_shift leaves `beta` to its default: each candidate is built and timed."""
    assert cli.main(["tune", "specs/scale_shift.yaml", "--jobs", "1", "--measure", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["candidates"]
    assert len(rows) > 1 and all(r["cpu_seconds"] and r["cpu_seconds"] > 0 for r in rows), rows
