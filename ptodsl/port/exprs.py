"""Expressions of a PyPTO kernel, evaluated as PyPTO's tracer would: Python values fold, tensor
and symbolic-scalar expressions become ptodsl text. Mixed into :class:`translate.KernelPort`."""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

from .calls import CallPort
from .mapping import DTYPES
from .values import (
    ADD,
    AND,
    CMP,
    MUL,
    NOT,
    OR,
    POSTFIX,
    UNARY,
    PortError,
    Val,
    _broadcast,
    _from_py,
    _prec,
    binop,
    const,
    int_value,
    is_int,
    py_value,
    scalar,
    seq,
    tensor,
    text_of,
    wrap,
)

_PY_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}
_PY_FOLD = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
            ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_PY_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_CMP_FOLD = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
             ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not}

class ExprPort(CallPort):
    """Needs from the kernel translator: ``lookup``, ``mark_read``, ``inline``, ``helpers``,
    ``module_env``."""

    def expr(self, node: ast.expr) -> Val:  # noqa: C901 - one case per expression form
        if isinstance(node, ast.Constant):
            if isinstance(node.value, float) and not math.isfinite(node.value):
                raise PortError("E1008", "a number that is not finite has no ptodsl form", node)
            if isinstance(node.value, (int, float, bool, str)) or node.value is None:
                return const(node.value)
            raise PortError("E1008", "a constant of this type has no ptodsl form", node)
        if isinstance(node, ast.Name):
            return self.lookup(node.id, node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, (ast.List, ast.Tuple)):
            items: list[Val] = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    v = self.expr(e.value)
                    if v.kind not in ("seq", "shape"):
                        raise PortError("E1008", "only a list known when the kernel is traced can be unpacked", e)
                    items.extend(v.items)
                else:
                    items.append(self.expr(e))
            return seq(items)
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        if isinstance(node, ast.UnaryOp):
            return self.unary(node)
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.BoolOp):
            vals = [self.expr(v) for v in node.values]
            if all(v.kind == "const" for v in vals):
                out = vals[0].py
                for v in vals[1:]:
                    out = (out and v.py) if isinstance(node.op, ast.And) else (out or v.py)
                return const(out)
            word, p = ("and", AND) if isinstance(node.op, ast.And) else ("or", OR)
            return scalar(f" {word} ".join(wrap(v, p + 1) for v in vals), p)
        if isinstance(node, ast.IfExp):
            test = self.expr(node.test)
            if test.kind == "const":
                return self.expr(node.body if test.py else node.orelse)
            raise PortError("E1008", "a conditional expression on a value the kernel computes has no ptodsl form",
                            node, help="write an `if` statement")
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        what = type(node).__name__.lower()
        raise PortError("E1008", f"this Python expression ({what}) has no ptodsl form", node,
                        help="compute it outside the kernel and pass it in")

    # ------------------------------------------------------------ attributes and names
    def attribute(self, node: ast.Attribute) -> Val:
        base = self.expr(node.value) if not isinstance(node.value, ast.Name) else \
            self.lookup(node.value.id, node.value, mark=False)
        if base.kind == "module":
            path = f"{base.path}.{node.attr}" if base.path else node.attr
            if node.attr in DTYPES:
                return Val("dtype", text=DTYPES[node.attr])
            return Val("module", path=path)
        if base.kind == "tensor":
            if node.attr == "shape":
                if base.shape is None:
                    raise PortError("E1005", f"the shape of `{ast.unparse(node.value)}` is not known here", node)
                return Val("shape", items=list(base.shape))
            if node.attr == "dtype":
                if base.dtype is None:
                    raise PortError("E1005", f"the dtype of `{ast.unparse(node.value)}` is not known here", node)
                return Val("dtype", text=base.dtype)
            if isinstance(node.value, ast.Name):
                self.mark_read(node.value.id)
            return Val("method", text=node.attr, items=[base])
        if base.kind == "record" and node.attr in base.py:
            from .callsite import UNKNOWN
            from .signature import _py

            if base.py[node.attr] is UNKNOWN:
                raise PortError("E1005", f"`{ast.unparse(node)}` is not known from the call of the kernel", node)
            return _py(base.py[node.attr])
        if base.kind == "scalar" and node.attr in ("min", "max"):
            return Val("method", text=node.attr, items=[base])
        raise PortError("E1008", f"`{ast.unparse(node)}` is not known when the kernel is traced", node,
                        help="pass the value as a parameter, or write it as a literal")

    # ------------------------------------------------------------ operators
    def binary(self, node: ast.BinOp) -> Val:
        a, b = self.expr(node.left), self.expr(node.right)
        fold = _PY_FOLD.get(type(node.op))
        try:
            pa, pb = py_value(a), py_value(b)
            if fold is not None and (a.kind != "scalar" and b.kind != "scalar") and _cheap(node.op, pa, pb):
                return _from_py(fold(pa, pb), node)
        except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError):
            pass
        if a.kind == "minsub" or b.kind == "minsub" or "min" in (a.kind, b.kind):
            if a.kind == "min" and isinstance(node.op, ast.Sub) and b.kind in ("scalar", "const"):
                return Val("minsub", items=[*a.items, b])
            raise PortError("E1008", "`min`/`max` of values the kernel computes has no ptodsl form", node,
                            help="a view's valid shape is clamped to the tensor's end already: leave `min` out")
        op = _PY_BIN.get(type(node.op))
        if op is None:
            raise PortError("E1008", f"the operator `{ast.unparse(node)[len(ast.unparse(node.left)):].split()[0]}` "
                                     "has no ptodsl form for these operands", node,
                            help="write `x * x` for a square, `matmul(a, b)` for a product")
        for v, side in ((a, node.left), (b, node.right)):
            if text_of(v) is None or v.kind in ("dtype", "seq"):
                raise PortError("E1008", f"`{ast.unparse(side)}` is not a number, scalar or tensor", side)
        if a.kind == "tensor" or b.kind == "tensor":
            if op in ("//", "%"):
                raise PortError("E1002", f"`{op}` on tensors has no ptodsl form", node)
            t = a if a.kind == "tensor" else b
            other = b if t is a else a
            shape = t.shape if other.kind != "tensor" else _broadcast(a, b)
            p = ADD if op in "+-" else MUL
            return tensor(f"{wrap(a, p)} {op} {wrap(b, p + 1)}", shape, t.dtype) | _prec(p)
        return binop(op, a, b)

    def unary(self, node: ast.UnaryOp) -> Val:
        v = self.expr(node.operand)
        if v.kind == "const" and not isinstance(v.py, str):
            try:
                return const({ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                              ast.Invert: operator.invert}[type(node.op)](v.py))
            except (KeyError, TypeError):
                pass
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub) and v.kind in ("tensor", "scalar"):
            out = Val(v.kind, text=f"-{wrap(v, UNARY)}", prec=UNARY, shape=v.shape, dtype=v.dtype, runtime=v.runtime)
            return out
        if isinstance(node.op, ast.Not) and v.kind == "scalar":
            return scalar(f"not {wrap(v, NOT)}", NOT, v.runtime)
        raise PortError("E1008", "this unary operator has no ptodsl form here", node)

    def compare(self, node: ast.Compare) -> Val:
        if len(node.ops) != 1:
            raise PortError("E1008", "a chained comparison has no ptodsl form", node, help="write `a < b and b < c`")
        a, b = self.expr(node.left), self.expr(node.comparators[0])
        op = type(node.ops[0])
        if a.kind == "const" and b.kind == "const" and op in _CMP_FOLD:
            return const(_CMP_FOLD[op](a.py, b.py))
        if op in (ast.Is, ast.IsNot) and (a.kind == "const" or b.kind == "const"):
            none_side = a if a.kind == "const" else b
            if none_side.py is None:  # a tensor or scalar is never None
                return const(op is ast.IsNot)
        sym = _PY_CMP.get(op)
        if sym is None or text_of(a) is None or text_of(b) is None:
            raise PortError("E1008", "this comparison has no ptodsl form", node)
        kind = "tensor" if "tensor" in (a.kind, b.kind) else "scalar"
        return Val(kind, text=f"{wrap(a, CMP + 1)} {sym} {wrap(b, CMP + 1)}", prec=CMP,
                   shape=(a if a.kind == "tensor" else b).shape, dtype="bool", runtime=a.runtime or b.runtime)

    # ------------------------------------------------------------ subscripts
    def subscript(self, node: ast.Subscript) -> Val:
        base = self.expr(node.value)
        if base.kind in ("seq", "shape"):
            idx = self.expr(node.slice) if not isinstance(node.slice, ast.Slice) else None
            if idx is not None and is_int(idx) and -len(base.items) <= idx.py < len(base.items):
                return base.items[idx.py]
            if isinstance(node.slice, ast.Slice):
                parts = [self.expr(p) if p is not None else const(None)
                         for p in (node.slice.lower, node.slice.upper, node.slice.step)]
                try:
                    return seq(base.items[slice(*[py_value(p) for p in parts])])
                except (KeyError, TypeError, ValueError):
                    pass
            raise PortError("E1008", "this index of a list is not known when the kernel is traced", node.slice)
        if base.kind != "tensor":
            raise PortError("E1008", f"`{ast.unparse(node.value)}` cannot be indexed", node.value)
        text, shape, element = self.region(base, node.slice, node)
        if element:
            return scalar(f"{wrap(base, POSTFIX)}[{text}]", POSTFIX, runtime=True)
        return tensor(f"{wrap(base, POSTFIX)}[{text}]", shape, base.dtype) | _prec(POSTFIX)

    def region(self, base: Val, index: ast.expr, node: ast.AST) -> tuple[str, list[Val] | None, bool]:
        """The ptodsl index text of ``base[index]``, the region's shape when known, and whether it
        reads one element (every index an integer, as many as the dims)."""
        elts = list(index.elts) if isinstance(index, ast.Tuple) else [index]
        n_ell = sum(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts)
        if n_ell > 1:
            raise PortError("E1008", "an index with two `...` has no meaning", index)
        if n_ell:
            if base.rank is None:
                raise PortError("E1005", "`...` needs the tensor's rank, which is not known here", index)
            at = next(i for i, e in enumerate(elts) if isinstance(e, ast.Constant) and e.value is Ellipsis)
            fill = base.rank - (len(elts) - 1)
            if fill < 0:
                raise PortError("E1008", "more indices than the tensor has dims", index)
            elts = elts[:at] + [ast.Slice(None, None, None)] * fill + elts[at + 1:]
        parts, shape, element = [], [], True
        for axis, e in enumerate(elts):
            dim = base.shape[axis] if base.shape is not None and axis < len(base.shape) else None
            if isinstance(e, ast.Slice):
                element = False
                if e.step is not None:
                    raise PortError("E1007", "a slice with a step has no ptodsl form", e)
                lo = self.expr(e.lower) if e.lower is not None else None
                hi = self.expr(e.upper) if e.upper is not None else None
                for v, sub in ((lo, e.lower), (hi, e.upper)):
                    if v is not None and (v.kind not in ("const", "scalar") or text_of(v) is None):
                        raise PortError("E1008", "a slice bound must be an integer expression", sub)
                lo_t = "" if lo is None or (is_int(lo) and lo.py == 0) else text_of(lo)
                hi_t = "" if hi is None else text_of(hi)
                parts.append(f"{lo_t}:{hi_t}")
                stop = hi if hi is not None else dim
                shape.append(None if stop is None else (binop("-", stop, lo) if lo is not None else stop))
            else:
                v = self.expr(e)
                if v.kind not in ("const", "scalar") or text_of(v) is None:
                    raise PortError("E1008", "an index must be an integer expression or a slice", e)
                parts.append(text_of(v))  # type: ignore[arg-type]
                shape.append(const(1))
        if base.rank is not None:
            element = element and len(elts) == base.rank
            shape += list(base.shape[len(elts):]) if base.shape is not None else []
        known = None if None in shape else shape
        return ", ".join(parts), known, element


def _cheap(op: ast.operator, a: Any, b: Any) -> bool:
    """Whether folding ``a op b`` at port time is bounded: no huge powers or repeated lists
    (the source is untrusted; the port must not hang or fill memory on it)."""
    if isinstance(op, ast.Pow):
        return isinstance(b, (int, float)) and abs(b) <= 64 and (not isinstance(a, int) or abs(a) < 2**32)
    if isinstance(op, ast.Mult) and isinstance(a, (list, tuple, str)) != isinstance(b, (list, tuple, str)):
        seq_, n = (a, b) if isinstance(a, (list, tuple, str)) else (b, a)
        return isinstance(n, int) and len(seq_) * max(n, 0) <= 4096
    if isinstance(op, ast.Mult) and isinstance(a, int) and isinstance(b, int):
        return a.bit_length() + b.bit_length() <= 4096
    return True


__all__ = ["ExprPort", "PortError", "int_value", "py_value"]
