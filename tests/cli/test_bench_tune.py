"""``ptodsl bench`` runs to the end on every library spec: each spec's scalars,
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
