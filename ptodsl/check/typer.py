"""Name resolution and typing of one kernel under one dtype variant.

The typer walks the AST once, giving every expression a type (dtype + symbolic shape + valid shape
for tensors; dtype + symbolic value for scalars) and recording what lowering needs: views, writes,
loops and resolved calls. Errors go to the shared Diagnostics; after an error the expression gets
no type and its users stay quiet, so one mistake gives one message.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from .. import sym
from ..diagnostics import Diagnostics, Label, Span
from ..dtypes import DTYPE_NAMES, DTYPES, value_range
from ..frontend import ast
from ..frontend.parser import return_error
from ..ops import BINARY_SPELLING, COMPARE_MODES, INDEXING, OPS, STRUCTURE_BUILTINS
from ..yamlio.schema import identifier_problem, parameter_name_problem
from .calls import CallTyping, did_you_mean, fmt_shape, is_float
from .elem import ElemTyping
from .indexing import IndexTyping
from .layout import LayoutTyping
from .scopes import ScopeRules, trip_guard
from .types import (
    INDEX,
    AccessGuard,
    Binding,
    CallInfo,
    CheckedKernel,
    DtypeTy,
    LoopInfo,
    Requirement,
    ScalarTy,
    SymbolInfo,
    TensorTy,
    Ty,
    Typing,
    ViewInfo,
    WriteInfo,
)

RESERVED = {"min", "max", "cdiv", "not", "and", "or", "true", "false", "inf", "nan"}
E_UNROLL_K = "E0512"  # a `loop_unroll` body that handles one step of the `k` it is given


class Typer(CallTyping, ElemTyping, LayoutTyping, IndexTyping, ScopeRules):
    """Statements, names and expressions; builtin calls are typed by :class:`CallTyping`."""

    def __init__(self, kernel: ast.Kernel, variant: dict[str, str], fixed: dict[str, sym.Expr],
                 valid_shapes: dict, diags: Diagnostics):
        self.kernel = kernel
        self.variant = variant
        self.fixed = fixed
        self.valid_shapes = valid_shapes  # view name -> (dims, span) from the YAML
        self.diags = diags
        self.t = Typing()
        self.scope: dict[str, Binding] = {}
        self.symbols: dict[str, SymbolInfo] = {}
        self.loops: list[LoopInfo] = []
        self.loop_stack: list[LoopInfo] = []
        self.arm_ranges: list[tuple[str, tuple]] = []  # (index, (lo, hi)) the arms around know (``arm_range``)
        self.names_used: dict[str, int] = {}
        self.fresh = itertools.count()
        self.source_names: set[str] | None = None  # every name the kernel's text uses (fresh_symbol)
        self.named_checked: set[tuple[str, Span]] = set()
        self.k_used: dict[int, bool] = {}  # id of a loop_unroll `k` binding -> read in its body
        self.k_flagged: set[Span] = set()  # loop_unroll loops with a one-step write reported
        self.root_dims: dict[str, tuple[sym.Expr, ...]] = {}  # ir_name of a viewed tensor -> its dims
        self.scope_init()
        self.ck_params: dict[str, Binding] = {}  # the kernel's parameters by name

    # ------------------------------------------------------------ helpers
    def err(self, code: str, msg: str, span: Span, label: str = "", **kw) -> None:
        notes = list(kw.pop("notes", ()))
        if kw.get("help") is None:
            kw["help"] = f"`ptodsl explain {code}` says what this rule guards against and how to fix it"
        if self.variant:
            notes.append("in the dtype variant " + ", ".join(f"{k}={v}" for k, v in sorted(self.variant.items())))
        self.diags.error(code, msg, span, label, notes=notes, **kw)

    def ir_name(self, name: str) -> str:
        n = self.names_used.get(name, 0)
        self.names_used[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    def dtype_of(self, name: str, span: Span) -> str | None:
        if name in DTYPE_NAMES:
            return name
        if name in self.variant:
            return self.variant[name]
        self.err("E0305", f"dtype variable `{name}` is not bound", span, "not a dtype, and not in `dtypes:`",
                 help=f"bind it in the YAML, e.g. `dtypes: {{{name}: [f32, f16, bf16]}}`, or use one of "
                 + ", ".join(DTYPE_NAMES))
        return None

    def ranges(self) -> dict[str, sym.Bounds]:
        """Known ranges: dims are >= 0, fixed symbols are exact, and a loop index lies in
        [start, stop - 1] (symbolic bounds are fine: sym.prove_le substitutes them)."""
        r: dict[str, sym.Bounds] = {s: (0, None) for s in self.symbols}
        for s, v in self.fixed.items():
            r[s] = (v, v)
        for lp in self.loop_stack:
            r[lp.index] = (lp.start, sym.sub(lp.stop, 1))
        for index, (lo, hi) in self.arm_ranges:
            old_lo, old_hi = r.get(index, (lo, hi))
            r[index] = (old_lo if lo is None else lo, old_hi if hi is None else hi)
        return r

    def arm_range(self, cond: ast.Expr, then: bool) -> tuple[str, tuple] | None:
        """What an arm of ``if is_loop_begin(i):`` / ``if is_loop_end(i):`` knows of ``i`` beyond
        the loop's range: the other arm of a begin branch runs from the second index on, the other
        arm of an end branch (a loop by 1) up to the one before the last (``(index, (lo, hi))``,
        None for a bound it leaves; a ``loop_unroll`` index is left alone). The begin and end arms
        themselves run at one end of the range, which the range already bounds."""
        if not (isinstance(cond, ast.Call) and cond.func_name in ("is_loop_begin", "is_loop_end")
                and len(cond.args) == 1 and isinstance(cond.args[0], ast.Name)):
            return None
        lp = next((lp for lp in reversed(self.loop_stack) if lp.index == cond.args[0].id), None)
        if lp is None or lp.unrolled is not None:
            return None
        # (one bound moves, the other stays: a loop's upper bound also says its stop is past its
        # start, which the proofs of the arm's views use)
        if cond.func_name == "is_loop_begin":
            return None if then else (lp.index, (sym.add(lp.start, lp.step), None))
        if lp.step != 1:
            return None  # the last index is no simpler bound than the loop's own
        return None if then else (lp.index, (None, sym.sub(lp.stop, 2)))

    def check_name(self, name: str, span: Span, what: str) -> None:
        """Names reach generated C++ and Python: no keywords, no reserved spellings, and no leading
        underscore (the compiler's own names start with one); a parameter's is also a keyword
        argument of every call of the op, so none of the call's own keywords (``backend=``)."""
        problem = parameter_name_problem(name) if what == "parameter" else identifier_problem(name)
        if problem is None and name.startswith("_"):
            problem = "names starting with `_` are reserved for the compiler"
        if problem is not None and (name, span) not in self.named_checked:
            self.named_checked.add((name, span))
            self.err("E0322", f"{what} `{name}` cannot be used: {problem}", span,
                     help=f"rename it, e.g. `{name.strip('_') or 'x'}_`" if not name.startswith("_")
                     else f"rename it, e.g. `{name.lstrip('_') or 'x'}`")

    # ------------------------------------------------------------ kernel
    def run(self) -> CheckedKernel:
        params: dict[str, Binding] = {}
        for p in self.kernel.params:
            self.check_name(p.name, p.span, "parameter")
            for d in p.dims or ():
                if isinstance(d.value, str):
                    self.check_name(d.value, d.span, "dim symbol")
            dtype = self.dtype_of(p.dtype, p.dtype_span or p.span)
            if p.name in params:
                self.err("E0316", f"parameter `{p.name}` is declared twice", p.span,
                         secondary=[Label(params[p.name].span, "first declared here")], help="rename one of them")
                continue
            if p.dims is None:
                if p.mode != "in":
                    self.err("E0311", f"scalar parameter `{p.name}` cannot be `{p.mode}`", p.span,
                             help="results go to `out` tensors; make it a tensor or drop the mode")
                b = Binding(p.name, "scalar", ScalarTy(dtype or "f32"), p.span, p, p.name)
                if p.default is not None:
                    self.check_default(p, dtype)
            else:
                shape = []
                for axis, d in enumerate(p.dims):
                    if isinstance(d.value, int):
                        shape.append(d.value)
                        continue
                    if d.value in RESERVED:
                        self.err("E0300", f"`{d.value}` is reserved and cannot name a dim", d.span,
                                 help="rename the symbol")
                    if d.value not in self.symbols:
                        value = self.fixed.get(d.value)
                        self.symbols[d.value] = SymbolInfo(d.value, value if isinstance(value, int) else None,
                                                           (p.name, axis), d.span)
                    shape.append(self.fixed.get(d.value, sym.Sym(d.value)))
                b = Binding(p.name, "param", TensorTy(dtype or "f32", tuple(shape)), p.span, p, p.name)
            self.names_used[p.name] = 1
            params[p.name] = b
            self.ck_params[p.name] = b
            self.scope[p.name] = b
        for s, v in self.fixed.items():
            if s not in self.symbols:
                self.symbols[s] = SymbolInfo(s, v if isinstance(v, int) else None, None, self.kernel.span)
            for free in sym.free_symbols(v):  # a dim only a definition names (`D: 2*H`), solved at call time
                self.symbols.setdefault(free, SymbolInfo(free, None, None, self.kernel.span))
        self.block(self.kernel.body)
        return CheckedKernel(self.kernel, dict(self.variant), params, self.symbols, self.t, self.loops)

    def check_default(self, p: ast.Param, dtype: str | None) -> None:
        d = p.default
        ok = isinstance(d, ast.Num) or isinstance(d, ast.Bool) or (
            isinstance(d, ast.UnaryOp) and d.op == "-" and isinstance(d.operand, ast.Num))
        if not ok:
            self.err("E0317", f"the default of `{p.name}` must be a number", d.span, help="write a literal, e.g. `= 1e-6`")
        elif dtype and not is_float(dtype) and isinstance(getattr(d, "operand", d), ast.Num) and \
                getattr(d, "operand", d).is_float:
            self.err("E0317", f"the default of `{p.name}` is a float, but `{p.name}` is {dtype}", d.span,
                     help=f"write an integer default, or declare `{p.name}: f32`")
        elif dtype in DTYPES and dtype != "bool" and not isinstance(d, ast.Bool):
            num = getattr(d, "operand", d)
            value = -num.value if d is not num else num.value
            lo, hi = value_range(dtype)
            if not lo <= value <= hi:
                # The default becomes a C++ and Python literal of that dtype; outside it, it would wrap
                # or turn into infinity.
                self.err("E0317", f"the default of `{p.name}` does not fit {dtype}", d.span,
                         help=f"{dtype} holds values from {lo:.7g} to {hi:.7g}" if isinstance(hi, float)
                         else f"{dtype} holds values from {lo} to {hi}")

    # ------------------------------------------------------------ statements
    def block(self, stmts: Sequence[ast.Stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ast.Stmt) -> None:
        if isinstance(s, ast.Assign):
            self.assign(s)
        elif isinstance(s, ast.ExprStmt):
            self.expr_stmt(s)
        elif isinstance(s, ast.For):
            self.for_stmt(s)
        elif isinstance(s, ast.If):
            self.if_stmt(s)
        elif isinstance(s, ast.Unpack):
            self.unpack(s)
        elif isinstance(s, ast.Pass):
            pass

    def assign(self, s: ast.Assign) -> None:
        if isinstance(s.target, ast.Name):
            self.bind(s)
            return
        target = s.target
        if not isinstance(target.value, ast.Name):
            self.err("E0319", "only a named tensor can be written", target.span, help="write `t[...] = value`")
            return
        b = self.lookup(target.value)
        if b is None:
            self.expr(s.value)
            return
        region = self.region(b, target.indices, target.span)
        vt = self.expr(s.value)
        if region is None:
            return
        self.write(s, b, region, s.value, vt, target.span)

    def bind(self, s: ast.Assign) -> None:
        name = s.target.id
        self.check_name(name, s.target.span, "local")
        old = self.scope.get(name)
        if old is not None and old.kind == "param":
            if old.param is not None and old.param.mode in ("out", "inout"):
                self.err("E0400", f"output `{name}` is rebound, never written", s.span,
                         f"this makes `{name}` name a new value; the `{old.param.mode}` tensor is left untouched",
                         secondary=[Label(old.span, f"`{name}` is declared `{old.param.mode}` here")],
                         help=f"write into it: `{name}[:] = ...` or `{name}.move(...)`")
            else:
                self.err("E0316", f"parameter `{name}` cannot be rebound", s.target.span,
                         secondary=[Label(old.span, "declared here")], help="bind the value to a new name")
            self.expr(s.value)
            return
        if old is not None and old.kind in ("index", "symbol"):
            self.err("E0316", f"`{name}` is a {'loop index' if old.kind == 'index' else 'dim symbol'} and cannot be rebound",
                     s.target.span, secondary=[Label(old.span, "bound here")], help="bind the value to a new name")
            self.expr(s.value)
            return
        if name in DTYPE_NAMES or name in RESERVED or name in OPS:
            self.builtin_name_error(name, s.target.span)
        self.check_rebind(name, old, s.target.span)
        ty = self.expr(s.value, bind_name=name)
        if ty is None:
            self.scope[name] = Binding(name, "value", ScalarTy("f32"), s.target.span, ir_name="?")  # poisoned
            self.scope[name].kind = "error"
            return
        if isinstance(ty, DtypeTy):
            self.err("E0311", "a dtype is not a value", s.value.span, help="use it as the dtype argument of a call")
            return
        kind = "scalar" if isinstance(ty, ScalarTy) else "value"
        view = self.t.view.get(id(s.value))
        if view is not None:
            kind = "view"
        call = self.t.call.get(id(s.value))
        if call is not None and call.op in ("tensor", "zeros", "ones", "full"):
            kind = "local"
        if view is not None and name in self.valid_shapes:
            dims, yspan = self.valid_shapes[name]
            if view.valid is not None and view.valid != view.shape and isinstance(s.value, ast.Call):
                self.err("E0607", f"view `{name}` has a valid shape both inline and in the YAML", s.value.span,
                         secondary=[Label(yspan, "also given here")], help="keep one of the two")
            valid = self.yaml_valid(dims, yspan, view.shape)
            if valid is not None:
                given = valid
                valid = self.clamp_valid(valid, ty.valid_shape)
                view = ViewInfo(view.base, view.offsets, view.shape, valid, given)
                ty = TensorTy(ty.dtype, ty.shape, valid)
                self.t.view[id(s.value)] = view
                self.t.ty[id(s.value)] = ty
        b = Binding(name, kind, ty, s.target.span, ir_name=self.ir_name(name), view=view)
        if kind == "scalar":
            read = self.t.read.get(id(s.value))
            if read is not None:
                b.ir_name = read[2]
            else:
                b.value = self.t.scalar.get(id(s.value))
        self.scope[name] = b
        self.t.defines[id(s)] = b
        self.t.binding[id(s.target)] = b

    def yaml_valid(self, dims, yspan: Span, shape) -> tuple[sym.Expr, ...] | None:
        if len(dims) != len(shape):
            self.err("E0310", f"valid shape has rank {len(dims)}, the view has rank {len(shape)}", yspan,
                     help=f"give {len(shape)} dims")
            return None
        out = []
        for d in dims:
            if isinstance(d, int):
                out.append(d)
                continue
            try:
                e = sym.parse(str(d))
            except ValueError:
                self.err("E0310", f"`{d}` is not a dim expression", yspan, help="use integers and symbols")
                return None
            for s in sym.free_symbols(e):
                b = self.scope.get(s)
                if b is None and s not in self.symbols:
                    self.err("E0300", f"unknown name `{s}` in a valid shape", yspan,
                             help=did_you_mean(s, list(self.scope)) or "use a symbol, loop index or scalar")
                    return None
                if b is not None and b.kind == "gone":
                    self.gone_use(b, yspan)
                    return None
                if b is not None and b.kind == "scalar":
                    e = sym.substitute(e, {s: sym.Sym(b.ir_name)})
            out.append(e)
        return tuple(out)

    def region(self, b: Binding, indices: Sequence[ast.Index], span: Span):
        """The (offsets, shape) region written by ``t[indices] = ...``."""
        if not isinstance(b.ty, TensorTy):
            self.err("E0311", f"`{b.name}` is a scalar and cannot be indexed", span, help="index a tensor")
            return None
        if not b.writable:
            self.not_writable(b, span)
            return None
        return self.subscript_region(b.ty, indices, span)

    def not_writable(self, b: Binding, span: Span) -> None:
        if b.kind == "param":
            self.err("E0319", f"`{b.name}` is an input and cannot be written", span,
                     secondary=[Label(b.span, "declared here")],
                     help=f"declare it `out` or `inout`: `{b.name}: out ...`")
        else:
            self.err("E0319", f"`{b.name}` is a computed value and cannot be written in place", span,
                     secondary=[Label(b.span, "bound here")],
                     help=f"allocate a local first: `{b.name} = tensor([...], dtype)`")

    def write(self, s: ast.Stmt, b: Binding, region, value: ast.Expr, vt: Ty | None, span: Span) -> None:
        offsets, shape = region
        tt = b.ty
        assert isinstance(tt, TensorTy)
        if vt is None:
            return
        if isinstance(vt, DtypeTy):
            self.err("E0311", "a dtype is not a value", value.span)
            return
        if isinstance(vt, TensorTy):
            if vt.dtype != tt.dtype:
                self.err("E0303", f"cannot write {vt.dtype} values into `{b.name}`, which is {tt.dtype}", value.span,
                         f"this is {vt.dtype}", secondary=[Label(b.span, f"`{b.name}` is {tt.dtype}")],
                         help=f"convert it: `cast(..., {tt.dtype})`")
                return
            if not self.broadcastable(vt.shape, shape):
                self.err("E0318", f"cannot write a value of shape {fmt_shape(vt.shape)} into a region of shape "
                         f"{fmt_shape(shape)}", value.span, f"shape {fmt_shape(vt.shape)}",
                         secondary=[Label(span, f"region of shape {fmt_shape(shape)}")],
                         help="make the shapes agree, or index the region to match")
                return
        elif isinstance(vt, ScalarTy) and not vt.weak and vt.dtype != tt.dtype and not (
                is_float(vt.dtype) and is_float(tt.dtype)):
            self.err("E0303", f"cannot fill {tt.dtype} `{b.name}` with a {vt.dtype} scalar", value.span)
            return
        self.unrolled_step_write(b.name, offsets, shape, span)
        stored = self.stored_extent(shape, vt)
        guards = self.region_bounds(b, offsets, stored, span)
        if guards is None:
            return
        self.t.write[id(s)] = WriteInfo(b.ir_name, offsets, shape, value, guards, stored)

    @staticmethod
    def stored_extent(shape, vt: Ty) -> tuple[sym.Expr, ...]:
        """What a write stores of its region: the value's valid extents, a broadcast dim whole
        (tensorize's broadcast rule), and all of the region for a scalar."""
        if not isinstance(vt, TensorTy) or len(vt.shape) > len(shape):
            return tuple(shape)
        pad = len(shape) - len(vt.shape)
        out = list(shape[:pad])
        for s, v, r in zip(vt.shape, vt.valid_shape, shape[pad:]):
            out.append(v if s == r else r if v == 1 else sym.min_(sym.mul(v, r), r))
        return tuple(out)

    def region_bounds(self, b: Binding, offsets, shape, span: Span):
        """The write region against the tensor's dims: an error when it provably leaves the tensor,
        else the bounds the checker cannot prove, which lowering turns into run-time guards."""
        dims = b.ty.shape
        if len(shape) > len(dims):
            self.err("E0318", f"cannot write a value of rank {len(shape)} into `{b.name}`, which has rank "
                     f"{len(dims)}", span, f"shape {fmt_shape(shape)}",
                     secondary=[Label(b.span, f"`{b.name}` is {fmt_shape(dims)}")],
                     help="index or reshape the value to the tensor's rank")
            return None
        shape = (1,) * (len(dims) - len(shape)) + tuple(shape)  # a lower-rank value aligns right
        r = self.ranges()
        guards = []
        for axis, (o, n, d) in enumerate(zip(offsets, shape, dims)):
            end = sym.add(o, n)
            outside = sym.prove_le(sym.add(d, 1), end, r) or sym.prove_le(sym.add(o, 1), 0, r)
            if outside and sym.prove_le(1, n, r):
                self.err("E0310", f"this write runs outside `{b.name}` on dim {axis}: [{sym.to_text(o)}, "
                         f"{sym.to_text(end)}) is not inside [0, {sym.to_text(d)})", span,
                         f"offset {sym.to_text(o)}, size {sym.to_text(n)} on dim {axis}",
                         secondary=[Label(b.span, f"`{b.name}` is {fmt_shape(dims)}")],
                         help="keep the offsets and the value's shape inside the tensor")
                return None
            if sym.prove_le(0, o, r) and _ends_inside(o, n, d, r):
                continue
            guards.append((axis, o, n, d))
        return tuple(guards)

    def unrolled_step_write(self, name: str, offsets, shape, span: Span) -> None:
        """A write that moves with a `loop_unroll` index but not with its `k` covers one step of
        the `k` the iteration handles, leaving the others unwritten (PyPTO's FAQ pitfall)."""
        at = set().union(*(sym.free_symbols(o) for o in offsets)) if offsets else set()
        extent = set().union(*(sym.free_symbols(d) for d in shape)) if shape else set()
        for lp in self.loop_stack:
            if lp.unrolled is None or lp.index not in at or lp.unrolled in extent:
                continue
            i, k = lp.index, lp.unrolled
            self.k_flagged.add(lp.span)
            region = ", ".join(f"{i}:{i} + {k}" if i in sym.free_symbols(o) else ":" for o in offsets)
            self.err(E_UNROLL_K, f"this write covers one step, but each `loop_unroll` iteration handles `{k}`",
                     span, f"the region moves with `{i}` and its extent does not depend on `{k}`",
                     secondary=[Label(lp.span, f"`{i}` advances by `{k}` steps per iteration")],
                     help=f"write the region of all `{k}` steps, e.g. `{name}[{region}] = ...`")
            return

    def broadcastable(self, src: Sequence[sym.Expr], dst: Sequence[sym.Expr]) -> bool:
        if len(src) > len(dst):
            return False
        src = (1,) * (len(dst) - len(src)) + tuple(src)
        return all(a == b or a == 1 for a, b in zip(src, dst))

    def expr_stmt(self, s: ast.ExprStmt) -> None:
        e = s.expr
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            method = e.func.attr
            if method not in ("move", "assemble"):
                self.err("E0301", f"tensors have no method `{method}`", e.func.span,
                         help=did_you_mean(method, ["move", "assemble"]) or "use `t.move(v)` or `t.assemble(v, [offsets])`")
                return
            if not isinstance(e.func.value, ast.Name):
                self.err("E0319", "only a named tensor can be written", e.func.value.span)
                return
            b = self.lookup(e.func.value)
            if b is None:
                return
            want = 1 if method == "move" else 2
            if len(e.args) != want or e.keywords:
                usage = "t.move(value)" if method == "move" else "t.assemble(value, [offsets])"
                self.err("E0302", f"`{method}` takes {want} argument{'s' if want > 1 else ''}", e.span,
                         help=f"write `{usage}`")
                return
            if not isinstance(b.ty, TensorTy):
                self.err("E0311", f"`{b.name}` is a scalar", e.func.value.span)
                return
            if not b.writable:
                self.not_writable(b, e.func.value.span)
                return
            vt = self.expr(e.args[0])
            if method == "move":
                region = (tuple(0 for _ in b.ty.shape), b.ty.shape)
            else:
                offs = self.dim_list(e.args[1], "offsets")
                if offs is None:
                    return
                if len(offs) != b.ty.rank:
                    self.err("E0310", f"`assemble` needs {b.ty.rank} offsets, got {len(offs)}", e.args[1].span)
                    return
                if not isinstance(vt, TensorTy):
                    return
                region = (offs, vt.shape)
            self.write(s, b, region, e.args[0], vt, e.span)
            return
        if isinstance(e, ast.Call) and e.func_name == "scatter_update":
            self.scatter_stmt(s, e)
            return
        if isinstance(e, ast.Call) and e.func_name == "print":
            if not e.args or not isinstance(e.args[0], ast.Str):
                self.err("E0302", "`print` takes a format string first", e.span, help='write `print("x = {}", x)`')
                return
            fmt = self.print_format(e)
            for a in e.args[1:]:
                ty = self.expr(a)
                if isinstance(ty, TensorTy):
                    self.err("E0343", "`print` shows scalars, not tensors", a.span, "this is a tensor",
                             help="print one element: `print(\"{}\", t[i, j])`")
                    return
            if fmt is not None:
                self.t.call[id(e)] = CallInfo("print", {"format": fmt})
            return
        ty = self.expr(e)
        if ty is not None:
            self.err("E0321", "this expression's value is never used", e.span,
                     help="assign it: `y[:] = ...` writes an output, `v = ...` binds a local")

    def print_format(self, e: ast.Call) -> str | None:
        """The format with one `{}` per value. Without any field, values follow the text separated
        by spaces, as Python's ``print("i =", i)`` shows them."""
        fmt, values = e.args[0].value, len(e.args) - 1
        plain = fmt.replace("{{", "").replace("}}", "")
        field = re.search(r"\{[^{}]+\}", plain)
        if field is not None or "{" in plain.replace("{}", "") or "}" in plain.replace("{}", ""):
            what = f"`{field.group()}`" if field is not None else "a lone brace"
            self.err("E0343", f"`print` supports only `{{}}` fields, not {what}", e.args[0].span,
                     help="write `{}` for each value (`{{` and `}}` print braces)")
            return None
        fields = plain.count("{}")
        if fields == 0:
            return fmt + " {}" * values
        if fields != values:
            self.err("E0343", f"`print` has {fields} `{{}}` field{'s' if fields != 1 else ''} but "
                     f"{values} value{'s' if values != 1 else ''}", e.span,
                     help="give one value per `{}` field")
            return None
        return fmt

    def for_stmt(self, s: ast.For) -> None:
        it = s.iter
        if not (isinstance(it, ast.Call) and it.func_name in ("loop", "loop_unroll")):
            self.err("E0502", "a loop iterates over `loop(...)` or `loop_unroll(...)`", it.span,
                     help="write `for i in loop(N, name=\"rows\"):`")
            return
        unroll = it.func_name == "loop_unroll"
        want = 2 if unroll else 1
        if len(s.targets) != want:
            self.err("E0502", f"`{it.func_name}` binds {want} name{'s' if want > 1 else ''}", s.span,
                     help="write `for i, k in loop_unroll(...)`" if unroll else "write `for i in loop(...)`")
            return
        args = [self.int_value(a, "a loop bound") for a in it.args]
        if not 1 <= len(it.args) <= 3:
            self.err("E0302", f"`{it.func_name}` takes 1 to 3 bounds", it.span, help="loop(stop) or loop(start, stop, step)")
            return
        if any(a is None for a in args):
            return
        for kw in it.keywords:
            if kw.name != "name":
                self.unknown_keyword(it.func_name, kw)
        name_kw = it.keyword("name")
        index = s.targets[0]
        if name_kw is not None:
            if not isinstance(name_kw.value, ast.Str):
                self.err("E0302", "a loop name is a string", name_kw.value.span, help='name="b_loop"')
                return
            name = name_kw.value.value
        else:
            name = f"{index.id}_loop"
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        if not sym.is_const(step) or step <= 0:
            # The trip count, unroll split and peeling all assume a known forward step; a runtime
            # step could be 0 (no progress) or negative.
            self.err("E0302", "a loop step must be a positive integer constant", it.args[2].span,
                     help="step forward by a constant, e.g. `loop(0, N, 2)`; to walk backwards, index with "
                     "`N - 1 - i`")
            return
        for t in s.targets:
            self.check_name(t.id, t.span, "loop index")
        outer = next((lp for lp in self.loop_stack if lp.index == index.id), None)
        if outer is not None:
            self.err("E0500", f"nested loops both use the index `{index.id}`", index.span,
                     "the inner loop reuses it", secondary=[Label(outer.span, "the outer loop binds it here")],
                     help="give the inner loop another index name")
        for t in s.targets:
            old = self.scope.get(t.id)
            if old is not None and old.kind in ("param", "symbol", "scalar") and outer is None:
                self.err("E0316", f"loop index `{t.id}` shadows {old.kind} `{t.id}`", t.span,
                         secondary=[Label(old.span, "bound here")], help="choose another index name")
        guard = trip_guard(start, stop, step, {r[2] for r in self.t.read.values()}, self.ck_params,
                           self.proof_ranges())
        if guard is not None:
            self.t.trips[id(s)] = guard
        info = LoopInfo(name, index.id, start, stop, step, s.targets[1].id if unroll else None, s.span,
                        len(self.loop_stack), self.loop_stack[-1].name if self.loop_stack else None)
        self.loops.append(info)
        self.t.loop[id(s)] = info
        saved = dict(self.scope)
        self.scope[index.id] = Binding(index.id, "index", ScalarTy(INDEX, weak=True), index.span, ir_name=index.id)
        if unroll:
            k = s.targets[1]
            kb = Binding(k.id, "index", ScalarTy(INDEX, weak=True), k.span, ir_name=k.id)
            self.scope[k.id] = kb
            self.k_used[id(kb)] = False
        self.loop_stack.append(info)
        frame = self.open_frame("loop", name, s.span)
        self.block(s.body)
        self.loop_stack.pop()
        if unroll and not self.k_used.pop(id(kb)) and s.span not in self.k_flagged:
            self.err(E_UNROLL_K, f"the `loop_unroll` body never uses `{k.id}`", k.span,
                     f"each iteration handles `{k.id}` consecutive steps from `{index.id}`, but the body "
                     "does one", secondary=[Label(it.span, f"`{k.id}` is each factor of the YAML's `unroll:` "
                                                            "for this loop")],
                     help=f"handle all `{k.id}` steps (index `[{index.id}:{index.id} + {k.id}, ...]` where the "
                     f"body indexes `[{index.id}, ...]`), or write `for {index.id} in loop(...)` and let "
                     "`unroll:` in the YAML repeat a one-step body")
        self.close_frame(frame, saved, [self.scope])

    def if_stmt(self, s: ast.If) -> None:
        self.condition(s.cond)
        saved = dict(self.scope)
        frame = self.open_frame("if", "", s.span)
        with self.narrowed(self.arm_range(s.cond, True)):
            self.block(s.body)
        then_scope = self.scope
        self.scope = dict(saved)
        self.next_arm(frame)
        with self.narrowed(self.arm_range(s.cond, False)):
            self.block(s.orelse)
        self.close_frame(frame, saved, [then_scope, self.scope])

    @contextmanager
    def narrowed(self, arm: tuple[str, tuple] | None) -> Iterator[None]:
        """The proofs inside an arm use what its condition says of the loop index (``arm_range``)."""
        if arm is not None:
            self.arm_ranges.append(arm)
        try:
            yield
        finally:
            if arm is not None:
                self.arm_ranges.pop()

    def condition(self, e: ast.Expr) -> None:
        ty = self.expr(e)
        if ty is not None and not isinstance(ty, ScalarTy):
            self.err("E0320", "a branch condition must be a scalar", e.span,
                     "this is a tensor" if isinstance(ty, TensorTy) else "",
                     help="branch on a scalar, e.g. `if is_loop_begin(i):` or `if s > 0:`; "
                     "for elementwise choice use `where(cond, a, b)`")

    # ------------------------------------------------------------ expressions
    def lookup(self, n: ast.Name) -> Binding | None:
        b = self.scope.get(n.id)
        if b is None and n.id in self.symbols:
            return Binding(n.id, "symbol", ScalarTy(INDEX, weak=True), self.symbols[n.id].span, ir_name=n.id)
        if b is None and n.id == "return":
            return_error(self.diags, n.span)
            return None
        if b is None:
            if n.id in OPS or n.id in STRUCTURE_BUILTINS or n.id in INDEXING:
                self.err("E0311", f"`{n.id}` is a function; call it", n.span, help=f"write `{n.id}(...)`")
                return None
            candidates = list(self.scope) + list(self.symbols)
            self.err("E0300", f"unknown name `{n.id}`", n.span, "not a parameter, local, loop index or symbol",
                     help=did_you_mean(n.id, candidates) or
                     "bind it first, or fix a dim symbol in the YAML's `symbols:`")
            return None
        if b.kind == "error":
            return None
        if b.kind == "gone":
            self.gone_use(b, n.span)
            return None
        self.note_use(b, n.span)
        if id(b) in self.k_used:
            self.k_used[id(b)] = True
        return b

    def expr(self, e: ast.Expr, bind_name: str | None = None) -> Ty | None:
        ty = self._expr(e, bind_name)
        if ty is not None:
            self.t.ty[id(e)] = ty
        return ty

    def _expr(self, e: ast.Expr, bind_name: str | None) -> Ty | None:
        if isinstance(e, ast.Num):
            self.t.scalar[id(e)] = e.value
            return ScalarTy("f32" if e.is_float else INDEX, weak=True)
        if isinstance(e, ast.Bool):
            self.t.scalar[id(e)] = e.value
            return ScalarTy("bool", weak=True)
        if isinstance(e, ast.Str):
            self.err("E0311", "a string is not a value here", e.span, help="strings only name loops and format prints")
            return None
        if isinstance(e, ast.ListExpr):
            self.err("E0311", "a list is not a value here", e.span, help="lists give shapes and offsets of calls")
            return None
        if isinstance(e, ast.Name):
            if e.id in DTYPE_NAMES or e.id in self.variant:
                return DtypeTy(self.variant.get(e.id, e.id))
            b = self.lookup(e)
            if b is None:
                return None
            self.t.binding[id(e)] = b
            if isinstance(b.ty, ScalarTy):
                self.t.scalar[id(e)] = b.value if b.value is not None else sym.Sym(b.ir_name) \
                    if b.kind != "symbol" or b.name not in self.fixed else self.fixed[b.name]
            if b.view is not None:
                self.t.view[id(e)] = b.view
            return b.ty
        if isinstance(e, ast.UnaryOp):
            return self.unary(e)
        if isinstance(e, ast.BinOp):
            return self.binop(e)
        if isinstance(e, ast.Compare):
            return self.compare(e)
        if isinstance(e, ast.BoolOp):
            return self.bool_op(e)
        if isinstance(e, ast.Subscript):
            return self.subscript(e, bind_name)
        if isinstance(e, ast.Call):
            return self.call(e, bind_name)
        if isinstance(e, ast.Attribute):
            self.err("E0301", f"`.{e.attr}` is not a value", e.span, help="methods `move`/`assemble` are statements")
            return None
        return None

    def unary(self, e: ast.UnaryOp) -> Ty | None:
        ty = self.expr(e.operand)
        if ty is None:
            return None
        if e.op == "not" and isinstance(ty, TensorTy):
            return self.logical(e, "not", [(e.operand, ty)])
        if e.op == "not":
            v = self.scalar_value(e.operand, "a condition", ty)
            if v is None:
                return None
            self.t.scalar[id(e)] = sym.logical_not(v)
            return ScalarTy("bool")
        if isinstance(ty, ScalarTy):
            v = self.t.scalar.get(id(e.operand))
            if v is not None:
                self.t.scalar[id(e)] = sym.neg(v) if e.op == "-" else v
            return ty
        if isinstance(ty, TensorTy):
            if e.op == "+":
                self.t.call[id(e)] = CallInfo("identity")
                return ty
            self.t.call[id(e)] = CallInfo("neg")
            return TensorTy(ty.dtype, ty.shape, ty.valid)
        self.err("E0311", "a dtype is not a value", e.span)
        return None

    def binop(self, e: ast.BinOp) -> Ty | None:
        lt, rt = self.expr(e.left), self.expr(e.right)
        if lt is None or rt is None:
            return None
        if isinstance(lt, DtypeTy) or isinstance(rt, DtypeTy):
            self.err("E0311", "a dtype is not a value", (e.left if isinstance(lt, DtypeTy) else e.right).span)
            return None
        if isinstance(lt, ScalarTy) and isinstance(rt, ScalarTy):
            a, b = self.t.scalar.get(id(e.left)), self.t.scalar.get(id(e.right))
            op = e.op
            if op in ("/", "//", "%") and sym.is_const(b) and b == 0:
                self.err("E0340", "division by zero", e.right.span, "this is 0",
                         help="divide by a non-zero value")
                return None
            if a is not None and b is not None:
                self.t.scalar[id(e)] = sym.binary(op, a, b)

            def integral(t: ScalarTy) -> bool:
                return not is_float(t.dtype) or t.ratio

            # Python semantics: `/` of integers is true division (a float); where an integer is
            # needed later, `int_value` turns it back into an exact integer division.
            ratio = integral(lt) and integral(rt) and (op == "/" or lt.ratio or rt.ratio)
            if ratio:
                return ScalarTy("f32", weak=lt.weak and rt.weak, ratio=True)
            dtype = lt.dtype if not lt.weak else rt.dtype if not rt.weak else (
                "f32" if is_float(lt.dtype) or is_float(rt.dtype) else INDEX)
            return ScalarTy(dtype, weak=lt.weak and rt.weak)
        opname = BINARY_SPELLING.get(e.op)
        if opname is None:
            self.err("E0800", f"`{e.op}` on tensors is not supported", e.span,
                     help="tensor arithmetic supports + - * /")
            return None
        return self.elementwise(e, opname, [(e.left, lt), (e.right, rt)])

    def compare(self, e: ast.Compare) -> Ty | None:
        lt, rt = self.expr(e.left), self.expr(e.right)
        if lt is None or rt is None:
            return None
        if isinstance(lt, ScalarTy) and isinstance(rt, ScalarTy):
            a, b = self.t.scalar.get(id(e.left)), self.t.scalar.get(id(e.right))
            if a is not None and b is not None:
                self.t.scalar[id(e)] = sym.compare(e.op, a, b)
            return ScalarTy("bool")
        ty = self.elementwise(e, "cmp", [(e.left, lt), (e.right, rt)], attrs={"mode": COMPARE_MODES[e.op]})
        return TensorTy("bool", ty.shape, ty.valid) if isinstance(ty, TensorTy) else None

    def elementwise(self, e: ast.Expr, opname: str, operands, attrs=None) -> Ty | None:
        """Broadcast the operands (right-aligned; a dim of 1 or a scalar broadcasts) and unify dtypes."""
        tensors = [(x, t) for x, t in operands if isinstance(t, TensorTy)]
        for x, t in operands:
            if isinstance(t, DtypeTy):
                self.err("E0311", "a dtype is not a value", x.span)
                return None
        if not tensors:
            return None
        dtype = tensors[0][1].dtype
        for x, t in tensors[1:]:
            if t.dtype != dtype:
                first = tensors[0]
                self.err("E0303", f"mixed dtypes: {first[1].dtype} and {t.dtype}", e.span,
                         secondary=[Label(first[0].span, f"this is {first[1].dtype}"), Label(x.span, f"this is {t.dtype}")],
                         help=f"convert one side, e.g. `cast(..., {first[1].dtype})`")
                return None
        for x, t in operands:
            if isinstance(t, ScalarTy) and not t.weak and not (is_float(t.dtype) == is_float(dtype)):
                self.err("E0303", f"cannot combine a {t.dtype} scalar with a {dtype} tensor", x.span,
                         help=f"use a {dtype} scalar")
                return None
            if isinstance(t, ScalarTy) and t.weak and is_float(t.dtype) and not is_float(dtype) and dtype != "bool":
                self.err("E0303", f"cannot combine a float literal with a {dtype} tensor", x.span,
                         help="write an integer literal, or cast the tensor to a float dtype")
                return None
        od = OPS.get(opname)
        if od is not None and not self.dtype_taken(od, dtype, e.span):
            return None
        rank = max(t.rank for _, t in tensors)
        shape: list[sym.Expr] = []
        valid: list[sym.Expr] = []
        for d in range(rank):
            dims = []
            for x, t in tensors:
                pad = rank - t.rank
                if d >= pad:
                    dims.append((x, t.shape[d - pad], t.valid_shape[d - pad]))
            real = [(x, s, v) for x, s, v in dims if s != 1]
            if not real:
                # every operand has one element here: the result holds it only where all of them
                # do (a one-row view at a row index read from a tensor may hold none)
                shape.append(1)
                v = dims[0][2]
                for _, _, v2 in dims[1:]:
                    v = sym.min_(v, v2, self.ranges())
                valid.append(v)
                continue
            s0 = real[0][1]
            for x, s, _ in real[1:]:
                if s != s0:
                    self.err("E0304", f"shapes do not broadcast: dim {d} is {sym.to_text(s0)} on one side and "
                             f"{sym.to_text(s)} on the other", e.span,
                             secondary=[Label(real[0][0].span, f"shape {fmt_shape(tensors_shape(real[0][0], tensors))}"),
                                        Label(x.span, f"shape {fmt_shape(tensors_shape(x, tensors))}")],
                             help="dims must be equal or 1 (distinct symbols are never assumed equal)")
                    return None
            v = real[0][2]
            for _, _, v2 in real[1:]:
                v = sym.min_(v, v2, self.ranges())
            shape.append(s0)
            valid.append(v)
        all_valid = tuple(valid) == tuple(shape)
        info_attrs = dict(attrs or {})
        self.t.call[id(e)] = CallInfo(opname, info_attrs)
        return TensorTy(dtype, tuple(shape), None if all_valid else tuple(valid))

    def scalar_value(self, e: ast.Expr, what: str, ty: Ty | None = None) -> sym.Expr | None:
        ty = ty if ty is not None else self.expr(e)
        if ty is None:
            return None
        if not isinstance(ty, ScalarTy):
            self.err("E0311", f"{what} must be a scalar", e.span,
                     "this is a tensor" if isinstance(ty, TensorTy) else "this is a dtype",
                     help="scalars are literals, dim symbols, loop indices, scalar parameters, or one "
                     "element read from a tensor: `n = t[i]`")
            return None
        return self.t.scalar.get(id(e))

    def int_value(self, e: ast.Expr, what: str) -> sym.Expr | None:
        """A scalar used where an integer is needed: a loop bound, a shape, an offset, an index.

        A float is an error, except a quotient of integers (``L / BL``): that stands for the integer
        it equals. A constant quotient must be exact here; a symbolic one is checked at call time,
        when the dims are known (see :class:`Requirement`)."""
        ty = self.expr(e)
        v = self.scalar_value(e, what, ty)
        if v is None or not isinstance(ty, ScalarTy):
            return None
        if is_float(ty.dtype) and not ty.ratio:
            self.err("E0302", f"{what} must be an integer", e.span, f"this is {ty.dtype}",
                     help="use an integer literal, a dim symbol, a loop index or an integer scalar")
            return None
        try:
            v, conds = sym.as_integer(v)
        except sym.NotInteger as exc:
            self.err("E0341", f"{what} must be an integer, but this is {exc.value:g}", e.span,
                     "`/` is true division, as in Python",
                     help="write `a // b` to round down, or `cdiv(a, b)` for the number of blocks of b "
                     "that cover a")
            return None
        dims = set(self.symbols)  # dims are all known when the call binds its arguments
        for kind, num, den in conds:
            runtime = (sym.free_symbols(num) | sym.free_symbols(den)) - dims
            if runtime:
                self.err("E0342", f"{what} divides by a value known only while the kernel runs", e.span,
                         f"this depends on `{sorted(runtime)[0]}`",
                         help="make the exactness explicit: `a // b` rounds down, `cdiv(a, b)` rounds up")
                return None
            self.t.requires.append(Requirement(kind, num, den, e.span, what))
        return v

    def const_int(self, e: ast.Expr, what: str) -> int | None:
        v = e.value if isinstance(e, ast.Num) else (
            -e.operand.value if isinstance(e, ast.UnaryOp) and e.op == "-" and isinstance(e.operand, ast.Num) else None)
        if not isinstance(v, int):
            self.err("E0302", f"{what} must be an integer literal", e.span)
            return None
        return v

    def const_bool(self, e: ast.Expr, what: str) -> bool | None:
        if isinstance(e, ast.Bool):
            return e.value
        self.err("E0302", f"{what} must be `True` or `False`", e.span)
        return None

    def dim_list(self, e: ast.Expr, what: str) -> tuple[sym.Expr, ...] | None:
        if not isinstance(e, ast.ListExpr):
            self.err("E0302", f"{what} must be a list, e.g. `[1, N]`", e.span)
            return None
        out = []
        for item in e.items:
            v = self.int_value(item, f"an entry of {what}")
            if v is None:
                return None
            out.append(v)
        return tuple(out)

    # ------------------------------------------------------------ subscripts and views
    def subscript_region(self, tt: TensorTy, indices: Sequence[ast.Index], span: Span):
        if len(indices) > tt.rank:
            self.err("E0309", f"{len(indices)} indices for a tensor of rank {tt.rank}", span,
                     help=f"give at most {tt.rank}")
            return None
        offsets: list[sym.Expr] = []
        shape: list[sym.Expr] = []
        for axis in range(tt.rank):
            dim = tt.shape[axis]
            if axis >= len(indices):
                offsets.append(0)
                shape.append(dim)
                continue
            ix = indices[axis]
            if isinstance(ix, ast.Slice):
                if ix.step is not None:
                    self.err("E0800", "slices with a step are not supported", ix.step.span, help="use a unit step")
                    return None
                lo = self.int_value(ix.lo, "a slice bound") if ix.lo is not None else 0
                hi = self.int_value(ix.hi, "a slice bound") if ix.hi is not None else dim
                if lo is None or hi is None:
                    return None
                if sym.is_const(lo) and sym.is_const(dim) and lo > dim or sym.is_const(hi) and sym.is_const(dim) and hi > dim:
                    self.err("E0310", f"slice {sym.to_text(lo)}:{sym.to_text(hi)} is out of bounds for a dim of "
                             f"{sym.to_text(dim)}", ix.span, help="keep slices inside the tensor")
                    return None
                offsets.append(lo)
                shape.append(sym.sub(hi, lo))
            else:
                v = self.int_value(ix, "an index")
                if v is None:
                    return None
                if sym.is_const(v) and sym.is_const(dim) and not 0 <= v < dim:
                    self.err("E0310", f"index {v} is out of bounds for a dim of {dim}", ix.span,
                             help=f"use an index in [0, {dim})")
                    return None
                offsets.append(v)
                shape.append(1)
        return tuple(offsets), tuple(shape)

    def subscript(self, e: ast.Subscript, bind_name: str | None) -> Ty | None:
        bt = self.expr(e.value)
        if bt is None:
            return None
        if not isinstance(bt, TensorTy):
            self.err("E0311", "only tensors can be indexed", e.value.span)
            return None
        if len(e.indices) == bt.rank and not any(isinstance(i, ast.Slice) for i in e.indices):
            idx = [self.int_value(i, "an index") for i in e.indices]
            if any(i is None for i in idx):
                return None
            base = self.t.view.get(id(e.value))
            b = self.t.binding.get(id(e.value))
            if base is not None:
                base_name = base.base
                idx = [sym.add(o, i) for o, i in zip(base.offsets, idx)]
                dims = self.root_dims.get(base_name, bt.shape)
            elif b is not None:
                base_name = b.ir_name
                dims = bt.shape
            else:
                self.err("E0800", "element reads need a named tensor", e.span)
                return None
            param = self.ck_params.get(base_name)
            if param is not None and param.param is not None and param.param.mode == "in":
                shared = self.read_cache.get((base_name, tuple(idx)))
                if shared is not None:  # the same element, read earlier where this point sees it
                    self.t.read[id(e)] = (base_name, tuple(idx), shared)
                    self.t.scalar[id(e)] = sym.Sym(shared)
                    return ScalarTy(bt.dtype)
            name = self.ir_name(bind_name or self.fresh_symbol())
            if param is not None and param.param is not None and param.param.mode == "in":
                self.shared_read(base_name, tuple(idx), name)
            self.access_guards(e, base_name, tuple(idx), (1,) * len(idx), dims)
            self.t.read[id(e)] = (base_name, tuple(idx), name)
            self.t.scalar[id(e)] = sym.Sym(name)
            return ScalarTy(bt.dtype)
        region = self.subscript_region(bt, e.indices, e.span)
        if region is None:
            return None
        return self.make_view(e, e.value, bt, region[0], region[1], None)

    def clamp_valid(self, valid, bound) -> tuple[sym.Expr, ...]:
        """``min(max(valid, 0), bound)`` per dim, simplified where the ranges decide it."""
        r = self.ranges()
        return tuple(sym.min_(sym.max_(v, 0, r), b, r) for v, b in zip(valid, bound))

    def make_view(self, e: ast.Expr, src: ast.Expr, bt: TensorTy, offsets, shape, valid) -> Ty | None:
        parent = self.t.view.get(id(src))
        b = self.t.binding.get(id(src))
        if parent is None and b is None:
            self.err("E0800", "views of computed expressions are not supported", src.span,
                     help="bind the value to a name first")
            return None
        pvalid = bt.valid_shape
        # a view without its own valid shape inherits the parent's, clipped to the view
        inferred = self.clamp_valid(tuple(sym.sub(pv, o) for pv, o in zip(pvalid, offsets)), shape)
        given = None if valid is None else tuple(valid)
        if valid is None:
            valid = inferred
        else:
            # a given valid shape (a runtime value, typically) never reaches past the view or its
            # parent's valid data: loads and stores of the view stay inside the tensor
            valid = self.clamp_valid(valid, inferred)
        if parent is not None:
            base = parent.base
            offsets = tuple(sym.add(a, o) for a, o in zip(parent.offsets, offsets))
        else:
            base = b.ir_name
            self.root_dims[base] = tuple(bt.shape)
        # what the view loads, [offset, offset + inferred extent), must lie inside the tensor: the
        # extent is clipped to the data, so this asks for an offset in [0, dim]
        self.access_guards(e, base, tuple(offsets), inferred, self.root_dims.get(base, bt.shape))
        v = None if tuple(valid) == tuple(shape) else tuple(valid)
        self.t.view[id(e)] = ViewInfo(base, tuple(offsets), tuple(shape), v, given)
        return TensorTy(bt.dtype, tuple(shape), v)

    def fresh_symbol(self) -> str:
        """A name for an element read the kernel does not bind to a name: ``s0``, ``s1``, ..., skipping
        every name the kernel's text uses (a read called ``s1`` inside ``for s1 in loop(...)`` would
        be the loop index to every later pass)."""
        if self.source_names is None:
            self.source_names = {n.id for n in ast.walk(self.kernel) if isinstance(n, ast.Name)}
            for p in self.kernel.params:
                self.source_names.add(p.name)
                self.source_names |= {d.value for d in p.dims or () if isinstance(d.value, str)}
        while True:
            name = f"s{next(self.fresh)}"
            if name not in self.source_names:
                return name

    def proof_ranges(self) -> dict[str, sym.Bounds]:
        """:meth:`ranges` for the run-time checks: a kernel runs only when every dim is at least 1 (a
        zero dim returns at once or is refused)."""
        r = self.ranges()
        for s in self.symbols:
            if s not in self.fixed:
                r[s] = (1, None)
        return r

    def access_guards(self, e: ast.Expr, tensor: str, offsets, extents, dims) -> None:
        """Run-time guards for the bounds of a read that the checker cannot prove inside ``tensor``.

        A view offset or element index computed from run-time values (an element read from a
        tensor, a scalar parameter, a loop index the ranges do not bound) gets a guard in the
        control program, which stops the call before the read on every backend (E0730). A kernel
        runs only when every dim is at least 1 (a zero dim returns at once or is refused), which
        the proof may assume.
        """
        r = self.proof_ranges()
        guards = []
        for axis, (o, n, d) in enumerate(zip(offsets, extents, dims)):
            if sym.prove_le(0, o, r) and _ends_inside(o, n, d, r):
                continue
            guards.append(AccessGuard(tensor, axis, o, n, d))
        if guards:
            self.t.access[id(e)] = tuple(guards)


def _ends_inside(offset: sym.Expr, extent: sym.Expr, dim: sym.Expr, r) -> bool:
    """offset + extent <= dim, looking through the min/max of clamped valid extents (`min(v, s)` ends
    inside when either side does, `max(v, 0)` when both do)."""
    if isinstance(extent, sym.CallExpr) and extent.fn in ("min", "max"):
        ends = [_ends_inside(offset, a, dim, r) for a in extent.args]
        return any(ends) if extent.fn == "min" else all(ends)
    return sym.prove_le(sym.add(offset, extent), dim, r)


def tensors_shape(x: ast.Expr, tensors) -> tuple:
    for y, t in tensors:
        if y is x:
            return t.shape
    return ()
