"""``ptodsl fmt``: a layout formatter for .pto files that never changes what a file means.

The formatter works on tokens, not on the AST, so that comments and the author's line breaks inside
brackets survive. It normalises indentation to four spaces a level, puts spaces around binary
operators and after commas, strips trailing whitespace and keeps at most one blank line in a row.
Before anything is written, both texts are parsed and their ASTs compared (spans excluded), and the
comments must be the same, in the same order: a file that does not parse, or whose meaning the
layout would change, is reported and left as it was.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .diagnostics import Diagnostics, Span
from .frontend.parser import parse_module
from .frontend.text import BOM

E_FMT_MEANING = "E0252"
E_FMT_CHECK = "E0253"
E_FMT_NOT_PTO = "E0255"
E_READ = "E0203"

INDENT = "    "

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\f]+)
      | (?P<comment>\#[^\n]*)
      | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      | (?P<number>[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+|[0-9]+)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>//|<=|>=|==|!=|[-+*/%<>=()\[\]:,.])
      | (?P<other>.)""",
    re.X,
)

# Words after which `-`/`+` is a sign and `(`/`[` opens a group rather than a call or subscript.
KEYWORDS = frozenset({"kernel", "for", "in", "if", "elif", "else", "pass", "and", "or", "not"})
_BINARY = frozenset({"+", "-", "*", "/", "//", "%", "<", "<=", ">", ">=", "==", "!="})
_OPENERS = {"(": ")", "[": "]"}


@dataclass
class _Tok:
    kind: str
    text: str
    gap: int = 0  # the blanks before it on its line (kept before a trailing comment, aligned by hand)


def _tokens(line: str) -> list[_Tok] | None:
    """The tokens of one physical line, or None when it holds a character the language has no use for
    (the parser has already accepted the file, so this only guards the formatter itself)."""
    out = []
    gap = 0
    for m in _TOKEN.finditer(line):
        kind = m.lastgroup or "other"
        if kind == "other":
            return None
        if kind == "ws":
            gap = len(m.group())
        else:
            out.append(_Tok(kind, m.group(), gap))
            gap = 0
    return out


class _Spacer:
    """Decides the space before each token of a logical line; state carries across physical lines."""

    def __init__(self) -> None:
        self.prev: _Tok | None = None
        self.prev_unary = False
        self.stack: list[str] = []  # "call" | "group" | "params" | "index" | "list"
        self.after_kernel_name = False

    def _ctx(self) -> str:
        return self.stack[-1] if self.stack else ""

    def _sign_position(self) -> bool:
        p = self.prev
        return p is None or (p.kind == "op" and p.text not in (")", "]")) or (p.kind == "name" and p.text in KEYWORDS)

    def space(self, tok: _Tok) -> str:
        p = self.prev
        t = tok.text
        unary = tok.kind == "op" and t in ("-", "+") and self._sign_position()
        if p is None:
            sep = ""
        elif tok.kind == "comment":
            sep = " " * max(tok.gap, 2)
        elif self.prev_unary or p.text == "." or t == ".":
            sep = ""
        elif p.kind == "op" and p.text in _OPENERS:
            sep = ""
        elif tok.kind == "op" and t in (")", "]"):
            sep = ""
        elif p.kind == "op" and p.text == ",":
            sep = " "
        elif tok.kind == "op" and t in (",", ":"):
            sep = ""
        elif p.kind == "op" and p.text == ":":
            sep = "" if self._ctx() == "index" else " "
        elif tok.kind == "op" and t in _OPENERS and p.kind in ("name", "string") and p.text not in KEYWORDS:
            sep = ""  # a call or subscript
        elif tok.kind == "op" and t in _OPENERS and p.kind == "op" and p.text in (")", "]"):
            sep = ""
        elif t == "=" or (p.kind == "op" and p.text == "="):
            sep = "" if self._ctx() == "call" else " "  # keyword arguments stay `name=value`
        else:
            sep = " "
        self._advance(tok, unary)
        return sep

    def _advance(self, tok: _Tok, unary: bool) -> None:
        p = self.prev
        t = tok.text
        if tok.kind == "op" and t in _OPENERS:
            if t == "(" and self.after_kernel_name:
                kind = "params"
            elif t == "(":
                callee = p is not None and (p.kind in ("name", "string") and p.text not in KEYWORDS
                                            or p.text in (")", "]"))
                kind = "call" if callee else "group"
            else:
                indexed = p is not None and (p.kind in ("name", "string") and p.text not in KEYWORDS
                                             or p.text in (")", "]"))
                kind = "index" if indexed else "list"
            self.stack.append(kind)
        elif tok.kind == "op" and t in (")", "]") and self.stack:
            self.stack.pop()
        self.after_kernel_name = tok.kind == "name" and p is not None and p.text == "kernel"
        if tok.kind != "comment":
            self.prev = tok
            self.prev_unary = unary

    def end_of_statement(self) -> None:
        self.prev = None
        self.prev_unary = False


def layout(text: str) -> str | None:
    """``text`` laid out; None when a line holds something the formatter cannot tokenise."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out: list[str | None] = []  # None marks a comment line whose indent waits for the next code line
    pending: list[tuple[int, str]] = []  # (index in out, comment text)
    widths = [0]
    depth = 0
    delta = 0  # new indent minus old indent of the statement a continuation line belongs to
    spacer = _Spacer()
    blank = 0
    for raw in lines:
        stripped = raw.strip()
        lead = len(raw) - len(raw.lstrip(" \t\f"))
        if not stripped:
            blank += 1
            continue
        toks = _tokens(stripped)
        if toks is None:
            return None
        if blank and out:
            out.append("")
        blank = 0
        if depth == 0 and toks[0].kind == "comment":
            if lead in widths:
                out.append(INDENT * widths.index(lead) + stripped)
            else:
                pending.append((len(out), stripped))
                out.append(None)
            continue
        if depth == 0:
            if lead > widths[-1]:
                widths.append(lead)
            while lead < widths[-1]:
                widths.pop()
            indent = INDENT * (len(widths) - 1)
            delta = len(indent) - lead
            for i, comment in pending:
                out[i] = indent + comment
            pending.clear()
            spacer.end_of_statement()
        else:
            indent = " " * max(lead + delta, 0)
        parts = [indent]
        for k, tok in enumerate(toks):
            sep = spacer.space(tok)
            parts.append(sep if k else "")  # a line's own indent comes before its first token
            parts.append(tok.text)
            if tok.kind == "op" and tok.text in _OPENERS:
                depth += 1
            elif tok.kind == "op" and tok.text in (")", "]"):
                depth = max(depth - 1, 0)
        out.append("".join(parts).rstrip())
    for i, comment in pending:
        out[i] = comment  # comments after the last statement: at the left margin
    while out and out[-1] == "":
        out.pop()
    return "\n".join(s for s in out if s is not None) + "\n" if out else ""


def _comments(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        for tok in _tokens(line.strip()) or []:
            if tok.kind == "comment":
                found.append(tok.text.rstrip())
    return found


def format_source(text: str, path: str, diags: Diagnostics) -> str | None:
    """``text`` formatted, or None with diagnostics when it cannot be formatted without risk: the file
    does not parse, or the new layout would parse to another AST or lose a comment.

    A byte-order mark at the start is kept (and none is added): it is how the author's editor
    saves the file, not layout; the parser ignores it, as the compiler does."""
    if text.startswith(BOM):
        new = format_source(text[len(BOM):], path, diags)
        return None if new is None else BOM + new
    before = parse_module(text, path, diags)
    if before is None:
        return None
    new = layout(text)
    check = Diagnostics()
    after = parse_module(new, path, check) if new is not None else None
    if new is not None:
        parse_module(text, path, Diagnostics())  # the source shown with any diagnostic is the file's own
    if after is None or after != before or _comments(new) != _comments(text):
        why = ("the new layout does not parse" if after is None else
               "the new layout parses to a different program" if after != before else
               "the new layout loses or changes a comment")
        line = _first_changed_line(text, new or "")
        diags.error(E_FMT_MEANING, f"cannot format `{path}`: {why}", Span(path, line, 1),
                    "the first line the new layout changes; the file is left as it was",
                    help="please report this file as a ptodsl bug; lay this part out by hand meanwhile")
        return None
    return new


def report_unformatted(old: str, new: str, path: str, diags: Diagnostics) -> None:
    """``fmt --check``: one diagnostic at the first line whose layout would change."""
    a, b = old.replace("\r\n", "\n").split("\n"), new.split("\n")
    line = _first_changed_line(old, new) - 1
    shown = b[line] if line < len(b) else ""
    span = Span(path, line + 1, 1, line + 1, max(len(a[line]) if line < len(a) else 1, 1) + 1)
    diags.error(E_FMT_CHECK, f"`{path}` is not formatted", span,
                f"`ptodsl fmt` lays this line out as `{shown.strip()}`" if shown.strip() else
                "`ptodsl fmt` changes the blank lines here",
                help=f"run `ptodsl fmt {path}` to rewrite the file")


def _first_changed_line(old: str, new: str) -> int:
    a, b = old.replace("\r\n", "\n").split("\n"), new.split("\n")
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)) - 1) + 1


# ---------------------------------------------------------------- the command


def pto_files(paths: Sequence[str], diags: Diagnostics) -> tuple[list[str], int]:
    """The .pto files ``paths`` name: a file as given, a folder as every .pto file under it (sorted,
    as ``check``/``test``/``gen`` take folders of specs). A path that does not exist, or a file
    named explicitly that is not a .pto file (a spec's YAML), is reported; returns the files and
    how many paths were refused."""
    files: list[str] = []
    refused = 0
    for path in paths:
        if os.path.isdir(path):
            for dirpath, dirs, names in os.walk(path):
                dirs.sort()
                files.extend(os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".pto"))
        elif not os.path.exists(path):
            diags.error(E_READ, f"cannot read `{path}`: no such file or directory", None,
                        help="pass a .pto file, or a folder: every .pto file under it is formatted")
            refused += 1
        elif not path.endswith(".pto"):
            beside = os.path.splitext(path)[0] + ".pto"
            diags.error(E_FMT_NOT_PTO, f"`ptodsl fmt` lays out .pto files; `{path}` is not one", None,
                        help=f"pass `{beside}`, the kernel beside it, or a folder: every .pto file under "
                        "it is formatted" if os.path.isfile(beside) else
                        "pass a .pto file, or a folder: every .pto file under it is formatted")
            refused += 1
        else:
            files.append(path)
    return files, refused


def _files(n: int) -> str:
    return f"{n} file" + ("" if n == 1 else "s")


def summary(changed: int, unchanged: int, failed: int, check: bool) -> str:
    """The last line, worded as ruff words it: ``1 file reformatted, 46 files left unchanged``."""
    parts = []
    if changed:
        parts.append(f"{_files(changed)} would be reformatted" if check else f"{_files(changed)} reformatted")
    if unchanged or not (changed or failed):
        parts.append(f"{_files(unchanged)} already formatted" if check else f"{_files(unchanged)} left unchanged")
    if failed:
        parts.append(f"{_files(failed)} could not be formatted")
    return ", ".join(parts)


def run(paths: Sequence[str], check: bool, out: Any) -> int:
    """``ptodsl fmt [--check] PATH...``: format .pto files in place, or with ``check`` only say
    which would change; ``out`` is the command line's output (diagnostics, report lines, JSON
    fields). Returns the exit status: 1 when a path or file could not be formatted or, with
    ``check``, a file would change."""
    diags = Diagnostics()
    files, failed = pto_files(paths, diags)
    out.diagnostics(diags.items)
    changed: list[str] = []
    unchanged = 0
    for path in files:
        diags = Diagnostics()
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            diags.error(E_READ, f"cannot read `{path}`: {getattr(exc, 'strerror', None) or exc.__class__.__name__}",
                        None, help="pass the path of a .pto file saved as UTF-8")
            text = None
        new = format_source(text, path, diags) if text is not None else None
        out.diagnostics(diags.items)
        if new is None:
            failed += 1
        elif new == text:
            unchanged += 1
        else:
            changed.append(path)
            if check:
                report_unformatted(text, new, path, diags)
                out.diagnostics(diags.items[-1:])
                out.say(f"would reformat {path}")
            else:
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(new)
                out.say(f"reformatted {path}")
    out.say(summary(len(changed), unchanged, failed, check))
    out.result(changed=changed, checked=len(changed) + unchanged, unchanged=unchanged, failed=failed,
               written=not check)
    return 1 if failed or (check and changed) else 0
