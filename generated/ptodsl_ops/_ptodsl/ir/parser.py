"""Parser for the textual IR written by :mod:`printer`."""

from __future__ import annotations

import json
import re
from typing import Any

from .. import sym
from ..diagnostics import Span
from .core import Func, Module, Op, Param, TensorType, TileType, Type, Value

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<value>%[A-Za-z0-9_.]+)
  | (?P<global>@[A-Za-z0-9_.]+)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<punct>//|<=|>=|==|!=|[(){}\[\]<>,:=+\-*/%])
    """,
    re.VERBOSE,
)


class IRSyntaxError(ValueError):
    """A malformed IR text; ``line`` and ``col`` (1-based) say where, when known."""

    def __init__(self, message: str, line: int | None = None, col: int | None = None):
        super().__init__(f"{line}:{col}: {message}" if line is not None else message)
        self.message, self.line, self.col = message, line, col


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _tokenize(text: str) -> tuple[list[str], list[int]]:
    toks: list[str] = []
    starts: list[int] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise IRSyntaxError(f"unexpected character {text[pos]!r}", *_line_col(text, pos))
        if m.lastgroup != "ws":
            toks.append(m.group())
            starts.append(pos)
        pos = m.end()
    return toks, starts


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks, self.starts = _tokenize(text)
        self.i = 0
        self.values: dict[str, Value] = {}

    def error(self, message: str) -> IRSyntaxError:
        """An error at the current token (or at the end of the text)."""
        pos = self.starts[self.i] if self.i < len(self.starts) else len(self.text)
        return IRSyntaxError(message, *_line_col(self.text, pos))

    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None:
            raise self.error(f"unexpected end of IR, expected {want or 'a token'}")
        if want is not None and tok != want:
            raise self.error(f"expected {want!r}, found {tok!r}")
        self.i += 1
        return tok

    def accept(self, want: str) -> bool:
        if self.peek() == want:
            self.i += 1
            return True
        return False

    # -- expressions and attributes
    def expr(self, cond: bool = False) -> sym.Expr:
        p = sym.ExprParser(self.toks, "", self.i)
        e = p.cond() if cond else p.expr()
        self.i = p.i
        return e

    def dims(self) -> tuple[sym.Expr, ...]:
        self.take("[")
        out: list[sym.Expr] = []
        while not self.accept("]"):
            out.append(self.expr())
            if not self.accept(","):
                self.take("]")
                break
        return tuple(out)

    def attr_value(self) -> Any:
        tok = self.peek()
        if tok == "[":
            self.take("[")
            items: list[Any] = []
            while not self.accept("]"):
                items.append(self.attr_value())
                if not self.accept(","):
                    self.take("]")
                    break
            return tuple(items)
        if tok is not None and tok.startswith('"'):
            self.take()
            return json.loads(tok)
        return self.expr(cond=True)

    def attrs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        self.take("{")
        while not self.accept("}"):
            key = self.take()
            self.take("=")
            out[key] = self.attr_value()
            if not self.accept(","):
                self.take("}")
                break
        return out

    def type(self) -> Type:
        kind = self.take()
        self.take("<")
        if kind == "tensor":
            dtype = self.take()
            shape = self.dims()
            valid = None
            if self.accept("valid"):
                valid = self.dims()
            self.take(">")
            return TensorType(dtype, shape, valid)
        if kind == "tile":
            space = self.take()
            dtype = self.take()
            shape = self.dims()
            self.take("valid")
            valid = self.dims()
            self.take(">")
            return TileType(space, dtype, tuple(int(d) for d in shape), valid)
        raise self.error(f"unknown type {kind!r}")

    def loc(self) -> Span | None:
        if self.peek() != "loc":
            return None
        self.take("loc")
        self.take("(")
        file = json.loads(self.take())
        nums = []
        for _ in range(4):
            self.take(":")
            nums.append(int(self.take()))
        self.take(")")
        return Span(file, *nums)

    # -- structure
    def value_ref(self) -> Value:
        tok = self.take()
        if not tok.startswith("%"):
            raise self.error(f"expected a value, found {tok!r}")
        name = tok[1:]
        if name not in self.values:
            raise self.error(f"use of undefined value %{name}")
        return self.values[name]

    def op(self) -> Op:
        result_names: list[str] = []
        if self.peek() is not None and self.peek().startswith("%"):
            result_names.append(self.take()[1:])
            while self.accept(","):
                result_names.append(self.take()[1:])
            self.take("=")
        name = self.take()
        self.take("(")
        operands: list[Value] = []
        while not self.accept(")"):
            operands.append(self.value_ref())
            if not self.accept(","):
                self.take(")")
                break
        attrs = self.attrs() if self.peek() == "{" else {}
        results: list[Value] = []
        if result_names:
            self.take(":")
            for k, rname in enumerate(result_names):
                if k:
                    self.take(",")
                v = Value(rname, self.type())
                self.values[rname] = v
                results.append(v)
        regions: list[list[Op]] = []
        while self.accept("region"):
            self.take("{")
            body: list[Op] = []
            while not self.accept("}"):
                body.append(self.op())
            regions.append(body)
        return Op(name, operands, attrs, results, regions, self.loc())

    def param(self) -> Param:
        tok = self.take()
        if tok.startswith("%"):
            name = tok[1:]
            self.take(":")
            t = self.type()
            mode = "in"
            if self.peek() in ("out", "inout"):
                mode = self.take()
            v = Value(name, t)
            self.values[name] = v
            return Param(name, t, t.dtype, mode, v)
        self.take(":")
        return Param(tok, None, self.take())

    def func(self) -> Func:
        kind = self.take()
        name = self.take()[1:]
        self.values = {}
        self.take("(")
        params: list[Param] = []
        while not self.accept(")"):
            params.append(self.param())
            if not self.accept(","):
                self.take(")")
                break
        attrs = {}
        if self.accept("attributes"):
            attrs = self.attrs()
        span = self.loc()
        self.take("{")
        body: list[Op] = []
        while not self.accept("}"):
            body.append(self.op())
        return Func(name, params, body, kind, attrs, span)

    def module(self) -> Module:
        self.take("module")
        name = self.take()[1:]
        self.take("level")
        level = self.take()
        attrs = {}
        if self.accept("attributes"):
            attrs = self.attrs()
        self.take("{")
        funcs: list[Func] = []
        while not self.accept("}"):
            funcs.append(self.func())
        if self.peek() is not None:
            raise self.error(f"unexpected {self.peek()!r} after the module")
        return Module(name, level, funcs, attrs)


def parse(text: str) -> Module:
    """Parse a module printed by :func:`ptodsl.ir.printer.print_module`."""
    return _Parser(text).module()
