"""The C++ compiler of the CPU backend: which one, what it is (version, OpenMP, bf16, instruction
set), how it is run, and the options of a kernel build.

A compiler is identified once per binary (path, size, mtime) and the answer is remembered in the
cache's ``toolchains`` folder, so a cache hit runs no compiler at all. Sources compile against
ptodsl's own pto-isa CPU header (``include/pto/pto-inst.hpp`` beside this file) or, when
``PTO_ISA_ROOT`` is set, against that pto-isa checkout with ``-D__CPU_SIM``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ... import staging
from ...diagnostics import CompileError, Diagnostic
from . import arch as _arch
from .buildcache import STATS, cache_error, cache_root, cpp_dir, write_atomic

log = logging.getLogger(__name__)

HEADER_DIR = Path(__file__).resolve().parent / "include"
BASE_FLAGS = ("-fPIC", "-shared")
# The optimisation level: $PTODSL_CPU_OPT, 3 by default (what `ptodsl bench`, the generated
# packages and every user build get: -O3 vectorises the tile loops). A lower level only makes
# builds quicker (g++ -O1 builds attention's kernel about 2.5 times faster): no flag below changes a
# computed value at any level, so the everyday test suite builds at 1 and CI's golden matrix at 3.
OPT_ENV = "PTODSL_CPU_OPT"
DEFAULT_OPT = "3"
OPT_LEVELS = ("0", "1", "2", "3")
# The pto-isa programming model places tiles of different element types in the same buffer;
# strict aliasing would let the optimiser reorder those accesses.
# g++ contracts a * b + c into a fused multiply-add wherever the instruction set has one (its
# default, even in ISO C++ mode): results would then depend on the machine and differ from the
# simulator's separately rounded steps. The CPU header asks for fused ones where it means them.
SAFETY_FLAGS = ("-fno-strict-aliasing", "-ffp-contract=off")
# No kernel reads errno or the floating-point exception flags: without them g++ computes sqrt
# inline and turns selects between floats into vector blends, so the element loops vectorise.
# Neither changes a computed value (unlike -ffast-math, which reorders and drops NaN rules).
SPEED_FLAGS = ("-fno-math-errno", "-fno-trapping-math")
OWN_HEADER_STD = "-std=c++17"
# The real library's CPU simulation documents GCC 13 or newer and includes C++20 headers (<bit>),
# so that path builds in C++20 mode.
PTO_ISA_STD = "-std=c++20"
# Under __CPU_SIM the real library's bfloat16_t is C++23's std::bfloat16_t when the compiler has it
# (g++ 13 or newer) and otherwise a placeholder _Float16, which has half's precision, not bf16's.
# With it, builds use C++23 and ask the library to insist on the real type.
PTO_ISA_BF16_STD = "-std=c++23"
PTO_ISA_BF16_DEFINE = "-DPTO_CPU_SIM_ENABLE_BF16"
PTO_ISA_EXTRA = ("-D__CPU_SIM", "-pthread")
DEFAULT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Toolchain:
    path: str  # the compiler as found on PATH (what commands run)
    version: str  # first line of `--version`
    openmp: bool


@dataclass(frozen=True)
class IncludeMode:
    """Which pto-isa the sources compile against, and what that adds to the command."""

    label: str  # "ptodsl" or "pto-isa:<root>"
    include_dir: Path
    flags: tuple[str, ...]
    prelude: str  # text put before every translation unit


# ------------------------------------------------------------------------------------- toolchain


def compiler_name() -> str:
    return os.environ.get("PTODSL_CXX") or "g++"


def find_toolchain() -> Toolchain:
    """The compiler to use, identified without running it when its answers are cached on disk."""
    name = compiler_name()
    found = shutil.which(name)
    if found is None:
        raise CompileError([Diagnostic(
            "E0900", f"the C++ compiler `{name}` was not found on PATH",
            notes=("the CPU backend compiles the emitted pto-isa kernels with it",),
            help="install g++ (e.g. `apt-get install g++`) or set PTODSL_CXX to a C++17 compiler; "
                 "backend=\"sim\" needs no compiler",
        )])
    real = os.path.realpath(found)
    stat = os.stat(real)
    return _identify(found, real, stat.st_mtime_ns, stat.st_size, str(cache_root()))


def _stamp(real: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(f"{real}\0{mtime_ns}\0{size}".encode()).hexdigest()[:32]


def target_arch(toolchain: Toolchain) -> _arch.Arch:
    """The instruction set kernels are built for (``PTODSL_CPU_ARCH``, :mod:`.arch`): probed once
    per compiler binary and machine, then read from the cache's toolchains folder."""
    real = os.path.realpath(toolchain.path)
    try:
        stat = os.stat(real)
    except OSError:
        return _arch.Arch(_arch.requested(), ())
    return _arch.choose(toolchain.path, _stamp(real, stat.st_mtime_ns, stat.st_size), str(cache_root()))


@cache
def _identify(path: str, real: str, mtime_ns: int, size: int, root: str) -> Toolchain:
    """Version line and OpenMP support of one compiler binary, remembered in the cache directory.

    Memoised per cache root as well, so every cache gets its record and a fresh process using it
    never has to run the compiler to identify it.
    """
    stamp = _stamp(real, mtime_ns, size)
    record = cpp_dir("toolchains") / f"{stamp}.json"
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        return Toolchain(path, str(data["version"]), bool(data["openmp"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    lines = _run_probe([path, "--version"]).stdout.splitlines()
    version = lines[0].strip() if lines else "unknown"
    openmp = _probe_openmp(path)
    try:
        write_atomic(record, json.dumps({"version": version, "openmp": openmp}))
    except OSError as exc:  # the record only saves the probes next time
        log.info("cannot remember the toolchain in %s: %s", record, exc)
    log.debug("toolchain %s: %s, OpenMP %s", path, version, "yes" if openmp else "no")
    return Toolchain(path, version, openmp)


def opt_flag() -> str:
    """``-O`` and the level $PTODSL_CPU_OPT names (blanks ignored; 3 when unset or empty). Any
    other value is E0887: it would reach the compiler command."""
    value = (os.environ.get(OPT_ENV) or "").strip() or DEFAULT_OPT
    if value not in OPT_LEVELS:
        raise CompileError([Diagnostic(
            "E0887", f"{OPT_ENV}={value!r} is not an optimisation level",
            notes=(f"{OPT_ENV} takes {', '.join(OPT_LEVELS)} (g++'s -O levels); unset, the kernels build at "
                   f"-O{DEFAULT_OPT}",),
            help=f"set {OPT_ENV} to one of {', '.join(OPT_LEVELS)}, or unset it",
        )])
    return f"-O{value}"


def build_timeout() -> float:
    """$PTODSL_BUILD_TIMEOUT seconds (600 by default; a value that is no positive number is ignored)."""
    try:
        value = float(os.environ.get("PTODSL_BUILD_TIMEOUT", DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


def run_tool(command: list[str], cwd: str | os.PathLike[str] | None, what: str,
             env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a toolchain command within the build timeout; its output decoded whatever its bytes.

    The command runs in a session of its own, so a timeout stops the compiler's own children
    (cc1plus, as, ld) too instead of leaving them orphaned. A timeout is E0906, with the command.
    """
    timeout = build_timeout()
    proc = subprocess.Popen(command, cwd=cwd, env=dict(env) if env is not None else None, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        repro = f"cd {shlex.quote(str(cwd))} && {shlex.join(command)}" if cwd else shlex.join(command)
        raise CompileError([Diagnostic(
            "E0906", f"{what} took longer than {timeout:g} s and was stopped",
            notes=(f"the command: {repro}",),
            help="raise PTODSL_BUILD_TIMEOUT (seconds) or reduce the schedule's unrolling",
        )]) from exc
    # Compilers may print bytes of any encoding (file names, a localised message): never fail on them.
    return subprocess.CompletedProcess(command, proc.returncode, out.decode("utf-8", errors="replace"),
                                       err.decode("utf-8", errors="replace"))


def _run_probe(command: list[str], cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    STATS.probes += 1
    return run_tool(command, cwd, f"probing the compiler (`{shlex.join(command)}`)")


def _probe_source(source: str, command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (naming ``probe.cpp``) on ``source`` in a scratch folder of the cache."""
    try:
        folder = tempfile.TemporaryDirectory(prefix=staging.owned_name("probe-"), dir=cpp_dir("tmp"))
    except OSError as exc:
        raise cache_error(cpp_dir("tmp"), exc) from exc
    with folder as tmp:
        Path(tmp, "probe.cpp").write_text(source, encoding="utf-8")
        return _run_probe(command, cwd=tmp)


def _probe_openmp(compiler: str) -> bool:
    source = "#include <omp.h>\nint main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n"
    result = _probe_source(source, [compiler, "-fopenmp", "probe.cpp", "-o", "probe"])
    if result.returncode != 0:
        log.info("%s cannot build OpenMP code; kernels build single-threaded", compiler)
    return result.returncode == 0


@cache
def _probe_native_bf16(compiler: str) -> bool:
    source = "#include <stdfloat>\n#ifndef __STDCPP_BFLOAT16_T__\n#error no std::bfloat16_t\n#endif\n"
    return _probe_source(source, [compiler, PTO_ISA_BF16_STD, "-fsyntax-only", "probe.cpp"]).returncode == 0


def native_bf16() -> bool:
    """Whether the compiler has C++23's std::bfloat16_t, which pto-isa's CPU simulation needs for bf16."""
    found = shutil.which(compiler_name())
    return found is not None and _probe_native_bf16(found)


def pto_isa_bf16_gap() -> str | None:
    """Why bf16 kernels cannot run against the PTO_ISA_ROOT checkout, or None when they can (or
    when no checkout is in use: ptodsl's own header has its own bfloat16_t)."""
    if not os.environ.get("PTO_ISA_ROOT") or native_bf16():
        return None
    return (f"pto-isa's CPU simulation has a real bf16 type only as C++23 std::bfloat16_t, which "
            f"`{compiler_name()}` lacks (g++ 13 or newer has it); without it bfloat16_t is _Float16, "
            "so bf16 results would have half precision")


# ------------------------------------------------------------------------------------ the command


def include_mode() -> IncludeMode:
    root = os.environ.get("PTO_ISA_ROOT")
    if not root:
        return IncludeMode("ptodsl", HEADER_DIR, (OWN_HEADER_STD,), "")
    include = Path(root).expanduser().resolve() / "include"
    if not (include / "pto" / "pto-inst.hpp").is_file():
        raise CompileError([Diagnostic(
            "E0903", f"PTO_ISA_ROOT={root} has no include/pto/pto-inst.hpp",
            help="point PTO_ISA_ROOT at a pto-isa checkout, or unset it to use ptodsl's own CPU header",
        )])
    # The real headers use fixed-width integer types before including <cstdint> themselves.
    flags = (PTO_ISA_BF16_STD, PTO_ISA_BF16_DEFINE) if native_bf16() else (PTO_ISA_STD,)
    return IncludeMode(f"pto-isa:{include.parent}", include, (*flags, *PTO_ISA_EXTRA), "#include <cstdint>\n")


def _define_flags(defines: Mapping[str, object]) -> list[str]:
    flags = []
    for name in sorted(defines):
        value = defines[name]
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"not a macro name: {name!r}")
        if value is None or value is True:
            flags.append(f"-D{name}")
        else:
            flags.append(f"-D{name}={0 if value is False else value}")
    return flags


def compile_flags(toolchain: Toolchain, mode: IncludeMode, flags: Sequence[str],
                  defines: Mapping[str, object], arch: _arch.Arch | None = None) -> list[str]:
    """Every option of the compiler command, in order (sources and output come after). The
    instruction set's ``-march`` is part of it, so it is part of the cache key too: a library built
    for AVX-512 is never handed to a machine that lacks it."""
    return [
        opt_flag(),
        *BASE_FLAGS,
        *(arch.flags if arch is not None else ()),
        *mode.flags,
        *SAFETY_FLAGS,
        *SPEED_FLAGS,
        *(["-fopenmp"] if toolchain.openmp else []),
        f"-I{mode.include_dir}",
        *_define_flags(defines),
        *flags,
    ]


__all__ = ["BASE_FLAGS", "DEFAULT_TIMEOUT_S", "HEADER_DIR", "IncludeMode", "OPT_ENV", "Toolchain", "build_timeout",
           "compile_flags", "compiler_name", "find_toolchain", "include_mode", "native_bf16", "opt_flag", "pto_isa_bf16_gap",
           "run_tool", "target_arch"]
