"""Compile C++ sources into a shared library with g++, through a content-addressed cache.

``build_shared({"kernel.cpp": text}, "softmax")`` returns the path of ``libsoftmax.so``. The sources
are compiled against ptodsl's own pto-isa CPU header (``include/pto/pto-inst.hpp`` beside this
file) or, when ``PTO_ISA_ROOT`` is set, against that pto-isa checkout with ``-D__CPU_SIM``.

The cache key hashes everything the library depends on: the ptodsl version, every source's name
and text, the full compiler command, the compiler's version line and the contents of every header
the include path can reach. Entries are directories that appear atomically (built in a staging
folder in the cache's ``tmp``, then renamed into place), carry a manifest with the library's sha256,
and are checked on every hit, so a concurrent build of the same kernel or a damaged entry is
harmless. A build killed outright leaves its staging folder; the next build removes it, by the rules
of :mod:`ptodsl.staging` (the owner process is gone, or the folder is older than :func:`stale_age`). A hit runs no compiler: not even ``g++ --version``, whose answer is cached per compiler
binary. ``STATS`` counts what happened (tests assert "rebuilt nothing" with it), and each compiler
run is logged on the ``ptodsl.backends.cpp.build`` logger.

Failures raise :class:`ptodsl.diagnostics.CompileError` (codes E0900-E0919 in
``diagnostics/codes/build.yaml``); a failed build keeps its sources and the full compiler log in
the cache's ``failed`` folder and the diagnostic shows a one-line command that repeats it.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
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
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ... import staging
from ...diagnostics import CompileError, Diagnostic, Span
from . import arch as _arch

log = logging.getLogger(__name__)

HEADER_DIR = Path(__file__).resolve().parent / "include"
BASE_FLAGS = ("-O3", "-fPIC", "-shared")
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
TRANSLATION_UNITS = (".cpp", ".cc", ".cxx")
DEFAULT_TIMEOUT_S = 600.0
MESSAGE_LINES = 40
MESSAGE_LINE_CHARS = 300
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_DIAG_RE = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+):\s*(?P<rest>.*)$")


@dataclass
class BuildStats:
    """What ``build_shared`` did in this process: tests assert "rebuilt nothing" with these."""

    compiles: int = 0  # compiler runs that produced (or tried to produce) a kernel library
    hits: int = 0  # builds answered from the cache
    probes: int = 0  # compiler runs that identified a toolchain (version, OpenMP)
    discarded: int = 0  # damaged cache entries thrown away


STATS = BuildStats()


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


# ------------------------------------------------------------------------------------------ paths


def cache_root() -> Path:
    """$PTODSL_CACHE_DIR, else the per-user cache ($XDG_CACHE_HOME/ptodsl or ~/.cache/ptodsl)."""
    explicit = os.environ.get("PTODSL_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ptodsl"


def _cache_error(path: Path, exc: OSError) -> CompileError:
    return CompileError([Diagnostic(
        "E0904", f"cannot write the build cache at {path}: {exc.strerror or exc}",
        help="set PTODSL_CACHE_DIR to a writable directory, or remove the damaged cache",
    )])


def _cpp_dir(kind: str) -> Path:
    path = cache_root() / "cpp" / kind
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CompileError([Diagnostic(
            "E0904", f"cannot create the build cache directory {path}: {exc.strerror or exc}",
            help="set PTODSL_CACHE_DIR to a writable directory",
        )]) from exc
    return path


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
    record = _cpp_dir("toolchains") / f"{stamp}.json"
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        return Toolchain(path, str(data["version"]), bool(data["openmp"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    lines = _run_probe([path, "--version"]).stdout.splitlines()
    version = lines[0].strip() if lines else "unknown"
    openmp = _probe_openmp(path)
    try:
        _write_atomic(record, json.dumps({"version": version, "openmp": openmp}))
    except OSError as exc:  # the record only saves the probes next time
        log.info("cannot remember the toolchain in %s: %s", record, exc)
    log.debug("toolchain %s: %s, OpenMP %s", path, version, "yes" if openmp else "no")
    return Toolchain(path, version, openmp)


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
        folder = tempfile.TemporaryDirectory(prefix=staging.owned_name("probe-"), dir=_cpp_dir("tmp"))
    except OSError as exc:
        raise _cache_error(_cpp_dir("tmp"), exc) from exc
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


# ------------------------------------------------------------------------------------ cache keys


def _files_under(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for filename in sorted(filenames):
            yield Path(dirpath, filename)


@cache
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def headers_digest(include_dir: Path) -> str:
    """A hash of every file the include path reaches (names and contents)."""
    digest = hashlib.sha256()
    for path in _files_under(include_dir):
        if path.suffix == ".pyc" or "__pycache__" in path.parts:
            continue
        stat = path.stat()
        digest.update(str(path.relative_to(include_dir)).encode())
        digest.update(b"\0")
        digest.update(_file_digest(str(path), stat.st_mtime_ns, stat.st_size).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def cache_key(sources: Mapping[str, str], name: str, command: Sequence[str], toolchain: Toolchain,
              mode: IncludeMode) -> str:
    from ... import __version__

    material = {
        "ptodsl": __version__,
        "name": name,
        "sources": [[n, sources[n]] for n in sorted(sources)],
        "command": list(command),
        "compiler": toolchain.version,
        "include": mode.label,
        "headers": headers_digest(mode.include_dir),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


# ---------------------------------------------------------------------------------- cache entries

MANIFEST = "entry.json"


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _valid_entry(entry: Path, key: str) -> Path | None:
    """The entry's library if its manifest vouches for it byte for byte, else None."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        library = entry / manifest["library"]
        if manifest["key"] != key or library.stat().st_size != manifest["size"]:
            return None
        return library if _sha256_file(library) == manifest["sha256"] else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _discard(path: Path) -> None:
    """Remove a directory another process may be removing too: move it aside first."""
    aside = _cpp_dir("tmp") / (staging.owned_name("discard-") + uuid.uuid4().hex)
    try:
        os.replace(path, aside)
    except OSError:  # gone already, or a read-only cache: the build reports it if it matters
        return
    shutil.rmtree(aside, ignore_errors=True)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _entry_dir(key: str) -> Path:
    return _cpp_dir("kernels") / key[:2] / key


# ------------------------------------------------------------------------------------- building


def build_shared(sources: Mapping[str, str], name: str, *, flags: Sequence[str] = (),
                 defines: Mapping[str, object] | None = None) -> Path:
    """Compile ``sources`` (file name -> text) into ``lib<name>.so`` and return its cached path.

    ``flags`` are extra compiler options; ``defines`` become ``-DNAME=VALUE`` (``-DNAME`` for a
    value of None or True). Raises CompileError on any failure.
    """
    _check_inputs(sources, name, flags)
    if cache_root() not in _CLEANED:
        clean_staging()
    toolchain = find_toolchain()
    mode = include_mode()
    options = compile_flags(toolchain, mode, flags, defines or {}, target_arch(toolchain))
    key = cache_key(sources, name, options, toolchain, mode)
    entry = _entry_dir(key)
    library = _valid_entry(entry, key)
    if library is not None:
        STATS.hits += 1
        log.debug("kernel %s: cache hit %s", name, entry)
        return library
    with _key_lock(key):
        # another process may have built it while this one waited for the lock
        library = _valid_entry(entry, key)
        if library is not None:
            STATS.hits += 1
            return library
        if entry.exists():
            STATS.discarded += 1
            log.warning("kernel %s: discarding a damaged cache entry %s", name, entry)
            _discard(entry)
        return _compile_and_install(sources, name, toolchain, mode, options, key)


@contextlib.contextmanager
def _key_lock(key: str) -> Iterator[None]:
    """Hold the cache's lock of one entry: processes sharing a cache (pytest workers, parallel
    ``ptodsl test`` runs) build each library once, the others wait and find it built. Where
    file locks are unavailable (no fcntl, a read-only cache) builds proceed unlocked: installing
    an entry is atomic either way, only the duplicate work is lost."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        folder = _cpp_dir("locks")
        fd = os.open(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except (OSError, CompileError):
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _check_inputs(sources: Mapping[str, str], name: str, flags: Sequence[str]) -> None:
    if isinstance(flags, str):
        raise TypeError("flags must be a sequence of options, not one string")
    if not _NAME_RE.match(name):
        raise ValueError(f"library name {name!r} must be letters, digits, '_', '-' or '.'")
    if not any(Path(n).suffix in TRANSLATION_UNITS for n in sources):
        raise ValueError(f"sources {sorted(sources)} hold no translation unit ({', '.join(TRANSLATION_UNITS)})")
    for n in sources:
        if Path(n).name != n or not _NAME_RE.match(n):
            raise ValueError(f"source name {n!r} must be a plain file name")


# Every folder a build works in lives in the cache's tmp folder, named for its process
# (ptodsl.staging): `build-` for a library being built, `probe-` for a compiler probe, `discard-` for
# a damaged entry being removed.
STAGING = ("build-", "probe-", "discard-")


def stale_age() -> float:
    """The age past which a staging folder is stale whoever owns it: a day, or twice the build
    timeout if that is longer (a compiler run never outlives the timeout, so no running build's
    folder is that old)."""
    return max(staging.STALE_AGE_S, 2 * build_timeout())


_CLEANED: set[Path] = set()  # the caches this process has cleaned at its first build


def clean_staging() -> None:
    """Remove what builds killed mid-way left in the cache's tmp folder (:mod:`ptodsl.staging`):
    the folders of processes of this machine that no longer exist, and anything older than
    :func:`stale_age` (also what ptodsl versions that did not name the owner left). Run before
    every compile, and at a process's first build in a cache even when the cache answers it."""
    root = cache_root()
    _CLEANED.add(root)
    staging.clean(root / "cpp" / "tmp", STAGING, stale_age(), everything=True)


def _compile_and_install(sources: Mapping[str, str], name: str, toolchain: Toolchain, mode: IncludeMode,
                         options: list[str], key: str) -> Path:
    tmp = _cpp_dir("tmp")
    try:
        clean_staging()
        work = staging.create(tmp, "build-", f"{key[:16]}-")
    except OSError as exc:
        raise _cache_error(tmp, exc) from exc
    try:
        units = sorted(n for n in sources if Path(n).suffix in TRANSLATION_UNITS)
        unity = unity_source(sources, units, mode.prelude) if len(units) > 1 else None
        try:
            for filename, text in sources.items():
                prelude = mode.prelude if unity is None and Path(filename).suffix in TRANSLATION_UNITS else ""
                (work / filename).write_text(prelude + text, encoding="utf-8")
            if unity is not None:
                (work / UNITY).write_text(unity, encoding="utf-8")
                units = [UNITY]
        except OSError as exc:
            raise _cache_error(work, exc) from exc
        library_name = f"lib{name}.so"
        command = [toolchain.path, *options, *units, "-o", library_name]
        STATS.compiles += 1
        log.info("building %s: %s", library_name, shlex.join([Path(command[0]).name, *command[1:]]))
        try:
            result = _run_compiler(command, work, name)
        except CompileError as exc:  # timed out: keep the build where the command can repeat it
            failed = _keep_failure(work, key, command, "stopped: the build timeout ran out\n")
            raise CompileError([dataclasses.replace(
                d, notes=(f"the build is kept in {failed}",),
                help=f"raise PTODSL_BUILD_TIMEOUT (seconds) or reduce the schedule's unrolling; repeat the build "
                     f"with: cd {shlex.quote(str(failed))} && {shlex.join(command)}") for d in exc.diagnostics]) from exc
        if result.returncode != 0:
            failed = _keep_failure(work, key, command, result.stdout + result.stderr)
            prelude_lines = len(mode.prelude.splitlines()) if unity is None else 0
            raise CompileError([_failure_diagnostic(name, failed, command, result.stdout + result.stderr,
                                                    sources, mode, prelude_lines)])
        library = work / library_name
        if not library.is_file():
            failed = _keep_failure(work, key, command, result.stdout + result.stderr)
            raise CompileError([Diagnostic(
                "E0907", f"the compiler reported success but wrote no {library_name}",
                notes=(f"the build is kept in {failed}",),
                help=f"repeat the build with: cd {shlex.quote(str(failed))} && {shlex.join(command)}",
            )])
        manifest = {
            "key": key,
            "library": library_name,
            "sha256": _sha256_file(library),
            "size": library.stat().st_size,
            "command": command,
            "compiler": toolchain.version,
            "include": mode.label,
        }
        try:
            (work / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        except OSError as exc:
            raise _cache_error(work, exc) from exc
        return _install(work, key)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


UNITY = "ptodsl_unity.cpp"
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"][^\n]*$", re.M)


def unity_source(sources: Mapping[str, str], units: Sequence[str], prelude: str) -> str:
    """One translation unit that includes every unit, each inside a namespace of its own.

    Each unit would otherwise parse the pto-isa header again, which is most of a build (a variant
    has a unit per compute kernel). Every header the units include comes first, so their own
    includes inside the namespaces are no-ops; file-local names (tile aliases, ``static`` helpers)
    stay apart in their namespaces, and ``extern "C"`` kernels and entries keep their C names, so a
    kernel declared in the control program is the one defined in its own unit. Compiler messages
    still name the unit files and their lines."""
    if UNITY in sources:
        raise ValueError(f"a source may not be called {UNITY}")
    headers = list(dict.fromkeys(m.group().strip() for u in units for m in _INCLUDE.finditer(sources[u])))
    lines = [prelude.rstrip("\n")] if prelude else []
    lines += headers + [""]
    for i, unit in enumerate(units):
        lines += [f"namespace ptodsl_unit_{i} {{", f'#include "{unit}"', f"}}  // namespace ptodsl_unit_{i}"]
    return "\n".join(lines) + "\n"


def _run_compiler(command: list[str], cwd: Path, name: str) -> subprocess.CompletedProcess[str]:
    # The C locale keeps the compiler's messages in plain ASCII whatever the user's locale is.
    return run_tool(command, cwd, f"compiling `{name}`", env={**os.environ, "LC_ALL": "C"})


def _install(work: Path, key: str) -> Path:
    """Rename the finished build into place; if another process got there first, use its entry."""
    entry = _entry_dir(key)
    try:
        if entry.parent.exists() and not entry.parent.is_dir():
            entry.parent.unlink()  # a shard replaced by a file: not ours to keep, and in the way
        entry.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cache_error(entry.parent, exc) from exc
    try:
        os.replace(work, entry)
    except OSError:
        # A directory rename onto a non-empty directory fails: a concurrent build won the race.
        pass
    library = _valid_entry(entry, key)
    if library is None:
        raise CompileError([Diagnostic(
            "E0904", f"the build cache entry {entry} could not be installed",
            help="check that PTODSL_CACHE_DIR is writable and not shared with an incompatible ptodsl",
        )])
    return library


# ------------------------------------------------------------------------------------- failures


def _keep_failure(work: Path, key: str, command: list[str], output: str) -> Path:
    """Move the failed build to ``failed/<key>`` (replacing an older failure of the same key)."""
    failed = _cpp_dir("failed") / key
    try:
        if failed.exists():
            _discard(failed)
        (work / "compiler.log").write_text(output, encoding="utf-8")
        (work / "command.txt").write_text(shlex.join(command) + "\n", encoding="utf-8")
    except OSError:
        return work  # a read-only cache: the diagnostic still shows the output and the command
    try:
        os.replace(work, failed)
    except OSError:
        # A concurrent failure of the same build took the slot first; it holds the same files.
        return failed if failed.exists() else work
    return failed


def _trim(output: str) -> list[str]:
    lines = [line[:MESSAGE_LINE_CHARS] for line in output.rstrip().splitlines()]
    if len(lines) > MESSAGE_LINES:
        lines = [*lines[:MESSAGE_LINES], f"... {len(lines) - MESSAGE_LINES} more lines in compiler.log"]
    return lines


@dataclass(frozen=True)
class _Location:
    file: str
    line: int
    col: int
    text: str
    own: bool  # in one of the generated files (not a header on the include path)

    @property
    def is_error(self) -> bool:
        return self.text.startswith(("error:", "fatal error:"))


def _locations(output: str, sources: Mapping[str, str]) -> list[_Location]:
    found = []
    for line in output.splitlines():
        m = _DIAG_RE.match(line)
        if m is not None:
            file = m["file"]
            own = not os.path.isabs(file) and Path(file).name in sources
            found.append(_Location(file, int(m["line"]), int(m["col"]), m["rest"].strip(), own))
    return found


def _primary_location(output: str, sources: Mapping[str, str]) -> tuple[_Location | None, str]:
    """The generated-file position the first error comes from, and the error's text.

    An error inside a header (a failed static_assert of the pto-isa API) is attributed to the
    generated line that led there: the last one named before it ("required from here"), else the
    first one named in its notes.
    """
    locations = _locations(output, sources)
    first = next((i for i, loc in enumerate(locations) if loc.is_error), None)
    if first is None:
        return None, ""
    error = locations[first]
    message = error.text.partition(":")[2].strip()
    if error.own:
        return error, message
    for loc in reversed(locations[:first]):
        if loc.own:
            return loc, message
    for loc in locations[first + 1:]:
        if loc.is_error:
            break
        if loc.own:
            return loc, message
    return None, message


def _failure_diagnostic(name: str, failed: Path, command: list[str], output: str,
                        sources: Mapping[str, str], mode: IncludeMode, prelude_lines: int) -> Diagnostic:
    located, first_error = _primary_location(output, sources)
    first_error = first_error or "see the compiler output"
    span = None
    label = ""
    if located is not None:
        file, col = located.file, located.col
        row = located.line - prelude_lines  # lines of the file as generated, without the prelude
        if prelude_lines:
            # The kept copy includes the prelude; point at the generated text itself.
            (failed / f"{file}.generated").write_text(sources[file], encoding="utf-8")
            file = f"{file}.generated"
        span = Span(str(failed / file), max(row, 1), max(col, 1))
        label = "the first error comes from here"
    repro = f"cd {shlex.quote(str(failed))} && {shlex.join(command)}"
    code = "E0902" if mode.label.startswith("pto-isa:") else "E0901"
    output_lines = "\n".join("    " + line for line in _trim(output))
    notes = [f"compiler output:\n{output_lines}", f"the failed build is kept in {failed}"]
    if code == "E0902":
        notes.append(f"compiled against {mode.label.removeprefix('pto-isa:')} (PTO_ISA_ROOT); "
                     "unset it to use ptodsl's own CPU header")
    return Diagnostic(
        code, f"the C++ of `{name}` does not compile: {first_error}"[:400],
        span, label, notes=tuple(notes), help=f"repeat the build with: {repro}",
    )


# ------------------------------------------------------------------------------------- loading


def library_function(library: ctypes.CDLL, path: str | os.PathLike[str], symbol: str) -> Any:
    """The exported function ``symbol`` of a loaded kernel library; a missing one is E0905."""
    try:
        return getattr(library, symbol)
    except AttributeError as exc:
        raise CompileError([Diagnostic(
            "E0905", f"the kernel library {path} does not export `{symbol}`",
            notes=(f"list what it exports with: nm -D --defined-only {shlex.quote(os.fspath(path))}",),
            help="the library was built from other sources than the ones emitted now; remove it from the cache "
                 "and run again",
        )]) from exc


def load_library(path: str | os.PathLike[str]) -> ctypes.CDLL:
    """Load a built kernel library; a loader failure becomes a CompileError (E0905)."""
    try:
        return ctypes.CDLL(os.fspath(path))
    except OSError as exc:
        raise CompileError([Diagnostic(
            "E0905", f"the kernel library {path} does not load: {exc}",
            help="a function the kernel calls is declared but not defined, or a runtime library is missing",
        )]) from exc


__all__ = [
    "HEADER_DIR",
    "build_timeout",
    "run_tool",
    "STATS",
    "BuildStats",
    "Toolchain",
    "build_shared",
    "cache_root",
    "find_toolchain",
    "library_function",
    "load_library",
]
