"""The .pto grammar: loading the text, the indentation post-lexer and the cached LALR parser.

The grammar file lives at ``grammar/pto.lark`` in a source checkout and is shipped inside the wheel
as ``ptodsl/_grammar/pto.lark`` (see the hatch ``force-include`` in pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from lark import Lark, Token
from lark.exceptions import UnexpectedInput
from lark.indenter import Indenter
from lark.lexer import PatternStr

# Entry points: whole files, plus fragments so tests (and tools) can parse a single statement or
# expression without wrapping it in a kernel.
START_RULES = ("module", "stmt", "expr")

NL = "_NL"
INDENT = "_INDENT"
DEDENT = "_DEDENT"
END = "$END"

# Bracket terminals are named in the grammar file itself, so these names cannot drift from it.
OPENERS = {"LPAR": "RPAR", "LSQB": "RSQB"}
CLOSERS = {close: open_ for open_, close in OPENERS.items()}


def grammar_text() -> str:
    """The grammar source, from the installed package data or else from the source tree."""
    try:
        packaged = resources.files("ptodsl").joinpath("_grammar", "pto.lark")
        if packaged.is_file():
            return packaged.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        pass
    return (Path(__file__).resolve().parents[2] / "grammar" / "pto.lark").read_text(encoding="utf-8")


# ------------------------------------------------------------------ layout errors
# Raised by the post-lexer while the parser pulls tokens, so they surface in source order, before
# the parser would have tripped over the same token with a less precise message.


# Compile time grows with the size of the program: a kernel of this many tokens (names, numbers,
# operators, brackets, line ends; about 3000 statements like `t2 = t1 * 0.5`) compiles in seconds,
# while a file of statements at the 1 MiB size limit would take minutes. The library's largest
# kernel has under 400.
MAX_TOKENS = 20_000


class LayoutError(Exception):
    """An indentation or bracket error found by the post-lexer."""


class TooManyTokens(LayoutError):
    """The file holds more tokens than :data:`MAX_TOKENS`; raised by the post-lexer, so that an
    oversized file is refused before it is parsed, let alone compiled."""

    def __init__(self, token: Token):
        super().__init__(f"more than {MAX_TOKENS} tokens")
        self.token = token


class BadDedent(LayoutError):
    """A line dedents to a width that no enclosing block uses."""

    def __init__(self, line: int, width: int, levels: list[int]):
        super().__init__(f"line {line}: dedent to width {width}")
        self.line, self.width, self.levels = line, width, levels


class TabIndent(LayoutError):
    """A tab in the indentation of a line (indentation must be spaces)."""

    def __init__(self, line: int, col: int):
        super().__init__(f"line {line}: tab in indentation")
        self.line, self.col = line, col


class BracketMismatch(LayoutError):
    """A closing bracket that does not close the innermost open one (opener is None if none is open)."""

    def __init__(self, opener: Token | None, closer: Token):
        super().__init__(f"line {closer.line}: mismatched {closer.value!r}")
        self.opener, self.closer = opener, closer


class PtoIndenter(Indenter):
    """Turns the indentation after each newline into _INDENT/_DEDENT tokens.

    Unlike Lark's stock indenter it remembers *which* brackets are open (not just how many), so a
    mismatched bracket is reported at once and an unclosed one can be pointed at; it positions the
    synthesized tokens on the line they belong to; and it keeps the raw token stream so that, after
    a parse error, the rest of the file can be scanned to tell whether an open bracket ever closes.
    """

    NL_type = NL
    OPEN_PAREN_types = list(OPENERS)
    CLOSE_PAREN_types = list(CLOSERS)
    INDENT_type = INDENT
    DEDENT_type = DEDENT
    tab_len = 8  # required by the base class; tabs in indentation are rejected anyway

    def __init__(self) -> None:
        super().__init__()
        self.brackets: list[Token] = []
        self.levels: list[int] = [0]
        self._raw: Iterator[Token] = iter(())

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        self.brackets = []
        self.levels = [0]
        self._raw = iter(stream)
        return self._process(self._raw)

    def _process(self, stream: Iterator[Token]) -> Iterator[Token]:
        last: Token | None = None
        count = 0
        for tok in stream:
            count += 1
            if count > MAX_TOKENS:
                raise TooManyTokens(tok)
            if last is None and tok.type != NL and tok.column > 1:
                # Code on the first line of the file is indented: the parser reports it as an
                # unexpected indent, exactly as for any later line.
                yield _synth(INDENT, tok.line, tok.column, tok.start_pos)
            last = tok
            if tok.type == NL:
                if not self.brackets:  # inside brackets, newlines are insignificant
                    yield tok
                    yield from self._layout(tok)
                continue
            if tok.type in OPENERS:
                self.brackets.append(tok)
            elif tok.type in CLOSERS:
                opener = self.brackets[-1] if self.brackets else None
                if opener is None or OPENERS[opener.type] != tok.type:
                    raise BracketMismatch(opener, tok)
                self.brackets.pop()
            yield tok
        # Close every open block at the end of the file, positioned at the end of the last token.
        while len(self.levels) > 1:
            self.levels.pop()
            if last is None:
                yield _synth(DEDENT, 1, 1, 0)
            else:
                yield _synth(DEDENT, last.end_line or last.line, last.end_column or last.column,
                             last.end_pos or last.start_pos or 0)

    def _layout(self, nl: Token) -> Iterator[Token]:
        indent = nl.value.rsplit("\n", 1)[-1]
        line = nl.end_line or nl.line
        start = (nl.end_pos or 0) - len(indent)
        if "\t" in indent:
            raise TabIndent(line, indent.index("\t") + 1)
        width = len(indent)
        if width > self.levels[-1]:
            self.levels.append(width)
            yield _synth(INDENT, line, width + 1, start + width)
            return
        enclosing = list(self.levels)
        while width < self.levels[-1]:
            self.levels.pop()
            yield _synth(DEDENT, line, width + 1, start + width)
        if width != self.levels[-1]:
            raise BadDedent(line, width, enclosing)

    def unclosed_bracket(self) -> Token | None:
        """After a parse error: the innermost bracket open at the error that no later token closes.

        Returns None when every open bracket is closed further on, or when the rest of the file
        cannot be scanned cleanly (a lexer error or another mismatch), since then the unclosed
        bracket would only be a guess.
        """
        open_at_error = list(self.brackets)
        stack = list(open_at_error)
        try:
            for tok in self._raw:
                if tok.type in OPENERS:
                    stack.append(tok)
                elif tok.type in CLOSERS:
                    if not stack or OPENERS[stack[-1].type] != tok.type:
                        return None
                    stack.pop()
        except UnexpectedInput:
            return None
        survivors = [t for t in stack if any(t is o for o in open_at_error)]
        return survivors[-1] if survivors else None


def _synth(kind: str, line: int, col: int, pos: int) -> Token:
    """An _INDENT/_DEDENT token with a position on the line it applies to."""
    return Token(kind, "", pos, line, col, line, col, pos)


@cache
def get_parser() -> Lark:
    """The LALR parser, built once per process (the grammar is compiled on first use)."""
    return Lark(
        grammar_text(),
        parser="lalr",
        lexer="basic",  # a basic lexer reserves keywords everywhere, as Python does
        postlex=PtoIndenter(),
        propagate_positions=True,
        maybe_placeholders=True,
        start=list(START_RULES),
    )


# ------------------------------------------------------------------ describing terminals

# Terminals defined by a regular expression (or declared) are shown as a category; every terminal
# defined by a literal string is shown as that literal, read from the grammar itself.
_CATEGORIES = {
    "NAME": "identifier",
    "INT": "number",
    "FLOAT": "number",
    "STRING": "string",
    NL: "newline",
    INDENT: "indent",
    DEDENT: "end of block",
    END: "end of file",
}

# Punctuation that shapes statements and postfix forms rather than combining two values.
_PUNCTUATION = frozenset({"(", ")", "[", "]", ":", ",", ".", "="})


@dataclass(frozen=True)
class TerminalInfo:
    """Facts about the grammar's terminals, derived from the compiled parser (never hand-listed)."""

    literals: dict[str, str]  # terminal name -> the literal text it matches
    expression_starts: frozenset[str]  # terminals that can begin an expression
    operators: frozenset[str]  # terminals that can join two operands (+, <=, and, ...)
    ignored: frozenset[str]


@cache
def terminal_info() -> TerminalInfo:
    parser = get_parser()
    literals = {t.name: t.pattern.value for t in parser.terminals if isinstance(t.pattern, PatternStr)}
    # Ask the LALR tables directly: what may start an expression, and what may follow an operand.
    # Nothing is lexed here, so the shared post-lexer's state is left untouched.
    starts = frozenset(parser.parse_interactive("", start="expr").accepts())
    after_operand = parser.parse_interactive("", start="expr")
    after_operand.feed_token(Token("NAME", "x"))
    operators = frozenset(n for n in after_operand.accepts() if n in literals and literals[n] not in _PUNCTUATION)
    return TerminalInfo(literals, starts, operators, frozenset(parser.ignore_tokens))


def describe_terminal(name: str) -> str:
    """How a terminal is shown to users: ``")"`` for a literal, a category word otherwise."""
    literal = terminal_info().literals.get(name)
    if literal is not None:
        return f'"{literal}"'
    return _CATEGORIES.get(name, name.lower().strip("_"))


def literal_of(name: str) -> str | None:
    return terminal_info().literals.get(name)


def is_keyword(name: str) -> bool:
    literal = literal_of(name)
    return literal is not None and literal.isidentifier()


def regex_terminals() -> list[str]:
    """Names of the non-literal, non-ignored terminals of the grammar (each needs a category word)."""
    info = terminal_info()
    return [t.name for t in get_parser().terminals if t.name not in info.literals and t.name not in info.ignored]
