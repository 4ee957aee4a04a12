"""Rules for the raw text of spec files (.pto and .yaml), applied before either is parsed.

- A byte-order mark at the start is dropped (editors on Windows write one); positions are those
  an editor shows, which does not count the mark.
- Characters that make text display differently from what it is are refused wherever they are,
  code, strings, docs or comments (E0121): the bidirectional controls of "Trojan source"
  (U+202A-U+202E, U+2066-U+2069), which reorder what a reader sees, and the line and paragraph
  separators (U+2028, U+2029), which some editors show as line breaks where the compiler sees none.
- A spec file is at most :data:`MAX_SOURCE_BYTES` (E0118 for a .pto, E0203 for a YAML file).
"""

from __future__ import annotations

import unicodedata

from ..diagnostics import Diagnostics, Span
from ..escape import BIDI_CONTROLS

MAX_SOURCE_BYTES = 1 << 20  # a spec is a page or two of text; anything far larger is not one
BOM = "\ufeff"
E_DISPLAY = "E0121"
MAX_REPORTED = 8  # occurrences reported one by one; the rest are counted in the last one's note

_MISLEADING = BIDI_CONTROLS | {"\u2028", "\u2029"}


def strip_bom(text: str) -> str:
    return text[1:] if text.startswith(BOM) else text


def too_large(size: int) -> bool:
    return size > MAX_SOURCE_BYTES


def refuse_misleading(text: str, path: str, diags: Diagnostics) -> bool:
    """Report every character of ``text`` that would display differently from what it is (E0121);
    True when there was none."""
    if not any(c in _MISLEADING for c in text):  # the common case, at C speed
        return True
    found = []
    line, start = 1, 0
    for i, c in enumerate(text):
        if c == "\n":
            line, start = line + 1, i + 1
        elif c in _MISLEADING:
            found.append((line, i - start + 1, c))
    for k, (ln, col, c) in enumerate(found[:MAX_REPORTED]):
        name = unicodedata.name(c, "")
        bidi = c in BIDI_CONTROLS
        more = len(found) - MAX_REPORTED
        notes = [f"{more} more such characters in this file"] if k == MAX_REPORTED - 1 and more > 0 else []
        diags.error(
            E_DISPLAY, f"the invisible character U+{ord(c):04X} ({name}) is not allowed in a spec file",
            Span(path, ln, col, ln, col + 1),
            "reorders how the text around it is displayed" if bidi else "some editors show a line break here",
            help="delete it: ptodsl specs never need it, and it can make code, strings or comments read "
                 "differently from what they are",
            notes=notes)
    return False


__all__ = ["BOM", "E_DISPLAY", "MAX_SOURCE_BYTES", "refuse_misleading", "strip_bom", "too_large"]
