"""What a PyPTO name stands for while a kernel is traced: a value known when the kernel is traced
(a number, a list, a dtype), a scalar expression over symbols and loop indices, or a tensor.

PyPTO runs the kernel's Python at trace time, so only tensors and symbolic scalars reach the
device program; everything else is a Python value. The port does the same: Python values are
folded into the text they reach, and only tensors (and runtime scalars read from them) become
ptodsl bindings.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

# Precedence of the ptodsl text of an expression, as in Python: a sub-expression of lower
# precedence than its context is parenthesised.
ATOM, POSTFIX, UNARY, MUL, ADD, CMP, NOT, AND, OR = 9, 8, 7, 6, 5, 4, 3, 2, 1
BIN_PREC = {"+": ADD, "-": ADD, "*": MUL, "/": MUL, "//": MUL, "%": MUL}


@dataclass
class Val:
    """``kind`` is one of: const (``py`` holds a Python int/float/bool/str/None), seq (``items``: a
    list or tuple of values), dtype (``text`` is a ptodsl dtype), scalar (``text`` is a ptodsl
    scalar expression), tensor (``text`` names it; ``shape`` when known), shape (``items``, the
    dims of ``tensor``), module (a name of the ``pypto`` package)."""

    kind: str
    text: str = ""
    py: Any = None
    items: list[Val] = field(default_factory=list)
    prec: int = ATOM
    dtype: str | None = None
    shape: list[Val] | None = None
    runtime: bool = False  # a scalar read from a tensor: known only to the running kernel
    path: str = ""  # module: the dotted name below pypto

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)


def const(v: Any) -> Val:
    return Val("const", py=v)


def scalar(text: str, prec: int = ATOM, runtime: bool = False) -> Val:
    return Val("scalar", text=text, prec=prec, runtime=runtime)


def tensor(text: str, shape: list[Val] | None, dtype: str | None) -> Val:
    return Val("tensor", text=text, shape=shape, dtype=dtype)


def seq(items: list[Val]) -> Val:
    return Val("seq", items=list(items))


def is_int(v: Val) -> bool:
    return v.kind == "const" and isinstance(v.py, int) and not isinstance(v.py, bool)


def number_text(x: Any) -> str:
    """A Python number as a ptodsl literal; floats keep a decimal point or an exponent."""
    if isinstance(x, bool):
        return "True" if x else "False"
    if isinstance(x, int):
        return str(x)
    text = repr(float(x))
    return text if any(c in text for c in ".e") else text + ".0"


def text_of(v: Val) -> str | None:
    """The ptodsl text of a value that has one (a number, a scalar, a tensor, a dtype)."""
    if v.kind == "const" and isinstance(v.py, (int, float)):
        return number_text(v.py)
    if v.kind in ("scalar", "tensor", "dtype"):
        return v.text
    if v.kind == "seq":
        parts = [text_of(i) for i in v.items]
        return None if None in parts else "[" + ", ".join(parts) + "]"  # type: ignore[arg-type]
    return None


def prec_of(v: Val) -> int:
    if v.kind == "const" and isinstance(v.py, (int, float)) and not isinstance(v.py, bool) and v.py < 0:
        return UNARY
    return v.prec if v.kind in ("scalar", "tensor") else ATOM


def wrap(v: Val, at_least: int) -> str:
    text = text_of(v) or "?"
    return f"({text})" if prec_of(v) < at_least else text


def binop(op: str, a: Val, b: Val) -> Val:
    """``a op b`` on scalars, with the identities a tracer folds (``x * 1``, ``x + 0``) folded."""
    if is_int(b) and ((op in ("*", "//") and b.py == 1) or (op in ("+", "-") and b.py == 0)):
        return a
    if is_int(a) and ((op == "*" and a.py == 1) or (op == "+" and a.py == 0)):
        return b
    if op == "-" and a.kind == "scalar" and a.prec == ADD and text_of(b) is not None:
        head = wrap(b, ADD) + " + "
        if a.text.startswith(head):  # (i + e) - i is e: a slice's extent, as PyPTO simplifies it
            rest = a.text[len(head):]
            return const(int(rest)) if rest.isdigit() else scalar(rest, ADD, a.runtime or b.runtime)
    p = BIN_PREC[op]
    runtime = a.runtime or b.runtime
    return scalar(f"{wrap(a, p)} {op} {wrap(b, p + 1)}", p, runtime)


def same(a: Val, b: Val) -> bool:
    return text_of(a) == text_of(b) and a.kind == b.kind


class PortError(Exception):
    """One construct that cannot be translated: becomes a diagnostic at ``node``."""

    def __init__(self, code: str, message: str, node: ast.AST, label: str = "", help: str | None = None,
                 cascade: bool = False):
        super().__init__(message)
        self.code, self.message, self.node, self.label, self.help = code, message, node, label, help
        self.cascade = cascade  # follows from an error already reported: a TODO line, no diagnostic


def int_value(v: Val) -> int | None:
    """The integer a value is known to be when traced (a literal, or a fixed symbol)."""
    if is_int(v):
        return v.py
    if v.kind == "scalar" and isinstance(v.py, int) and not isinstance(v.py, bool):
        return v.py
    return None


def py_value(v: Val) -> Any:
    """A trace-time value as plain Python (numbers, strings, nested lists), or raises KeyError."""
    if v.kind == "const":
        return v.py
    if v.kind == "seq":
        return [py_value(i) for i in v.items]
    iv = int_value(v)
    if iv is not None:
        return iv
    raise KeyError(v.kind)


def _from_py(x: Any, node: ast.AST) -> Val:
    if isinstance(x, (list, tuple)):
        return seq([_from_py(i, node) for i in x])
    if isinstance(x, (int, float, bool, str)) or x is None:
        return const(x)
    raise PortError("E1008", "this value has no ptodsl form", node)


def _broadcast(a: Val, b: Val) -> list[Val] | None:
    ta = a if a.kind == "tensor" else None
    tb = b if b.kind == "tensor" else None
    if ta is None or tb is None:
        return (ta or tb).shape if (ta or tb) is not None else None  # type: ignore[union-attr]
    if ta.shape is None or tb.shape is None:
        return None
    longer, shorter = (ta.shape, tb.shape) if len(ta.shape) >= len(tb.shape) else (tb.shape, ta.shape)
    out = list(longer)
    for i in range(1, len(shorter) + 1):
        if is_int(out[-i]) and out[-i].py == 1:
            out[-i] = shorter[-i]
    return out


def _prec(p: int) -> _SetPrec:
    return _SetPrec(p)


class _SetPrec:
    """``val | _prec(p)``: the same value with its text's precedence set."""

    def __init__(self, p: int):
        self.p = p

    def __ror__(self, v: Val) -> Val:
        v.prec = self.p
        return v
