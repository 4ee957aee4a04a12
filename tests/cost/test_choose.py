"""Schedules a spec leaves out are chosen by the cost model, and ``ptodsl tune`` shows and writes them."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest

import ptodsl
from ptodsl.cli import main
from ptodsl.golden import run_case
from ptodsl.tune import without_schedule, write_tiles

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"


def unscheduled(name: str, tmp: Path) -> Path:
    """A copy of library spec ``name`` (and the references, and the backward spec it names, as it
    is) with its ``schedule:`` removed."""
    shutil.copy(SPECS / f"{name}.pto", tmp / f"{name}.pto")
    shutil.copy(SPECS / "refs.py", tmp / "refs.py")
    for suffix in (".pto", ".yaml"):
        if (SPECS / f"{name}_bwd{suffix}").exists():
            shutil.copy(SPECS / f"{name}_bwd{suffix}", tmp / f"{name}_bwd{suffix}")
    text = (SPECS / f"{name}.yaml").read_text()
    (tmp / f"{name}.yaml").write_text(without_schedule(text, name))
    return tmp / f"{name}.yaml"


def estimate(op: ptodsl.Operator) -> float:
    # (a case the call must refuse runs no kernel: nothing to model)
    return sum(run_case(op, case).timeline.estimate for case in op.spec.tests if case.refuses is None)


def check_auto_schedule(name: str, tmp: Path) -> None:
    hand = ptodsl.load(str(SPECS / f"{name}.yaml"))
    auto = ptodsl.load(str(unscheduled(name, tmp)))
    assert "schedule:" not in (tmp / f"{name}.yaml").read_text()
    for case in auto.spec.tests:
        r = run_case(auto, case)
        assert r.ok, r.report
    assert estimate(auto) <= 1.10 * estimate(hand), f"{name}: the chosen tiles model slower than the spec's"


@pytest.mark.parametrize("name", ["rmsnorm", "amin_cols", "matmul"])
def test_a_spec_without_a_schedule_gets_tiles_that_compute_right_and_model_fast(name, tmp_path):
    check_auto_schedule(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.stem for p in SPECS.glob("*.yaml")))
def test_every_library_spec_without_its_schedule(name, tmp_path):
    check_auto_schedule(name, tmp_path)


def test_the_chosen_keys_are_recorded_in_the_ir(tmp_path):
    op = ptodsl.load(str(unscheduled("rmsnorm", tmp_path)))
    attrs = op.compiled.stages["tensor"].attrs
    assert attrs["chosen"] == ("vec_tile",) and "vec_tile" in attrs
    assert op.compiled.candidates and all(c.cycles for c in op.compiled.candidates)


SPEC = """op: k
# the tiles
schedule:
  vec_tile: [8, 256]   # rows x cols
  loops:
    b_loop: {vec_tile: [1, 1024], unroll: [2, 1]}
reference: refs.py:k   # numpy
tests:
  - {shapes: {M: 8}}
"""


def test_writing_tiles_keeps_comments_and_layout():
    from ptodsl.schedule import Schedule

    out = write_tiles(SPEC, "k.yaml", Schedule(vec_tile=(4, 512), cube_tile={"m": (64, 128)}))
    assert out.splitlines() == [
        "op: k", "# the tiles", "schedule:", "  cube_tile: {m: [64, 128]}", "  vec_tile: [4, 512]   # rows x cols",
        "  loops:", "    b_loop: {unroll: [2, 1]}", "reference: refs.py:k   # numpy", "tests:", "  - {shapes: {M: 8}}"]


def test_writing_into_a_spec_without_a_schedule_adds_the_block_before_the_reference():
    from ptodsl.schedule import Schedule

    text = without_schedule(SPEC, "k.yaml")
    assert text.splitlines()[:3] == ["op: k", "# the tiles", "reference: refs.py:k   # numpy"]
    out = write_tiles(text, "k.yaml", Schedule(vec_tile=(1, 256)))
    assert out.splitlines()[2:5] == ["schedule:", "  vec_tile: [1, 256]", "reference: refs.py:k   # numpy"]


def test_tune_prints_the_candidates_and_writes_the_choice(tmp_path, capsys):
    path = unscheduled("amin_cols", tmp_path)
    assert main(["tune", str(path), "--jobs", "1", "--write"]) == 0
    out = capsys.readouterr().out
    assert "<- chosen" in out and "<- spec" in out and "pipe work" in out
    text = path.read_text()
    assert "schedule:\n  vec_tile: [" in text
    assert ptodsl.load(str(path)).compiled.stages["tensor"].attrs.get("chosen") is None  # now the spec's own


def test_tune_on_ray_sends_every_candidate_to_the_cluster(tmp_path, capsys, monkeypatch):
    """A stand-in for the ray module records what tune asks of it; the work runs locally."""
    calls = {"init": None, "remote": 0}

    def init(address):
        calls["init"] = address

    def remote(fn):
        class Task:
            @staticmethod
            def remote(*args):
                calls["remote"] += 1
                return fn(*args)
        return Task

    fake = types.SimpleNamespace(is_initialized=lambda: False, init=init, remote=remote, get=lambda xs: xs)
    monkeypatch.setitem(sys.modules, "ray", fake)
    path = unscheduled("amin_cols", tmp_path)
    assert main(["tune", str(path), "--ray", "ray://head:10001"]) == 0
    assert calls["init"] == "ray://head:10001" and calls["remote"] >= 12


def test_tune_on_ray_without_ray_installed_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    path = unscheduled("amin_cols", tmp_path)
    assert main(["tune", str(path), "--ray", "ray://head:10001"]) == 1
    assert "`--ray` needs the `ray` package" in capsys.readouterr().err
