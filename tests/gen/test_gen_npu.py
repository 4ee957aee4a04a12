"""backend="npu" without an NPU: fake version trees, compilers and environments.

Each guard is driven through a generated wrapper, the way a user meets it, and each must raise an
NpuError (a RuntimeError) whose diagnostic says what was found and what is required.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from ptodsl import ArgumentTypeError, ArgumentValueError
from ptodsl.cli import main
from ptodsl.diagnostics import code_registry
from ptodsl.gen import npu
from ptodsl.gen.npu import NpuError
from ptodsl.gen.runtime import PackagedOp

ENV_VARS = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_DRIVER_PATH", "TILE_FWK_DEVICE_ID")


def cann_tree(root: Path, version: str) -> Path:
    """A toolkit folder as the CANN installer leaves it: <arch>-linux/ascend_toolkit_install.info."""
    info = root / f"{platform.machine()}-linux" / "ascend_toolkit_install.info"
    info.parent.mkdir(parents=True)
    info.write_text(f"package_name=Ascend-cann-toolkit\nversion={version}\ninnerversion=V100R001C25B001\n"
                    f"arch={platform.machine()}\nos=linux\npath={root}\n")
    return root


def driver_tree(root: Path, version: str) -> Path:
    root.mkdir(parents=True)
    (root / "version.info").write_text(f"Version={version}\nascendhal_version=7.35.23\n"
                                       "Innerversion=V100R001C25SPC001B220\n"
                                       f"compatible_version=[V100R001C15],[V100R001C18]\npackage_version={version}\n")
    return root


def fake_compiler(folder: Path, exit_code: int = 0) -> Path:
    """A `bisheng` that logs its calls and writes its -o output (or fails with a message)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "bisheng"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{folder}/calls.log"\n'
        f"if [ {exit_code} -ne 0 ]; then echo 'error: unknown type name TADD' >&2; exit {exit_code}; fi\n"
        'while [ "$#" -gt 0 ]; do if [ "$1" = "-o" ]; then echo built > "$2"; fi; shift; done\n'
    )
    script.chmod(0o755)
    return script


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment: no Ascend variables, an empty PATH, defaults pointing at nothing."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(npu, "DEFAULT_TOOLKIT", str(tmp_path / "no-toolkit"))
    monkeypatch.setattr(npu, "DEFAULT_DRIVER", str(tmp_path / "no-driver"))
    monkeypatch.setattr(npu, "DEV_ROOT", tmp_path / "dev")
    return tmp_path


@pytest.fixture
def ready(fake_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Everything in place: device id, CANN 8.5.0, driver 25.2.0 and a compiler on PATH."""
    monkeypatch.setenv("TILE_FWK_DEVICE_ID", "0")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(cann_tree(fake_env / "cann", "8.5.0")))
    monkeypatch.setenv("ASCEND_DRIVER_PATH", str(driver_tree(fake_env / "driver", "25.2.0")))
    fake_compiler(fake_env / "bin")
    return fake_env


def npu_error(call) -> NpuError:
    with pytest.raises(NpuError) as exc:
        call()
    assert isinstance(exc.value, RuntimeError)
    return exc.value


def x() -> np.ndarray:
    return np.ones((4, 1024), np.float32)


# ------------------------------------------------------------------ the guards, in order


def test_no_device_id(pkg: ModuleType, fake_env: Path):
    err = npu_error(lambda: pkg.softmax(x(), backend="npu"))
    assert err.diagnostic.code == "E0920"
    assert "pass `device=N` or set TILE_FWK_DEVICE_ID" in str(err)


@pytest.mark.parametrize("value", ["abc", "-1", "1.5"])
def test_invalid_device_id(pkg: ModuleType, fake_env: Path, monkeypatch, value: str):
    monkeypatch.setenv("TILE_FWK_DEVICE_ID", value)
    err = npu_error(lambda: pkg.softmax(x(), backend="npu"))
    assert err.diagnostic.code == "E0921" and repr(value) in str(err)


def test_device_argument_wins_over_the_environment(fake_env: Path):
    assert npu.device_id(3, {"TILE_FWK_DEVICE_ID": "1"}) == 3
    assert npu.device_id("npu:2", {}) == 2
    assert npu.device_id(None, {"TILE_FWK_DEVICE_ID": " 5 "}) == 5


def test_no_cann(pkg: ModuleType, fake_env: Path, monkeypatch):
    err = npu_error(lambda: pkg.softmax(x(), backend="npu", device=0))
    assert err.diagnostic.code == "E0922"
    assert "no-toolkit (the default location), which does not exist" in str(err)
    assert "ascend_toolkit_install.info" in str(err)


def test_old_cann(pkg: ModuleType, fake_env: Path, monkeypatch):
    monkeypatch.setenv("TILE_FWK_DEVICE_ID", "0")
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(cann_tree(fake_env / "cann", "8.0.RC3")))
    err = npu_error(lambda: pkg.softmax(x(), backend="npu"))
    assert err.diagnostic.code == "E0923"
    assert "CANN 8.0.RC3 is too old: the NPU backend requires CANN >= 8.5.0" in str(err)
    assert "ascend_toolkit_install.info ($ASCEND_TOOLKIT_HOME)" in str(err)


def test_cann_release_candidate_is_older_than_the_release(pkg: ModuleType, fake_env: Path, monkeypatch):
    monkeypatch.setenv("ASCEND_HOME_PATH", str(cann_tree(fake_env / "cann", "8.5.RC1")))
    err = npu_error(lambda: pkg.softmax(x(), backend="npu", device=0))
    assert err.diagnostic.code == "E0923" and "CANN 8.5.RC1 is too old" in str(err)


def test_cann_version_from_the_compiler_folder(fake_env: Path):
    info = fake_env / "cann" / "compiler" / "version.info"
    info.parent.mkdir(parents=True)
    info.write_text("Version=8.5.0\nversion_dir=8.5.0\n")
    found = npu.cann_version({"ASCEND_HOME_PATH": str(fake_env / "cann")})
    assert found.version == "8.5.0" and found.path == info


def test_no_driver(pkg: ModuleType, fake_env: Path, monkeypatch):
    monkeypatch.setenv("ASCEND_HOME_PATH", str(cann_tree(fake_env / "cann", "8.5.0")))
    err = npu_error(lambda: pkg.softmax(x(), backend="npu", device=0))
    assert err.diagnostic.code == "E0924"
    assert "no-driver/version.info (the default location) cannot be read" in str(err)


def test_old_driver(pkg: ModuleType, fake_env: Path, monkeypatch):
    monkeypatch.setenv("ASCEND_HOME_PATH", str(cann_tree(fake_env / "cann", "9.0.0")))
    monkeypatch.setenv("ASCEND_DRIVER_PATH", str(driver_tree(fake_env / "driver", "24.1.rc3")))
    err = npu_error(lambda: pkg.softmax(x(), backend="npu", device=0))
    assert err.diagnostic.code == "E0925"
    assert "NPU driver 24.1.rc3 is too old: the NPU backend requires driver >= 25.2.0" in str(err)
    assert "version.info ($ASCEND_DRIVER_PATH)" in str(err)


def test_missing_compiler(pkg: ModuleType, ready: Path):
    (ready / "bin" / "bisheng").unlink()
    err = npu_error(lambda: pkg.softmax(x(), backend="npu"))
    assert err.diagnostic.code == "E0926"
    assert "the CANN kernel compiler (bisheng or ccec) was not found" in str(err)


def test_compiler_in_the_toolkit_folder(ready: Path):
    (ready / "bin" / "bisheng").unlink()
    fake_compiler(ready / "cann" / "compiler" / "ccec_compiler" / "bin")
    env = npu.check_environment(None, dict(os.environ))
    assert env.compiler.endswith("ccec_compiler/bin/bisheng")
    assert (env.device, env.cann.version, env.driver.version) == (0, "8.5.0", "25.2.0")


def test_all_ok_then_the_packaged_kernel_is_built_and_needs_a_device(pkg: ModuleType, ready: Path):
    # the package carries the emitted pto-isa C++ of every variant, so the guard gets past the
    # source check; with no NPU device here the run stops at the device check
    assert (Path(pkg.__file__).parent / "kernels" / "softmax" / "f32.cpp").is_file()
    err = npu_error(lambda: pkg.softmax(x(), backend="npu"))
    assert err.diagnostic.code in ("E0929", "E0930"), str(err)


# ------------------------------------------------------------------ build and launch, with a kernel


@pytest.fixture
def with_kernel(pkg: ModuleType, tmp_path: Path) -> PackagedOp:
    """softmax from a copy of the package that has a (fake) C++ kernel for its f32 variant."""
    root = Path(pkg.__file__).parent
    copy = tmp_path / "pkg"
    shutil.copytree(root / "specs", copy / "specs")
    shutil.copytree(root / "kernels" / "softmax", copy / "kernels" / "softmax")
    (copy / "kernels" / "softmax" / "f32.cpp").write_text("// a kernel\n")
    op = PackagedOp("ptodsl_ops", "softmax", "specs/softmax.yaml")
    op.__dict__["root"] = copy
    return op


def test_build_then_no_device(with_kernel: PackagedOp, ready: Path):
    err = npu_error(lambda: with_kernel((x(),), {}, {}, backend="npu"))
    assert err.diagnostic.code == "E0929"
    assert "NPU device 0 is not present" in str(err) and "davinci0 does not exist" in str(err)
    calls = (ready / "bin" / "calls.log").read_text().splitlines()
    assert len(calls) == 1 and "--npu-arch=dav-2201" in calls[0] and "-xcce" in calls[0]
    # the build is cached by the source's hash: a second call does not run the compiler again
    (ready / "dev").mkdir()
    (ready / "dev" / "davinci0").write_text("")
    err = npu_error(lambda: with_kernel((x(),), {}, {}, backend="npu"))
    assert err.diagnostic.code == "E0930" and "not available yet" in str(err)
    assert len((ready / "bin" / "calls.log").read_text().splitlines()) == 1


def test_build_failure_shows_the_compiler_output(with_kernel: PackagedOp, ready: Path):
    fake_compiler(ready / "bin", exit_code=1)
    err = npu_error(lambda: with_kernel((x(),), {}, {}, backend="npu"))
    assert err.diagnostic.code == "E0928"
    assert "(exit 1)" in str(err) and "unknown type name TADD" in str(err)
    assert not list((ready / "cache").rglob("*.so"))


# ------------------------------------------------------------------ arguments before the environment


def test_argument_errors_come_first(pkg: ModuleType, fake_env: Path):
    with pytest.raises(ArgumentTypeError, match="`x` has dtype i32"):
        pkg.softmax(np.ones((4, 1024), np.int32), backend="npu")
    with pytest.raises(ArgumentValueError, match="symbol `N` is 8"):
        pkg.softmax(np.ones((4, 8), np.float32), backend="npu")


def test_device_tensors_are_checked_without_reading_them(pkg: ModuleType, fake_env: Path):
    torch = pytest.importorskip("torch")
    on_device = torch.empty((4, 1024), device="meta")  # stands for a tensor in NPU memory
    err = npu_error(lambda: pkg.softmax(on_device, backend="npu"))
    assert err.diagnostic.code == "E0920"  # the arguments passed; the environment is next
    with pytest.raises(ArgumentValueError, match="`x` has rank 1"):
        pkg.softmax(torch.empty(1024, device="meta"), backend="npu")


# ------------------------------------------------------------------ version strings and files


@pytest.mark.parametrize(("older", "newer"), [
    ("8.0.RC3", "8.5.0"),
    ("8.5.RC1", "8.5.0"),
    ("8.2.RC1.alpha003", "8.2.RC1"),
    ("7.0.0.alpha001", "7.0.0"),
    ("8.5.0", "8.5.1"),
    ("8.5.0", "9.0.0"),
    ("24.1.rc3", "25.2.0"),
    ("25.0.rc1", "25.0.rc1.1"),
    ("25.2.0", "25.2.0.1"),
])
def test_version_order(older: str, newer: str):
    assert npu.version_key(older) < npu.version_key(newer)


def test_version_file_tolerance(tmp_path: Path):
    info = tmp_path / "version.info"
    info.write_text('# comment\r\n  VERSION = "8.5.0"\r\nversion_dir=8.5.0\r\n')
    assert npu.read_version(info) == "8.5.0"
    info.write_text("innerversion=V100R001C25B001\npackage_version=[25.3.rc1]\n")
    assert npu.read_version(info) == "25.3.rc1"
    info.write_text("Version=\nnothing here\n")
    assert npu.read_version(info) is None
    assert npu.read_version(tmp_path / "missing.info") is None


def test_codes_are_registered_and_explained(capsys):
    codes = [c for c in code_registry() if "E0920" <= c <= "E0939"]
    assert codes == [f"E09{n}" for n in range(20, 31)]
    assert main(["explain", "E0923"]) == 0
    assert "8.5.0" in capsys.readouterr().out
