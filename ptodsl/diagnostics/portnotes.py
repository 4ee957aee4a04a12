"""Notes naming the PyPTO line a diagnostic's .pto line was ported from.

``ptodsl port`` writes ``NAME.portmap.json`` beside ``NAME.pto``: for each line of the .pto it
wrote from a Python statement, that statement's line, column and text. A diagnostic at such a
line (``y = x + 1`` ported from a kernel that rebinds its output: E0400) gets a note naming the
PyPTO line, so the fix can be made where the kernel came from. The line must still carry its
``# from FILE.py:LINE`` comment: after the .pto was edited, a shifted line gets no note.
The map is data from a file: read with a size limit, and its text is printed cleaned.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from functools import lru_cache

from . import Diagnostic

MAX_MAP_BYTES = 1 << 20


def _clean(text: str, limit: int = 200) -> str:
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@lru_cache(maxsize=64)
def _load(pto: str, stamp: tuple[float, float]) -> tuple[dict, list[str]] | None:
    del stamp  # part of the cache key: a rewritten file is read again
    stem = os.path.splitext(pto)[0]
    try:
        if os.path.getsize(stem + ".portmap.json") > MAX_MAP_BYTES:
            return None
        with open(stem + ".portmap.json", encoding="utf-8") as f:
            data = json.load(f)
        with open(pto, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("lines"), dict) or not isinstance(data.get("source"), str):
        return None
    return data, lines


def port_note(pto: str, line: int) -> str | None:
    """The note for ``line`` of ``pto``, or None when that line was not ported (or was edited)."""
    stem = os.path.splitext(pto)[0]
    try:
        stamp = (os.path.getmtime(pto), os.path.getmtime(stem + ".portmap.json"))
    except OSError:
        return None
    loaded = _load(pto, stamp)
    if loaded is None:
        return None
    data, lines = loaded
    entry = data["lines"].get(str(line))
    if not isinstance(entry, dict) or not isinstance(entry.get("line"), int) or not 0 < line <= len(lines):
        return None
    source = _clean(data["source"], 100)
    if not lines[line - 1].rstrip().endswith(f"# from {source}:{entry['line']}"):
        return None
    text = entry.get("text")
    quoted = f": `{_clean(text)}`" if isinstance(text, str) and text.strip() else ""
    return f"ported from {source}:{entry['line']}{quoted}"


def with_port_notes(diags: Sequence[Diagnostic]) -> list[Diagnostic]:
    """``diags`` with a note on each one whose span is a ported line of a .pto file."""
    out = []
    for d in diags:
        note = port_note(d.span.file, d.span.line) if d.span is not None and d.span.file.endswith(".pto") else None
        out.append(dataclasses.replace(d, notes=(*d.notes, note)) if note and note not in d.notes else d)
    return out
