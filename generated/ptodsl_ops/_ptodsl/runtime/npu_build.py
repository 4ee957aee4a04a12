"""The NPU build of one op variant, laid out as pto-isa's own NPU tests build theirs.

pto-isa's tests (``tests/npu/<chip>/src/st``) compile a kernel file as CCE for one core type
(``-xcce --cce-aicore-arch=<arch> -DMEMORY_BASE``) into a shared library linked with
``--cce-fatobj-link``, and compile the host program as plain C++ (``-xc++``, with ``stdint.h`` and
``stddef.h`` included first) into a program linked against that library and the ACL runtime. Here:

- every compute kernel unit (the kernel and its ``<kernel>_launch`` function) is compiled for its
  own core type, the architecture named by the target file (``npu_vector_arch``, ``npu_cube_arch``);
- the objects of each core type are linked into a kernel library of their own
  (``lib<entry>_vector.so``, ``lib<entry>_cube.so``), never cube and vector into one;
- the host program (``host.cpp``) is compiled as host C++, not as a CCE unit, and linked into
  ``lib<entry>.so`` against the kernel libraries (found beside it: ``$ORIGIN``) and ACL.

The host program includes ``pto/pto-inst.hpp`` for the kernels' element types; its compile sees
ptodsl's host view of that header (:data:`HOST_HEADER`) instead of pto-isa's device one.

Builds are cached in ``$XDG_CACHE_HOME/ptodsl/npu/<package>/<op>/<variant>-<key>/``; the key
covers everything the libraries depend on: the sources and every file they include from the
package, the contents of the include trees of the commands (pto-isa's and the toolkit's), the
compiler's version line and every command with all its flags.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..backends.cpp.buildcache import headers_digest
from ..targets import load_target, target_names
from .layout import npu_folder
from .npu import NpuEnvironment, _fail

if TYPE_CHECKING:
    from .package import PackagedOp

BUILD_TIMEOUT_S = 600
PTO_ISA_ENV = "PTO_ISA_ROOT"
# pto-isa's own NPU tests (tests/npu/a2a3/src/st) build every kernel with these bisheng options.
CCE_OPTIONS = ("-xcce", "-O2", "-std=c++17", "-fPIC", "-DMEMORY_BASE",
               "-mllvm", "-cce-aicore-stack-size=0x8000",
               "-mllvm", "-cce-aicore-function-stack-size=0x8000",
               "-mllvm", "-cce-aicore-record-overflow=true",
               "-mllvm", "-cce-aicore-addr-transform",
               "-mllvm", "-cce-aicore-dcci-insert-for-scalar=false")
# ... and their host programs with these: plain C++ for the host CPU.
HOST_OPTIONS = ("-xc++", "-O2", "-std=c++17", "-fPIC", "-include", "stdint.h", "-include", "stddef.h")
HOST_LIBRARIES = ("-lruntime", "-lascendcl", "-lstdc++", "-lm", "-ldl", "-lpthread")
HOST_INCLUDE = "host_include"  # the folder of the build holding HOST_HEADER as pto/pto-inst.hpp
HOST_HEADER = """\
// pto/pto-inst.hpp as the host program of ptodsl's NPU build sees it (written by the build).
// The host program is compiled as C++ for the host CPU, so pto-isa's device header is not for it.
// It passes the kernels' device pointers through and reads index values from device memory, so
// the 16-bit element types are opaque storage here (any arithmetic on them fails to compile),
// and AICORE, which marks the helpers it shares with the kernels, is empty.
#ifndef PTODSL_NPU_HOST_PTO_INST_HPP
#define PTODSL_NPU_HOST_PTO_INST_HPP
#include <cstddef>
#include <cstdint>
#ifndef AICORE
#define AICORE
#endif
struct half {
    uint16_t bits;
};
struct bfloat16_t {
    uint16_t bits;
};
#endif
"""
# Placeholders of the package's folder and the build's own folder in the commands the key hashes,
# so the key does not depend on where the package is installed or which process builds it.
SOURCES, OUT = Path("<sources>"), Path("<out>")
_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)


@dataclass(frozen=True)
class BuildPlan:
    """The NPU build of one variant, as the package's ``kernels/<op>/npu/<variant>/build.json``
    describes it."""

    folder: Path
    entry: str
    kernels: tuple[tuple[str, str, str], ...]  # (name, vector | cube, source file name)
    host: str
    params: tuple[tuple[str, str, str], ...]  # (kind, name, dtype) of the host entry, after the stream


@dataclass(frozen=True)
class Step:
    what: str  # "compiling k0.cpp", "linking lib..._vector.so"
    command: tuple[str, ...]
    output: Path


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


def toolkit_includes(toolkit: Path) -> list[Path]:
    """The toolkit's include folders, as pto-isa's NPU tests put them on the include path."""
    return [toolkit / "include", toolkit / "pkg_inc", toolkit / "pkg_inc" / "runtime", toolkit / "pkg_inc" / "profiling"]


def kernel_command(compiler: str, toolkit: Path, pto_include: Path, arch: str, source: Path, output: Path) -> list[str]:
    """Compile one kernel translation unit (the kernel and its launcher) for its core type."""
    return [compiler, "-c", *CCE_OPTIONS, f"--cce-aicore-arch={arch}",
            *(f"-I{d}" for d in [pto_include, *toolkit_includes(toolkit)]), str(source), "-o", str(output)]


def kernel_library_command(compiler: str, objects: Sequence[Path], output: Path) -> list[str]:
    """Link the kernels of one core type into their own library (its file name is its soname)."""
    return [compiler, "-shared", "--cce-fatobj-link", *map(str, objects), f"-Wl,-soname,{output.name}",
            "-o", str(output)]


def host_command(compiler: str, toolkit: Path, host_include: Path, source: Path, output: Path) -> list[str]:
    """Compile the host program as host C++ against ACL and ptodsl's host view of pto-inst.hpp."""
    return [compiler, "-c", *HOST_OPTIONS, *(f"-I{d}" for d in [host_include, *toolkit_includes(toolkit)]),
            str(source), "-o", str(output)]


def host_link_command(compiler: str, toolkit: Path, host_object: Path, kernel_libraries: Sequence[Path],
                      output: Path) -> list[str]:
    """Link the host program against the kernel libraries beside it and the ACL runtime."""
    folders = sorted({str(lib.parent) for lib in kernel_libraries})
    return [compiler, "-shared", str(host_object), "-o", str(output), *(f"-L{d}" for d in folders),
            *(f"-l:{lib.name}" for lib in kernel_libraries), "-Wl,-rpath,$ORIGIN",
            f"-L{toolkit / 'lib64'}", *HOST_LIBRARIES]


def library_name(entry: str, core: str | None = None) -> str:
    return f"lib{entry}_{core}.so" if core else f"lib{entry}.so"


def steps(plan: BuildPlan, archs: Mapping[str, str], compiler: str, toolkit: Path, pto_include: Path,
          sources: Path, out: Path) -> list[Step]:
    """Every command of the build, in order: the kernels of each core type compiled and linked into
    their library, then the host program compiled and linked against them."""
    out_steps: list[Step] = []
    libraries = []
    for core in ("vector", "cube"):
        units = [(name, src) for name, kind, src in plan.kernels if kind == core]
        if not units:
            continue
        objects = []
        for name, src in units:
            obj = out / f"{name}.o"
            out_steps.append(Step(f"compiling {src}", tuple(kernel_command(
                compiler, toolkit, pto_include, archs[core], sources / src, obj)), obj))
            objects.append(obj)
        library = out / library_name(plan.entry, core)
        out_steps.append(Step(f"linking {library.name}", tuple(kernel_library_command(compiler, objects, library)),
                              library))
        libraries.append(library)
    host_obj = out / "host.o"
    out_steps.append(Step(f"compiling {plan.host}", tuple(host_command(
        compiler, toolkit, out / HOST_INCLUDE, sources / plan.host, host_obj)), host_obj))
    host_lib = out / library_name(plan.entry)
    out_steps.append(Step(f"linking {host_lib.name}", tuple(host_link_command(
        compiler, toolkit, host_obj, libraries, host_lib)), host_lib))
    return out_steps


# ------------------------------------------------------------------ the cache key


def _source_files(folder: Path, names: Sequence[str]) -> Iterator[tuple[str, bytes]]:
    """The sources and, transitively, every file of the package they include by a quoted path."""
    todo = [folder / n for n in names]
    seen: set[Path] = set()
    while todo:
        path = Path(os.path.normpath(todo.pop(0)))
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        data = path.read_bytes()
        yield os.path.relpath(path, folder), data
        todo += [path.parent / inc for inc in _QUOTED_INCLUDE.findall(data.decode("utf-8", errors="replace"))]


@cache
def _compiler_version(path: str, mtime_ns: int, size: int) -> str:
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, errors="replace",
                              timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _fail("E0928", f"the NPU compiler {path} does not run: {exc}",
                    "check that the compiler runs: `bisheng --version`") from None
    lines = (proc.stdout or proc.stderr).strip().splitlines()
    return lines[0].strip() if lines else "unknown"


def compiler_version(compiler: str) -> str:
    """The first line of ``<compiler> --version``, asked once per process and compiler binary."""
    real = os.path.realpath(compiler)
    try:
        stat = os.stat(real)
    except OSError:
        return "unknown"
    return _compiler_version(real, stat.st_mtime_ns, stat.st_size)


def build_key(plan: BuildPlan, archs: Mapping[str, str], compiler: str, toolkit: Path, pto_include: Path) -> str:
    """The sha256 of everything the variant's libraries depend on."""
    names = [src for _n, _c, src in plan.kernels] + [plan.host]
    includes = [pto_include, toolkit / "include", toolkit / "pkg_inc"]  # pkg_inc holds the other two
    material = {
        "sources": [[name, hashlib.sha256(data).hexdigest()] for name, data in _source_files(plan.folder, names)],
        "includes": {str(d): headers_digest(d) for d in includes},
        "host_header": HOST_HEADER,
        "compiler": compiler_version(compiler),
        "commands": [list(s.command) for s in steps(plan, archs, compiler, toolkit, pto_include, SOURCES, OUT)],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------ building


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


def _run(step: Step, op: PackagedOp, slug: str) -> None:
    command = list(step.command)
    try:
        proc = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=BUILD_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _fail("E0928", f"building op `{op.name}` variant {slug} for the NPU failed: {exc}",
                    "check that the compiler runs: `bisheng --version`") from None
    if proc.returncode != 0 or not step.output.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-20:]
        raise _fail("E0928", f"building op `{op.name}` variant {slug} for the NPU failed "
                    f"(exit {proc.returncode}, {step.what})", "please report this with the compiler output",
                    (f"command: {' '.join(command)}", *tail))


def npu_archs(op: PackagedOp, plan: BuildPlan) -> dict[str, str]:
    """The ``--cce-aicore-arch`` of each core type, from the target file; E0928 when it names none."""
    target = op.program.target
    archs = {"vector": target.npu_vector_arch, "cube": target.npu_cube_arch, "mixed": target.npu_mixed_arch}
    if not all(archs.get(core) for _name, core, _src in plan.kernels) or not archs["vector"]:
        known = [n for n in target_names() if load_target(n).npu_vector_arch]
        raise _fail("E0928", f"no NPU architecture is known for target `{target.name}`",
                    f"targets the NPU build knows: {', '.join(known)}")
    return archs


def build(environment: NpuEnvironment, op: PackagedOp, slug: str, env: Mapping[str, str] | None = None) -> Path:
    """Build (or reuse) the libraries of one op variant; returns the host library's path."""
    env = os.environ if env is None else env
    plan = build_plan(op, slug)
    archs = npu_archs(op, plan)
    pto_include = pto_isa_include(env, environment.toolkit)
    key = build_key(plan, archs, environment.compiler, environment.toolkit, pto_include)
    final = cache_dir(env) / op.package / op.name / f"{slug}-{key}"
    output = final / library_name(plan.entry)
    libraries = [output.name, *(library_name(plan.entry, c) for c in sorted({c for _n, c, _s in plan.kernels}))]

    def complete() -> bool:
        return all((final / name).is_file() for name in libraries)

    if complete():
        return output
    work = final.with_name(f"{final.name}.{os.getpid()}.tmp")  # renamed into place once linked
    shutil.rmtree(work, ignore_errors=True)
    (work / HOST_INCLUDE / "pto").mkdir(parents=True)
    try:
        (work / HOST_INCLUDE / "pto" / "pto-inst.hpp").write_text(HOST_HEADER, encoding="utf-8")
        for step in steps(plan, archs, environment.compiler, environment.toolkit, pto_include, plan.folder, work):
            _run(step, op, slug)
        # the entry keeps the libraries only: the host library finds the kernel libraries beside it
        shutil.rmtree(work / HOST_INCLUDE)
        for obj in work.glob("*.o"):
            obj.unlink()
        try:
            os.replace(work, final)
        except OSError:  # another process installed the same build first, or a damaged entry is in the way
            if not complete():
                shutil.rmtree(final, ignore_errors=True)
                os.replace(work, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return output


__all__ = ["CCE_OPTIONS", "HOST_HEADER", "HOST_OPTIONS", "BuildPlan", "Step", "build", "build_key", "build_plan",
           "cache_dir", "compiler_version", "host_command", "host_link_command", "kernel_command",
           "kernel_library_command", "npu_archs", "pto_isa_include", "steps", "toolkit_includes"]
