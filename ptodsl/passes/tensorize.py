"""Checked AST -> Tensor IR.

Requires: a kernel that type-checked without errors under one dtype variant.
Produces: a ``level tensor`` module: ops on whole tensors and views with symbolic shapes and valid
shapes, ``loop``/``if`` regions, and ``assemble``/``fill`` writes into out/inout/local tensors. A
value written into a wider region first goes through a ``broadcast`` to the region's shape.
Composite ops (sigmoid, gelu, ...) stay whole here; tiling expands them from the op table.
"""

from __future__ import annotations

import itertools

from .. import sym
from ..check.types import CheckedKernel, ScalarTy, TensorTy
from ..frontend import ast
from ..ir import Func, Module, Op, Param, TensorType, Value
from ..ir.schedule import schedule_attrs
from ..ops import INDEXING, OPS
from ..schedule import Schedule
from . import tensorize_index
from . import tensorize_layout as layout
from .reduce_axes import reduce_axes


def _post_order(node: ast.Node | None):
    """``node`` and the nodes below it, children first (an index read before the read it indexes)."""
    if node is None:
        return
    for f in node.__dataclass_fields__:
        if f == "span":
            continue
        v = getattr(node, f)
        for x in v if isinstance(v, tuple) else (v,):
            if isinstance(x, ast.Node):
                yield from _post_order(x)
    yield node


def tensor_type(t: TensorTy) -> TensorType:
    return TensorType(t.dtype, t.shape, t.valid)


class _Builder:
    def __init__(self, ck: CheckedKernel):
        self.ck = ck
        self.t = ck.typing
        self.values: dict[str, Value] = {}
        self.counter = itertools.count()
        self.blocks: list[list[Op]] = [[]]
        self.used: set[str] = set()
        self.reads_done: set[int] = set()  # element reads (AST node ids) already emitted
        self.syms_done: set[str] = set()  # and the symbols they define

    def emit(self, op: Op) -> Op:
        self.blocks[-1].append(op)
        return op

    def fresh(self, hint: str = "t") -> str:
        while True:
            name = f"{hint}{next(self.counter)}"
            if name not in self.used:
                self.used.add(name)
                return name

    def named(self, name: str) -> str:
        base, n = name, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

    # -------------------------------------------------------------- kernel
    def build(self) -> Func:
        params = []
        for p in self.ck.kernel.params:
            b = self.ck.params[p.name]
            self.used.add(p.name)
            if isinstance(b.ty, TensorTy):
                v = Value(p.name, tensor_type(b.ty))
                self.values[p.name] = v
                params.append(Param(p.name, v.type, b.ty.dtype, p.mode, v))
            else:
                params.append(Param(p.name, None, b.ty.dtype))
        for s in self.ck.kernel.body:
            self.stmt(s)
        attrs = {"variant": self.ck.variant_name} if self.ck.variant else {}
        return Func(self.ck.kernel.name, params, self.blocks[0], "kernel", attrs, self.ck.kernel.span)

    # -------------------------------------------------------------- statements
    def stmt(self, s: ast.Stmt) -> None:
        self.reads_of(s)
        if isinstance(s, ast.Assign):
            if isinstance(s.target, ast.Name):
                b = self.t.defines[id(s)]
                v = self.value(s.value, name=b.ir_name)
                if v is not None and b.kind != "scalar":
                    self.values[b.ir_name] = v
            else:
                self.write(s)
        elif isinstance(s, ast.ExprStmt):
            call = self.t.call.get(id(s.expr))
            if call is not None and call.op == "scatter_update":
                tensorize_index.lower_scatter(self, s)
            elif call is not None and call.op == "print":
                e = s.expr
                args = tuple(self.t.scalar.get(id(a), 0) for a in e.args[1:])
                self.emit(Op("print", [], {"format": call.attrs["format"], "args": args}, span=s.span))
            else:
                self.write(s)
        elif isinstance(s, ast.Unpack):
            tensorize_index.lower_unpack(self, s)
        elif isinstance(s, ast.For):
            lp = self.t.loop[id(s)]
            trips = self.t.trips.get(id(s))
            if trips is not None:  # a trip count from data, checked against the call's largest dim
                count, bound = trips
                self.emit(Op("guard", [], {"cond": sym.compare("<=", count, bound), "access": "trips",
                                           "loop": lp.name, "offset": count, "extent": 0, "dim": bound},
                             span=s.iter.span))
            attrs = {"index": lp.index, "lo": lp.start, "hi": lp.stop, "step": lp.step, "name": lp.name}
            if lp.unrolled:
                attrs["unroll_var"] = lp.unrolled
            self.blocks.append([])
            for x in s.body:
                self.stmt(x)
            body = self.blocks.pop()
            self.emit(Op("loop", [], attrs, [], [body], s.span))
        elif isinstance(s, ast.If):
            cond = self.t.scalar[id(s.cond)]
            regions = []
            for branch in (s.body, s.orelse):
                self.blocks.append([])
                for x in branch:
                    self.stmt(x)
                regions.append(self.blocks.pop())
            self.emit(Op("if", [], {"cond": cond}, [], regions, s.span))

    def reads_of(self, s: ast.Stmt) -> None:
        """The element reads in a statement's own expressions (not in its body), before it and
        innermost first: a read anywhere in an expression (`y[i:i + 1, :] = x[ids[i], 0] * 2.0`,
        a condition, a loop bound, a view offset) defines the scalar the statement's ops use."""
        exprs = {ast.Assign: ("target", "value"), ast.ExprStmt: ("expr",), ast.For: ("iter",),
                 ast.If: ("cond",)}.get(type(s), ())
        for field in exprs:
            for node in _post_order(getattr(s, field)):
                if id(node) in self.t.read:
                    self.emit_read(node)

    def emit_read(self, e: ast.Expr) -> None:
        base, idx, symname = self.t.read[id(e)]
        if id(e) in self.reads_done or symname in self.syms_done:
            return  # the checker shares one read of an input element among the points it dominates
        self.reads_done.add(id(e))
        self.syms_done.add(symname)
        self.access_guards(e, "read")
        self.emit(Op("read", [self.values[base]], {"index": idx, "sym": symname, "dtype": self.t.ty[id(e)].dtype},
                     span=e.span))

    def write(self, s: ast.Stmt) -> None:
        w = self.t.write[id(s)]
        dst = self.values[w.target]
        for axis, offset, extent, dim in w.guards:
            # the region's bound on this dim depends on run-time values: the control program checks
            # it before any of the write's work, and stops the call when it fails
            # `offset <= dim - extent` rather than `offset + extent <= dim`: the offset may be any
            # value a tensor holds, and the sum could overflow the C++ integer it is computed in
            inside = sym.logical("and", sym.compare("<=", 0, offset), sym.compare("<=", offset, sym.sub(dim, extent)))
            cond = sym.logical("or", sym.compare("<=", extent, 0), inside)
            self.emit(Op("guard", [], {"cond": cond, "tensor": w.target, "axis": axis, "offset": offset,
                                       "extent": extent, "dim": dim}, span=s.span))
        vt = self.t.ty[id(w.value)]
        if isinstance(vt, ScalarTy):
            scalar = self.t.scalar[id(w.value)]
            self.emit(Op("fill", [dst], {"offsets": w.offsets, "shape": w.shape, "scalar": scalar}, span=s.span))
            return
        src = self.value(w.value)
        src = self.broadcast_to(src, w.shape, s.span)
        self.emit(Op("assemble", [dst, src], {"offsets": w.offsets}, span=s.span))

    def access_guards(self, e: ast.Expr, access: str) -> None:
        """The guards of a read whose bounds the checker could not prove (see ``Typer.access_guards``),
        before the read: a failed one stops the call (E0730) instead of reading outside the tensor."""
        for g in self.t.access.get(id(e), ()):
            inside = sym.logical("and", sym.compare("<=", 0, g.offset),
                                 sym.compare("<=", g.offset, sym.sub(g.dim, g.extent)))
            self.emit(Op("guard", [], {"cond": inside, "tensor": g.tensor, "axis": g.axis, "offset": g.offset,
                                       "extent": g.extent, "dim": g.dim, "access": access}, span=e.span))

    def broadcast_to(self, src: Value, shape: tuple[sym.Expr, ...], span) -> Value:
        """src spread over a write region of ``shape``, as numpy's ``t[region] = src`` does.

        The checker has already rejected shapes numpy would not broadcast. A value of the region's
        rank and extents is stored as it is; a dim of 1 written into a wider dim, and a value of
        fewer dims (whose tiles would not match the region's rank), go through ``broadcast``.
        """
        t: TensorType = src.type
        pad = len(shape) - t.rank
        sshape = (1,) * pad + tuple(t.shape)
        svalid = (1,) * pad + tuple(t.valid_shape)
        if pad == 0 and all(a == b for a, b in zip(sshape, shape)):
            return src
        valid = []
        for s, v, r in zip(sshape, svalid, shape):
            if s == r:
                valid.append(v)
            elif v == 1:
                valid.append(r)  # one valid element fills the whole dim
            else:
                # a length-1 dim whose valid extent is 0 or 1 at runtime: nothing or everything
                valid.append(sym.min_(sym.mul(v, r), r))
        out_valid = None if tuple(valid) == tuple(shape) else tuple(valid)
        out = Value(self.fresh("b"), TensorType(t.dtype, tuple(shape), out_valid))
        self.emit(Op("broadcast", [src], {}, [out], span=span))
        return out

    # -------------------------------------------------------------- expressions
    def value(self, e: ast.Expr, name: str | None = None) -> Value | None:
        """Emit the ops computing e; returns its tensor value (None for scalars)."""
        ty = self.t.ty.get(id(e))
        if isinstance(ty, ScalarTy):
            if id(e) in self.t.read:
                self.emit_read(e)
            return None
        b = self.t.binding.get(id(e))
        if isinstance(e, ast.Name) and b is not None:
            return self.values[b.ir_name]
        view = self.t.view.get(id(e))
        if view is not None:
            base = self.values[view.base]
            out = Value(self.named(name) if name else self.fresh("v"), tensor_type(self.t.ty[id(e)]))
            self.access_guards(e, "view")
            attrs = {"offsets": view.offsets}
            if view.given is not None:
                attrs["valid_given"] = view.given  # what the call-time length check reads (E0711)
            self.emit(Op("view", [base], attrs, [out], span=e.span))
            layout.note_view(self, base, out)
            return out
        call = self.t.call[id(e)]
        if call.op == "identity":
            return self.value(e.operand)
        if call.op in INDEXING:
            return tensorize_index.lower_call(self, e, call, name)
        out = Value(self.named(name) if name else self.fresh(), tensor_type(ty))
        if call.op in ("tensor", "zeros", "ones", "full"):
            attrs = {} if call.attrs["fill"] is None else {"fill": call.attrs["fill"]}
            self.emit(Op("alloc", [], attrs, [out], span=e.span))
            return out
        if call.op in layout.LAYOUT_CALLS:
            return layout.lower(self, e, call, out)
        operands = self.operands(e)
        attrs = dict(call.attrs)
        tensors = [v for v, _ in operands if v is not None]
        scalars = [(s, i) for i, (v, s) in enumerate(operands) if v is None]
        if scalars and OPS[call.op].kind not in ("select", "ternary"):
            scalar, pos = scalars[0]
            attrs["scalar"] = scalar
            if pos == 0 and not OPS[call.op].commutative:
                attrs["side"] = "left"
        elif scalars:  # by position: the second operand in `scalar`, the third in `scalar2`
            for scalar, pos in scalars:
                attrs["scalar" if pos == 1 else "scalar2"] = scalar
        if OPS[call.op].kind == "reduce" and "axes" in call.attrs:
            return reduce_axes(self, call, tensors[0], out, e.span)
        if OPS[call.op].kind == "reduce" and not call.attrs["keepdim"]:
            # reduce with keepdim, then drop the axis: the reshape is free on a contiguous tensor
            src = self.t.ty[id(e.args[0])]
            kshape = list(src.shape)
            kshape[call.attrs["axis"]] = 1
            kvalid = list(src.valid_shape)
            kvalid[call.attrs["axis"]] = 1
            kt = TensorType(src.dtype, tuple(kshape), None if kvalid == kshape else tuple(kvalid))
            tmp = Value(self.fresh(), kt)
            attrs["keepdim"] = True
            self.emit(Op(call.op, tensors, attrs, [tmp], span=e.span))
            self.emit(Op("reshape", [tmp], {}, [out], span=e.span))
            return out
        self.emit(Op(call.op, tensors, attrs, [out], span=e.span))
        return out

    def operands(self, e: ast.Expr) -> list[tuple[Value | None, sym.Expr | None]]:
        if isinstance(e, ast.BinOp | ast.Compare | ast.BoolOp):
            args = [e.left, e.right]
        elif isinstance(e, ast.UnaryOp):
            args = [e.operand]
        elif isinstance(e, ast.Call):
            args = list(e.args)
            op = self.t.call[id(e)].op
            if op == "cast":
                args = args[:1]
            elif op == "matmul" and e.keyword("bias") is not None:
                args.append(e.keyword("bias").value)  # the tensor op's optional third operand
        else:
            args = []
        # operands holding a product first: what is left of the expression (`acc * alpha` of
        # `acc * alpha + matmul(p, v)`) then lies next to the op that reads it, and fusion can keep
        # it in UB instead of storing it across the product (operands are pure: any order computes
        # the same)
        order = sorted(range(len(args)), key=lambda i: not self._has_matmul(args[i]))
        out: list[tuple[Value | None, sym.Expr | None]] = [(None, None)] * len(args)
        for i in order:
            v = self.value(args[i])
            out[i] = (v, None if v is not None else self.t.scalar.get(id(args[i])))
        return out

    def _has_matmul(self, e: ast.Expr) -> bool:
        return any(isinstance(n, ast.Call) and id(n) in self.t.call and self.t.call[id(n)].op == "matmul"
                   for n in ast.walk(e))


def run(checked: list[CheckedKernel], name: str, target: str, schedule: Schedule) -> Module:
    """Build one Tensor IR module holding a kernel per dtype variant. The module carries its target
    and schedule as attributes: the passes after this one read them there, not from the spec."""
    funcs = [_Builder(ck).build() for ck in checked]
    for f, ck in zip(funcs, checked):
        if ck.variant:
            f.name = "_".join([f.name, *(ck.variant[k] for k in sorted(ck.variant))])
    attrs = {"target": target, **schedule_attrs(schedule), "passes": ("tensorize",)}
    return Module(name, "tensor", funcs, attrs)
