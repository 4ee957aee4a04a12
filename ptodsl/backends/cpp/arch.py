"""Which instruction set the kernels are compiled for: ``-march`` chosen by probing this machine.

The emitted tile loops are plain C++ that g++ vectorises; built for the compiler's default target
(x86-64: SSE2 only, no FMA) they run several times slower than the host allows. So the build asks
for the host's instruction set, chosen by ``PTODSL_CPU_ARCH``:

- ``native`` (the default): the newest x86-64 microarchitecture level (``x86-64-v4``, ``-v3``,
  ``-v2``) that the compiler accepts and this CPU runs, found by compiling and running a probe with
  each, newest first. A level, not ``-march=native``: it names exactly what the code needs, so the
  command (and with it the cache key) says which machines a cached library may run on. Off x86-64,
  or when no level passes, the compiler's default target;
- ``portable``: no ``-march`` at all (the compiler's default target, which every machine of the
  architecture runs);
- any other value is given to the compiler as ``-march=VALUE`` (``x86-64-v3``, ``znver4``, ...)
  after the same probe: a value the compiler rejects or this CPU cannot run is an error (E0886)
  rather than a library that dies of an illegal instruction.

The probe program, compiled with the candidate flag, checks at run time that the CPU has every
x86 feature the flag lets the compiler use (``__builtin_cpu_supports``, which also asks the OS
whether it saves the AVX registers), and runs a loop the flag vectorises. Its answer is kept in the
cache's ``toolchains`` folder under the compiler binary and this CPU's identity (its model and
feature flags), so a cache shared by several machines keeps one answer per kind of machine and a
fresh process answers from the record without running the compiler.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import re
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ... import staging
from ...diagnostics import CompileError, Diagnostic

log = logging.getLogger(__name__)

ENV = "PTODSL_CPU_ARCH"
DEFAULT = "native"
PORTABLE = "portable"
# Newest first: the first one this machine runs is the one native picks.
X86_LEVELS = ("x86-64-v4", "x86-64-v3", "x86-64-v2")
_VALUE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
RECORD_VERSION = 1

# (predefined macro, __builtin_cpu_supports name): every feature of the x86-64 levels the compiler
# may use once a -march enables the macro.
_X86_FEATURES = (
    ("__SSE3__", "sse3"), ("__SSSE3__", "ssse3"), ("__SSE4_1__", "sse4.1"), ("__SSE4_2__", "sse4.2"),
    ("__POPCNT__", "popcnt"), ("__AVX__", "avx"), ("__AVX2__", "avx2"), ("__FMA__", "fma"),
    ("__BMI__", "bmi"), ("__BMI2__", "bmi2"), ("__F16C__", "f16c"), ("__AVX512F__", "avx512f"),
    ("__AVX512VL__", "avx512vl"), ("__AVX512BW__", "avx512bw"), ("__AVX512DQ__", "avx512dq"),
    ("__AVX512CD__", "avx512cd"),
)


def _probe_program() -> str:
    checks = "\n".join(
        f'#ifdef {macro}\n    if (!__builtin_cpu_supports("{name}")) {{ std::puts("{name}"); missing = 1; }}\n#endif'
        for macro, name in _X86_FEATURES)
    return (
        "#include <cstdio>\n"
        "static float data[256];\n"
        "int main() {\n"
        "    int missing = 0;\n"
        "#if defined(__x86_64__) || defined(__i386__)\n"
        "    __builtin_cpu_init();\n"
        f"{checks}\n"
        "#endif\n"
        "    if (missing) return 3;\n"
        "    // code the flag vectorises, run only once the CPU is known to have what it needs\n"
        "    volatile float seed = 1.5f;\n"
        "    for (int i = 0; i < 256; ++i) data[i] = seed * static_cast<float>(i);\n"
        "    float sum = 0.0f;\n"
        "    for (int i = 0; i < 256; ++i) sum += data[i] * data[i];\n"
        "    return sum > 0.0f ? 0 : 4;\n"
        "}\n")


@dataclass(frozen=True)
class Arch:
    """The instruction set choice: what was asked for, and the flags it gives the compiler."""

    request: str  # the value of PTODSL_CPU_ARCH (or its default)
    flags: tuple[str, ...]  # what goes into every compile command: () or ("-march=...",)

    @property
    def label(self) -> str:
        return self.flags[0].removeprefix("-march=") if self.flags else PORTABLE


def requested() -> str:
    """PTODSL_CPU_ARCH, or the default (``native``); surrounding blanks ignored."""
    return (os.environ.get(ENV) or DEFAULT).strip() or DEFAULT


def check_request(value: str) -> None:
    """A value that cannot be a -march name is E0885 (it would otherwise reach the command line)."""
    if value in (DEFAULT, PORTABLE) or _VALUE_RE.match(value):
        return
    raise CompileError([Diagnostic(
        "E0885", f"{ENV}={value!r} is not an instruction set name",
        notes=(f"{ENV} takes `native` (the default: the newest x86-64 level this machine runs), `portable` "
               "(the compiler's default target) or a -march name such as `x86-64-v3`",),
        help=f"set {ENV} to one of those, or unset it",
    )])


@cache
def cpu_identity() -> str:
    """A digest of what decides which instructions this machine runs: its architecture, CPU model
    and feature flags (from /proc/cpuinfo where there is one)."""
    parts = [platform.machine()]
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        parts.append(platform.processor())
    else:
        for key in ("vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU part"):
            m = re.search(rf"^{re.escape(key)}\s*:\s*(.*)$", text, re.M)
            if m:
                parts.append(f"{key}={m.group(1).strip()}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def choose(compiler: str, stamp: str, root: str) -> Arch:
    """The instruction set for ``compiler`` (``stamp`` identifies its binary) on this machine,
    remembered in the toolchains folder of the build cache at ``root``."""
    request = requested()
    check_request(request)
    if request == PORTABLE:
        return Arch(request, ())
    return _choose(compiler, stamp, root, request, cpu_identity())


@cache
def _choose(compiler: str, stamp: str, root: str, request: str, cpu: str) -> Arch:
    tmp = Path(root) / "cpp" / "tmp"
    name = hashlib.sha256(f"{stamp}\0{cpu}\0{request}".encode()).hexdigest()[:32]
    record = Path(root) / "cpp" / "toolchains" / f"arch-{name}.json"
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        if data.get("version") == RECORD_VERSION and data.get("request") == request:
            return Arch(request, tuple(str(f) for f in data["flags"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    if request == DEFAULT:
        flags: tuple[str, ...] = ()
        for level in X86_LEVELS if _x86() else ():
            ok, why = probe(compiler, tmp, f"-march={level}")
            if ok:
                flags = (f"-march={level}",)
                break
            log.info("%s: -march=%s is not usable here: %s", compiler, level, why)
            if why.startswith("timed out"):
                break  # a compiler that hangs would hang on every level
    else:
        ok, why = probe(compiler, tmp, f"-march={request}")
        if not ok:
            raise CompileError([Diagnostic(
                "E0886", f"{ENV}={request}: kernels built with -march={request} cannot run on this machine",
                notes=(f"the probe: {why}",),
                help=f"unset {ENV} (the default picks the newest x86-64 level this machine runs), or set it "
                     "to `portable` or to a level this CPU has",
            )])
        flags = (f"-march={request}",)
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        part = record.with_name(f".{record.name}.{os.getpid()}")
        part.write_text(json.dumps({"version": RECORD_VERSION, "request": request, "flags": list(flags)}),
                        encoding="utf-8")
        os.replace(part, record)
    except OSError as exc:  # the record only saves the probes next time
        log.info("cannot remember the instruction set in %s: %s", record, exc)
    log.debug("%s on this machine: %s -> %s", compiler, request, " ".join(flags) or "the default target")
    return Arch(request, flags)


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def probe(compiler: str, tmp: Path, flag: str) -> tuple[bool, str]:
    """Compile the probe with ``flag`` and run it: (usable, why not)."""
    from .buildcache import STATS
    from .toolchain import build_timeout, run_tool

    try:
        tmp.mkdir(parents=True, exist_ok=True)
        folder = tempfile.TemporaryDirectory(prefix=staging.owned_name("probe-"), dir=tmp)
    except OSError as exc:
        return False, f"no scratch folder: {exc}"
    with folder as work:
        Path(work, "probe.cpp").write_text(_probe_program(), encoding="utf-8")
        command = [compiler, "-O2", flag, "probe.cpp", "-o", "probe"]
        STATS.probes += 1
        try:
            built = run_tool(command, work, f"probing `{flag}`")
        except CompileError:
            return False, f"timed out: `{' '.join(command)}` took longer than {build_timeout():g} s"
        if built.returncode != 0:
            lines = (built.stderr or built.stdout).strip().splitlines()
            return False, f"the compiler rejects {flag}" + (f": {lines[0][:200]}" if lines else "")
        try:
            ran = subprocess.run([str(Path(work, "probe"))], cwd=work, capture_output=True, text=True,
                                 timeout=min(build_timeout(), 60.0), stdin=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return False, f"the probe built with {flag} does not run: {exc}"
        if ran.returncode == 3:
            missing = " ".join(ran.stdout.split())
            return False, f"this CPU lacks {missing}, which {flag} uses"
        if ran.returncode != 0:
            how = f"signal {-ran.returncode}" if ran.returncode < 0 else f"status {ran.returncode}"
            return False, f"the probe built with {flag} stopped with {how}"
        return True, ""


__all__ = ["Arch", "DEFAULT", "ENV", "PORTABLE", "X86_LEVELS", "check_request", "choose", "cpu_identity",
           "probe", "requested"]
