"""The NPU path of a generated package: environment checks, kernel build and launch.

Nothing here needs an NPU to be tested. Every check reads the environment through a mapping and
the file system through paths taken from it, so tests point them at fake version trees. Each
failure is an :class:`NpuError` (a ``RuntimeError``) carrying a diagnostic (codes E0920-E0939)
that says what was found, where, and what is required. The checks run in the order a user
fixes them: device id, CANN toolkit, driver, compiler; then the kernel is built
(:mod:`.npu_build`) and launched (:mod:`.npu_launch`).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..diagnostics import Diagnostic, DiagnosticError
from .layout import variant_slug

if TYPE_CHECKING:
    from .package import PackagedOp

MIN_CANN = "8.5.0"
MIN_DRIVER = "25.2.0"
DEVICE_ENV = "TILE_FWK_DEVICE_ID"
TOOLKIT_ENVS = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")
DEFAULT_TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"
DRIVER_ENV = "ASCEND_DRIVER_PATH"
DEFAULT_DRIVER = "/usr/local/Ascend/driver"
COMPILERS = ("bisheng", "ccec")  # bisheng is CANN's kernel compiler; older toolkits call it ccec
DEV_ROOT = Path("/dev")  # where the driver creates davinci<N>; tests point it elsewhere


class NpuError(DiagnosticError, RuntimeError):
    """An NPU run cannot go ahead; ``.diagnostic`` says why and what to do."""


def _fail(code: str, message: str, help: str, notes: tuple[str, ...] = ()) -> NpuError:
    return NpuError(Diagnostic(code, message, None, "", (), notes, help))


# ------------------------------------------------------------------ versions

_VERSION = re.compile(
    r"v?(\d+)\.(\d+)(?:\.(\d+))?"  # major.minor[.patch]
    r"(?:\.?rc(\d+))?"  # 8.0.RC3, 24.1.rc1
    r"(?:[.\-]?(alpha|beta|a|b|t)(\d*))?"  # 8.2.RC1.alpha003, 7.0.0.beta1
    r"(?:\.(\d+))?",  # 25.0.rc1.1
    re.IGNORECASE,
)


def version_key(text: str) -> tuple[int, ...] | None:
    """A sortable key of a CANN or driver version string, or None when it holds no version.

    A release candidate sorts below the release it leads to (8.5.RC1 < 8.5.0), and an alpha or
    beta build below the version it precedes (8.2.RC1.alpha003 < 8.2.RC1).
    """
    m = _VERSION.search(text.strip())
    if m is None:
        return None
    major, minor, patch, rc, pre, _pre_n, build = m.groups()
    return (int(major), int(minor), int(patch or 0), 0 if rc else 1, int(rc or 0), 0 if pre else 1,
            int(build or 0))


def read_version(path: Path, keys: tuple[str, ...] = ("version", "package_version")) -> str | None:
    """The version a ``key=value`` info file gives under the first of ``keys`` it has, else None.

    Tolerant of what these files hold in practice: any case of the key, spaces around ``=``,
    quotes, brackets, comments and unrelated lines.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        key = key.strip().lower()
        value = value.strip().strip("\"'[]").strip()
        if sep and key in keys and key not in found and version_key(value) is not None:
            found[key] = value
    return next((found[k] for k in keys if k in found), None)


@dataclass(frozen=True)
class Found:
    version: str
    path: Path  # the file it was read from


def _toolkit_root(env: Mapping[str, str]) -> tuple[Path, str]:
    for var in TOOLKIT_ENVS:
        if env.get(var):
            return Path(env[var]), f"${var}"
    return Path(DEFAULT_TOOLKIT), "the default location"


def _cann_files(root: Path) -> Iterator[Path]:
    arch = platform.machine() or "x86_64"
    yield root / f"{arch}-linux" / "ascend_toolkit_install.info"
    yield from sorted(root.glob("*-linux/ascend_toolkit_install.info"))
    yield root / "compiler" / "version.info"
    yield root / "runtime" / "version.info"


def cann_version(env: Mapping[str, str]) -> Found:
    root, origin = _toolkit_root(env)
    tried = []
    for path in _cann_files(root):
        if path in tried:
            continue
        tried.append(path)
        version = read_version(path)
        if version is not None:
            found = Found(version, path)
            break
    else:
        where = "exists but holds none of them" if root.is_dir() else "does not exist"
        raise _fail("E0922", f"no CANN toolkit version found under {root} ({origin}), which {where}",
                    f"install CANN {MIN_CANN} or newer and `source <toolkit>/set_env.sh`, or set "
                    "ASCEND_HOME_PATH to the toolkit folder",
                    tuple(f"looked for a `version=` line in {p}" for p in tried))
    if _older(found.version, MIN_CANN):
        raise _fail("E0923", f"CANN {found.version} is too old: the NPU backend requires CANN >= {MIN_CANN}",
                    f"install CANN {MIN_CANN} or newer and point ASCEND_HOME_PATH at it",
                    (f"found CANN {found.version} in {found.path} ({origin})",))
    return found


def driver_version(env: Mapping[str, str]) -> Found:
    folder = Path(env[DRIVER_ENV]) if env.get(DRIVER_ENV) else Path(DEFAULT_DRIVER)
    origin = f"${DRIVER_ENV}" if env.get(DRIVER_ENV) else "the default location"
    path = folder / "version.info"
    version = read_version(path, ("version", "package_version"))
    if version is None:
        state = "cannot be read" if not path.is_file() else "has no `Version=` line"
        raise _fail("E0924", f"no NPU driver version found: {path} ({origin}) {state}",
                    f"install the Ascend NPU driver {MIN_DRIVER} or newer, or set {DRIVER_ENV} to its folder")
    if _older(version, MIN_DRIVER):
        raise _fail("E0925", f"NPU driver {version} is too old: the NPU backend requires driver >= {MIN_DRIVER}",
                    f"upgrade the NPU driver to {MIN_DRIVER} or newer",
                    (f"found driver {version} in {path} ({origin})",))
    return Found(version, path)


def _older(found: str, required: str) -> bool:
    have, need = version_key(found), version_key(required)
    assert have is not None and need is not None
    return have < need


# ------------------------------------------------------------------ device and compiler


def device_id(device: Any, env: Mapping[str, str]) -> int:
    """The device to run on: ``device=`` (an int, ``"npu:N"`` or a torch.device), else $TILE_FWK_DEVICE_ID."""
    if device is None:
        raw = env.get(DEVICE_ENV, "").strip()
        if not raw:
            raise _fail("E0920", f"no NPU device id: pass `device=N` or set {DEVICE_ENV}",
                        f"e.g. `op(x, backend=\"npu\", device=0)` or `export {DEVICE_ENV}=0`",
                        (f"`device=` was not given and {DEVICE_ENV} is not set",))
        value, origin = raw, f"{DEVICE_ENV}={raw!r}"
    else:
        value, origin = device, f"device={device!r}"
    index: int | None = None
    if type(value).__name__ == "device" and hasattr(value, "index"):  # a torch.device
        index = value.index if value.type == "npu" else None
    elif isinstance(value, int) and not isinstance(value, bool):
        index = value
    elif isinstance(value, str):
        text = value.strip().lower().removeprefix("npu:")
        index = int(text) if text.isdigit() else None
    if index is None or index < 0:
        raise _fail("E0921", f"invalid NPU device id: {origin}",
                    "use a non-negative integer such as 0, or \"npu:0\"")
    return index


def find_compiler(env: Mapping[str, str], toolkit: Path) -> str:
    """The CANN kernel compiler: on PATH, else in the toolkit's own bin folders."""
    path = env.get("PATH", "")
    for name in COMPILERS:
        found = shutil.which(name, path=path)
        if found:
            return found
    bins = [toolkit / "compiler" / "ccec_compiler" / "bin", toolkit / "compiler" / "bin"]
    for name in COMPILERS:
        found = shutil.which(name, path=os.pathsep.join(str(b) for b in bins))
        if found:
            return found
    raise _fail("E0926", f"the CANN kernel compiler ({' or '.join(COMPILERS)}) was not found",
                "`source <toolkit>/set_env.sh` to put bisheng on PATH",
                (f"looked on PATH and in {', '.join(str(b) for b in bins)}",))


@dataclass(frozen=True)
class NpuEnvironment:
    device: int
    toolkit: Path
    cann: Found
    driver: Found
    compiler: str


def check_environment(device: Any = None, env: Mapping[str, str] | None = None) -> NpuEnvironment:
    """Every check that can fail before a kernel is built, in the order a user fixes them."""
    env = os.environ if env is None else env
    index = device_id(device, env)
    cann = cann_version(env)
    driver = driver_version(env)
    toolkit, _origin = _toolkit_root(env)
    return NpuEnvironment(index, toolkit, cann, driver, find_compiler(env, toolkit))


# ------------------------------------------------------------------ launch


def _torch_npu() -> Any:
    try:
        import torch  # noqa: F401
        import torch_npu
    except ImportError as exc:
        raise _fail("E0930", "launching on the NPU needs torch and torch_npu, which cannot be imported",
                    "install the torch_npu matching your torch and CANN, or use backend=\"sim\"",
                    (f"import failed: {exc}",)) from None
    return torch_npu


def launch(environment: NpuEnvironment, library: Path, op: PackagedOp, index: int, inputs: tuple[Any, ...],
           kwargs: Mapping[str, Any], symbols: Mapping[str, int]) -> Any:
    """Run the variant's host program on the current torch_npu stream of the device. Inputs may be
    numpy arrays (copied to the device and the results copied back) or torch tensors on the NPU
    (used in place, as device pointers); returns what the sim backend would."""
    node = DEV_ROOT / f"davinci{environment.device}"
    if not node.exists():
        raise _fail("E0929", f"NPU device {environment.device} is not present: {node} does not exist",
                    "check `npu-smi info` for the devices of this machine, and the device id",
                    (f"CANN {environment.cann.version}, driver {environment.driver.version}, kernel {library}",))
    torch_npu = _torch_npu()
    from .npu_build import build_plan
    from .npu_launch import call_host_entry

    slug = variant_slug(op.program.variants[index].dtypes)
    return call_host_entry(torch_npu, library, build_plan(op, slug), op.operator, index, inputs, kwargs, symbols,
                           environment.device)


def run(op: PackagedOp, inputs: tuple[Any, ...], kwargs: Mapping[str, Any], device: Any = None,
        env: Mapping[str, str] | None = None) -> Any:
    """backend="npu": check the arguments (as on the simulator), then the environment, build, launch."""
    env = os.environ if env is None else env
    index, symbols = op.validate(inputs, kwargs)
    environment = check_environment(device, env)
    from .npu_build import build

    slug = variant_slug(op.program.variants[index].dtypes)
    library = build(environment, op, slug, env)
    return launch(environment, library, op, index, inputs, kwargs, symbols)


__all__ = [
    "MIN_CANN",
    "MIN_DRIVER",
    "NpuEnvironment",
    "NpuError",
    "cann_version",
    "check_environment",
    "device_id",
    "driver_version",
    "find_compiler",
    "launch",
    "read_version",
    "run",
    "version_key",
]
