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

    def write(self, s: ast.Stmt) -> None:
        w = self.t.write[id(s)]
        dst = self.values[w.target]
        for axis, offset, extent, dim in w.guards:
            # the region's bound on this dim depends on run-time values: the control program checks
            # it before any of the write's work, and stops the call when it fails
            inside = sym.logical("and", sym.compare("<=", 0, offset), sym.compare("<=", sym.add(offset, extent), dim))
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
            read = self.t.read.get(id(e))
            if read is not None:
                base, idx, symname = read
                self.emit(Op("read", [self.values[base]], {"index": idx, "sym": symname, "dtype": ty.dtype},
                             span=e.span))
            return None
        b = self.t.binding.get(id(e))
        if isinstance(e, ast.Name) and b is not None:
            return self.values[b.ir_name]
        view = self.t.view.get(id(e))
        if view is not None:
            base = self.values[view.base]
            out = Value(self.named(name) if name else self.fresh("v"), tensor_type(self.t.ty[id(e)]))
            self.emit(Op("view", [base], {"offsets": view.offsets}, [out], span=e.span))
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
        operands = self.operands(e)
        attrs = dict(call.attrs)
        tensors = [v for v, _ in operands if v is not None]
        scalars = [(s, i) for i, (v, s) in enumerate(operands) if v is None]
        if scalars and call.op not in ("where",):
            scalar, pos = scalars[0]
            attrs["scalar"] = scalar
            if pos == 0 and not OPS[call.op].commutative:
                attrs["side"] = "left"
        elif scalars:
            for scalar, pos in scalars:
                attrs["scalar" if pos == 1 else "scalar2"] = scalar
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
        if isinstance(e, ast.BinOp | ast.Compare):
            args = [e.left, e.right]
        elif isinstance(e, ast.UnaryOp):
            args = [e.operand]
        elif isinstance(e, ast.Call):
            args = list(e.args)
            if self.t.call[id(e)].op == "cast":
                args = args[:1]
        else:
            args = []
        out = []
        for a in args:
            v = self.value(a)
            out.append((v, None if v is not None else self.t.scalar.get(id(a))))
        return out


def run(checked: list[CheckedKernel], name: str, target: str, schedule: Schedule) -> Module:
    """Build one Tensor IR module holding a kernel per dtype variant. The module carries its target
    and schedule as attributes: the passes after this one read them there, not from the spec."""
    funcs = [_Builder(ck).build() for ck in checked]
    for f, ck in zip(funcs, checked):
        if ck.variant:
            f.name = "_".join([f.name, *(ck.variant[k] for k in sorted(ck.variant))])
    attrs = {"target": target, **schedule_attrs(schedule), "passes": ("tensorize",)}
    return Module(name, "tensor", funcs, attrs)
