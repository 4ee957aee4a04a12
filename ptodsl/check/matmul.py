"""Typing of ``matmul(a, b, trans_a=, trans_b=, out_dtype=, bias=)``: mixed into the checker's Typer.

The operands have rank 2 to 4. Their last two dims multiply (``trans_a``/``trans_b`` swap an
operand's last two); the dims before them are batch dims, broadcast as ``torch.matmul`` does:
aligned from the right, a missing dim or a dim of 1 repeats, other dims must be equal (distinct
symbols are never assumed equal). So a rank-2 operand is one matrix for every batch entry.
The product accumulates on L0C in the dtype of ``MATMUL_ACCUMULATOR`` (f32, or i32 for i8) and is
written out as ``out_dtype``, one of ``MATMUL_OUT`` (an f32 accumulator may be rounded to f16 or
bf16, once, on its way out). ``bias`` is a row of ``n`` values added to every row of the product,
in the accumulator's dtype or the operands' (the cube widens a half-float bias).
"""

from __future__ import annotations

from .. import sym
from ..diagnostics import Label
from ..frontend import ast
from ..ops import MATMUL_ACCUMULATOR, MATMUL_OUT, OpDef
from .types import CallInfo, DtypeTy, TensorTy, Ty

MATMUL_KEYWORDS = ("trans_a", "trans_b", "out_dtype", "bias")
E_OUT_DTYPE = "E0820"
E_BIAS = "E0821"


def _shape_text(shape) -> str:
    return "[" + ", ".join(sym.to_text(s) for s in shape) + "]"


class MatmulTyping:
    """Needs from the Typer: err, expr, arity, dtype_taken, const_bool, ranges and t."""

    def matmul(self, e: ast.Call, od: OpDef) -> Ty | None:
        if not self.arity(e, "matmul", od.arity):
            return None
        a, b = self.expr(e.args[0]), self.expr(e.args[1])
        if a is None or b is None:
            return None
        for x, t in ((e.args[0], a), (e.args[1], b)):
            if not isinstance(t, TensorTy) or not 2 <= t.rank <= 4:
                self.err("E0314", "`matmul` takes tensors of rank 2 to 4", x.span,
                         f"this is {'a tensor of rank ' + str(t.rank) if isinstance(t, TensorTy) else 'not a tensor'}",
                         help="the last two dims are the matrix; the dims before them are a batch")
                return None
        flags = {}
        for k in ("trans_a", "trans_b"):
            kw = e.keyword(k)
            flags[k] = self.const_bool(kw.value, f"`{k}`") if kw else False
            if flags[k] is None:
                return None
        if not self.dtype_taken(od, a.dtype, e.span):
            return None
        if a.dtype != b.dtype:
            self.err("E0303", f"mixed dtypes: {a.dtype} and {b.dtype}", e.span,
                     secondary=[Label(e.args[0].span, f"this is {a.dtype}"), Label(e.args[1].span, f"this is {b.dtype}")],
                     help="cast one operand")
            return None
        acc = MATMUL_ACCUMULATOR[a.dtype]
        out = self._out_dtype(e, a.dtype, acc)
        if out is None:
            return None
        (m, k1), (mv, _) = self._matrix(a, flags["trans_a"])
        (k2, n), (_, nv) = self._matrix(b, flags["trans_b"])
        if k1 != k2:
            self.err("E0314", f"matmul inner dims differ: {sym.to_text(k1)} and {sym.to_text(k2)}", e.span,
                     secondary=[Label(e.args[0].span, f"shape {_shape_text(a.shape)}"),
                                Label(e.args[1].span, f"shape {_shape_text(b.shape)}")],
                     help="the left operand's columns must equal the right operand's rows (see trans_a/trans_b)")
            return None
        batch = self._batch(e, a, b)
        if batch is None:
            return None
        if not self._bias(e, a.dtype, acc, n):
            return None
        self.t.call[id(e)] = CallInfo("matmul", {**flags, "out_dtype": out, "in_dtype": a.dtype})
        shape = (*batch[0], m, n)
        valid = (*batch[1], mv, nv)
        return TensorTy(out, shape, None if valid == shape else valid)

    @staticmethod
    def _matrix(t: TensorTy, trans: bool):
        """(rows, cols) and their valid extents of an operand's matrix, after its transpose."""
        (r, c), (rv, cv) = t.shape[-2:], t.valid_shape[-2:]
        return ((c, r), (cv, rv)) if trans else ((r, c), (rv, cv))

    def _out_dtype(self, e: ast.Call, in_dtype: str, acc: str) -> str | None:
        kw = e.keyword("out_dtype")
        if kw is None:
            return acc
        d = self.expr(kw.value)
        if not isinstance(d, DtypeTy):
            self.err("E0313", "`out_dtype` is a dtype", kw.value.span)
            return None
        allowed = MATMUL_OUT[acc]
        if d.dtype not in allowed:
            self.err(E_OUT_DTYPE, f"a matmul of {in_dtype} cannot give {d.dtype}", kw.value.span,
                     f"the cube accumulates {in_dtype} products in {acc}",
                     help=f"use out_dtype={' or '.join(allowed)}" + (", then cast the result" if d.dtype != acc else ""))
            return None
        return d.dtype

    def _batch(self, e: ast.Call, a: TensorTy, b: TensorTy):
        """The broadcast batch dims and their valid extents, or None after reporting."""
        sa, sb = a.shape[:-2], b.shape[:-2]
        va, vb = a.valid_shape[:-2], b.valid_shape[:-2]
        rank = max(len(sa), len(sb))
        shape: list[sym.Expr] = []
        valid: list[sym.Expr] = []
        for d in range(rank):
            dims = []
            for x, s, v in ((e.args[0], sa, va), (e.args[1], sb, vb)):
                pad = rank - len(s)
                if d >= pad:
                    dims.append((x, s[d - pad], v[d - pad]))
            real = [(x, s, v) for x, s, v in dims if s != 1]
            if not real:
                shape.append(1)
                valid.append(min((v for _, _, v in dims), key=lambda v: 0 if v == 1 else 1))
                continue
            if len(real) == 2 and real[0][1] != real[1][1]:
                self.err("E0304", f"matmul batch dims do not broadcast: {sym.to_text(real[0][1])} and "
                         f"{sym.to_text(real[1][1])}", e.span,
                         secondary=[Label(e.args[0].span, f"shape {_shape_text(a.shape)}"),
                                    Label(e.args[1].span, f"shape {_shape_text(b.shape)}")],
                         help="the dims before the last two are a batch: equal, 1 or missing on one side "
                              "(distinct symbols are never assumed equal)")
                return None
            v = real[0][2]
            for _, _, v2 in real[1:]:
                v = sym.min_(v, v2, self.ranges())
            shape.append(real[0][1])
            valid.append(v)
        return tuple(shape), tuple(valid)

    def _bias(self, e: ast.Call, in_dtype: str, acc: str, n: sym.Expr) -> bool:
        kw = e.keyword("bias")
        if kw is None:
            return True
        t = self.expr(kw.value)
        if t is None:
            return False
        allowed = [acc] + ([in_dtype] if in_dtype != acc and acc == "f32" else [])
        if not isinstance(t, TensorTy) or t.rank != 1 or t.shape[0] != n:
            what = f"shape {_shape_text(t.shape)}" if isinstance(t, TensorTy) else "not a tensor"
            self.err(E_BIAS, f"the bias of a matmul with {sym.to_text(n)} columns is a tensor of shape "
                     f"[{sym.to_text(n)}]", kw.value.span, f"this is {what}",
                     help="one value per column of the product, added to every row")
            return False
        if t.dtype not in allowed:
            self.err(E_BIAS, f"a bias of {t.dtype} for a matmul of {in_dtype}", kw.value.span,
                     f"this is {t.dtype}", notes=[f"the product accumulates in {acc}"],
                     help=f"give the bias as {' or '.join(allowed)}, e.g. `bias=cast(..., {acc})`")
            return False
        return True


__all__ = ["E_BIAS", "E_OUT_DTYPE", "MATMUL_KEYWORDS", "MatmulTyping"]
