"""Render diagnostics as rustc-style text (colour only on a terminal) or as JSON."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import TextIO

from . import Diagnostic, Label, Severity, Span, source_line

_COLORS = {
    Severity.ERROR: "\x1b[1;31m",
    Severity.WARNING: "\x1b[1;33m",
    Severity.NOTE: "\x1b[1;36m",
    "blue": "\x1b[1;34m",
    "bold": "\x1b[1m",
    "reset": "\x1b[0m",
}


def use_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR", "") != "":
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _Style:
    def __init__(self, color: bool):
        self.color = color

    def __call__(self, key: object, text: str) -> str:
        if not self.color:
            return text
        return f"{_COLORS[key]}{text}{_COLORS['reset']}"


def _snippet(span: Span, message: str, mark: str, gutter: int, style: _Style, tone: object) -> list[str]:
    bar = style("blue", " " * gutter + " |")
    text = source_line(span.file, span.line)
    if text is None:
        return []
    text = text.expandtabs(4)
    start = max(span.col - 1, 0)
    if span.end_line == span.line:
        end = max(span.end_col - 1, start + 1)
    else:
        end = max(len(text.rstrip()), start + 1)
    underline = " " * start + mark * (end - start)
    tail = f" {message}" if message else ""
    number = style("blue", f"{span.line:>{gutter}} |")
    return [
        bar,
        f"{number} {text}".rstrip(),
        f"{bar} {style(tone, underline + tail)}".rstrip(),
    ]


def render(diag: Diagnostic, color: bool = False) -> str:
    style = _Style(color)
    head = style(diag.severity, f"{diag.severity.value}[{diag.code}]")
    lines = [f"{head}{style('bold', ': ' + diag.message)}"]
    labels: list[tuple[Label, bool]] = []
    if diag.span is not None:
        labels.append((Label(diag.span, diag.label), True))
    labels.extend((lb, False) for lb in diag.secondary)
    gutter = max((len(str(lb.span.line)) for lb, _ in labels), default=1)
    arrow = style("blue", " " * gutter + "-->")
    for label, primary in labels:
        marker = "-->" if primary else ":::"
        lines.append(f"{style('blue', ' ' * gutter + marker)} {label.span}" if not primary else f"{arrow} {label.span}")
        lines.extend(
            _snippet(label.span, label.message, "^" if primary else "-", gutter, style,
                     diag.severity if primary else "blue")
        )
    trailer = [f"= note: {n}" for n in diag.notes]
    if diag.help:
        trailer.append(f"= help: {diag.help}")
    if trailer:
        if labels:
            lines.append(style("blue", " " * gutter + " |"))
        for t in trailer:
            kind, _, rest = t.partition(": ")
            lines.append(f"{' ' * gutter} {style('bold', kind + ':')} {rest}")
    return "\n".join(lines)


def render_all(diags: Iterable[Diagnostic], color: bool = False) -> str:
    diags = list(diags)
    parts = [render(d, color) for d in diags]
    n_err = sum(1 for d in diags if d.is_error)
    n_warn = sum(1 for d in diags if d.severity is Severity.WARNING)
    if n_err:
        word = "error" if n_err == 1 else "errors"
        summary = f"error: aborting due to {n_err} previous {word}"
        if n_warn:
            summary += f"; {n_warn} warning{'s' if n_warn > 1 else ''} emitted"
        parts.append(_Style(color)(Severity.ERROR, summary))
    return "\n\n".join(parts) + "\n" if parts else ""


def render_json(diags: Iterable[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diags], indent=2, sort_keys=True) + "\n"
