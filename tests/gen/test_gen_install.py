"""The generated package installs with pip into a fresh virtual environment and works from there."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ptodsl.gen import Package

# Run in the venv beside the package's own golden tests (one interpreter: torch imports once).
USE = """
import sys

import numpy as np
import torch

import ptodsl_ops


def test_use_the_installed_package():
    assert ptodsl_ops.__file__.startswith(sys.prefix), ptodsl_ops.__file__
    x = np.random.default_rng(0).uniform(-1, 1, (7, 1024)).astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True))
    y = ptodsl_ops.softmax(x)
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    t = torch.from_numpy(x)
    torch.testing.assert_close(ptodsl_ops.softmax(t), torch.softmax(t, -1))
    torch.testing.assert_close(torch.ops.ptodsl_ops.softmax(t), torch.softmax(t, -1))
"""

# pip output when the build backend could not be fetched (an offline machine), not a package fault
OFFLINE = ("Could not find a version that satisfies the requirement hatchling", "Failed to establish a new connection",
           "Temporary failure in name resolution", "No matching distribution found for hatchling")


def run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def make_venv(folder: Path) -> Path:
    """A venv that sees this environment's packages (torch, numpy, ptodsl, pip, pytest)."""
    proc = run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(folder)], folder.parent)
    assert proc.returncode == 0, proc.stderr
    python = folder / "bin" / "python"
    if sys.prefix != sys.base_prefix:
        # This environment is itself a venv: --system-site-packages only reaches the base
        # interpreter's packages, so add ours (processing their .pth files, for editable installs).
        site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], folder)
        ours = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
        lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in ours)
        (Path(site.stdout.strip()) / "_outer_environment.pth").write_text(lines)
    return python


@pytest.mark.slow
def test_pip_install_into_a_fresh_venv(built: Package, tree: Path, tmp_path: Path):
    pytest.importorskip("torch")  # the installed package is used through torch.ops too
    python = make_venv(tmp_path / "venv")
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-build-isolation"]
    proc = run([str(python), "-m", "pip", "install", "--no-deps", "--no-input", "--disable-pip-version-check",
                "-q", *isolation, str(tree)], tmp_path)
    if proc.returncode != 0 and not isolation and any(s in proc.stdout + proc.stderr for s in OFFLINE):
        pytest.skip("pip could not fetch the build backend (hatchling) to build the package: offline?")
    assert proc.returncode == 0, proc.stdout + proc.stderr

    (tmp_path / "use" / "test_use_installed.py").parent.mkdir()
    (tmp_path / "use" / "test_use_installed.py").write_text(USE)
    proc = run([str(python), "-m", "pytest", "--pyargs", "ptodsl_ops", "use/test_use_installed.py", "-q",
                "-p", "no:cacheprovider"], tmp_path)
    cases = sum(len(op.cases) for op in built.ops)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"{cases + 1} passed" in proc.stdout
