"""The cost model over the Block IR alone: the control program and the kernels it launches are
walked with concrete dims but no data, charging each tile op to the pipeline model.

It is what the compiler uses to compare schedules before any input exists. Values read from
tensors at run time (``read``) are unknown here: they take the value the caller gives for that
tensor (the top of the test case's range for it, so lengths read from tensors are modelled at their
largest), else 1."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import sym
from ..ir import Func, Module, Op, TileType
from ..ir.opdefs import indexed_gm
from ..targets import Target
from .timeline import Timeline, nbytes

READ_VALUE = 1
MAX_OPS = 200_000  # a dry run that would walk more ops than this stops (TooLong)


class TooLong(Exception):
    """The modelled run is too long to walk op by op (huge shapes over small tiles)."""


@dataclass
class Estimate:
    timeline: Timeline
    gm_bytes: int  # bytes loaded from and stored to GM


def estimate(block: Module, control: str, symbols: Mapping[str, int], target: Target,
             scalars: Mapping[str, sym.Number] | None = None, reads: Mapping[str, int] | None = None,
             max_ops: int = MAX_OPS) -> Estimate:
    """The modelled run of ``control`` with the dims ``symbols`` (scalars default to 1); ``reads``
    gives, per tensor parameter, the value element reads of it return."""
    func = block.func(control)
    env: dict[str, sym.Number] = {p.name: 1 for p in func.params if not p.is_tensor}
    env |= dict(scalars or {}) | dict(symbols)
    run = _Run(block, Timeline(target), dict(reads or {}), max_ops)
    run.block(func.body, env, {})
    return Estimate(run.timeline, run.gm_bytes)


class _Run:
    def __init__(self, block: Module, timeline: Timeline, reads: dict[str, int], max_ops: int):
        self.reads = reads
        self.budget = max_ops
        self.kernels = {f.name: f for f in block.funcs if f.kind in ("vector", "cube")}
        self.timeline = timeline
        self.gm_bytes = 0

    def block(self, ops: list[Op], env: dict, valid: dict) -> None:
        for op in ops:
            self.op(op, env, valid)

    def op(self, op: Op, env: dict, valid: dict) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise TooLong
        name = op.name
        if name == "loop":
            lo, hi, step = (int(sym.evaluate(op.attrs[k], env)) for k in ("lo", "hi", "step"))
            for i in range(lo, hi, step):
                env[op.attrs["index"]] = i
                self.block(op.regions[0], env, valid)
        elif name == "if":
            self.block(op.regions[0] if sym.evaluate(op.attrs["cond"], env) else op.regions[1], env, valid)
        elif name == "read":
            env[op.attrs["sym"]] = self.reads.get(op.operands[0].name, READ_VALUE)
        elif name == "launch":
            self.launch(self.kernels[op.attrs["kernel"]], op, env)
        elif name.startswith("sync."):
            self.timeline.sync(op)
        elif name == "tile.alloc":
            t: TileType = op.result.type
            valid[op.result.name] = tuple(max(0, min(int(sym.evaluate(v, env)), s)) for v, s in zip(t.valid, t.shape))
        elif name.startswith("tile."):
            extents = [valid.get(v.name, ()) for v in op.operands]
            if name in ("tile.load", "tile.store"):
                tile = op.operands[0] if name == "tile.load" else op.operands[1]
                self.gm_bytes += nbytes(tile.type.dtype, valid[tile.name])
            elif any(indexed_gm(op)):  # a gather or scatter moves its data tile's bytes
                tile = op.operands[1] if indexed_gm(op)[1] else op.operands[0]
                self.gm_bytes += nbytes(tile.type.dtype, valid[tile.name])
            self.timeline.run(op, extents)

    def launch(self, kernel: Func, op: Op, env: dict) -> None:
        scalars = [p for p in kernel.params if not p.is_tensor]
        inner = {p.name: sym.evaluate(e, env) for p, e in zip(scalars, op.attrs["scalars"])}
        self.timeline.begin_kernel()
        self.block(kernel.body, inner, {})
        self.timeline.end_kernel()
