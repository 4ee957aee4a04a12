"""Calls in a PyPTO kernel: PyPTO ops by the mapping table, Python builtins on values of the
trace, helpers of the file (inlined). Mixed into :class:`exprs.ExprPort`."""

from __future__ import annotations

import ast

from ..diagnostics import did_you_mean
from .mapping import Form, form_of, known_names
from .values import (
    ADD,
    CMP,
    MUL,
    POSTFIX,
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
    tensor,
    text_of,
    wrap,
)

_SCALAR_RESULT = {"is_loop_begin", "is_loop_end", "cdiv"}


class CallPort:
    """Needs from the translator: ``expr``, ``env_names``, ``helpers``, ``inline``."""

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
        if form.target == "transpose":
            # its axes are literals in ptodsl: an `int` parameter the call fixes is folded to its value
            args = [args[0], *(const(int_value(a)) if int_value(a) is not None else a for a in args[1:])]
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
        dim) - off`` or ``min(dim - off, size)``) left to ptodsl, which clamps every valid shape so; None when nothing is left."""
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
            elif e.kind == "min" and len(e.items) == 2:
                # `(dim - off).min(size)`: the same clamp, written the other way round
                size = shape[axis] if axis < len(shape) else None
                dim = parent.shape[axis] if parent.shape is not None and axis < len(parent.shape) else None
                off = offs[axis] if axis < len(offs) else None
                if size is None or dim is None or off is None or \
                        {text_of(i) for i in e.items} != {text_of(binop("-", dim, off)), text_of(size)}:
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


def _arg_text(v: Val) -> str | None:
    if v.kind == "const" and isinstance(v.py, bool):
        return "True" if v.py else "False"
    if v.kind == "const" and isinstance(v.py, str):
        return None
    if v.kind == "shape":
        return "[" + ", ".join(text_of(i) or "?" for i in v.items) + "]"
    return text_of(v)


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
