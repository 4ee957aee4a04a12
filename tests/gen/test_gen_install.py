"""The generated package ships on its own: a wheel of it, installed into a fresh virtual environment
with neither ptodsl nor its sources, runs its ops on sim and cpu and passes its own tests.

``pytest -m wheel -n 0 tests/gen/test_gen_install.py`` (CI runs it after the README suite): the wheel,
a venv with numpy, ml_dtypes, PyYAML, pytest (and torch, when this environment has it) from the
index, and the package's golden cases on sim and cpu (a g++ build per variant) take a few minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptodsl.gen import Package

# Run in the venv beside the package's own golden tests.
USE = """
import importlib.util
import sys

import numpy as np

import ptodsl_ops


def test_the_compiler_is_not_there():
    # (jinja2 may be there: torch depends on it)
    assert importlib.util.find_spec("ptodsl") is None and importlib.util.find_spec("lark") is None


def test_softmax_on_sim_and_cpu():
    assert ptodsl_ops.__file__.startswith(sys.prefix), ptodsl_ops.__file__
    x = np.random.default_rng(0).uniform(-1, 1, (7, 1024)).astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True))
    for backend in ("sim", "cpu"):
        y = ptodsl_ops.softmax(x, backend=backend)
        assert isinstance(y, np.ndarray)
        np.testing.assert_allclose(y, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_a_wrong_argument_is_a_diagnostic():
    try:
        ptodsl_ops.softmax(np.zeros((7, 1000), np.float32))
    except ptodsl_ops.ArgumentValueError as exc:
        assert "E0702" in str(exc) and "specs/softmax.pto:" in str(exc)
    else:
        raise AssertionError("no error")
"""

USE_TORCH = """
import torch

import ptodsl_ops


def test_torch_ops():
    t = torch.rand(7, 1024)
    torch.testing.assert_close(ptodsl_ops.softmax(t), torch.softmax(t, -1))
    torch.testing.assert_close(torch.ops.ptodsl_ops.softmax(t), torch.softmax(t, -1))


def test_autograd():
    x = torch.rand(7, 1024, requires_grad=True)
    (grad,) = torch.autograd.grad((torch.ops.ptodsl_ops.softmax(x) * torch.arange(1024.0)).sum(), x)
    ref = x.detach().requires_grad_()
    (want,) = torch.autograd.grad((torch.softmax(ref, -1) * torch.arange(1024.0)).sum(), ref)
    torch.testing.assert_close(grad, want)
"""

# pip output when a package could not be fetched (an offline machine), not a package fault
OFFLINE = ("Could not find a version that satisfies the requirement", "Failed to establish a new connection",
           "Temporary failure in name resolution", "No matching distribution found for")


def run(args: list[str], cwd: Path, timeout: float = 900, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env)


def pip(python: Path, *args: str, cwd: Path) -> None:
    proc = run([str(python), "-m", "pip", "--disable-pip-version-check", "--no-input", *args], cwd)
    if proc.returncode != 0 and any(s in proc.stdout + proc.stderr for s in OFFLINE):
        pytest.skip("pip could not fetch a package: offline?")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def torch_requirement() -> str | None:
    """The torch of this environment, pinned, so that the venv installs the same build."""
    try:
        import torch
    except ImportError:
        return None
    return f"torch=={torch.__version__.split('+')[0]}"


@pytest.mark.wheel
def test_the_wheel_alone_in_a_fresh_venv(built: Package, tree: Path, tmp_path: Path):
    wheels = tmp_path / "wheels"
    # the wheel is built here, where the build backend (hatchling) is installed with the dev extra
    pip(Path(sys.executable), "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(tree),
        cwd=tmp_path)
    [wheel] = list(wheels.glob("ptodsl_ops-*.whl"))
    venv = tmp_path / "venv"
    proc = run([sys.executable, "-m", "venv", str(venv)], tmp_path)  # no system site packages: no ptodsl
    assert proc.returncode == 0, proc.stderr
    python = venv / "bin" / "python"
    extra = [r for r in (torch_requirement(),) if r]
    pip(python, "install", "-q", str(wheel), "pytest", *extra, cwd=tmp_path)
    (tmp_path / "use").mkdir()
    (tmp_path / "use" / "test_use.py").write_text(USE)
    if extra:
        (tmp_path / "use" / "test_use_torch.py").write_text(USE_TORCH)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PTO_ISA_ROOT")}
    env["PTODSL_TEST_BACKENDS"] = "sim,cpu"  # every golden case on both, from the shipped IR and C++
    # every golden case built cold with g++, one after another: about 12 to 16 minutes on a 2-core
    # machine (CI gives the whole run 90), so this call gets a longer limit than the others
    proc = run([str(python), "-m", "pytest", "--pyargs", "ptodsl_ops", "use", "-q", "-p", "no:cacheprovider"],
               tmp_path, timeout=2400, env=env)
    cases = sum(len(op.cases) for op in built.ops)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"{2 * cases + 3 + 2 * len(extra)} passed" in proc.stdout, proc.stdout[-2000:]
