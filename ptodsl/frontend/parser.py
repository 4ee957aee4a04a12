"""Parse .pto source text into the AST of :mod:`ptodsl.frontend.ast`.

Syntax errors never escape as Lark exceptions: they become :class:`~ptodsl.diagnostics.Diagnostic`
objects (codes E0100-E0119, see ``diagnostics/codes/syntax.yaml``) whose wording is ours, with
expected tokens shown as the literals the user would type.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lark import Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ..diagnostics import CompileError, Diagnostics, Label, Span, register_source
from ..dtypes import DIM_MAX
from . import ast
from .grammar import (
    CLOSERS,
    DEDENT,
    END,
    INDENT,
    MAX_TOKENS,
    NL,
    OPENERS,
    BadDedent,
    BracketMismatch,
    LayoutError,
    PtoIndenter,
    TabIndent,
    TooManyTokens,
    describe_terminal,
    get_parser,
    is_keyword,
    literal_of,
    terminal_info,
)
from .text import MAX_SOURCE_BYTES, refuse_misleading, strip_bom, too_large

# Deeper trees are rejected rather than risking Python's recursion limit in later passes, which
# walk the AST recursively. Real kernels stay far below this.
MAX_DEPTH = 200
# Expected-token lists longer than this are cut off with "or N more".
MAX_EXPECTED = 6

# The cached parser's post-lexer keeps per-parse state (open brackets, indentation levels).
_LOCK = threading.Lock()


# ------------------------------------------------------------------ public API


def parse_module(text: str, path: str, diags: Diagnostics) -> ast.Module | None:
    """Parse a whole .pto file; on any error, add diagnostics to ``diags`` and return None."""
    node = _parse(text, path, "module", diags)
    return node if isinstance(node, ast.Module) else None


def parse_file(path: str) -> ast.Module:
    """Read and parse a .pto file; raise :class:`CompileError` with every diagnostic on error."""
    diags = Diagnostics()
    text = read_source(path, diags)
    module = parse_module(text, path, diags) if text is not None else None
    diags.raise_if_errors()
    assert module is not None
    return module


def parse_expr(text: str, path: str = "<expr>") -> ast.Expr:
    """Parse a single expression (a fragment, for tests and tools); raise CompileError on error."""
    return _parse_fragment(text.rstrip(), path, "expr", ast.Expr)


def parse_stmt(text: str, path: str = "<stmt>") -> ast.Stmt:
    """Parse a single statement, simple or compound; raise CompileError on error."""
    return _parse_fragment(text, path, "stmt", ast.Stmt)


def _parse_fragment(text: str, path: str, start: str, kind: type) -> Any:
    diags = Diagnostics()
    node = _parse(text, path, start, diags)
    diags.raise_if_errors()
    assert isinstance(node, kind)
    return node


# Characters that str.splitlines() (used to show source lines) treats as line breaks but the lexer
# does not, and the bidirectional controls (which would reorder the shown line on a terminal); they
# are blanked in the displayed copy so that line numbers and carets agree with the file.
_EXTRA_LINE_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _parse(text: str, path: str, start: str, diags: Diagnostics) -> ast.Node | None:
    text = strip_bom(text)  # as editors do, positions do not count the mark
    if too_large(len(text)):  # a text handed over directly (an editor's buffer), not read here
        diags.error("E0118", f"cannot read {path}: it is larger than {MAX_SOURCE_BYTES >> 20} MiB", Span(path, 1, 1),
                    "far too long for a kernel", help="a .pto file is a short program; check that this is the right file")
        return None
    source = text.replace("\r\n", "\n").replace("\r", "\n")
    if start != "expr" and not source.endswith("\n"):
        source += "\n"  # every statement, including the last, ends with a newline token
    register_source(path, _EXTRA_LINE_BREAKS.sub(" ", source))
    if not refuse_misleading(source, path, diags):
        return None
    parser = get_parser()
    terminal_info()  # derived from the parser tables before any parse can use the post-lexer
    with _LOCK:
        try:
            tree = parser.parse(source, start=start)
        except (UnexpectedInput, LayoutError) as exc:
            _Reporter(source, path, parser.options.postlex, diags).report(exc)
            return None
    return _Builder(path, diags).build(tree)


def read_source(path: str, diags: Diagnostics) -> str | None:
    """The text of a .pto file, or None with an E0118 diagnostic: missing, unreadable, larger than
    1 MiB (checked before reading it) or not UTF-8. A byte-order mark is left for the parser."""
    try:
        if too_large(os.path.getsize(path)):
            diags.error("E0118", f"cannot read {path}: it is larger than {MAX_SOURCE_BYTES >> 20} MiB", None,
                        help="a .pto file is a short program; check that this is the right file")
            return None
        data = Path(path).read_bytes()
    except FileNotFoundError:
        diags.error("E0118", f"cannot read {path}: no such file", help="check the path; it is relative to the current directory")
        return None
    except IsADirectoryError:
        diags.error("E0118", f"cannot read {path}: it is a directory", help="pass the path of a .pto file")
        return None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        diags.error("E0118", f"cannot read {path}: {reason}", help="check that the file exists and is readable")
        return None
    try:
        return data.decode("utf-8")  # a byte-order mark is dropped by the parser, wherever the text comes from
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8", errors="replace")
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        register_source(path, data.decode("utf-8", errors="replace"))
        diags.error(
            "E0118",
            f"cannot read {path}: it is not valid UTF-8",
            Span(path, line, col),
            f"byte 0x{data[exc.start]:02x} is not valid here",
            help="save the file as UTF-8",
        )
        return None


# ------------------------------------------------------------------ syntax errors


def expected_phrase(names: Iterable[str]) -> str:
    """``expected ")", ",", an expression or 3 more`` for a set of acceptable terminal names.

    Items are ordered by how likely they are to be the fix (closing brackets and separators first)
    and then alphabetically, so the output is deterministic. Every token that can start an
    expression is summed up as "an expression" and binary operators as "an operator": listing
    ``%``, ``*``, ``+``... one by one rarely helps.
    """
    info = terminal_info()
    names = set(names)
    entries: set[tuple[int, str]] = set()
    # A state that accepts both an identifier and a number is one where an operand may begin.
    if {"NAME", "INT"} <= names:
        names -= info.expression_starts
        entries.add((3, "an expression"))
    operators = names & info.operators
    fold = len(operators) > 1
    if fold:
        names -= operators
    entries |= {(_tier(n), describe_terminal(n)) for n in names}  # INT and FLOAT are both "number"
    items = [text for _, text in sorted(entries)]
    shown, more = items[:MAX_EXPECTED], len(items) - MAX_EXPECTED
    parts = shown + (["an operator"] if fold else []) + ([f"{more} more"] if more > 0 else [])
    if not parts:
        return ""
    if len(parts) == 1:
        return f"expected {parts[0]}"
    return f"expected {', '.join(parts[:-1])} or {parts[-1]}"


def _tier(name: str) -> int:
    literal = literal_of(name)
    if name in CLOSERS:
        return 0
    if literal in (":", ",", "="):
        return 1
    if name in (NL, INDENT, DEDENT, END):
        return 5
    if literal is None:
        return 3  # identifier, number, string
    if is_keyword(name):
        return 4
    return 6  # openers, "." and operators: continuations of an expression


# Hints for characters that are not part of the language but have an obvious intended meaning.
_CHAR_HELP = {
    "@": 'matrix products are written "matmul(a, b)"',
    "!": 'inequality is written "!=" and negation "not"',
    "&": 'logical and is written "and"',
    "|": 'logical or is written "or"',
    "\\": "to continue an expression on the next line, wrap it in parentheses",
    ";": "put each statement on its own line",
    "{": 'there are no dicts or sets; a list is written "[a, b]"',
    "}": 'there are no dicts or sets; a list is written "[a, b]"',
}

_HEADER_KEYWORDS = ("kernel", "for", "if", "elif", "else")


class _Reporter:
    """Turns one parser, lexer or layout exception into one diagnostic."""

    def __init__(self, text: str, path: str, indenter: PtoIndenter, diags: Diagnostics):
        self.text, self.path, self.indenter, self.diags = text, path, indenter, diags

    def report(self, exc: Exception) -> None:
        if isinstance(exc, BracketMismatch):
            self._mismatch(exc)
        elif isinstance(exc, BadDedent):
            self._bad_dedent(exc)
        elif isinstance(exc, TooManyTokens):
            tok = exc.token
            self.diags.error("E0122", f"the file is too long: more than {MAX_TOKENS} tokens", self._tok_span(tok),
                             f"token {MAX_TOKENS + 1} is here",
                             help="a kernel this long would take minutes to compile; split the work into several "
                                  "ops (specs), or compute repeated steps with a loop")
        elif isinstance(exc, TabIndent):
            self.diags.error("E0107", "tab in indentation", Span(self.path, exc.line, exc.col), "tab character",
                             help="indent with spaces only (4 per level)")
        elif isinstance(exc, UnexpectedCharacters):
            self._bad_char(exc)
        elif isinstance(exc, UnexpectedToken):
            self._unexpected(exc)
        else:  # other Lark input errors carry at least a position
            line, col = getattr(exc, "line", 1), getattr(exc, "column", 1)
            span = Span(self.path, line if isinstance(line, int) else 1, col if isinstance(col, int) else 1)
            self.diags.error("E0100", "syntax error", span,
                             help="see docs/LANGUAGE.md section 1 for the syntax of statements and expressions")

    # -------------------------------------------------------------- spans

    def _eof_span(self) -> Span:
        """Just after the last non-blank character of the file."""
        body = self.text.rstrip()
        line = body.count("\n") + 1
        col = len(body) - (body.rfind("\n") + 1) + 1
        return Span(self.path, line, col)

    def _at_eof(self, tok: Token) -> bool:
        """Whether tok is the end of the input, or a newline/dedent after which only blanks and comments remain."""
        if tok.type == END:
            return True
        if tok.type in (NL, DEDENT) and tok.start_pos is not None:
            rest = self.text[tok.start_pos:].split("\n")
            return all(not ln.strip() or ln.lstrip().startswith("#") for ln in rest)
        return False

    def _tok_span(self, tok: Token) -> Span:
        if tok.type == END or (tok.type == DEDENT and self._at_eof(tok)):
            return self._eof_span()
        line, col = tok.line or 1, tok.column or 1
        if tok.type == NL and tok.start_pos is not None:
            # Point just after the code of the line, before any blanks or trailing comment.
            pos = tok.start_pos
            while pos > 0 and self.text[pos - 1] in " \t\f":
                pos -= 1
            return Span(self.path, line, col - (tok.start_pos - pos))
        if tok.type in (NL, INDENT, DEDENT):
            return Span(self.path, line, col)
        return Span(self.path, line, col, tok.end_line or line, tok.end_column or col + 1)

    def _starts_line(self, tok: Token) -> bool:
        """Whether tok is the first token on its line (a hint that a statement was swallowed)."""
        pos = tok.start_pos or 0
        return not self.text[self.text.rfind("\n", 0, pos) + 1: pos].strip()

    # -------------------------------------------------------------- cases

    def _unexpected(self, exc: UnexpectedToken) -> None:
        tok = exc.token
        accepts = set(exc.accepts or exc.expected or ())
        span = self._tok_span(tok)
        expected = expected_phrase(accepts)
        if tok.type == INDENT:
            first = not any(ln.strip() and not ln.lstrip().startswith("#")
                            for ln in self.text[: tok.start_pos or 0].split("\n"))
            label = ("the first line of code must start in column 1" if first
                     else "this line is indented deeper than the line before")
            self.diags.error("E0104", "unexpected indent", span, label,
                             help='indent only the body of a header that ends with ":"; align this line with the one above')
            return
        if INDENT in accepts:
            self._expected_block(exc, span)
            return
        if self._after_return(tok):
            return
        eof = self._at_eof(tok)
        if self.indenter.brackets:
            opener = self.indenter.unclosed_bracket()
            if opener is not None and opener is not tok and (eof or (tok.line or 0) > (opener.line or 0)):
                self._unclosed(opener, tok, span, eof)
                return
        if eof:
            self.diags.error("E0101", "unexpected end of file", span, expected, help=_fix_hint(accepts))
            return
        secondary = []
        if self.indenter.brackets and self._starts_line(tok) and (tok.line or 0) > (self.indenter.brackets[-1].line or 0):
            opener = self.indenter.brackets[-1]
            secondary.append(Label(self._tok_span(opener), f'the "{opener.value}" opened here is still open'))
        help_text = _fix_hint(accepts, tok)
        kernel = next((n for n, lit in terminal_info().literals.items() if lit == "kernel"), None)
        if accepts and accepts <= {kernel, NL, END} and not help_text.startswith("did you mean"):
            help_text = 'statements belong inside a kernel: "kernel NAME(params):" followed by an indented body'
        self.diags.error("E0100", _unexpected_what(tok), span, expected, help=help_text, secondary=secondary)

    def _after_return(self, tok: Token) -> bool:
        """`return x`: Python habit, but a kernel writes its results into `out` parameters."""
        pos = tok.start_pos or 0
        start = self.text.rfind("\n", 0, pos) + 1
        before = self.text[start:pos]
        if before.strip() != "return":
            return False
        col = len(before) - len(before.lstrip()) + 1
        line = tok.line or 1
        return_error(self.diags, Span(self.path, line, col, line, col + len("return")))
        return True

    def _unclosed(self, opener: Token, tok: Token, span: Span, eof: bool) -> None:
        closing = literal_of(OPENERS[opener.type])
        if eof:
            where = "the file ends while it is still open"
        else:
            where = f"still open at this {_token_kind(tok)}"
        self.diags.error(
            "E0102",
            f'unclosed "{opener.value}"',
            self._tok_span(opener),
            "this bracket is never closed",
            help=f'close it with "{closing}"',
            secondary=[Label(span, where)],
        )

    def _expected_block(self, exc: UnexpectedToken, span: Span) -> None:
        header = _header_keyword(exc)
        message = "expected an indented block"
        secondary = []
        if header is not None:
            message += f' after "{header.value}" on line {header.line}'
            secondary.append(Label(self._tok_span(header), "this block has no body"))
        self.diags.error("E0106", message, span, "expected an indented statement here",
                         help='indent the body one level deeper than the header; write "pass" for an empty body',
                         secondary=secondary)

    def _mismatch(self, exc: BracketMismatch) -> None:
        closer = exc.closer
        if exc.opener is None:
            self.diags.error("E0103", f'unmatched closing bracket "{closer.value}"', self._tok_span(closer),
                             "no bracket is open here",
                             help="remove it, or add the opening bracket it was meant to close")
            return
        want = literal_of(OPENERS[exc.opener.type])
        self.diags.error(
            "E0103",
            f'mismatched closing bracket "{closer.value}"',
            self._tok_span(closer),
            f'expected "{want}" to close the "{exc.opener.value}" first',
            help=f'close the "{exc.opener.value}" with "{want}"',
            secondary=[Label(self._tok_span(exc.opener), f'"{exc.opener.value}" opened here')],
        )

    def _bad_dedent(self, exc: BadDedent) -> None:
        levels = sorted(set(exc.levels))
        choices = ", ".join(str(n) for n in levels[:-1])
        choices = f"{choices} or {levels[-1]}" if choices else str(levels[-1])
        self.diags.error(
            "E0105",
            "unindent does not match any outer indentation level",
            Span(self.path, exc.line, exc.width + 1),
            f"this line is indented by {exc.width} space{'s' if exc.width != 1 else ''}",
            help=f"align it with an enclosing block: indent it by {choices} spaces",
        )

    def _bad_char(self, exc: UnexpectedCharacters) -> None:
        pos = exc.pos_in_stream
        char = self.text[pos] if pos is not None and 0 <= pos < len(self.text) else getattr(exc, "char", "?")
        line, col = exc.line, exc.column
        if char in "\"'":
            end = self.text.find("\n", pos)
            end_col = col + ((end if end >= 0 else len(self.text)) - pos)
            self.diags.error("E0109", "unterminated string literal", Span(self.path, line, col, line, end_col),
                             "this string is never closed",
                             help=f"close it with {char} on the same line; strings cannot span lines")
            return
        if char.isprintable() and char.isascii():
            what = f'"{char}"'
        else:
            name = unicodedata.name(char, "")
            what = f"U+{ord(char):04X}" + (f" ({name})" if name else "")
        help_text = _CHAR_HELP.get(char)
        if help_text is None:
            help_text = ("outside strings and comments, only ASCII characters are allowed" if not char.isascii()
                         else "remove it, or move it into a string or a comment")
        self.diags.error("E0108", f"unexpected character {what}", Span(self.path, line, col),
                         "not part of the .pto language", help=help_text)


def return_error(diags: Diagnostics, span: Span) -> None:
    diags.error("E0125", "a kernel does not return a value", span, "`return` is not a statement of the language",
                help="write results into an `out` parameter, e.g. `y[:] = x + 1.0`, and delete the `return`")


def _fix_hint(accepts: set[str], tok: Token | None = None) -> str:
    """A help line for an unexpected token: the likeliest fix if there is one, else a pointer to the docs."""
    if tok is not None and tok.type == "NAME":
        keywords = sorted(literal_of(n) or "" for n in accepts if is_keyword(n))
        guess = difflib.get_close_matches(str(tok.value), keywords, n=1, cutoff=0.75)
        if guess:
            return f'did you mean "{guess[0]}"?'
    if tok is not None and is_keyword(tok.type) and "NAME" in accepts:
        return f'"{tok.value}" is a reserved word and cannot be used as a name'
    closers = sorted(n for n in accepts if n in CLOSERS)
    comma = any(literal_of(n) == "," for n in accepts)
    colon = [n for n in accepts if literal_of(n) == ":"]
    if len(closers) == 1 and comma:
        return f'separate the items with "," and close the bracket with {describe_terminal(closers[0])}'
    # Where an operand may start, any guess would mislead.
    likely = closers + colon
    if len(likely) == 1 and "NAME" not in accepts:
        return f"did you forget {describe_terminal(likely[0])}?"
    return "see docs/LANGUAGE.md section 1 for the syntax of statements and expressions"


def _token_kind(tok: Token) -> str:
    if tok.type == NL:
        return "line end"
    if tok.type == DEDENT:
        return "end of block"
    if tok.type == "NAME":
        return f'identifier "{tok.value}"'
    if is_keyword(tok.type):
        return f'keyword "{tok.value}"'
    return f'"{_clip(str(tok.value))}"'


def _unexpected_what(tok: Token) -> str:
    if tok.type == NL:
        return "unexpected end of line"
    if tok.type == DEDENT:
        return "unexpected end of block"
    if tok.type == "NAME":
        return f'unexpected identifier "{tok.value}"'
    if tok.type in ("INT", "FLOAT"):
        return f'unexpected number "{tok.value}"'
    if tok.type == "STRING":
        return f"unexpected string {_clip(str(tok.value))}"
    if is_keyword(tok.type):
        return f'unexpected keyword "{tok.value}"'
    return f'unexpected token "{_clip(str(tok.value))}"'


def _clip(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _header_keyword(exc: UnexpectedToken) -> Token | None:
    """The keyword of the block header that is missing its body, from the parser's value stack.

    The header's own tokens are still unreduced on the stack, so the nearest keyword token is it.
    """
    try:
        stack = exc.interactive_parser.parser_state.value_stack
    except AttributeError:
        return None
    for value in reversed(stack):
        if isinstance(value, Token) and value.value in _HEADER_KEYWORDS and is_keyword(value.type):
            return value
    return None


# ------------------------------------------------------------------ AST builder


@dataclass(frozen=True)
class _Elif:
    """An ``elif`` clause until the if-statement folds it into a nested If."""

    start: Span
    cond: ast.Expr
    body: list[ast.Stmt]


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


def _unquote(literal: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), literal[1:-1])


_TARGET_KINDS: list[tuple[type, str]] = [
    (ast.Call, "a function call"),
    (ast.Attribute, "an attribute"),
    (ast.Subscript, "a subscript of an expression"),
    (ast.ListExpr, "a list"),
    (ast.Num, "a literal"),
    (ast.Str, "a literal"),
    (ast.Bool, "a literal"),
]


INT_LITERAL_MAX = 2**63 - 1  # an integer literal must fit the C++ int64_t it becomes


def _shorten(text: str) -> str:
    return text if len(text) <= 30 else f"{text[:12]}...{text[-6:]} ({len(text)} characters)"


class _Builder:
    """Builds AST nodes bottom-up from the Lark tree, one ``_<rule>`` method per grammar rule.

    Checks that the grammar deliberately leaves to this stage (parameter modes, assignment
    targets, argument order, comparison chains) report diagnostics and still return a node, so
    several of them can be reported in one run.
    """

    def __init__(self, path: str, diags: Diagnostics):
        self.path, self.out = path, diags
        self.diags = Diagnostics()  # collected here, then handed over in source order
        self.parenthesised: set[int] = set()  # ids of nodes written inside "( )"

    def build(self, tree: Tree) -> ast.Node | None:
        node = self._transform(tree)
        # Checks run bottom-up (a kernel's parameters are checked after its body); report in the
        # order the user reads the file.
        self.out.extend(sorted(self.diags, key=lambda d: (d.span.line, d.span.col) if d.span else (0, 0)))
        return None if self.diags.has_errors else node

    def _transform(self, root: Tree) -> Any:
        # An explicit post-order walk: deeply nested input must not hit Python's recursion limit.
        values: list[tuple[Any, int]] = []
        todo: list[tuple[Any, bool]] = [(root, False)]
        while todo:
            item, expanded = todo.pop()
            if not isinstance(item, Tree):
                values.append((item, 0))
            elif not expanded:
                todo.append((item, True))
                todo.extend((child, False) for child in reversed(item.children))
            else:
                count = len(item.children)
                kids = values[len(values) - count:]
                del values[len(values) - count:]
                depth = 1 + max((d for _, d in kids), default=0)
                if depth > MAX_DEPTH:
                    self.diags.error("E0119", f"nesting is too deep (more than {MAX_DEPTH} levels)",
                                     self._span(item.meta), "the limit is exceeded here",
                                     help="split the expression into several statements with intermediate locals")
                    return None
                values.append((getattr(self, "_" + item.data)(item.meta, [v for v, _ in kids]), depth))
        return values[0][0]

    # -------------------------------------------------------------- spans

    def _span(self, meta: Any) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.path, 1, 1)
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tok(self, tok: Token) -> Span:
        return Span(self.path, tok.line, tok.column, tok.end_line, tok.end_column)

    def _block(self, meta: Any, last: ast.Node) -> Span:
        """A compound statement runs from its keyword to the end of its last nested statement."""
        return self._span(meta).to(last.span)

    # -------------------------------------------------------------- kernels

    def _module(self, meta: Any, kids: list) -> ast.Module:
        kernels = tuple(k for k in kids if isinstance(k, ast.Kernel))
        span = kernels[0].span.to(kernels[-1].span) if kernels else Span(self.path, 1, 1)
        return ast.Module(kernels, span=span)

    def _kernel(self, meta: Any, kids: list) -> ast.Kernel:
        name, params, body = kids
        params = params or []
        self._check_unique_params(params)
        return ast.Kernel(name.value, tuple(params), tuple(body), span=self._block(meta, body[-1]),
                          name_span=self._tok(name))

    def _params(self, meta: Any, kids: list) -> list[ast.Param]:
        return [k for k in kids if k is not None]

    def _mode(self, meta: Any, kids: list) -> Token:
        return kids[0]

    def _param(self, meta: Any, kids: list) -> ast.Param:
        name, mode_tok, dtype, dims, default = kids
        mode = "in"
        if mode_tok is not None:
            if mode_tok.value in ("out", "inout"):
                mode = mode_tok.value
            else:
                self._bad_mode(name.value, mode_tok, dtype.value, dims)
        if dims is None and mode != "in":
            self.diags.error("E0111", f'a scalar parameter cannot be "{mode}"', self._tok(mode_tok),
                             "scalars are inputs",
                             help=f'to return a scalar, write it into a one-element tensor: "{name.value}: {mode} '
                                  f'{dtype.value}[1]"')
        if dims is not None and default is not None:
            self.diags.error("E0112", "a tensor parameter cannot have a default value", default.span,
                             "default given here",
                             help=f'only scalar parameters take defaults, e.g. "eps: f32 = 1e-6"; remove "= ..." '
                                  f'from "{name.value}"')
        return ast.Param(name.value, dtype.value, None if dims is None else tuple(dims), mode, default,
                         span=self._span(meta), dtype_span=self._tok(dtype))

    def _bad_mode(self, name: str, mode_tok: Token, dtype: str, dims: list[ast.Dim] | None) -> None:
        written = f"{name}: {dtype}" + ("" if dims is None else f"[{', '.join(str(d.value) for d in dims)}]")
        if mode_tok.value == "in":
            self.diags.error("E0110", 'unknown parameter mode "in"', self._tok(mode_tok),
                             'parameters are inputs unless marked "out" or "inout"',
                             help=f'drop "in": write "{written}"')
            return
        guess = difflib.get_close_matches(mode_tok.value, ["out", "inout"], n=1, cutoff=0.6)
        if guess:
            help_text = f'did you mean "{guess[0]}"?'
        else:
            help_text = ('a mode is "out" (written by the kernel) or "inout" (read and written); '
                         f'an input takes no mode: "{written}"')
        self.diags.error("E0110", f'unknown parameter mode "{mode_tok.value}"', self._tok(mode_tok),
                         'expected "out" or "inout"', help=help_text)

    def _check_unique_params(self, params: list[ast.Param]) -> None:
        seen: dict[str, ast.Param] = {}
        for p in params:
            first = seen.setdefault(p.name, p)
            if first is not p:
                self.diags.error("E0113", f'duplicate parameter "{p.name}"', _name_span(p), "declared again here",
                                 help="give each parameter its own name",
                                 secondary=[Label(_name_span(first), "first declared here")])

    def _dims(self, meta: Any, kids: list) -> list[ast.Dim]:
        return [k for k in kids if k is not None]

    def _dim(self, meta: Any, kids: list) -> ast.Dim:
        tok = kids[0]
        if tok.type == "INT" and (len(tok.value.lstrip("0")) > 10 or int(tok.value) > DIM_MAX):
            self._too_large(tok, f"the dim `{_shorten(tok.value)}` is too large",
                            f"dims are at most {DIM_MAX}")
            return ast.Dim(1, span=self._tok(tok))
        return ast.Dim(int(tok.value) if tok.type == "INT" else tok.value, span=self._tok(tok))

    # -------------------------------------------------------------- statements

    def _suite(self, meta: Any, kids: list) -> list[ast.Stmt]:
        return [k for k in kids if k is not None]

    def _assign(self, meta: Any, kids: list) -> ast.Assign:
        target, value = kids
        self._check_target(target)
        return ast.Assign(target, value, span=self._span(meta))

    def _check_target(self, target: ast.Expr) -> None:
        if isinstance(target, ast.Name):
            return
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            return
        what = next((text for kind, text in _TARGET_KINDS if isinstance(target, kind)), "an expression")
        self.diags.error("E0114", f"cannot assign to {what}", target.span, "not a name or a region of a tensor",
                         help='bind a local with "v = ..." or write a region of a tensor with "t[...] = ..."')

    def _unpack(self, meta: Any, kids: list) -> ast.Unpack:
        *names, value = kids
        targets = tuple(ast.Name(t.value, span=self._tok(t)) for t in names)
        return ast.Unpack(targets, value, span=self._span(meta))

    def _expr_stmt(self, meta: Any, kids: list) -> ast.ExprStmt:
        return ast.ExprStmt(kids[0], span=kids[0].span)

    def _pass_stmt(self, meta: Any, kids: list) -> ast.Pass:
        return ast.Pass(span=self._span(meta))

    def _for_stmt(self, meta: Any, kids: list) -> ast.For:
        *names, iterable, body = kids
        targets = tuple(ast.Name(t.value, span=self._tok(t)) for t in names)
        return ast.For(targets, iterable, tuple(body), span=self._block(meta, body[-1]))

    def _if_stmt(self, meta: Any, kids: list) -> ast.If:
        cond, body, *clauses, else_body = kids
        orelse: tuple[ast.Stmt, ...] = tuple(else_body or ())
        for clause in reversed(clauses):  # elif chains become Ifs nested in orelse
            last = orelse[-1] if orelse else clause.body[-1]
            orelse = (ast.If(clause.cond, tuple(clause.body), orelse, span=clause.start.to(last.span)),)
        last = orelse[-1] if orelse else body[-1]
        return ast.If(cond, tuple(body), orelse, span=self._block(meta, last))

    def _elif_clause(self, meta: Any, kids: list) -> _Elif:
        return _Elif(self._span(meta), kids[0], kids[1])

    def _else_clause(self, meta: Any, kids: list) -> list[ast.Stmt]:
        return kids[0]

    # -------------------------------------------------------------- expressions

    def _or_op(self, meta: Any, kids: list) -> ast.BoolOp:
        return ast.BoolOp("or", kids[0], kids[1], span=self._span(meta))

    def _and_op(self, meta: Any, kids: list) -> ast.BoolOp:
        return ast.BoolOp("and", kids[0], kids[1], span=self._span(meta))

    def _not_op(self, meta: Any, kids: list) -> ast.UnaryOp:
        return ast.UnaryOp("not", kids[0], span=self._span(meta))

    def _compare(self, meta: Any, kids: list) -> ast.Compare:
        left, op, right = kids
        if isinstance(left, ast.Compare) and id(left) not in self.parenthesised:
            self.diags.error(
                "E0117", "comparisons cannot be chained", self._span(meta), "two comparisons in a row",
                help=f'compare one pair at a time, e.g. "a {left.op} b and b {op.value} c"',
            )
        return ast.Compare(op.value, left, right, span=self._span(meta))

    def _binop(self, meta: Any, kids: list) -> ast.BinOp:
        left, op, right = kids
        return ast.BinOp(op.value, left, right, span=self._span(meta))

    def _unary(self, meta: Any, kids: list) -> ast.UnaryOp:
        op, operand = kids
        return ast.UnaryOp(op.value, operand, span=self._span(meta))

    def _call(self, meta: Any, kids: list) -> ast.Call:
        func, arguments = kids
        args: list[ast.Expr] = []
        keywords: dict[str, ast.Keyword] = {}
        first_kw: ast.Keyword | None = None
        reported_order = False
        for arg in arguments or []:
            if isinstance(arg, ast.Keyword):
                first_kw = first_kw or arg
                if arg.name in keywords:
                    self.diags.error("E0116", f'keyword argument "{arg.name}" repeated', arg.span, "repeated here",
                                     help=f'pass "{arg.name}=" once',
                                     secondary=[Label(keywords[arg.name].span, "first given here")])
                    continue
                keywords[arg.name] = arg
                continue
            if first_kw is not None and not reported_order:
                reported_order = True
                self.diags.error("E0115", "positional argument follows keyword argument", arg.span,
                                 "positional argument", help="put positional arguments before keyword arguments",
                                 secondary=[Label(first_kw.span, "keyword argument given first here")])
            args.append(arg)
        return ast.Call(func, tuple(args), tuple(keywords.values()), span=self._span(meta))

    def _arguments(self, meta: Any, kids: list) -> list:
        return [k for k in kids if k is not None]

    def _keyword(self, meta: Any, kids: list) -> ast.Keyword:
        name, value = kids
        return ast.Keyword(name.value, value, span=self._span(meta))

    def _subscript(self, meta: Any, kids: list) -> ast.Subscript:
        value, indices = kids
        return ast.Subscript(value, tuple(indices), span=self._span(meta))

    def _subscripts(self, meta: Any, kids: list) -> list:
        return [k for k in kids if k is not None]

    def _slice(self, meta: Any, kids: list) -> ast.Slice:
        lo, hi, step = kids
        return ast.Slice(lo, hi, step, span=self._span(meta))

    def _attribute(self, meta: Any, kids: list) -> ast.Attribute:
        value, name = kids
        return ast.Attribute(value, name.value, span=self._span(meta))

    def _name(self, meta: Any, kids: list) -> ast.Name:
        return ast.Name(kids[0].value, span=self._tok(kids[0]))

    def _int(self, meta: Any, kids: list) -> ast.Num:
        text = kids[0].value
        # Checked on the digits first: int() of thousands of digits is slow, and refused past 4300.
        if len(text.lstrip("0")) > 19 or int(text) > INT_LITERAL_MAX:
            self._too_large(kids[0], f"the integer `{_shorten(text)}` does not fit in 64 bits",
                            f"integers are at most {INT_LITERAL_MAX}")
            return ast.Num(0, text, span=self._tok(kids[0]))
        return ast.Num(int(text), text, span=self._tok(kids[0]))

    def _float(self, meta: Any, kids: list) -> ast.Num:
        text = kids[0].value
        value = float(text) if len(text) <= 400 else math.inf
        if not math.isfinite(value):
            self._too_large(kids[0], f"the number `{_shorten(text)}` is too large for a float",
                            "floats are at most about 3.4e38 (f32); write a smaller number")
            return ast.Num(0.0, text, span=self._tok(kids[0]))
        return ast.Num(value, text, span=self._tok(kids[0]))

    def _too_large(self, tok: Token, message: str, help: str) -> None:
        self.diags.error("E0120", message, self._tok(tok), "number out of range", help=help)

    def _string(self, meta: Any, kids: list) -> ast.Str:
        return ast.Str(_unquote(kids[0].value), span=self._tok(kids[0]))

    def _true(self, meta: Any, kids: list) -> ast.Bool:
        return ast.Bool(True, span=self._span(meta))

    def _false(self, meta: Any, kids: list) -> ast.Bool:
        return ast.Bool(False, span=self._span(meta))

    def _paren(self, meta: Any, kids: list) -> ast.Expr:
        # The node keeps its own span (without the parentheses); the enclosing node's span covers
        # them, since Lark propagates the parenthesised container's position.
        self.parenthesised.add(id(kids[0]))
        return kids[0]

    def _list(self, meta: Any, kids: list) -> ast.ListExpr:
        return ast.ListExpr(tuple(kids[0] or ()), span=self._span(meta))

    def _items(self, meta: Any, kids: list) -> list[ast.Expr]:
        return [k for k in kids if k is not None]


def _name_span(param: ast.Param) -> Span:
    return Span(param.span.file, param.span.line, param.span.col, param.span.line, param.span.col + len(param.name))


__all__ = ["CompileError", "expected_phrase", "parse_expr", "parse_file", "parse_module", "parse_stmt", "read_source"]
