"""Textual form of the IR. ``parse(print_module(m))`` rebuilds m, and printing it again gives the
same text (tests assert this after every pass)."""

from __future__ import annotations

import json
from typing import Any

from .. import sym
from ..diagnostics import Span
from .core import Func, Module, Op, Param, TensorType, TileType, Type

INDENT = "  "


def format_attr(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    return sym.to_text(v)


def format_dims(dims) -> str:
    return "[" + ", ".join(sym.to_text(d) for d in dims) + "]"


def format_type(t: Type) -> str:
    if isinstance(t, TensorType):
        valid = "" if t.valid is None else f" valid {format_dims(t.valid)}"
        return f"tensor<{t.dtype} {format_dims(t.shape)}{valid}>"
    if isinstance(t, TileType):
        return f"tile<{t.space} {t.dtype} {format_dims(t.shape)} valid {format_dims(t.valid)}>"
    raise TypeError(t)


def format_loc(span: Span | None) -> str:
    if span is None:
        return ""
    return f" loc({json.dumps(span.file)}:{span.line}:{span.col}:{span.end_line}:{span.end_col})"


def format_attrs(attrs: dict[str, Any]) -> str:
    if not attrs:
        return ""
    return " {" + ", ".join(f"{k} = {format_attr(v)}" for k, v in attrs.items()) + "}"


def _op_lines(op: Op, depth: int) -> list[str]:
    pad = INDENT * depth
    head = ""
    if op.results:
        head = ", ".join(f"%{r.name}" for r in op.results) + " = "
    text = f"{pad}{head}{op.name}({', '.join(f'%{v.name}' for v in op.operands)}){format_attrs(op.attrs)}"
    if op.results:
        text += " : " + ", ".join(format_type(r.type) for r in op.results)
    lines = [text]
    for region in op.regions:
        lines[-1] += " region {"
        for inner in region:
            lines.extend(_op_lines(inner, depth + 1))
        lines.append(f"{pad}}}")
    lines[-1] += format_loc(op.span)
    return lines


def format_param(p: Param) -> str:
    if p.type is None:
        return f"{p.name}: {p.dtype}"
    mode = "" if p.mode == "in" else f" {p.mode}"
    return f"%{p.name}: {format_type(p.type)}{mode}"


def _func_lines(f: Func, depth: int) -> list[str]:
    pad = INDENT * depth
    params = ", ".join(format_param(p) for p in f.params)
    attrs = f" attributes{format_attrs(f.attrs)}" if f.attrs else ""
    lines = [f"{pad}{f.kind} @{f.name}({params}){attrs}{format_loc(f.span)} {{"]
    for op in f.body:
        lines.extend(_op_lines(op, depth + 1))
    lines.append(f"{pad}}}")
    return lines


def print_module(m: Module) -> str:
    attrs = f" attributes{format_attrs(m.attrs)}" if m.attrs else ""
    lines = [f"module @{m.name} level {m.level}{attrs} {{"]
    for f in m.funcs:
        lines.extend(_func_lines(f, 1))
    lines.append("}")
    return "\n".join(lines) + "\n"


def print_op(op: Op) -> str:
    return "\n".join(_op_lines(op, 0))
