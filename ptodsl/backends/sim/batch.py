"""The simulator's batched loops: every iteration of a parallel control-program loop at once.

Interpreting a kernel tile op by tile op costs tens of microseconds of Python per op, so a loop of
thousands of iterations over small tiles spends its time in the interpreter, not in numpy. A loop
whose iterations are independent (the analysis the C++ backend runs them in parallel by,
``backends/cpp/parallel.py``: every GM write of an iteration lands where no other iteration writes
or reads) runs here as one evaluation of its body in which every tile holds all the iterations'
tiles, stacked along a leading axis. The loop index is a numpy array; an expression of it (a view
offset, a kernel argument) is an array too, and must be affine in the iteration where it places
GM data (a load or store then moves a strided view of all the iterations' regions at once) and the
same for all iterations where it shapes a tile (valid extents, loop bounds, branch conditions).
On-chip buffers are per iteration: a buffer per memory space with a leading iteration axis, each
tile a view at its planned offset, so tiles alias exactly as in the element-wise run, and poisoning
fills each fresh tile of every iteration. Each op is then the element-wise simulator's own numpy
code on the stacked arrays (the same ufuncs on the same values: bit for bit its results; a
reduction along one more axis adds in the same order), so the results do not depend on batching.

The last iteration runs alone, after the others: it is where a tail (a partial tile) usually is.
Whenever something cannot be batched -- an op family without a batched meaning here, a valid
extent or a condition that differs between iterations, an offset that is not affine, a failed
check -- the loop is run element-wise from the start instead (iterations never read what any of
them write, so running them again gives the same GM contents), with the traffic counts and the
cost model's timeline put back as they were. The cost model sees each op once per batch, with one
iteration's extents, and the batch's share is that iteration's times the number of iterations
(every launch starts from idle pipes, so alike iterations cost alike). Batches are cut to keep the
stacked buffers under :data:`BUDGET_BYTES`.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ... import sym
from ...dtypes import numpy_dtype
from ...ir import Func, Op, TileType
from ...ir.opdefs import IR_OPS

BUDGET_BYTES = 64 << 20  # stacked on-chip buffers and workspaces of one batch
ENABLED = True  # tests compare batched and element-wise runs by turning this off


@dataclass
class BatchStats:
    """What the batched loops did in this process (tests check that a loop really batched)."""

    batched: int = 0  # loops run batched
    iterations: int = 0  # the iterations they ran batched
    fallbacks: int = 0  # eligible loops that turned out not to batch and ran element-wise
    reasons: dict[str, int] = field(default_factory=dict)  # why, by message


STATS = BatchStats()


class Unbatchable(Exception):
    """This loop cannot run batched; it runs element-wise instead."""


@dataclass
class BView:
    """GM data that moves with the iteration: iteration i sees ``base`` shifted by ``i * step``
    bytes (a view of an input or output, or a workspace of each iteration)."""

    base: np.ndarray
    step: int

    @property
    def shape(self) -> tuple[int, ...]:
        return self.base.shape

    def stacked(self, n: int) -> np.ndarray:
        return np.lib.stride_tricks.as_strided(self.base, (n, *self.base.shape), (self.step, *self.base.strides))


def varying(v: object) -> bool:
    return isinstance(v, np.ndarray)


def uniform(v: object, what: str) -> sym.Number:
    """The value all iterations share, or Unbatchable."""
    if not isinstance(v, np.ndarray):
        return v  # type: ignore[return-value]
    first = v.flat[0]
    if not np.all(v == first):
        raise Unbatchable(f"{what} differs between iterations")
    return first.item()


def affine(v: object, what: str) -> tuple[int, int]:
    """(value at iteration 0, increment per iteration) of an integer that is affine in the
    iteration, or Unbatchable."""
    if not isinstance(v, np.ndarray):
        return int(v), 0  # type: ignore[call-overload]
    start = int(v[0])
    step = int(v[1]) - start if v.size > 1 else 0
    if not np.array_equal(v, start + step * np.arange(v.size)):
        raise Unbatchable(f"{what} is not affine in the iteration")
    return start, step


_BINARY: dict[str, Callable] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "//": np.floor_divide, "%": np.mod,
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal,
    "and": np.logical_and, "or": np.logical_or,
}


def evaluate(e: sym.Expr, env: dict) -> object:
    """``sym.evaluate`` where symbols may be arrays over the iterations: an expression of none of
    them is evaluated by ``sym.evaluate`` itself, so scalars mean exactly what they do there."""
    if not any(varying(env.get(name)) for name in sym.free_symbols(e)):
        return sym.evaluate(e, env)
    if isinstance(e, sym.Sym):
        return env[e.name]
    if isinstance(e, sym.NegExpr):
        return np.negative(evaluate(e.operand, env))
    if isinstance(e, sym.BinExpr) and e.op in _BINARY:
        return _BINARY[e.op](evaluate(e.left, env), evaluate(e.right, env))
    if isinstance(e, sym.CallExpr):
        args = [evaluate(x, env) for x in e.args]
        if e.fn in ("min", "max"):
            out = args[0]
            for a in args[1:]:
                out = (np.minimum if e.fn == "min" else np.maximum)(out, a)
            return out
        if e.fn == "cdiv":
            return np.negative(np.floor_divide(np.negative(args[0]), args[1]))
        if e.fn == "not":
            return np.logical_not(args[0])
    raise Unbatchable(f"cannot evaluate {e!r} for all iterations")


# ------------------------------------------------------------------------ which loops batch

# The op families the batched interpreter knows (ops.py's handlers), and those it runs through the
# element-wise simulator's own handler with batched tiles.
FAMILIES = frozenset({
    "loop", "if", "view", "reshape", "alloc", "launch", "sync_set", "sync_wait", "sync_barrier", "tile_alloc",
    "load", "store", "fill_tile", "expand", "mov", "matmul", "matmul_acc", "matmul_bias", "reduce", "cast",
    "compare", "select", "unary", "binary", "expand_binary", "muladd",
})

_eligible: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def eligible(module, control: Func, loop: Op) -> bool:
    """Whether ``loop`` (of ``control``) may run batched: its iterations are independent and every
    op of its body and of the kernels it launches has a batched meaning."""
    known = _eligible.get(loop)
    if known is None:
        known = _judge(module, control, loop)
        _eligible[loop] = known
    return known


def _judge(module, control: Func, loop: Op) -> bool:
    if loop.attrs.get("kind") in ("implicit", "peeled") or loop.attrs.get("parallel") != 1:
        return False  # the parallel pass's proof (passes/parallel.py) that the iterations are independent
    kernels = {f.name: f for f in module.funcs}
    for op in (o for region in loop.regions for top in region for o in top.walk()):
        if IR_OPS[op.name].family not in FAMILIES:
            return False
        if op.name == "launch":
            kernel = kernels.get(op.attrs["kernel"])
            if kernel is None or any(IR_OPS[k.name].family not in FAMILIES for k in kernel.walk()):
                return False
    return True


def arena_bytes(module, loop: Op) -> dict[str, int]:
    """Per memory space, the bytes the kernels launched in ``loop`` place tiles in."""
    kernels = {f.name: f for f in module.funcs}
    used: dict[str, int] = {}
    for op in (o for region in loop.regions for top in region for o in top.walk()):
        if op.name != "launch":
            continue
        for t in kernels[op.attrs["kernel"]].walk():
            if t.name == "tile.alloc" and "offset" in t.attrs:
                ty: TileType = t.result.type
                end = t.attrs["offset"] + math.prod(ty.shape) * np.dtype(numpy_dtype(ty.dtype)).itemsize
                used[ty.space] = max(used.get(ty.space, 0), end)
    return used


# ------------------------------------------------------------------------------- the loop


def run_loop(m, op: Op, lo: int, hi: int, step: int, block: Callable) -> bool:
    """Run the iterations of ``op`` but the last batched, then the last alone; False (with
    nothing changed but GM data the element-wise run rewrites) when the loop cannot batch."""
    from . import batch_ops

    iters = range(lo, hi, step)
    if len(iters) < 3 or not ENABLED or not eligible(m.module, m.control, op):
        return False
    used = arena_bytes(m.module, op)
    per_iteration = sum(-(-b // 64) * 64 for b in used.values()) or 64
    chunk = max(2, min(len(iters) - 1, BUDGET_BYTES // per_iteration))
    saved = _snapshot(m)
    try:
        for start in range(0, len(iters) - 1, chunk):
            values = np.asarray(iters[start:min(start + chunk, len(iters) - 1)], np.int64)
            batch_ops.run_batch(m, op, values, used, block)
    except Unbatchable as exc:
        _restore(m, saved)
        STATS.fallbacks += 1
        STATS.reasons[str(exc)] = STATS.reasons.get(str(exc), 0) + 1
        return False
    STATS.batched += 1
    STATS.iterations += len(iters) - 1
    m.env[op.attrs["index"]] = iters[-1]
    block(m, op.regions[0])
    return True


def _snapshot(m) -> tuple:
    t = m.timeline
    timeline = None if t is None else (t.elapsed, dict(t.busy), dict(t.free), dict(t.gate), dict(t.events))
    return (dict(m.traffic), {k: dict(v) for k, v in m.traffic_by_buffer.items()}, timeline, dict(m.env))


def _restore(m, saved: tuple) -> None:
    traffic, by_buffer, timeline, env = saved
    m.traffic.clear()
    m.traffic.update(traffic)
    m.traffic_by_buffer.clear()
    m.traffic_by_buffer.update(by_buffer)
    m.env.clear()
    m.env.update(env)
    if timeline is not None:
        t = m.timeline
        t.elapsed, t.busy, t.free, t.gate, t.events = timeline[0], timeline[1], timeline[2], timeline[3], timeline[4]


def scale_timeline(m, before: tuple | None, n: int) -> None:
    """The batch ran each op once with one iteration's extents: count the other n - 1 alike."""
    t = m.timeline
    if t is None or before is None:
        return
    elapsed, busy = before
    t.elapsed += (n - 1) * (t.elapsed - elapsed)
    for pipe, cycles in list(t.busy.items()):
        t.busy[pipe] = cycles + (n - 1) * (cycles - busy.get(pipe, 0.0))


__all__ = ["BUDGET_BYTES", "ENABLED", "STATS", "BView", "BatchStats", "Unbatchable", "affine", "eligible", "evaluate",
           "run_loop", "uniform"]
