"""Typing of the language's builtin calls: elementwise ops from the op table, reductions, casts,
views, local tensors and the loop predicates (matmul: ``matmul.py``). Mixed into the checker's Typer."""

from __future__ import annotations

from collections.abc import Sequence

from .. import sym
from ..diagnostics import Label, did_you_mean
from ..dtypes import DTYPES
from ..frontend import ast
from ..ops import INDEXING, OPS, SCALAR_BUILTINS, STRUCTURE_BUILTINS, OpDef
from .layout import LAYOUT_BUILTINS, LAYOUT_KEYWORDS
from .matmul import MATMUL_KEYWORDS, MatmulTyping
from .paths import loop_conditions
from .types import INDEX, CallInfo, DtypeTy, ScalarTy, TensorTy, Ty

CALL_KEYWORDS: dict[str, tuple[str, ...]] = {
    **{name: ("dim", "keepdim") for name, od in OPS.items() if od.kind == "reduce"},
    "matmul": MATMUL_KEYWORDS, "cast": ("mode",), "view": ("valid_shape",),
    "loop": ("name",), "loop_unroll": ("name",), **LAYOUT_KEYWORDS,
    **{name: io.keywords for name, io in INDEXING.items()},
}
CAST_MODES = ("rint", "round", "floor", "ceil", "trunc")
ELEMENTWISE_EXTREME = {"min": "minimum", "max": "maximum"}


def is_float(dtype: str) -> bool:
    return DTYPES[dtype].is_float if dtype in DTYPES else False


def fmt_shape(shape: Sequence[sym.Expr]) -> str:
    return "[" + ", ".join(sym.to_text(s) for s in shape) + "]"


class CallTyping(MatmulTyping):
    """Needs from the Typer: err, expr, elementwise, scalar_value, dim_list, const_int, const_bool,
    make_view, ranges and loop_stack."""

    def unknown_keyword(self, fn: str, kw: ast.Keyword) -> None:
        allowed = CALL_KEYWORDS.get(fn, ())
        self.err("E0302", f"`{fn}` has no keyword `{kw.name}`", kw.span,
                 help=did_you_mean(kw.name, allowed) or (f"it takes {', '.join(allowed)}" if allowed else
                                                         f"`{fn}` takes no keywords"))

    def dtype_taken(self, od: OpDef, dtype: str, span) -> bool:
        """Whether ``od`` is defined on ``dtype``; reports E0307 when it is not."""
        if od.takes(dtype):
            return True
        if all(is_float(d) for d in od.dtypes):
            self.err("E0307", f"`{od.name}` needs a float tensor, got {dtype}", span, help="cast first: `cast(x, f32)`")
        elif od.dtypes == ("bool",):
            self.err("E0307", f"`{od.name}` takes bool tensors, got {dtype}", span,
                     help="make a bool tensor with a comparison, e.g. `x > 0.0`")
        else:
            to = "i32" if "i32" in od.dtypes else od.dtypes[0]
            self.err("E0307", f"`{od.name}` takes {', '.join(od.dtypes)} tensors, got {dtype}", span,
                     help=f"cast first: `cast(x, {to})`")
        return False

    def arity(self, e: ast.Call, fn: str, lo: int, hi: int | None = None) -> bool:
        hi = lo if hi is None else hi
        n = len(e.args)
        if not lo <= n <= hi:
            want = f"{lo}" if lo == hi else f"{lo} to {hi}"
            self.err("E0302", f"`{fn}` takes {want} positional argument{'s' if hi != 1 else ''}, got {n}", e.span,
                     help="see `ptodsl explain E0302` for the signatures")
            return False
        allowed = CALL_KEYWORDS.get(fn, ())
        ok = True
        for kw in e.keywords:
            if kw.name not in allowed:
                self.unknown_keyword(fn, kw)
                ok = False
        return ok

    def call(self, e: ast.Call, bind_name: str | None) -> Ty | None:
        fn = e.func_name
        if fn is None:
            if isinstance(e.func, ast.Attribute) and e.func.attr in ("move", "assemble"):
                self.err("E0311", f"`{e.func.attr}` writes a tensor and gives no value", e.span,
                         help=f"use it as a statement: `t.{e.func.attr}(...)`")
            else:
                self.err("E0301", "only builtins can be called", e.func.span)
            return None
        if fn in ("loop", "loop_unroll"):
            self.err("E0502", f"`{fn}` only appears in a `for` statement", e.span, help=f"write `for i in {fn}(...):`")
            return None
        if fn in ("is_loop_begin", "is_loop_end"):
            return self.loop_predicate(e, fn)
        if fn == "print":
            self.err("E0311", "`print` gives no value", e.span, help="use it as a statement")
            return None
        if fn == "cdiv":
            return self.cdiv_call(e)
        if fn in ("min", "max"):
            return self.scalar_extreme(e, fn)
        if fn == "view":
            return self.view_call(e)
        if fn in ("tensor", "zeros", "ones", "full"):
            return self.local_tensor(e, fn)
        if fn in INDEXING:
            return self.index_call(e, fn, bind_name)
        if fn in LAYOUT_BUILTINS:
            return self.layout_call(e, fn)
        od = OPS.get(fn)
        if od is None or fn == "cmp":
            cands = [n for n in OPS if n != "cmp"] + list(SCALAR_BUILTINS) + list(STRUCTURE_BUILTINS) + list(INDEXING)
            self.err("E0301", f"unknown function `{fn}`", e.func.span,
                     help=did_you_mean(fn, cands) or "see docs/LANGUAGE.md §1.3 for the builtins")
            for a in e.args:
                self.expr(a)
            return None
        if od.dtypes == ("bool",) and od.kind in ("unary", "binary"):
            return self.logical_call(e, od)
        if od.kind == "unary":
            t = self.tensor_arg(e, od)
            return None if t is None else self.elementwise(e, fn, [(e.args[0], t)])
        if od.kind == "ternary":
            return self.ternary(e, od)
        if od.kind == "binary":
            if not self.arity(e, fn, od.arity):
                return None
            ts = [self.expr(a) for a in e.args]
            if any(t is None for t in ts):
                return None
            if all(isinstance(t, ScalarTy) for t in ts):
                return self.scalar_binary(e, fn, ts)
            return self.elementwise(e, fn, list(zip(e.args, ts)))
        if od.kind == "select":
            if not self.arity(e, fn, od.arity):
                return None
            ts = [self.expr(a) for a in e.args]
            if any(t is None for t in ts):
                return None
            c = ts[0]
            if not (isinstance(c, TensorTy) and c.dtype == "bool"):
                self.err("E0303", "the condition of `where` must be a bool tensor", e.args[0].span,
                         help="compare tensors: `where(x > 0, x, y)`")
                return None
            if all(isinstance(t, ScalarTy) for t in ts[1:]):
                return self.where_of_scalars(e, c, ts[1:])
            res = self.elementwise(e, "where", list(zip(e.args[1:], ts[1:])))
            if not isinstance(res, TensorTy):
                return None
            full = self.elementwise(e, "where", [(e.args[0], TensorTy(res.dtype, c.shape, c.valid)), (e, res)])
            return full
        if od.kind == "reduce":
            return self.reduction(e, od)
        if od.kind == "cast":
            return self.cast(e)
        if od.kind == "matmul":
            return self.matmul(e, od)
        return None

    def scalar_binary(self, e: ast.Call, fn: str, ts: list) -> Ty | None:
        """``maximum``/``minimum`` of two scalars is a scalar (an offset clamped with
        ``maximum(blk, 0)``); other binary ops take a tensor."""
        if fn not in ("maximum", "minimum"):
            self.err("E0311", f"`{fn}` takes a tensor", e.span, help="write scalar arithmetic with operators")
            return None
        a, b = (self.t.scalar.get(id(x)) for x in e.args)
        if a is not None and b is not None:
            self.t.scalar[id(e)] = sym.max_(a, b) if fn == "maximum" else sym.min_(a, b)
        lt, rt = ts
        if lt.ratio or rt.ratio:  # a true quotient of integers: a float, as in Python
            return ScalarTy("f32", weak=lt.weak and rt.weak, ratio=True)
        dtype = lt.dtype if not lt.weak else rt.dtype if not rt.weak else (
            "f32" if is_float(lt.dtype) or is_float(rt.dtype) else INDEX)
        return ScalarTy(dtype, weak=lt.weak and rt.weak)

    def where_of_scalars(self, e: ast.Call, cond: TensorTy, arms: list) -> Ty | None:
        """``where(c, a, b)`` with two scalar arms: a tensor of the condition's shape. A typed arm
        (a scalar parameter, a value read from a tensor) gives its dtype; two literals give f32
        when either is a float, else i32 (the tensor dtype an integer literal takes)."""
        strong = [(a, t) for a, t in zip(e.args[1:], arms) if not t.weak]
        if len({t.dtype for _, t in strong}) > 1:
            (a0, t0), (a1, t1) = strong
            self.err("E0303", f"mixed dtypes: {t0.dtype} and {t1.dtype}", e.span,
                     secondary=[Label(a0.span, f"this is {t0.dtype}"), Label(a1.span, f"this is {t1.dtype}")],
                     help=f"convert one side, e.g. `cast(..., {t0.dtype})`")
            return None
        if strong:
            dtype = strong[0][1].dtype
        elif all(t.dtype == "bool" for t in arms):
            dtype = "bool"
        else:
            dtype = "f32" if any(is_float(t.dtype) for t in arms) else "i32"
        return self.elementwise(e, "where", [(e.args[0], TensorTy(dtype, cond.shape, cond.valid)),
                                             *zip(e.args[1:], arms)])

    def cdiv_call(self, e: ast.Call) -> Ty | None:
        """``cdiv(a, b)``: the number of blocks of ``b`` that cover ``a`` (ceiling division)."""
        if not self.arity(e, "cdiv", 2):
            return None
        vals = [self.int_value(a, "an argument of `cdiv`") for a in e.args]
        if any(v is None for v in vals):
            return None
        a, b = vals
        if sym.is_const(b) and b == 0:
            self.err("E0340", "division by zero", e.args[1].span, "this is 0", help="divide by a non-zero value")
            return None
        self.t.scalar[id(e)] = sym.ceildiv(a, b)
        tys = [self.t.ty.get(id(x)) for x in e.args]
        return ScalarTy(INDEX, weak=all(isinstance(t, ScalarTy) and t.weak for t in tys))

    def scalar_extreme(self, e: ast.Call, fn: str) -> Ty | None:
        """``min(a, b, ...)`` / ``max(a, b, ...)`` of scalars: a length clipped to a tile
        (``min(cur_seq - s2 * S2T, S2T)``), an index kept inside a table (``max(block_table[b, j], 0)``).
        The result is an integer when every argument is one, so it may bound a loop or a view."""
        if len(e.args) < 2 or e.keywords:
            self.err("E0302", f"`{fn}` takes two or more scalars", e.span,
                     help=f"write `{fn}(a, b)`" + (f"; for tensors, `{ELEMENTWISE_EXTREME[fn]}(a, b)`" if e.args else ""))
            for a in e.args:
                self.expr(a)
            return None
        tys = [self.expr(a) for a in e.args]
        if any(t is None for t in tys):
            return None
        for a, t in zip(e.args, tys):
            if not isinstance(t, ScalarTy):
                self.err("E0311", f"`{fn}` takes scalars", a.span,
                         "this is a tensor" if isinstance(t, TensorTy) else "this is a dtype",
                         help=f"for the elementwise {fn}imum of tensors, write `{ELEMENTWISE_EXTREME[fn]}(a, b)`")
                return None
        values = [self.t.scalar.get(id(a)) for a in e.args]
        if all(v is not None for v in values):
            r = self.ranges()
            v = values[0]
            for x in values[1:]:
                v = sym.min_(v, x, r) if fn == "min" else sym.max_(v, x, r)
            self.t.scalar[id(e)] = v
        weak = all(t.weak for t in tys)
        if all(not is_float(t.dtype) or t.ratio for t in tys):
            if any(t.ratio for t in tys):
                return ScalarTy("f32", weak=weak, ratio=True)
            return ScalarTy(next((t.dtype for t in tys if not t.weak), INDEX), weak=weak)
        return ScalarTy(next((t.dtype for t in tys if not t.weak and is_float(t.dtype)), "f32"), weak=weak)

    def loop_predicate(self, e: ast.Call, fn: str) -> Ty | None:
        if len(e.args) != 1 or e.keywords or not isinstance(e.args[0], ast.Name):
            self.err("E0506", f"`{fn}` takes a loop index", e.span, help=f"write `{fn}(i)` inside `for i in loop(...)`")
            return None
        name = e.args[0].id
        lp = next((lp for lp in reversed(self.loop_stack) if lp.index == name), None)
        if lp is None:
            self.err("E0506", f"`{name}` is not the index of an enclosing loop", e.args[0].span,
                     help=f"`{fn}` tells the first/last iteration of a loop; pass that loop's index")
            return None
        # the paths pass recognises these conditions by equality, so both come from one function
        _, _, _, is_begin, is_end = loop_conditions(name, lp.start, lp.stop, lp.step)
        cond = is_begin if fn == "is_loop_begin" else is_end
        self.t.scalar[id(e)] = cond
        self.t.call[id(e)] = CallInfo(fn, {"loop": lp.name})
        return ScalarTy("bool")

    def view_call(self, e: ast.Call) -> Ty | None:
        if not self.arity(e, "view", 2, 3):
            return None
        bt = self.expr(e.args[0])
        if bt is None:
            return None
        if not isinstance(bt, TensorTy):
            self.err("E0311", "`view` takes a tensor", e.args[0].span)
            return None
        shape = self.dim_list(e.args[1], "the view shape")
        offsets = self.dim_list(e.args[2], "the view offsets") if len(e.args) > 2 else tuple(0 for _ in bt.shape)
        if shape is None or offsets is None:
            return None
        for what, dims, node in (("shape", shape, e.args[1]), ("offsets", offsets, e.args[2] if len(e.args) > 2 else e)):
            if len(dims) != bt.rank:
                self.err("E0310", f"view {what} has rank {len(dims)}, the tensor has rank {bt.rank}", node.span,
                         help=f"give {bt.rank} entries")
                return None
        for axis, (s, o, d) in enumerate(zip(shape, offsets, bt.shape)):
            if sym.is_const(s) and s <= 0:
                self.err("E0310", f"view dim {axis} is {s}; dims must be positive", e.args[1].span)
                return None
            if all(sym.is_const(x) for x in (s, o, d)) and o + s > d:
                self.err("E0310", f"view runs past the tensor on dim {axis}: offset {o} + size {s} > {d}",
                         e.span, help="shrink the view or its offset")
                return None
            if not all(sym.is_const(x) for x in (s, d)) and sym.is_const(sym.sub(d, s)) and sym.sub(d, s) < 0:
                self.err("E0310", f"view dim {axis} ({sym.to_text(s)}) is larger than the tensor's "
                         f"({sym.to_text(d)})", e.args[1].span)
                return None
        valid = None
        kw = e.keyword("valid_shape")
        if kw is not None:
            valid = self.dim_list(kw.value, "the valid shape")
            if valid is None:
                return None
            if len(valid) != len(shape):
                self.err("E0310", f"valid shape has rank {len(valid)}, the view has rank {len(shape)}",
                         kw.value.span, help=f"give {len(shape)} dims")
                return None
            for axis, (v, s) in enumerate(zip(valid, shape)):
                if sym.is_const(v) and sym.is_const(s) and not 0 <= v <= s:
                    self.err("E0310", f"valid dim {axis} is {v}, outside [0, {s}]", kw.value.items[axis].span,
                             help="a valid extent lies between 0 and the view's dim")
                    return None
        return self.make_view(e, e.args[0], bt, offsets, shape, valid)

    def local_tensor(self, e: ast.Call, fn: str) -> Ty | None:
        n = 3 if fn == "full" else 2
        if not self.arity(e, fn, n):
            return None
        args = e.args[1:] if fn == "full" else e.args
        fill = None
        if fn == "full":
            fill = self.scalar_value(e.args[0], "the fill value")
            if fill is None:
                return None
        shape = self.dim_list(args[0], "the shape")
        dt = self.expr(args[1])
        if shape is None or dt is None:
            return None
        if not isinstance(dt, DtypeTy):
            self.err("E0313", f"the second argument of `{fn}` is a dtype", args[1].span, help="e.g. `f32`")
            return None
        if not 1 <= len(shape) <= 4 or any(sym.is_const(s) and s <= 0 for s in shape):
            self.err("E0310", f"a local tensor has 1 to 4 positive dims, got {fmt_shape(shape)}", args[0].span)
            return None
        value = {"tensor": None, "zeros": 0.0, "ones": 1.0, "full": fill}[fn]
        self.t.call[id(e)] = CallInfo(fn, {"fill": value})
        return TensorTy(dt.dtype, shape)

    def tensor_arg(self, e: ast.Call, od: OpDef) -> TensorTy | None:
        """The single tensor argument of a one-operand op, or None after reporting."""
        fn = od.name
        if not self.arity(e, fn, od.arity):
            return None
        t = self.expr(e.args[0])
        if t is None:
            return None
        if not isinstance(t, TensorTy):
            self.err("E0311", f"`{fn}` takes a tensor", e.args[0].span, help="scalar math is not supported here")
            return None
        return t

    def reduction(self, e: ast.Call, od: OpDef) -> Ty | None:
        fn = od.name
        t = self.tensor_arg(e, od)
        if t is None:
            return None
        dim_kw, keep_kw = e.keyword("dim"), e.keyword("keepdim")
        axes = self.reduction_axes(dim_kw.value, t) if dim_kw else (t.rank - 1,)
        keep = self.const_bool(keep_kw.value, "`keepdim`") if keep_kw else False
        if axes is None or keep is None:
            return None
        if not self.dtype_taken(od, t.dtype, e.span):
            return None
        # several axes: tensorize reduces them one at a time (see passes/reduce_axes.py)
        info = {"axis": axes[0]} if len(axes) == 1 else {"axes": axes}
        self.t.call[id(e)] = CallInfo(fn, {**info, "keepdim": keep})
        shape = list(t.shape)
        valid = list(t.valid_shape)
        for axis in axes:
            shape[axis] = 1
            valid[axis] = 1
        if not keep:
            shape = [s for axis, s in enumerate(shape) if axis not in axes] or [1]
            valid = [v for axis, v in enumerate(valid) if axis not in axes] or [1]
        return TensorTy(t.dtype, tuple(shape), None if valid == shape else tuple(valid))

    def cast(self, e: ast.Call) -> Ty | None:
        if not self.arity(e, "cast", 2):
            return None
        t, d = self.expr(e.args[0]), self.expr(e.args[1])
        if t is None or d is None:
            return None
        if not isinstance(d, DtypeTy):
            self.err("E0313", "the second argument of `cast` is a dtype", e.args[1].span, help="e.g. `cast(x, f32)`")
            return None
        if not isinstance(t, TensorTy):
            self.err("E0311", "`cast` takes a tensor", e.args[0].span)
            return None
        mode = "rint"
        kw = e.keyword("mode")
        if kw is not None:
            if not isinstance(kw.value, ast.Str) or kw.value.value not in CAST_MODES:
                self.err("E0302", "unknown rounding mode", kw.value.span, help="one of " + ", ".join(CAST_MODES))
                return None
            mode = kw.value.value
        self.t.call[id(e)] = CallInfo("cast", {"to": d.dtype, "mode": mode})
        return TensorTy(d.dtype, t.shape, t.valid)
