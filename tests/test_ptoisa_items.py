"""The `ptoisa` golden items: collected only when `-m` names them, skipped with the reason when
PTO_ISA_ROOT is unset."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PTO_ISA_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-rs",
                             "specs/add_one.yaml", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    return result.stdout + result.stderr


@pytest.mark.slow  # a pytest run of its own: about 12 s
def test_ptoisa_items_only_with_their_marker():
    plain = pytest_run("--co")
    assert "-cpu]" in plain and "-ptoisa]" not in plain
    selected = pytest_run("--co", "-m", "ptoisa")
    assert selected.count("-ptoisa]") == 3 and "-cpu]" not in selected


def test_ptoisa_items_skip_without_a_checkout():
    out = pytest_run("-m", "ptoisa")
    assert "3 skipped" in out and "PTO_ISA_ROOT is not set" in out


def test_round_only_conversions_are_skipped_against_a_checkout_with_the_reason(monkeypatch, tmp_path):
    """pto-isa's CPU simulation copies a float TCVT to its own dtype (round, floor and the range
    reduction of sin and cos use it): such variants skip against a checkout, naming the ops; the
    ones without it, and every variant without a checkout, build."""
    from ptodsl.backends.cpp.run import unbuildable_reason
    from ptodsl.driver import compile_spec

    monkeypatch.delenv("PTO_ISA_ROOT", raising=False)
    rounding, softmax = compile_spec("specs/rounding.yaml"), compile_spec("specs/softmax.yaml")
    f32 = next(i for i, ck in enumerate(softmax.checked) if ck.variant == {"T": "f32"})
    assert unbuildable_reason(rounding, 0) is None
    monkeypatch.setenv("PTO_ISA_ROOT", str(tmp_path))
    reason = unbuildable_reason(rounding, 0)
    assert reason is not None and "ceil, floor, round, trunc" in reason
    assert unbuildable_reason(softmax, f32) is None
