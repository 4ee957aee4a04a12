"""Shapes, dtypes and values a kernel is called with, read from a call of it in the same file.

A PyPTO parameter annotated ``pypto.Tensor()`` or ``pypto.Tensor([...], dtype)`` takes its shape
from the tensor passed in, and an ``int``/``tuple``/``bool`` parameter is a value of the trace.
The port finds ``kernel(a, b, out, 128)`` in a function of the file and evaluates the arguments
with a small evaluator of the assignments before the call: numbers, tuples, comparisons,
``math.sqrt(n)``, ``torch.randn(...)``, ``torch.tensor([[...]])``, ``torch.empty(x.shape)``,
``x.shape``, ``x / n``; a branch whose condition it knows runs only its arm. Nothing is imported
or run.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .mapping import DTYPES, TORCH_DTYPES


@dataclass(frozen=True)
class Arg:
    """A tensor argument (``shape``, ``dtype``) or a plain value (``value``)."""

    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    value: Any = None
    is_tensor: bool = False
    values: tuple[float, float] | None = None  # the range of the data, when the call site says it


UNKNOWN = object()


class Record(dict):
    """An instance of a class of the file (a ``@dataclass`` config): its fields by name."""


class _Dynamic:
    """``pypto.DYNAMIC``: a dim bound when the kernel is called."""

    def __repr__(self) -> str:
        return "DYNAMIC"


DYNAMIC = _Dynamic()


@dataclass(frozen=True)
class DtypeName:
    """``pypto.DT_FP32`` seen at a call site: the ptodsl dtype."""

    name: str
_MAKERS = {"randn", "rand", "empty", "zeros", "ones", "full", "randint", "empty_strided"}


def _nested_shape(v: Any) -> tuple[int, ...] | None:
    if isinstance(v, (list, tuple)):
        if not v:
            return (0,)
        inner = {_nested_shape(x) for x in v}
        if len(inner) != 1:
            return None
        sub = inner.pop()
        return None if sub is None else (len(v), *sub)
    return () if isinstance(v, (int, float, bool)) else None


class Evaluator:
    """Evaluates the expressions of one function, given the assignments seen so far."""

    def __init__(self, module_env: dict[str, Any], classes: dict[str, ast.ClassDef] | None = None):
        self.env: dict[str, Any] = dict(module_env)
        self.classes = classes or {}

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, ast.Subscript):
            # `shape[dim] = 1` on a list of the trace; anything else makes it unknown
            base, idx = self.ev(target.value), self.ev(target.slice)
            if isinstance(target.value, ast.Name) and isinstance(base, list):
                if isinstance(idx, int) and not isinstance(idx, bool) and -len(base) <= idx < len(base):
                    base = list(base)  # a copy, as in _list_method
                    base[idx] = value
                    self.env[target.value.id] = base
                else:
                    self.env[target.value.id] = UNKNOWN
        elif isinstance(target, (ast.Tuple, ast.List)):
            seq = value if isinstance(value, (tuple, list)) else None
            for i, t in enumerate(target.elts):
                self.assign(t, seq[i] if seq is not None and i < len(seq) else UNKNOWN)

    def dtype(self, node: ast.expr | None) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
            return TORCH_DTYPES.get(node.attr)
        if isinstance(node, ast.Name):
            v = self.env.get(node.id)
            return v if isinstance(v, str) and v in TORCH_DTYPES.values() else None
        return None

    def ev(self, node: ast.expr) -> Any:  # noqa: C901 - one case per expression form
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.env.get(node.id, UNKNOWN)
        if isinstance(node, (ast.Tuple, ast.List)):
            items = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    v = self.ev(e.value)
                    if not isinstance(v, (tuple, list)):
                        return UNKNOWN
                    items.extend(v)
                else:
                    items.append(self.ev(e))
            return tuple(items) if isinstance(node, ast.Tuple) else list(items)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.ev(node.operand)
            return -v if isinstance(v, (int, float)) else UNKNOWN
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = self.ev(node.operand)
            return not v if _plain(v) else UNKNOWN
        if isinstance(node, (ast.Compare, ast.BoolOp)):
            return _logic(node, self.ev)
        if isinstance(node, ast.BinOp):
            a, b = self.ev(node.left), self.ev(node.right)
            t = a if isinstance(a, Arg) and a.is_tensor else b if isinstance(b, Arg) and b.is_tensor else None
            if t is not None and isinstance(a if t is b else b, (int, float)) and not isinstance(a if t is b else b, bool):
                return Arg(t.shape, t.dtype, is_tensor=True)  # `torch.randn(...) / 4.0`: a tensor of its shape
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                       ast.FloorDiv: lambda: a // b if b else UNKNOWN, ast.Div: lambda: a / b if b else UNKNOWN,
                       ast.Mod: lambda: a % b if b else UNKNOWN}
                f = ops.get(type(node.op))
                return f() if f else UNKNOWN
            if isinstance(a, (tuple, list)) and isinstance(b, int) and isinstance(node.op, ast.Mult) and b < 64:
                return a * b
            return UNKNOWN
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "torch" and node.attr in TORCH_DTYPES:
                return TORCH_DTYPES[node.attr]
            if isinstance(node.value, ast.Name) and node.value.id == "pypto" and node.attr in DTYPES:
                return DtypeName(DTYPES[node.attr])
            if isinstance(node.value, ast.Name) and node.value.id == "pypto" and node.attr == "DYNAMIC":
                return DYNAMIC
            base = self.ev(node.value)
            if isinstance(base, Record):
                return base.get(node.attr, UNKNOWN)
            if isinstance(base, Arg) and base.is_tensor:
                if node.attr == "shape":
                    return base.shape
                if node.attr == "dtype":
                    return base.dtype
            return UNKNOWN
        if isinstance(node, ast.Subscript):
            base, idx = self.ev(node.value), self.ev(node.slice)
            if isinstance(base, (tuple, list)) and isinstance(idx, int) and -len(base) <= idx < len(base):
                return base[idx]
            return UNKNOWN
        if isinstance(node, ast.Call):
            return self.call(node)
        return UNKNOWN

    def call(self, node: ast.Call) -> Any:
        f = node.func
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch":
            dtype = self.dtype(kw.get("dtype")) or "f32"
            if f.attr == "tensor" and node.args:
                data = self.ev(node.args[0])
                shape = _nested_shape(data)
                if shape is None:
                    return UNKNOWN
                if "dtype" not in kw:
                    dtype = "f32" if _has_float(data) else "i64"
                flat = _flat(data)
                rng = (float(min(flat)), float(max(flat))) if flat else None
                return Arg(shape, dtype, is_tensor=True, values=rng)
            if f.attr in _MAKERS:
                args = node.args[2:] if f.attr == "randint" else node.args
                if f.attr == "full":
                    args = node.args[:1]
                if "size" in kw:
                    args = [kw["size"]]
                dims = self._dims(args)
                rng = (0.0, 1.0) if f.attr == "rand" else None
                return UNKNOWN if dims is None else Arg(dims, dtype, is_tensor=True, values=rng)
            if f.attr in ("empty_like", "zeros_like", "ones_like", "randn_like", "rand_like") and node.args:
                base = self.ev(node.args[0])
                if isinstance(base, Arg) and base.is_tensor:
                    return Arg(base.shape, self.dtype(kw.get("dtype")) or base.dtype, is_tensor=True)
            return UNKNOWN
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math" \
                and f.attr in _MATH and len(node.args) == 1 and not node.keywords:
            v = self.ev(node.args[0])
            try:
                return _MATH[f.attr](v) if isinstance(v, (int, float)) and not isinstance(v, bool) else UNKNOWN
            except (ValueError, OverflowError):
                return UNKNOWN
        if isinstance(f, ast.Attribute):
            base = self.ev(f.value)
            if isinstance(base, Arg) and base.is_tensor:
                if f.attr in ("to", "npu", "cpu", "contiguous", "clone", "cuda"):
                    want = self.dtype(node.args[0]) if node.args else self.dtype(kw.get("dtype"))
                    return Arg(base.shape, want or base.dtype, is_tensor=True, values=base.values)
                if f.attr in ("float",):
                    return Arg(base.shape, "f32", is_tensor=True, values=base.values)
                if f.attr in ("half",):
                    return Arg(base.shape, "f16", is_tensor=True, values=base.values)
            return UNKNOWN
        if isinstance(f, ast.Name) and f.id in self.classes:
            return self.record(self.classes[f.id], node)
        if isinstance(f, ast.Name) and f.id in ("int", "float", "tuple", "list") and len(node.args) == 1:
            v = self.ev(node.args[0])
            try:
                return {"int": int, "float": float, "tuple": tuple, "list": list}[f.id](v) if v is not UNKNOWN \
                    else UNKNOWN
            except (TypeError, ValueError):
                return UNKNOWN
        return UNKNOWN

    def record(self, cls: ast.ClassDef, node: ast.Call) -> Any:
        """A dataclass-like instance: its annotated fields, defaults overridden by the call."""
        fields = [st for st in cls.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)]
        rec = Record()
        for st in fields:
            rec[st.target.id] = self.ev(st.value) if st.value is not None else UNKNOWN  # type: ignore[union-attr]
        for st, a in zip(fields, node.args, strict=False):
            rec[st.target.id] = self.ev(a)  # type: ignore[union-attr]
        for k in node.keywords:
            if k.arg is None:
                return UNKNOWN
            rec[k.arg] = self.ev(k.value)
        return rec

    def _dims(self, args: list[ast.expr]) -> tuple[int, ...] | None:
        if len(args) == 1:
            v = self.ev(args[0])
            if isinstance(v, (tuple, list)) and all(isinstance(d, int) for d in v):
                return tuple(v)
            if isinstance(v, int):
                return (v,)
            return None
        vals = [self.ev(a) for a in args]
        return tuple(vals) if vals and all(isinstance(d, int) and not isinstance(d, bool) for d in vals) else None


_MATH = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "ceil": math.ceil, "floor": math.floor}
_CMP = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
        ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
        ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


def _plain(v: Any) -> bool:
    """A value whose truth and comparisons are Python's own (no tensor, no unknown)."""
    if isinstance(v, (tuple, list)):
        return all(_plain(x) for x in v)
    return v is None or isinstance(v, (bool, int, float, str, DtypeName))


def _logic(node: ast.Compare | ast.BoolOp, ev: Callable[[ast.expr], Any]) -> Any:
    """``dim == 0``, ``a and b``: known only when every operand is a plain value."""
    if isinstance(node, ast.BoolOp):
        vals = [ev(v) for v in node.values]
        if not all(_plain(v) for v in vals):
            return UNKNOWN
        out = vals[0]
        for v in vals[1:]:
            out = (out and v) if isinstance(node.op, ast.And) else (out or v)
        return out
    left = ev(node.left)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = ev(right_node)
        f = _CMP.get(type(op))
        if f is None or not _plain(left) or not _plain(right):
            return UNKNOWN
        try:
            if not f(left, right):
                return False
        except TypeError:
            return UNKNOWN
        left = right
    return True


def _flat(v: Any) -> list[float]:
    if isinstance(v, (list, tuple)):
        return [x for i in v for x in _flat(i)]
    return [v] if isinstance(v, (int, float)) and not isinstance(v, bool) else []


def _has_float(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return any(_has_float(x) for x in v)
    return isinstance(v, float)


def module_env(tree: ast.Module) -> dict[str, Any]:
    """Module-level constants (``SHAPE = (2, 4, 8, 64)``), evaluated in order."""
    ev = Evaluator({})
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            v = ev.ev(stmt.value)
            for t in stmt.targets:
                ev.assign(t, v)
    return {k: v for k, v in ev.env.items() if v is not UNKNOWN}
