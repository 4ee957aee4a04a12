"""The cost model over the Block IR alone: the control program and the kernels it launches are
walked with concrete dims but no data, charging each tile op to the pipeline model.

It is what the compiler uses to compare schedules before any input exists, and what models the
chip on shapes far too large to simulate. Values read from tensors at run time (``read``) take the
test case's own values where its ``inputs:`` gives that tensor, else the value the caller gives
for it (the top of the test case's range for it, so lengths read from tensors are modelled at their
largest), else 1.

A loop of many iterations (or a launch of many blocks) is not walked through: where the
iterations are alike (:mod:`.alike`: the same cost-deciding values, and every expression deciding
them monotone in the index, so only the first and last iterations can differ), the dry run walks
the first few until one iteration advances the model exactly as the one before it (the pipes are
in their steady state), checks that the second-to-last iteration is alike too, advances the model
by that one iteration's amounts times the iterations it skips, and walks the last two. A
16M-element softmax or a 4096^3 matmul is modelled from a few hundred ops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import sym
from ..ir import Func, Module, Op, TileType
from ..ir.opdefs import indexed_gm, launched_params
from ..targets import Target
from . import steady
from .alike import cost_exprs, index_ranges, kernel_exprs, monotone_in, period
from .chip import launch_footprint
from .timeline import Timeline, nbytes

READ_VALUE = 1
MAX_OPS = 200_000  # a dry run that would walk more ops than this stops (TooLong)
# the report (``ptodsl ir --stats``) runs once per case, not inside every compile as the tile
# search does: it can afford nested sampled loops (a block's share of a 3-deep nest over a reduction)
REPORT_MAX_OPS = 1_500_000
SAMPLE_FROM = 10  # loops of fewer iterations are walked through
WARM_UP = 10  # at most this many first iterations to reach a steady state before sampling anyway


class TooLong(Exception):
    """The modelled run is too long to walk op by op (huge shapes over small tiles)."""


@dataclass
class Estimate:
    timeline: Timeline
    gm_bytes: int  # bytes loaded from and stored to GM
    walked: int = 0  # ops the dry run walked (sampling keeps it small on chip-filling shapes)


def estimate(block: Module, control: str, symbols: Mapping[str, int], target: Target,
             scalars: Mapping[str, sym.Number] | None = None, reads: Mapping[str, Any] | None = None,
             max_ops: int = MAX_OPS, sample: bool = True) -> Estimate:
    """The modelled run of ``control`` with the dims ``symbols`` (scalars default to 1); ``reads``
    gives, per tensor parameter, the value element reads of it return, or the array they read
    (a case's explicit input). ``sample=False`` walks every iteration of every loop (what sampling
    must agree with)."""
    func = block.func(control)
    env: dict[str, sym.Number] = {p.name: 1 for p in func.params if not p.is_tensor}
    env |= dict(scalars or {}) | dict(symbols)
    run = _Run(block, Timeline(target), dict(reads or {}), max_ops, sample)
    run.block(func.body, env, {})
    return Estimate(run.timeline, int(round(run.gm_bytes)), max_ops - run.budget)


class _Run:
    def __init__(self, block: Module, timeline: Timeline, reads: dict[str, Any], max_ops: int, sample: bool):
        self.reads = reads
        self.budget = max_ops
        self.kernels = {f.name: f for f in block.funcs if f.kind in ("vector", "cube", "mixed")}
        self.timeline = timeline
        self.gm_bytes = 0.0
        self.sample = sample
        self.trace: list = []  # the cost-deciding values evaluated so far in the current iteration
        self._exprs: dict[int, tuple] = {}  # loop op id -> the expressions its body's cost depends on (alike.cost_exprs)

    def read(self, op: Op, env: dict) -> sym.Number:
        """What an element read gives: the case's own value at the index when it gives the tensor's
        values, else the one value it stands for (the top of its range)."""
        given = self.reads.get(op.operands[0].name, READ_VALUE)
        if not isinstance(given, np.ndarray):
            return given
        try:
            index = tuple(int(sym.evaluate(i, env)) for i in op.attrs["index"])
        except (KeyError, TypeError):
            return READ_VALUE
        if len(index) != given.ndim or not all(0 <= i < n for i, n in zip(index, given.shape)):
            return READ_VALUE
        value = given[index].item()
        return int(value) if float(value).is_integer() else float(value)

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
            self.trace.append(len(range(lo, hi, step)))
            index = op.attrs["index"]

            def one(i: int) -> None:
                env[index] = i
                self.block(op.regions[0], env, valid)

            self.each(range(lo, hi, step), one, self._loop_exprs(op), index, env)
        elif name == "if":
            cond = bool(sym.evaluate(op.attrs["cond"], env))
            self.trace.append(cond)
            self.block(op.regions[0] if cond else op.regions[1], env, valid)
        elif name == "read":
            env[op.attrs["sym"]] = self.read(op, env)
        elif name == "launch":
            self.launch(self.kernels[op.attrs["kernel"]], op, env)
        elif name.startswith("sync."):
            self.timeline.sync(op)
        elif name == "tile.alloc":
            t: TileType = op.result.type
            v = tuple(max(0, min(int(sym.evaluate(x, env)), s)) for x, s in zip(t.valid, t.shape))
            valid[op.result.name] = v
            self.trace.append(v)
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
        inner = {p.name: sym.evaluate(e, env) for p, e in zip(launched_params(kernel), op.attrs["scalars"])}
        blocks = int(sym.evaluate(op.attrs.get("block_dim", 1), env))
        self.trace.append(("launch", kernel.name, blocks))
        index, count = kernel.attrs.get("block_index"), kernel.attrs.get("block_count")
        if count is not None:
            inner[count] = blocks
        tl = self.timeline
        tl.begin_launch(kernel.kind, launch_footprint(op, lambda d: sym.evaluate(d, env), kernel))

        def one(b: int) -> None:
            benv = dict(inner)
            if index is not None:
                benv[index] = b
            tl.begin_kernel()
            self.block(kernel.body, benv, {})
            tl.end_kernel()

        keys = kernel.attrs.get("block_key")  # what decides a block's cost (passes/blocks_flat.py)
        if keys is not None and index is not None and self.sample:
            self.trace.append(("blocks by key",))
            seen: dict[tuple, dict] = {}
            for b in range(blocks):
                key = tuple(sym.evaluate(e, inner | {index: b}) for e in keys)
                if key in seen:
                    self._advance(seen[key], 1)
                    continue
                before = self._state()
                one(b)
                seen[key] = steady.diff(self._state(), before)
            tl.end_launch()
            return
        if index is None:
            self.iterate(range(blocks), one, lambda: True)
        else:
            self.each(range(blocks), one, kernel_exprs(kernel), index, inner)
        tl.end_launch()

    def _loop_exprs(self, op: Op) -> tuple[list[sym.Expr], dict[str, sym.Expr]]:
        out = self._exprs.get(id(op))
        if out is None:
            out = self._exprs[id(op)] = cost_exprs(op.regions[0], self.kernels)
        return out

    @staticmethod
    def _monotone(found: tuple[list[sym.Expr], dict[str, sym.Expr]], var: str, span: range, env: dict) -> bool:
        exprs, counts = found
        return monotone_in(exprs, var, env, index_ranges(var, span[0], span[-1], counts, env))

    # ------------------------------------------------------------------ sampling
    def each(self, span: range, one: Callable[[int], None], found: tuple[list[sym.Expr], dict[str, sym.Expr]],
             var: str, env: dict) -> None:
        """Run ``one`` for every index of ``span``, sampled where the iterations are alike in the
        expressions ``found`` (alike.cost_exprs). Where a ``%`` of the index wraps (a flattened
        nest's column), the iterations a period apart are: each such class is sampled on its own."""
        if not self.sample or len(span) < SAMPLE_FROM:
            self.iterate(span, one, lambda: True)
            return
        ranges = index_ranges(var, span[0], span[-1], found[1], env)
        if not monotone_in(found[0], var, env, ranges):
            p = period(found[0], var, env, span.step, ranges)
            if p is not None and 1 < p and len(span) // p >= SAMPLE_FROM:
                row = var + "#row"
                for c in range(p):
                    sub = span[c::p]
                    at = {var: sym.add(sub.start, sym.mul(sym.Sym(row), sub.step))}
                    moved = ([sym.substitute(e, at) for e in found[0]],
                             {k: sym.substitute(n, at) for k, n in found[1].items()})
                    rows = range(len(sub))
                    self.iterate(rows, lambda r, sub=sub: one(sub[r]),
                                 lambda moved=moved, rows=rows: self._monotone(moved, row, rows, env))
                return
            self.iterate(span, one, lambda: False)
            return
        self.iterate(span, one, lambda: True)

    def iterate(self, trips: range, one: Callable[[int], None], monotone: Callable[[], bool]) -> None:
        """Run ``one`` for every index of ``trips``, or for a few when the iterations are alike
        (module docstring): the model then advances by the skipped iterations' amounts."""
        n = len(trips)
        if not self.sample or n < SAMPLE_FROM:
            for i in trips:
                one(i)
            return
        traces: list[tuple] = []
        deltas: list[dict] = []
        done = 0
        period = 1
        while done < WARM_UP:
            before = self._state()
            traces.append(self._traced(one, trips[done]))
            deltas.append(steady.diff(self._state(), before))
            done += 1
            if done >= 3 and (traces[-1] != traces[1] or steady.same(deltas[-1], deltas[-2])):
                break
            if done >= 6 and steady.same(deltas[-1], deltas[-3]) and steady.same(deltas[-2], deltas[-4]):
                # iterations alike two by two: a double-buffered body alternates its buffers and
                # event ids, and a pipeline of two cores may settle into a period of two iterations
                period = 2
                break
        last = n - 2
        alike = traces[-1] == traces[1] and monotone()
        if alike:
            saved = self._state()
            probe = self._traced(one, trips[last])
            self._set_state(saved)
            alike = probe == traces[1]
        self.trace.append(tuple(traces))
        if not alike:
            for k in range(done, n):
                one(trips[k])
            return
        skipped = last - done
        if period == 2:
            if skipped % 2:  # one more walked: the rest are whole pairs
                one(trips[done])
                skipped -= 1
            self._advance(steady.joined(deltas[-2], deltas[-1]), skipped // 2)
        else:
            self._advance(deltas[-1], skipped)
        self.trace.append(("skipped", skipped))
        one(trips[last])
        one(trips[last + 1])

    def _traced(self, one: Callable[[int], None], i: int) -> tuple:
        outer, self.trace = self.trace, []
        try:
            one(i)
            return tuple(self.trace)
        finally:
            self.trace = outer

    def _state(self) -> dict:
        s = steady.state(self.timeline)
        s[("run", "gm_bytes")] = self.gm_bytes
        return s

    def _set_state(self, s: dict) -> None:
        self.gm_bytes = s[("run", "gm_bytes")]
        steady.set_state(self.timeline, s)

    def _advance(self, delta: dict, times: int) -> None:
        """The model as if ``times`` more iterations had each changed it by ``delta``."""
        steady.advance(self.timeline, self._state(), delta, times, self._set_state)
