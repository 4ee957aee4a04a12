"""Folders a process works in before renaming them into place, and finding those a killed one left.

`ptodsl gen` writes a package into a staging folder beside OUT, and the cpu backend builds each
library in a staging folder under its build cache (``cpp/tmp``); both then rename the folder into
place, and remove it on any error. A process killed outright (``kill -9``, the OOM killer, a lost
machine) cannot remove it, so the next run does: each folder's name records its owner,
``<prefix><pid>@<host>-<random>``, where ``<host>`` is a short hash of the machine's name (a cache
under a network home is shared between machines, whose process ids mean nothing to each other).

A folder is stale, and removed by the next run, when

- its owner is a process of this machine that no longer exists, or
- it is older than ``max_age`` (:data:`STALE_AGE_S`, a day, unless the caller needs longer): the
  rule for owners on other machines, for a process id since reused, and for folders named before
  owners were recorded (``<prefix><pid>-<random>`` counts as this machine's).

A folder whose owner runs on this machine is never removed before ``max_age``, so a build or a
`ptodsl gen` still running in another process keeps its folder. Age is the time since the folder
last changed (its modification time), which a running build refreshes as it writes into it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

STALE_AGE_S = 24 * 3600

_OWNER = re.compile(r"(\d{1,10})(?:@([0-9a-f]{8}))?-")


@cache
def host() -> str:
    """This machine, as it appears in folder names: 8 hex digits of a hash of its host name."""
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def owned_name(prefix: str) -> str:
    """The start of the name of an entry this process owns: ``<prefix><pid>@<host>-``."""
    return f"{prefix}{os.getpid()}@{host()}-"


def create(parent: str | os.PathLike[str], prefix: str, label: str = "") -> Path:
    """A new, empty folder ``<prefix><pid>@<host>-<label><random>`` in ``parent``, owned by this
    process (private, as ``mkdtemp`` makes it)."""
    return Path(tempfile.mkdtemp(prefix=owned_name(prefix) + label, dir=parent))


@dataclass(frozen=True)
class Leftover:
    """An entry of a folder that a process may have left behind."""

    path: Path
    pid: int | None  # None: the name records no owner
    host: str | None  # None: a name without one, from before hosts were recorded

    @property
    def local(self) -> bool:
        return self.pid is not None and self.host in (None, host())


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (another user's counts: not ours to judge)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:
        return True
    return True


def leftovers(parent: str | os.PathLike[str], prefixes: str | Sequence[str], everything: bool = False
              ) -> Iterator[Leftover]:
    """The entries of ``parent`` named ``<prefix><pid>[@<host>]-...`` for one of ``prefixes``; with
    ``everything`` (a folder only ptodsl writes in), every other entry too, without an owner."""
    if isinstance(prefixes, str):
        prefixes = (prefixes,)
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        m = next((m for p in prefixes if name.startswith(p) and (m := _OWNER.match(name, len(p)))), None)
        if m is not None:
            yield Leftover(Path(parent, name), int(m.group(1)), m.group(2))
        elif everything:
            yield Leftover(Path(parent, name), None, None)


def age(path: Path, now: float | None = None) -> float:
    """Seconds since ``path`` last changed; 0 when it is gone already."""
    try:
        return (time.time() if now is None else now) - path.lstat().st_mtime
    except OSError:
        return 0.0


def is_stale(entry: Leftover, max_age: float = STALE_AGE_S, now: float | None = None) -> bool:
    """Whether the process that made ``entry`` is certainly done with it (see the module's rules)."""
    if entry.local and not alive(entry.pid):  # type: ignore[arg-type]
        return True
    return age(entry.path, now) > max_age


def remove(path: Path) -> None:
    """Remove a stale folder or file; one that is gone already, or cannot go, is left to the next run."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
    except OSError:
        pass


def clean(parent: str | os.PathLike[str], prefixes: str | Sequence[str], max_age: float = STALE_AGE_S,
          everything: bool = False) -> None:
    """Remove the stale entries of ``parent`` (those :func:`leftovers` finds)."""
    now = time.time()
    for entry in list(leftovers(parent, prefixes, everything)):
        if is_stale(entry, max_age, now):
            remove(entry.path)


__all__ = ["STALE_AGE_S", "Leftover", "age", "alive", "clean", "create", "host", "owned_name", "is_stale", "leftovers", "remove"]
