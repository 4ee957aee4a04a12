"""Compiler output as a ptodsl diagnostic: the first error, attributed to the generated line it
comes from (also when the compiler stops inside a pto-isa header), a trimmed copy of the output,
and a one-line command that repeats the failed build where it is kept.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...diagnostics import Diagnostic, Span
from .toolchain import IncludeMode

MESSAGE_LINES = 40
MESSAGE_LINE_CHARS = 300
_DIAG_RE = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+):\s*(?P<rest>.*)$")


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


def failure_diagnostic(name: str, failed: Path, command: list[str], output: str,
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


__all__ = ["MESSAGE_LINES", "MESSAGE_LINE_CHARS", "failure_diagnostic"]
