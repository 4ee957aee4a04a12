"""`ptodsl ir --stats` reports the chip model per case; `--bench` models the specs' chip-filling
`bench:` cases (dry run, never the simulator); `ptodsl bench --bench` times them. Nothing here runs
a bench-sized case on a backend: `bench --bench` is exercised on a spec whose bench case is small."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from ptodsl import cli
from ptodsl.bench import bench
from ptodsl.diagnostics import Diagnostics
from ptodsl.frontend.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
CHIP_KEYS = {"case", "launches", "block_dim", "cores_used", "modelled_us", "chip_roofline_us", "roofline_ratio",
             "bound"}


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return code, out.out, out.err


def test_stats_bench_models_the_bench_cases(capsys):
    code, out, _ = run(capsys, "ir", "specs/softmax.yaml", "--stats", "--bench")
    assert code == 0
    assert "softmax[f32-B16384]: GM bytes modelled 134217728, minimum 134217728, ratio 1.00" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("chip:"))
    for word in ("1 launch,", "block_dim 48", "48 cores used", "modelled", "chip roofline", "bound: "):
        assert word in line, line
    code, out, _ = run(capsys, "ir", "specs/softmax.yaml", "--stats", "--bench", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["stats"][0]["bench"] is True
    (chip,) = doc["stats"][0]["chip"]
    assert set(chip) == CHIP_KEYS
    assert chip["case"] == "softmax[f32-B16384]" and chip["launches"] == 1  # the rows run as blocks
    assert chip["block_dim"] == 48 and chip["cores_used"] == 48
    assert chip["modelled_us"] > chip["chip_roofline_us"] > 0
    assert chip["roofline_ratio"] == chip["modelled_us"] / chip["chip_roofline_us"]
    assert chip["bound"] in {"HBM", "launch", "V", "MTE2", "MTE3", "S"}


def test_stats_of_the_test_cases_carry_the_chip_too(capsys):
    code, out, _ = run(capsys, "ir", "specs/add_one.yaml", "--stats", "--format", "json")
    doc = json.loads(out)
    stats = doc["stats"][0]
    assert code == 0 and stats["bench"] is False
    assert [c["case"] for c in stats["chip"]] == [t["case"] for t in stats["traffic"]]
    assert all(set(c) == CHIP_KEYS and c["launches"] == 1 for c in stats["chip"])


def test_bench_needs_stats(capsys):
    code, _, err = run(capsys, "ir", "specs/add_one.yaml", "--bench")
    assert code == 1 and "error[E0250]" in err and "--stats" in err


def _library(tmp_path: Path, names: tuple[str, ...]) -> Path:
    for name in names:
        for ext in ("pto", "yaml"):
            shutil.copy(ROOT / "specs" / f"{name}.{ext}", tmp_path / f"{name}.{ext}")
    shutil.copy(ROOT / "specs" / "refs.py", tmp_path / "refs.py")
    return tmp_path


@pytest.mark.slow  # models matmul and its backward at 4096^3 (seconds); CI runs it under -m slow
def test_the_library_summary_on_bench_shapes(tmp_path, capsys):
    lib = _library(tmp_path, ("add_one", "matmul", "matmul_bwd", "exp"))  # matmul names matmul_bwd
    text = (lib / "exp.yaml").read_text()
    (lib / "exp.yaml").write_text(text[: text.index("bench:")])  # a spec without bench cases yet
    code, out, _ = run(capsys, "ir", str(lib), "--stats", "--bench")
    assert code == 0
    head = out.splitlines()[0].split()
    assert head[:2] == ["case", "launches"] and "bound" in head
    assert "add_one[M4096-N4096]" in out and "matmul[f16-M4096-K4096-N4096]" in out
    assert "worst ratio to the chip roofline, per spec:" in out
    assert "of 3 ops within 1.3x of the chip roofline in every bench case" in out
    assert "no bench cases: exp" in out
    code, out, _ = run(capsys, "ir", str(lib), "--stats", "--bench", "--format", "json")
    doc = json.loads(out)
    summary = doc["bench_summary"]
    assert set(summary["worst_ratio"]) == {"add_one", "matmul", "matmul_bwd"}
    assert summary["without_bench_cases"] == ["exp"] and summary["ops"] == 3 and summary["near_factor"] == 1.3


def test_bench_times_the_bench_cases_only(tmp_path, capsys):
    """A spec whose bench case is small enough for the simulator."""
    lib = _library(tmp_path, ("add_one",))
    text = (lib / "add_one.yaml").read_text()
    (lib / "add_one.yaml").write_text(text[: text.index("bench:")] + "bench:\n  - {shapes: {M: 16, N: 512}}\n")
    rows: list = []
    failed = bench([str(lib)], backend="sim", out=io.StringIO(), rows=rows, min_round_s=0.0, rounds=1,
                   bench_cases=True)
    assert failed == 0
    (row,) = rows
    assert row.case == "add_one[M16-N512]" and row.error is None and row.seconds > 0
    assert row.modelled_us > row.chip_roofline_us > 0


def test_test_never_runs_bench_cases(tmp_path, capsys):
    lib = _library(tmp_path, ("add_one",))
    text = (lib / "add_one.yaml").read_text()
    # a bench case the simulator could not finish: `ptodsl test` must not touch it
    (lib / "add_one.yaml").write_text(text[: text.index("bench:")] + "bench:\n  - {shapes: {M: 1000000, N: 1000000}}\n")
    code, out, _ = run(capsys, "test", str(lib), "--format", "json")
    doc = json.loads(out)
    spec = load_spec(str(lib / "add_one.yaml"), Diagnostics())
    assert code == 0 and len(doc["cases"]) == len(spec.tests) == 3 and len(spec.bench) == 1


def test_a_bench_case_is_checked_like_a_test_case(tmp_path, capsys):
    lib = _library(tmp_path, ("exp",))
    text = (lib / "exp.yaml").read_text()
    (lib / "exp.yaml").write_text(text[: text.index("bench:")] + "bench:\n  - {shapes: {M: 8, N: 8}, dtypes: {U: f32}}\n")
    code, _, err = run(capsys, "check", str(lib / "exp.yaml"))
    assert code == 1 and "bench case 0 binds `U`" in err and "exp.yaml:" in err


def test_every_library_spec_has_bench_cases():
    """New specs may arrive without them (the library summary lists those); today's all have one."""
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        spec = load_spec(str(path), Diagnostics())
        assert spec is not None and spec.bench, path.name


def test_a_bench_case_without_a_dim_is_reported_at_the_case(tmp_path, capsys):
    lib = _library(tmp_path, ("add_one", "exp"))
    text = (lib / "add_one.yaml").read_text()
    (lib / "add_one.yaml").write_text(text[: text.index("bench:")] + "bench:\n  - {shapes: {M: 8}}\n")
    code, _, err = run(capsys, "ir", str(lib / "add_one.yaml"), "--stats", "--bench")
    assert code == 1 and "error[E0233]: the bench case gives no size for the dim symbol `N`" in err
    assert "add_one.yaml:" in err and "{shapes: {M: 8}}" in err
    # in a folder, the other specs are still summarised
    code, out, err = run(capsys, "ir", str(lib), "--stats", "--bench")
    assert code == 1 and "error[E0233]" in err and "exp[f32-M4096-N4096]" in out


def test_bench_cases_bind_the_dims_the_spec_defines(capsys):
    """rope's head dim is defined as D = 2*F; its bench case gives F only, as its test cases do."""
    code, out, _ = run(capsys, "ir", "specs/rope.yaml", "--stats", "--bench")
    assert code == 0, out
    assert "rope[f16-R65536-F64]: GM bytes modelled" in out


@pytest.mark.slow  # (README suite time)
def test_a_bench_case_too_long_to_walk_is_said_so(tmp_path, capsys, monkeypatch):
    """A case the dry run would walk too many ops for is reported as not modelled (was an internal
    error). The library's cases all fit the report's budget today, so the budget is cut to what
    varlen attention's data-dependent trip counts exceed."""
    import ptodsl.stats

    monkeypatch.setattr(ptodsl.stats, "REPORT_MAX_OPS", 20_000)
    code, out, _ = run(capsys, "ir", "specs/varlen_attention.yaml", "--stats", "--bench")
    assert code == 0
    assert "varlen_attention[TQ2048-TK2048-HD512-NH8-C3-cu_seqlens_k-cu_seqlens_q]: not modelled" in out
    # in the library's summary too: it has bench cases, which the model cannot walk
    code, out, _ = run(capsys, "ir", str(_library(tmp_path, ("add_one", "varlen_attention"))), "--stats", "--bench")
    assert code == 0
    assert "bench cases not modelled (the dry run would walk over" in out and "varlen_attention" in out.splitlines()[-1]
    assert "no bench cases" not in out
