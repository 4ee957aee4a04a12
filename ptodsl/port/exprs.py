"""Expressions of a PyPTO kernel, evaluated as PyPTO's tracer would: Python values fold, tensor
and symbolic-scalar expressions become ptodsl text. Mixed into :class:`translate.KernelPort`."""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

from ..diagnostics import did_you_mean
from .mapping import DTYPES, Form, form_of, known_names
from .values import (
    ADD,
    AND,
    ATOM,
    CMP,
    MUL,
    NOT,
    OR,
    POSTFIX,
    UNARY,
    Val,
    binop,
    const,
    is_int,
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
_SCALAR_RESULT = {"is_loop_begin", "is_loop_end", "cdiv"}
_TENSOR_BUILTINS = {"view", "transpose", "reshape", "tensor", "zeros", "ones", "full"}


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


class ExprPort:
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

    # ------------------------------------------------------------ calls
    def call(self, node: ast.Call) -> Val:
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("min", "max", "len", "int", "float", "abs", "range") \
                and f.id not in self.env_names():
            return self.builtin(f.id, node)
        if isinstance(f, ast.Name) and f.id in self.helpers and f.id not in self.env_names():
            return self.inline(f.id, node)
        fv = self.expr(f)
        if fv.kind == "module":
            name = fv.path.rsplit(".", 1)[-1]
            if name == "cond":
                if len(node.args) != 1 or node.keywords:
                    raise PortError("E1007", "`pypto.cond` takes one condition", node)
                return self.expr(node.args[0])
            if name in ("min", "max") and fv.path in ("min", "max"):
                return self.builtin(name, node)
            return self.op_call(name, None, node)
        if fv.kind == "method":
            recv = fv.items[0]
            if recv.kind == "scalar" and fv.text in ("min", "max"):
                return self.builtin(fv.text, node, first=recv)
            return self.op_call(fv.text, recv, node)
        raise PortError("E1008", f"`{ast.unparse(f)}` is not a PyPTO op or a function of this file", f)

    def builtin(self, name: str, node: ast.Call, first: Val | None = None) -> Val:
        args = ([first] if first is not None else []) + [self.expr(a) for a in node.args]
        if name == "len" and len(args) == 1 and args[0].kind in ("seq", "shape"):
            return const(len(args[0].items))
        if name == "range":
            raise PortError("E1003", "`range` is a loop of the trace, not of the kernel", node,
                            help="write `pypto.loop(...)`")
        try:
            vals = [py_value(a) for a in args]
            return _from_py({"min": min, "max": max, "int": int, "float": float, "abs": abs, "len": len}[name](*vals),
                            node)
        except (KeyError, TypeError, ValueError):
            pass
        if name == "min" and len(args) == 2 and all(a.kind in ("scalar", "const") for a in args):
            return Val("min", items=args)
        raise PortError("E1008", f"`{name}(...)` of values the kernel computes has no ptodsl form", node,
                        help="a view's valid shape is clamped to the tensor's end already: leave `min` out"
                        if name in ("min", "max") else None)

    def op_call(self, name: str, recv: Val | None, node: ast.Call) -> Val:
        form = form_of(name)
        if form is None:
            cands = known_names()
            raise PortError("E1002", f"PyPTO op `{name}` has no ptodsl form", node.func,
                            help=(did_you_mean(name, cands) or "see docs/PORTING.md for the ops the port maps")
                            + " (ptodsl/port/mapping.py is the table)")
        args: list[Val] = [recv] if recv is not None else []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.expr(a.value)
                if v.kind not in ("seq", "shape"):
                    raise PortError("E1008", "only a list known when the kernel is traced can be unpacked", a)
                args.extend(v.items)
            else:
                args.append(self.expr(a))
        kws: dict[str, tuple[Val, ast.AST]] = {}
        for k in node.keywords:
            if k.arg is None:
                raise PortError("E1008", "`**kwargs` has no ptodsl form", k.value)
            kws[k.arg] = (self.expr(k.value), k.value)
        for i, pname in enumerate(form.params):  # keywords that name a positional parameter
            if pname in kws and i >= len(args) and i < form.positional:
                if i > len(args):
                    break
                args.append(kws.pop(pname)[0])
        return self.apply(form, name, args, kws, node)

    def apply(self, form: Form, name: str, args: list[Val], kws: dict[str, tuple[Val, ast.AST]],
              node: ast.Call) -> Val:
        out_kws: dict[str, str] = {}  # ptodsl keyword -> text, in the order written
        kw_vals: dict[str, Val] = {}
        if len(args) > form.positional and form.kind == "call" and form.params:
            for pname, v in zip(form.params[form.positional:], args[form.positional:], strict=False):
                kws = {pname: (v, node), **kws}
            args = args[:form.positional]
        for k, (v, where) in kws.items():
            if k in form.ignore:
                want = form.ignore[k]
                got = v.py if v.kind == "const" else v.path.rsplit(".", 1)[-1] if v.kind == "module" else object()
                if got == want:
                    continue
                raise PortError("E1007", f"`{name}` with `{k}=` has no ptodsl form", where,
                                help=f"leave `{k}` out (ptodsl has only `{k}={want}`)")
            kw = form.rename.get(k, k)
            if name == "view" and kw == "valid_shape":
                vs = self.valid_shape(args, v, where)
                if vs is not None:
                    out_kws[kw] = vs
                continue
            text = _arg_text(v)
            if text is None:
                raise PortError("E1007", f"`{k}=` of `{name}` has no ptodsl form", where)
            out_kws[kw] = text
            kw_vals[kw] = v
        for k, fv in form.fill.items():
            if k not in out_kws:
                out_kws[k] = _arg_text(const(fv)) or ""
                kw_vals[k] = const(fv)
        texts = [_arg_text(a) for a in args]
        for t, a in zip(texts, args, strict=True):
            if t is None:
                raise PortError("E1008", f"an argument of `{name}` has no ptodsl form ({a.kind})", node)
        if form.order and len(args) == len(form.order):
            args = [args[i] for i in form.order]
            texts = [texts[i] for i in form.order]
        tensors = [a for a in args if a.kind == "tensor"]
        first = tensors[0] if tensors else None
        if form.kind == "operator":
            if len(args) != 2 or out_kws:
                raise PortError("E1007", f"`{name}` takes two operands here", node)
            p = ADD if form.target in "+-" else MUL if form.target in "*/" else CMP
            text = f"{wrap(args[0], p)} {form.target} {wrap(args[1], p + 1)}"
            if first is None:
                return scalar(text, p)
            return tensor(text, _broadcast(args[0], args[1]), "bool" if p == CMP else first.dtype) | _prec(p)
        if form.kind == "template":
            if len(args) != form.positional:
                raise PortError("E1007", f"`{name}` needs {form.positional} operands to be written in ptodsl", node)
            return tensor(form.target.format(*[wrap(a, MUL) for a in args]), first.shape if first else None,
                          first.dtype if first else None) | _prec(ADD)
        parts = [*texts, *(f"{k}={t}" for k, t in out_kws.items())]
        text = f"{form.target}({', '.join(parts)})"  # type: ignore[arg-type]
        if form.target in _SCALAR_RESULT:
            return scalar(text, POSTFIX)
        return tensor(text, _result_shape(form.target, args, kw_vals, first), _result_dtype(form.target, args, first))

    def valid_shape(self, args: list[Val], v: Val, where: ast.AST) -> str | None:
        """``valid_shape=`` of a view, with PyPTO's clamp to the tensor's end (``min(off + size,
        dim) - off``) left to ptodsl, which clamps every valid shape so; None when nothing is left."""
        if v.kind not in ("seq", "shape") or len(args) < 3:
            raise PortError("E1007", "a valid shape must be a list", where)
        parent, shape, offs = args[0], args[1].items, args[2].items
        out = []
        for axis, e in enumerate(v.items):
            if e.kind == "minsub":
                p, q, r = e.items
                size = shape[axis] if axis < len(shape) else None
                dim = parent.shape[axis] if parent.shape is not None and axis < len(parent.shape) else None
                off = offs[axis] if axis < len(offs) else None
                ok = size is not None and dim is not None and off is not None and text_of(r) == text_of(off) \
                    and {text_of(p), text_of(q)} == {text_of(binop("+", off, size)), text_of(dim)}
                if not ok:
                    raise PortError("E1007", "this valid shape has no ptodsl form", where,
                                    help="ptodsl clamps a view's valid shape to the tensor's end; give the extent "
                                         "without `min`")
                e = size
            t = text_of(e)
            if t is None:
                raise PortError("E1007", "a valid shape entry must be an integer expression", where)
            out.append(t)
        sizes = [text_of(s) for s in shape]
        return None if out == sizes else "[" + ", ".join(out) + "]"


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


def _prec(p: int) -> _SetPrec:
    return _SetPrec(p)


class _SetPrec:
    """``val | _prec(p)``: the same value with its text's precedence set."""

    def __init__(self, p: int):
        self.p = p

    def __ror__(self, v: Val) -> Val:
        v.prec = self.p
        return v


def _arg_text(v: Val) -> str | None:
    if v.kind == "const" and isinstance(v.py, bool):
        return "True" if v.py else "False"
    if v.kind == "const" and isinstance(v.py, str):
        return None
    if v.kind == "shape":
        return "[" + ", ".join(text_of(i) or "?" for i in v.items) + "]"
    return text_of(v)


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


def _result_shape(target: str, args: list[Val], kws: dict[str, Val], first: Val | None) -> list[Val] | None:
    if target in ("view", "zeros", "ones", "full", "tensor", "reshape"):
        shape_arg = args[1] if target in ("view", "full", "reshape") else args[0]
        return list(shape_arg.items) if len(args) > 1 and shape_arg.kind in ("seq", "shape") else None
    if first is None or first.shape is None:
        return None
    if target == "transpose":
        axes = [a.py % len(first.shape) for a in args[1:3] if is_int(a)] if first.shape else []
        if len(axes) != 2:
            return None
        out = list(first.shape)
        out[axes[0]], out[axes[1]] = out[axes[1]], out[axes[0]]
        return out
    dim = kws.get("dim", args[1] if len(args) > 1 else None)
    if target in ("sum", "amax", "amin", "mean") and dim is not None and is_int(dim):
        axis = dim.py % len(first.shape) if first.shape else 0
        keep = kws.get("keepdim", const(False)).py is True
        return [const(1) if i == axis else d for i, d in enumerate(first.shape) if keep or i != axis]
    if target == "matmul" and len(args) == 2 and args[1].shape is not None and len(first.shape) >= 2:
        a, b = first.shape, args[1].shape
        rows = a[-1] if kws.get("trans_a", const(False)).py is True else a[-2]
        cols = b[-2] if kws.get("trans_b", const(False)).py is True else b[-1]
        return [*a[:-2], rows, cols]
    return first.shape


def _result_dtype(target: str, args: list[Val], first: Val | None) -> str | None:
    if target == "cast" and len(args) > 1 and args[1].kind == "dtype":
        return args[1].text
    if target in ("zeros", "ones", "full", "tensor"):
        d = [a for a in args if a.kind == "dtype"]
        return d[0].text if d else None
    return first.dtype if first is not None else None


__all__ = ["ATOM", "ExprPort", "PortError", "int_value", "py_value"]
