"""The NPU path of a generated package: environment checks, kernel build and launch.

Nothing here needs an NPU to be tested. Every check reads the environment through a mapping and
the file system through paths taken from it, so tests point them at fake version trees. Each
failure is an :class:`NpuError` (a ``RuntimeError``) carrying a diagnostic (codes E0920-E0939)
that says what was found, where, and what is required. The checks run in the order a user
fixes them: device id, CANN toolkit, driver, compiler; then the kernel is built and launched.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..diagnostics import Diagnostic, DiagnosticError
from ..targets import load_target, target_names
from .layout import npu_folder, variant_slug

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
BUILD_TIMEOUT_S = 600


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


# ------------------------------------------------------------------ build and launch

PTO_ISA_ENV = "PTO_ISA_ROOT"
# pto-isa's own NPU tests (tests/npu/a2a3/src/st) build every kernel with these bisheng options.
CCE_OPTIONS = ("-xcce", "-O2", "-std=c++17", "-fPIC", "-DMEMORY_BASE",
               "-mllvm", "-cce-aicore-stack-size=0x8000",
               "-mllvm", "-cce-aicore-function-stack-size=0x8000",
               "-mllvm", "-cce-aicore-record-overflow=true",
               "-mllvm", "-cce-aicore-addr-transform",
               "-mllvm", "-cce-aicore-dcci-insert-for-scalar=false")


@dataclass(frozen=True)
class BuildPlan:
    """The NPU build of one variant, as the package's ``kernels/<op>/npu/<variant>/build.json``
    describes it."""

    folder: Path
    entry: str
    kernels: tuple[tuple[str, str, str], ...]  # (name, vector | cube, source file name)
    host: str
    params: tuple[tuple[str, str, str], ...]  # (kind, name, dtype) of the host entry, after the stream


def cache_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ptodsl" / "npu"


def pto_isa_include(env: Mapping[str, str], toolkit: Path) -> Path:
    """The folder holding ``pto/pto-inst.hpp``: $PTO_ISA_ROOT/include, else the toolkit's include."""
    tried = []
    if env.get(PTO_ISA_ENV):
        tried.append(Path(env[PTO_ISA_ENV]) / "include")
    tried.append(toolkit / "include")
    for folder in tried:
        if (folder / "pto" / "pto-inst.hpp").is_file():
            return folder
    raise _fail("E0931", "the pto-isa headers were not found",
                f"set {PTO_ISA_ENV} to a checkout of pto-isa (the folder holding include/pto/pto-inst.hpp)",
                tuple(f"looked for {f / 'pto' / 'pto-inst.hpp'}" for f in tried))


def _includes(toolkit: Path, pto_include: Path) -> list[str]:
    return [f"-I{pto_include}", f"-I{toolkit / 'include'}", f"-I{toolkit / 'pkg_inc'}",
            f"-I{toolkit / 'pkg_inc' / 'runtime'}", f"-I{toolkit / 'pkg_inc' / 'profiling'}"]


def kernel_command(compiler: str, toolkit: Path, pto_include: Path, arch: str, source: Path, output: Path) -> list[str]:
    """Compile one kernel translation unit (the kernel and its launcher) for its core type."""
    return [compiler, "-c", *CCE_OPTIONS, f"--cce-aicore-arch={arch}", *_includes(toolkit, pto_include),
            str(source), "-o", str(output)]


def link_command(compiler: str, toolkit: Path, objects: list[Path], output: Path) -> list[str]:
    """Link the kernels and the host program into one library against the ACL runtime."""
    return [compiler, "-shared", "--cce-fatobj-link", *map(str, objects), "-o", str(output),
            f"-L{toolkit / 'lib64'}", "-lascendcl", "-lruntime", "-lstdc++"]


def build_plan(op: PackagedOp, slug: str) -> BuildPlan:
    """The variant's NPU sources in the package; E0927 when the package has none."""
    rel = f"kernels/{npu_folder(op.name, slug)}"
    folder = op.root / rel
    try:
        data = json.loads((folder / "build.json").read_text(encoding="utf-8"))
        kernels = tuple((k["name"], k["core"], k["source"]) for k in data["kernels"])
        params = tuple((p["kind"], p["name"], p["dtype"]) for p in data["params"])
        plan = BuildPlan(folder, data["entry"], kernels, data["host"], params)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _fail("E0927", f"op `{op.name}` has no NPU kernel sources for variant {slug}",
                    "regenerate the package with a ptodsl that emits NPU kernels; use backend=\"sim\" until then",
                    (f"{rel}/build.json cannot be read from the package at {op.root}: {exc}",)) from None
    for name in [k[2] for k in plan.kernels] + [plan.host]:
        if not (folder / name).is_file():
            raise _fail("E0927", f"op `{op.name}` has no NPU kernel sources for variant {slug}",
                        "regenerate the package with `ptodsl gen`; use backend=\"sim\" until then",
                        (f"{rel}/{name} is missing from the package at {op.root}",))
    return plan


def _run(command: list[str], what: str, op: PackagedOp, slug: str) -> None:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _fail("E0928", f"building op `{op.name}` variant {slug} for the NPU failed: {exc}",
                    "check that the compiler runs: `bisheng --version`") from None
    output = Path(command[command.index("-o") + 1])
    if proc.returncode != 0 or not output.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-20:]
        output.unlink(missing_ok=True)
        raise _fail("E0928", f"building op `{op.name}` variant {slug} for the NPU failed "
                    f"(exit {proc.returncode}, {what})", "please report this with the compiler output",
                    (f"command: {' '.join(command)}", *tail))


def build(environment: NpuEnvironment, op: PackagedOp, slug: str, env: Mapping[str, str] | None = None) -> Path:
    """Build (or reuse) the shared library of one op variant: every compute kernel compiled for
    its own core type (``--cce-aicore-arch`` from the target file), the host program, linked
    against the ACL runtime. Returns its path."""
    env = os.environ if env is None else env
    plan = build_plan(op, slug)
    target = op.program.target
    archs = {"vector": target.npu_vector_arch, "cube": target.npu_cube_arch}
    if not all(archs[core] for _name, core, _src in plan.kernels) or not archs["vector"]:
        known = [n for n in target_names() if load_target(n).npu_vector_arch]
        raise _fail("E0928", f"no NPU architecture is known for target `{target.name}`",
                    f"targets the NPU build knows: {', '.join(known)}")
    pto_include = pto_isa_include(env, environment.toolkit)
    sources = [plan.folder / src for _n, _c, src in plan.kernels] + [plan.folder / plan.host]
    # keyed on the sources and the pto-isa version they are built against (its top header's text)
    header = (pto_include / "pto" / "pto-inst.hpp").read_bytes()
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources) + header).hexdigest()[:16]
    output = cache_dir(env) / op.package / op.name / f"{slug}-{digest}.so"
    if output.is_file():
        return output
    work = output.parent / f"{slug}-{digest}-objects.{os.getpid()}.tmp"  # removed once linked
    work.mkdir(parents=True, exist_ok=True)
    objects = []
    # the host program has no kernel of its own; it is compiled as the vector kernels are, so that
    # the kernels' pointer types (half, bfloat16_t, __gm__) mean the same on both sides
    units = [(src, archs[core], name) for name, core, src in plan.kernels] + [(plan.host, archs["vector"], "host")]
    try:
        for src, arch, name in units:
            obj = work / f"{name}.o"
            _run(kernel_command(environment.compiler, environment.toolkit, pto_include, arch, plan.folder / src, obj),
                 f"compiling {src}", op, slug)
            objects.append(obj)
        partial = output.with_suffix(f".{os.getpid()}.tmp")
        _run(link_command(environment.compiler, environment.toolkit, objects, partial), "linking", op, slug)
        os.replace(partial, output)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return output


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
    slug = variant_slug(op.program.variants[index].dtypes)
    library = build(environment, op, slug, env)
    return launch(environment, library, op, index, inputs, kwargs, symbols)


__all__ = [
    "MIN_CANN",
    "MIN_DRIVER",
    "NpuEnvironment",
    "NpuError",
    "BuildPlan",
    "build",
    "build_plan",
    "cann_version",
    "check_environment",
    "device_id",
    "driver_version",
    "find_compiler",
    "kernel_command",
    "launch",
    "link_command",
    "pto_isa_include",
    "read_version",
    "run",
    "version_key",
]
