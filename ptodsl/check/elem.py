"""Typing of issue 23's elementwise forms and reduction dims, mixed into the checker's Typer:
``and``/``or``/``not`` on bool tensors (``logical_and``/``logical_or``/``logical_not``), the
three-operand ``clip``, a ``dim=[...]`` list of several axes, and the message for a local that
would take a builtin's name."""

from __future__ import annotations

from .. import sym
from ..diagnostics import Span
from ..dtypes import DTYPE_NAMES
from ..frontend import ast
from ..ops import OPS, OpDef
from .types import CallInfo, DtypeTy, ScalarTy, TensorTy, Ty

E_DIM_LIST = "E0840"  # a `dim` list that is empty or names an axis twice
LOGICAL = {"and": "logical_and", "or": "logical_or", "not": "logical_not"}


class ElemTyping:
    """Needs from the Typer: err, expr, elementwise, scalar_value, const_int, arity and t."""

    # ------------------------------------------------------------ and / or / not
    def bool_op(self, e: ast.BoolOp) -> Ty | None:
        """``a and b``: a scalar condition on scalars, ``logical_and`` on bool tensors."""
        lt, rt = self.expr(e.left), self.expr(e.right)
        if lt is None or rt is None:
            return None
        if isinstance(lt, TensorTy) or isinstance(rt, TensorTy):
            return self.logical(e, e.op, [(e.left, lt), (e.right, rt)])
        a = self.scalar_value(e.left, "a condition", lt)
        b = self.scalar_value(e.right, "a condition", rt)
        if a is None or b is None:
            return None
        self.t.scalar[id(e)] = sym.logical(e.op, a, b)
        return ScalarTy("bool")

    def logical_call(self, e: ast.Call, od: OpDef) -> Ty | None:
        """``logical_and(a, b)`` / ``logical_or(a, b)`` / ``logical_not(a)``."""
        if not self.arity(e, od.name, od.arity):
            return None
        ts = [self.expr(a) for a in e.args]
        if any(t is None for t in ts):
            return None
        spelling = next(k for k, v in LOGICAL.items() if v == od.name)
        return self.logical(e, spelling, list(zip(e.args, ts)), shown=od.name)

    def logical(self, e: ast.Expr, spelling: str, operands: list[tuple[ast.Expr, Ty]],
                shown: str | None = None) -> Ty | None:
        """The logical op of ``spelling`` (and / or / not) on bool tensors; messages name the op
        as ``shown`` (the operator by default)."""
        name = LOGICAL[spelling]
        spelling = shown or spelling
        for x, t in operands:
            if isinstance(t, DtypeTy):
                self.err("E0311", "a dtype is not a value", x.span)
                return None
            if not isinstance(t, TensorTy):
                self.err("E0311", f"`{spelling}` of bool tensors takes no scalar operand", x.span,
                         "this is a scalar",
                         help="combine a tensor mask with a scalar condition by branching on the scalar "
                              "(`if c: ...`) or by comparing tensors only")
                return None
            if t.dtype != "bool":
                self.err("E0307", f"`{spelling}` on tensors takes bool tensors, got {t.dtype}", x.span,
                         f"this is {t.dtype}",
                         help="make a bool tensor with a comparison, e.g. `(x > 0.0) and (x < 1.0)`")
                return None
        if len(operands) == 1:
            _, t = operands[0]
            self.t.call[id(e)] = CallInfo(name)
            return TensorTy("bool", t.shape, t.valid)
        return self.elementwise(e, name, operands)

    # ------------------------------------------------------------ clip
    def ternary(self, e: ast.Call, od: OpDef) -> Ty | None:
        """``clip(x, lo, hi)``: x a tensor, lo and hi tensors that broadcast with it, or scalars."""
        if not self.arity(e, od.name, od.arity):
            return None
        ts = [self.expr(a) for a in e.args]
        if any(t is None for t in ts):
            return None
        if not isinstance(ts[0], TensorTy):
            self.err("E0311", f"`{od.name}` takes a tensor first", e.args[0].span,
                     "this is not a tensor", help=f"write `{od.name}(x, lo, hi)` with `x` a tensor")
            return None
        return self.elementwise(e, od.name, list(zip(e.args, ts)))

    # ------------------------------------------------------------ reduction dims
    def reduction_axes(self, value: ast.Expr, t: TensorTy) -> tuple[int, ...] | None:
        """The axes ``dim=`` names, each in [0, rank): one literal, or a list of them."""
        items = value.items if isinstance(value, ast.ListExpr) else [value]
        if isinstance(value, ast.ListExpr) and not items:
            self.err(E_DIM_LIST, "`dim=[]` names no axis", value.span,
                     help=f"list the axes to reduce, e.g. `dim=[0, {t.rank - 1}]` (torch reduces all of them "
                          "for an empty list, numpy none: say which)")
            return None
        axes: list[int] = []
        for item in items:
            d = self.const_int(item, "`dim`")
            if d is None:
                return None
            if not -t.rank <= d < t.rank:
                self.err("E0308", f"`dim={d}` is out of range for a tensor of rank {t.rank}", item.span,
                         help=f"use a dim in [{-t.rank}, {t.rank - 1}]")
                return None
            if d % t.rank in axes:
                self.err(E_DIM_LIST, f"`dim` names axis {d % t.rank} twice", item.span,
                         "this is the same axis as an earlier entry",
                         help="list each axis once (a negative dim counts from the end)")
                return None
            axes.append(d % t.rank)
        return tuple(sorted(axes))

    # ------------------------------------------------------------ names
    def builtin_name_error(self, name: str, span: Span) -> None:
        """A local named like a builtin: the name would stop meaning the builtin."""
        if name in OPS:
            what = f"`{name}` is the builtin function `{name}(...)`"
            help_ = f"name the local otherwise, e.g. `{name}_` or `x_{name}`; `{name}(...)` stays the builtin"
        elif name in DTYPE_NAMES:
            what = f"`{name}` is a dtype"
            help_ = f"name the local otherwise, e.g. `{name}_`"
        else:
            what = f"`{name}` is reserved"
            help_ = f"name the local otherwise, e.g. `{name}_`"
        self.err("E0316", f"`{name}` is a builtin name and cannot be bound", span, what, help=help_)


__all__ = ["E_DIM_LIST", "LOGICAL", "ElemTyping"]
