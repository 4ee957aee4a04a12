"""The C++ build cache: where it lives, what a key covers, and how entries are kept.

An entry is a directory ``cpp/kernels/<key[:2]>/<key>`` holding the library and a manifest with its
sha256. Entries appear atomically (built in a staging folder of ``cpp/tmp``, then renamed into place)
and are checked on every hit, so a concurrent build of the same kernel or a damaged entry is
harmless. A failed build is kept in ``cpp/failed/<key>`` with its sources, command and compiler log.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from ... import staging
from ...diagnostics import CompileError, Diagnostic

if TYPE_CHECKING:
    from .toolchain import IncludeMode, Toolchain


@dataclass
class BuildStats:
    """What ``build_shared`` did in this process: tests assert "rebuilt nothing" with these."""

    compiles: int = 0  # compiler runs that produced (or tried to produce) a kernel library
    hits: int = 0  # builds answered from the cache
    probes: int = 0  # compiler runs that identified a toolchain (version, OpenMP)
    discarded: int = 0  # damaged cache entries thrown away


STATS = BuildStats()


# ------------------------------------------------------------------------------------------ paths


def cache_root() -> Path:
    """$PTODSL_CACHE_DIR, else the per-user cache ($XDG_CACHE_HOME/ptodsl or ~/.cache/ptodsl)."""
    explicit = os.environ.get("PTODSL_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ptodsl"


def cache_error(path: Path, exc: OSError) -> CompileError:
    return CompileError([Diagnostic(
        "E0904", f"cannot write the build cache at {path}: {exc.strerror or exc}",
        help="set PTODSL_CACHE_DIR to a writable directory, or remove the damaged cache",
    )])


def cpp_dir(kind: str) -> Path:
    path = cache_root() / "cpp" / kind
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CompileError([Diagnostic(
            "E0904", f"cannot create the build cache directory {path}: {exc.strerror or exc}",
            help="set PTODSL_CACHE_DIR to a writable directory",
        )]) from exc
    return path


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
    """A hash of every file the include path reaches (names and contents; each file read once per
    process while its size and mtime stay the same), or of its absence."""
    if not include_dir.is_dir():
        return "absent"
    digest = hashlib.sha256()
    for path in _files_under(include_dir):
        if path.suffix == ".pyc" or "__pycache__" in path.parts:
            continue
        try:
            stat = path.stat()
            content = _file_digest(str(path), stat.st_mtime_ns, stat.st_size)
        except OSError:  # a dangling link in a toolkit's include tree
            content = "unreadable"
        digest.update(f"{path.relative_to(include_dir)}\0{content}\n".encode())
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


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def valid_entry(entry: Path, key: str) -> Path | None:
    """The entry's library if its manifest vouches for it byte for byte, else None."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        library = entry / manifest["library"]
        if manifest["key"] != key or library.stat().st_size != manifest["size"]:
            return None
        return library if sha256_file(library) == manifest["sha256"] else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def discard(path: Path) -> None:
    """Remove a directory another process may be removing too: move it aside first."""
    aside = cpp_dir("tmp") / (staging.owned_name("discard-") + uuid.uuid4().hex)
    try:
        os.replace(path, aside)
    except OSError:  # gone already, or a read-only cache: the build reports it if it matters
        return
    shutil.rmtree(aside, ignore_errors=True)


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def entry_dir(key: str) -> Path:
    return cpp_dir("kernels") / key[:2] / key


@contextlib.contextmanager
def key_lock(key: str) -> Iterator[None]:
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
        folder = cpp_dir("locks")
        fd = os.open(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except (OSError, CompileError):
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def install(work: Path, key: str) -> Path:
    """Rename the finished build into place; if another process got there first, use its entry."""
    entry = entry_dir(key)
    try:
        if entry.parent.exists() and not entry.parent.is_dir():
            entry.parent.unlink()  # a shard replaced by a file: not ours to keep, and in the way
        entry.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cache_error(entry.parent, exc) from exc
    try:
        os.replace(work, entry)
    except OSError:
        # A directory rename onto a non-empty directory fails: a concurrent build won the race.
        pass
    library = valid_entry(entry, key)
    if library is None:
        raise CompileError([Diagnostic(
            "E0904", f"the build cache entry {entry} could not be installed",
            help="check that PTODSL_CACHE_DIR is writable and not shared with an incompatible ptodsl",
        )])
    return library


def keep_failure(work: Path, key: str, command: list[str], output: str) -> Path:
    """Move the failed build to ``failed/<key>`` (replacing an older failure of the same key)."""
    failed = cpp_dir("failed") / key
    try:
        if failed.exists():
            discard(failed)
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


__all__ = ["MANIFEST", "STATS", "BuildStats", "cache_error", "cache_key", "cache_root", "cpp_dir", "discard",
           "entry_dir", "headers_digest", "install", "keep_failure", "key_lock", "sha256_file", "valid_entry",
           "write_atomic"]
