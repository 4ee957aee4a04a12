"""Compile C++ sources into a shared library with g++, through a content-addressed cache.

``build_shared({"kernel.cpp": text}, "softmax")`` returns the path of ``libsoftmax.so``. This module
ties three others together: :mod:`.toolchain` (which compiler, what it is, the command's options),
:mod:`.buildcache` (the cache's folders, keys and entries) and :mod:`.ccdiag` (compiler output as a
diagnostic); their public names are importable from here too.

The cache key hashes everything the library depends on: the ptodsl version, every source's name
and text, the full compiler command, the compiler's version line and the contents of every header
the include path can reach. Entries appear atomically and are checked on every hit. A build killed
outright leaves its staging folder; the next build removes it, by the rules of :mod:`ptodsl.staging`
(the owner process is gone, or the folder is older than :func:`stale_age`). A hit runs no compiler:
not even ``g++ --version``, whose answer is cached per compiler binary. ``STATS`` counts what
happened (tests assert "rebuilt nothing" with it), and each compiler run is logged.

Failures raise :class:`ptodsl.diagnostics.CompileError` (codes E0900-E0919 in
``diagnostics/codes/build.yaml``); a failed build keeps its sources and the full compiler log in
the cache's ``failed`` folder and the diagnostic shows a one-line command that repeats it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ... import staging
from ...diagnostics import CompileError, Diagnostic
from .buildcache import (
    MANIFEST,
    STATS,
    BuildStats,
    cache_error,
    cache_key,
    cache_root,
    cpp_dir,
    discard,
    entry_dir,
    headers_digest,
    install,
    keep_failure,
    key_lock,
    sha256_file,
    valid_entry,
)
from .ccdiag import failure_diagnostic
from .toolchain import (
    DEFAULT_TIMEOUT_S,
    HEADER_DIR,
    IncludeMode,
    Toolchain,
    build_timeout,
    compile_flags,
    compiler_name,
    find_toolchain,
    include_mode,
    native_bf16,
    opt_flag,
    pto_isa_bf16_gap,
    run_tool,
    target_arch,
)

log = logging.getLogger(__name__)

TRANSLATION_UNITS = (".cpp", ".cc", ".cxx")
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


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
    entry = entry_dir(key)
    library = valid_entry(entry, key)
    if library is not None:
        STATS.hits += 1
        log.debug("kernel %s: cache hit %s", name, entry)
        return library
    with key_lock(key):
        # another process may have built it while this one waited for the lock
        library = valid_entry(entry, key)
        if library is not None:
            STATS.hits += 1
            return library
        if entry.exists():
            STATS.discarded += 1
            log.warning("kernel %s: discarding a damaged cache entry %s", name, entry)
            discard(entry)
        return _compile_and_install(sources, name, toolchain, mode, options, key)


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
    tmp = cpp_dir("tmp")
    try:
        clean_staging()
        work = staging.create(tmp, "build-", f"{key[:16]}-")
    except OSError as exc:
        raise cache_error(tmp, exc) from exc
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
            raise cache_error(work, exc) from exc
        library_name = f"lib{name}.so"
        command = [toolchain.path, *options, *units, "-o", library_name]
        STATS.compiles += 1
        log.info("building %s: %s", library_name, shlex.join([Path(command[0]).name, *command[1:]]))
        try:
            result = _run_compiler(command, work, name)
        except CompileError as exc:  # timed out: keep the build where the command can repeat it
            failed = keep_failure(work, key, command, "stopped: the build timeout ran out\n")
            raise CompileError([dataclasses.replace(
                d, notes=(f"the build is kept in {failed}",),
                help=f"raise PTODSL_BUILD_TIMEOUT (seconds) or reduce the schedule's unrolling; repeat the build "
                     f"with: cd {shlex.quote(str(failed))} && {shlex.join(command)}") for d in exc.diagnostics]) from exc
        if result.returncode != 0:
            failed = keep_failure(work, key, command, result.stdout + result.stderr)
            prelude_lines = len(mode.prelude.splitlines()) if unity is None else 0
            raise CompileError([failure_diagnostic(name, failed, command, result.stdout + result.stderr,
                                                    sources, mode, prelude_lines)])
        library = work / library_name
        if not library.is_file():
            failed = keep_failure(work, key, command, result.stdout + result.stderr)
            raise CompileError([Diagnostic(
                "E0907", f"the compiler reported success but wrote no {library_name}",
                notes=(f"the build is kept in {failed}",),
                help=f"repeat the build with: cd {shlex.quote(str(failed))} && {shlex.join(command)}",
            )])
        manifest = {
            "key": key,
            "library": library_name,
            "sha256": sha256_file(library),
            "size": library.stat().st_size,
            "command": command,
            "compiler": toolchain.version,
            "include": mode.label,
        }
        try:
            (work / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        except OSError as exc:
            raise cache_error(work, exc) from exc
        return install(work, key)
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
    "DEFAULT_TIMEOUT_S",
    "HEADER_DIR",
    "MANIFEST",
    "STATS",
    "BuildStats",
    "IncludeMode",
    "Toolchain",
    "build_shared",
    "build_timeout",
    "cache_key",
    "cache_root",
    "clean_staging",
    "compile_flags",
    "compiler_name",
    "find_toolchain",
    "headers_digest",
    "include_mode",
    "library_function",
    "load_library",
    "native_bf16",
    "opt_flag",
    "pto_isa_bf16_gap",
    "run_tool",
    "stale_age",
    "target_arch",
    "unity_source",
]
