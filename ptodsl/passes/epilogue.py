"""Matmul epilogues (Tensor IR -> Tensor IR): the work the cube does on the way out of L0C is
folded into the matmul that feeds it, so a linear layer's product no longer goes through GM to a
vector kernel that adds its bias and applies its activation.

Requires: a ``level tensor`` module (after ``unroll``, before ``tile``).
Produces, where the product ``t = matmul(a, b)`` has no other reader than the op folded into it:

1. ``u = add(t, bias)`` (either order), ``bias`` a row of the product's columns (rank 1, the
   product's last dim and valid extent), becomes ``u = matmul(a, b, bias)``: the bias starts the
   accumulation (TMATMUL_BIAS). Only where the product is written in its accumulator's dtype (else
   the add would follow a rounding the fold removes), the target moves the bias's dtype into the
   bias table (``bias_moves``), the add is in the same region as the matmul with nothing between
   them that writes a tensor (the bias is then read earlier, at the matmul, with the same values),
   and the bias is defined before the matmul.
2. ``u = relu(t)`` becomes ``u = matmul(...) {relu = true}``: the fixpipe's relu as the
   accumulator leaves L0C (TSTORE with ``ReluPreMode::NormalRelu``), where the target's
   ``relu_stores`` lists the accumulator's dtype. Relu commutes with the rounding to the output
   dtype (both keep the sign, and zero is exact), so the result is the same to the bit.

Summation order is the only change (1.: the bias is the first term, not the last), as with a
bias given to ``matmul(bias=)``. Off with ``pass_options: {fused_ops: false}``.
"""

from __future__ import annotations

from ..ir import Func, Module, Op, TensorType, Value
from ..ir.opdefs import IR_OPS
from ..ir.schedule import schedule_of
from ..ops import MATMUL_ACCUMULATOR
from ..schedule import PASS_OPTION_DEFAULTS
from ..targets import Target
from .context import Pass, PassContext


def _readers(func: Func) -> dict[str, int]:
    out: dict[str, int] = {}
    for op in func.walk():
        for v in op.operands:
            out[v.name] = out.get(v.name, 0) + 1
    return out


def _order(func: Func) -> dict[str, int]:
    """Each value's place in program order (parameters first)."""
    out = {p.value.name: -1 for p in func.params if p.value is not None}
    for i, op in enumerate(func.walk()):
        for v in op.results:
            out[v.name] = i
    return out


def _writes(op: Op) -> bool:
    d = IR_OPS.get(op.name)
    return bool(op.regions) or d is None or d.dest is not None


class _Folder:
    def __init__(self, func: Func, target: Target) -> None:
        self.func, self.target = func, target
        self.readers = _readers(func)
        self.order = _order(func)
        self.changed = False

    def region(self, ops: list[Op]) -> list[Op]:
        for op in ops:
            op.regions = [self.region(r) for r in op.regions]
        made: dict[str, int] = {}  # a matmul's result -> its index in ops
        out: list[Op] = []
        for op in ops:
            if op.name == "matmul":
                made[op.result.name] = len(out)
                out.append(op)
                continue
            mm = self.product_of(op, made, out)
            if mm is not None and (op.name == "relu" or self.takes_bias(mm, op, out[made[mm.result.name] + 1:])):
                if op.name == "relu":
                    mm.attrs["relu"] = True
                else:
                    mm.operands = [*mm.operands, self.bias(mm, op)]
                del made[mm.result.name]
                mm.results = [op.result]
                made[op.result.name] = out.index(mm)
                self.changed = True
                continue
            out.append(op)
        return out

    def product_of(self, op: Op, made: dict[str, int], out: list[Op]) -> Op | None:
        """The matmul of this region whose result ``op`` is the only reader of, when ``op`` is one
        the fixpipe can take over."""
        if op.name not in ("relu", "add") or "scalar" in op.attrs or len(op.results) != 1:
            return None
        for v in op.operands:
            if v.name in made and self.readers.get(v.name) == 1:
                mm = out[made[v.name]]
                if op.operands.count(v) != 1 or op.result.type != mm.result.type or mm.attrs.get("relu"):
                    return None  # a bias after the relu is not the accumulation's first term
                acc = MATMUL_ACCUMULATOR.get(mm.operands[0].type.dtype)
                return mm if op.name == "add" or acc in self.target.relu_stores else None
        return None

    def bias(self, mm: Op, add: Op) -> Value:
        return next(v for v in add.operands if v.name != mm.result.name)

    def takes_bias(self, mm: Op, add: Op, between: list[Op]) -> bool:
        if len(mm.operands) > 2 or len(add.operands) != 2:
            return False
        bias = self.bias(mm, add)
        rt: TensorType = mm.result.type
        bt = bias.type
        acc = MATMUL_ACCUMULATOR.get(mm.operands[0].type.dtype)
        return (isinstance(bt, TensorType) and bt.rank == 1 and bt.shape[0] == rt.shape[-1]
                and bt.valid_shape[0] == rt.valid_shape[-1] and rt.dtype == acc
                and (bt.dtype == acc or self.target.moves_bias(acc, bt.dtype))
                and self.order.get(bias.name, len(self.order)) < self.order[mm.result.name]
                and not any(_writes(op) for op in between))

    def run(self) -> bool:
        self.func.body = self.region(self.func.body)
        return self.changed


def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()  # passes never mutate their input
    options = {**PASS_OPTION_DEFAULTS, **schedule_of(module).pass_options}
    if not options["fused_ops"]:
        return fresh
    for f in fresh.funcs:
        _Folder(f, ctx.target).run()
    return fresh


PASS = Pass("epilogue", "tensor", "tensor", run)
