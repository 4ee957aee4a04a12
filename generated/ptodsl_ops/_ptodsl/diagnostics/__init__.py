"""One diagnostic type for every stage: parse, spec, check, lowering, build and call time.

A diagnostic has a stable code (registered in ``codes/*.yaml`` with its ``ptodsl explain`` text), a
primary span with a label, optional secondary spans, notes and a ``help`` line. Stages collect them
in a :class:`Diagnostics` list so that one run reports every error it finds.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml


@dataclass(frozen=True, order=True)
class Span:
    """A source region: 1-based line and column, end column exclusive."""

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __post_init__(self) -> None:
        if self.end_line < self.line or (self.end_line == self.line and self.end_col <= self.col):
            object.__setattr__(self, "end_line", self.line)
            object.__setattr__(self, "end_col", self.col + 1)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def to(self, other: Span) -> Span:
        """The span from the start of self to the end of other."""
        return Span(self.file, self.line, self.col, other.end_line, other.end_col)


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True)
class Label:
    span: Span
    message: str = ""


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span | None = None
    label: str = ""
    secondary: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()
    help: str | None = None
    severity: Severity = Severity.ERROR

    def __post_init__(self) -> None:
        if self.code not in code_registry():
            raise ValueError(f"diagnostic code {self.code} is not registered in codes/*.yaml")

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def to_json(self) -> dict:
        def span_json(s: Span | None) -> dict | None:
            if s is None:
                return None
            return {"file": s.file, "line": s.line, "col": s.col, "end_line": s.end_line, "end_col": s.end_col}

        return {
            "severity": self.severity.value,
            "code": self.code,
            "message": self.message,
            "span": span_json(self.span),
            "label": self.label,
            "secondary": [{"span": span_json(lb.span), "message": lb.message} for lb in self.secondary],
            "notes": list(self.notes),
            "help": self.help,
        }


@dataclass
class Diagnostics:
    """An ordered collection of diagnostics, filled by one stage or one whole run."""

    items: list[Diagnostic] = field(default_factory=list)

    def add(self, diag: Diagnostic) -> Diagnostic:
        if diag not in self.items:
            self.items.append(diag)
        return diag

    def extend(self, diags: Iterable[Diagnostic]) -> None:
        for d in diags:
            self.add(d)

    def error(
        self,
        code: str,
        message: str,
        span: Span | None = None,
        label: str = "",
        *,
        help: str | None = None,
        notes: Iterable[str] = (),
        secondary: Iterable[Label] = (),
    ) -> Diagnostic:
        return self.add(Diagnostic(code, message, span, label, tuple(secondary), tuple(notes), help))

    def warning(self, code: str, message: str, span: Span | None = None, label: str = "", *,
                help: str | None = None, notes: Iterable[str] = (), secondary: Iterable[Label] = ()) -> Diagnostic:
        return self.add(Diagnostic(code, message, span, label, tuple(secondary), tuple(notes), help,
                                   Severity.WARNING))

    def note(self, code: str, message: str, span: Span | None = None, label: str = "", *,
             help: str | None = None, notes: Iterable[str] = ()) -> Diagnostic:
        return self.add(Diagnostic(code, message, span, label, (), tuple(notes), help, Severity.NOTE))

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.items)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.is_error]

    def raise_if_errors(self) -> None:
        if self.has_errors:
            raise CompileError(list(self.items))

    def __iter__(self) -> Iterator[Diagnostic]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


class DiagnosticError(Exception):
    """A run that stopped with one diagnostic (a wrong argument, a failed guard or kernel check, an
    NPU that cannot run); ``.diagnostic`` holds it and ``str()`` is its rendering."""

    def __init__(self, diagnostic: Diagnostic):
        from .render import render

        self.diagnostic = diagnostic
        super().__init__(render(diagnostic))


class CompileError(Exception):
    """Raised when a spec cannot be compiled; ``.diagnostics`` holds every error found."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = list(diagnostics)
        first = next((d for d in self.diagnostics if d.is_error), None)
        summary = f"{first.code}: {first.message}" if first else "compile error"
        if first is not None and first.span is not None:
            summary = f"{first.span}: {summary}"
        more = len([d for d in self.diagnostics if d.is_error]) - 1
        super().__init__(summary + (f" (and {more} more)" if more > 0 else ""))

    def render(self, color: bool = False) -> str:
        from .render import render_all

        return render_all(self.diagnostics, color=color)


@dataclass(frozen=True)
class CodeInfo:
    code: str
    title: str
    explain: str
    # a code no stage reports any more; kept registered so its number is never given to another
    # meaning and `ptodsl explain` still says what replaced it
    retired: bool = False


@cache
def code_registry() -> dict[str, CodeInfo]:
    """Codes live in ``codes/*.yaml``, one file per stage, so each stage owns its range."""
    registry: dict[str, CodeInfo] = {}
    folder = resources.files(__package__).joinpath("codes")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        for code, info in (yaml.safe_load(entry.read_text(encoding="utf-8")) or {}).items():
            if code in registry:
                raise ValueError(f"diagnostic code {code} is registered twice")
            registry[code] = CodeInfo(code, info["title"], info["explain"].strip(), bool(info.get("retired")))
    return dict(sorted(registry.items()))


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """A ``help:`` suggesting the closest of ``candidates`` to a misspelt ``name``, if any is close."""
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None


# Source texts by file name, so the renderer can show the line a span points at even when the
# text never touched the disk (tests, generated fragments).
_SOURCES: dict[str, str] = {}
# the paths registered while each open `recording_sources` runs: what a compile read
_RECORDERS: list[set[str]] = []


def register_source(path: str, text: str) -> None:
    _SOURCES[path] = text
    for seen in _RECORDERS:
        seen.add(path)


@contextmanager
def recording_sources() -> Iterator[set[str]]:
    """The paths of every source registered inside the block (the files a compile read)."""
    seen: set[str] = set()
    _RECORDERS.append(seen)
    try:
        yield seen
    finally:
        _RECORDERS.remove(seen)


def source_line(path: str, line: int) -> str | None:
    text = _SOURCES.get(path)
    if text is None:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return None
        _SOURCES[path] = text
    lines = text.splitlines()
    if 1 <= line <= len(lines):
        return lines[line - 1]
    if line == len(lines) + 1:
        return ""
    return None


__all__ = [
    "CodeInfo",
    "CompileError",
    "Diagnostic",
    "Diagnostics",
    "Label",
    "Severity",
    "Span",
    "code_registry",
    "did_you_mean",
    "register_source",
    "source_line",
]
