"""The simulator's batched loops: every iteration of a parallel loop at once.

Interpreting a kernel tile op by tile op costs tens of microseconds of Python per op, so a loop of
thousands of iterations over small tiles spends its time in the interpreter, not in numpy. A loop
whose iterations are independent (``parallel = 1``, the parallel pass's proof, ``passes/parallel.py``:
every GM write of an iteration lands where no other iteration writes or reads) runs here as one
evaluation of its body in which every tile holds all the iterations' tiles, stacked along a leading
axis: a loop of the control program (its launches included), a loop inside a compute kernel, and
the loop a launch's blocks share out (``passes/blocks.py``), whose blocks together are one batched
evaluation of all the loop's iterations. The loop index is a numpy array; an expression of it (a
view offset, a kernel argument) is an array too, and must be affine in the iteration where it
places GM data (a load or store then moves a strided view of all the iterations' regions at once)
and the same for all iterations where it shapes a tile (valid extents, loop bounds, branch
conditions). On-chip buffers are per iteration: a buffer per memory space with a leading iteration
axis, each tile a view at its planned offset, so tiles alias exactly as in the element-wise run,
and poisoning fills each fresh tile of every iteration. Each op is then the element-wise
simulator's own numpy code on the stacked arrays (the same ufuncs on the same values: bit for bit
its results; a reduction along one more axis adds in the same order), so the results do not depend
on batching.

The last iteration runs alone, after the others: it is where a tail (a partial tile) usually is.
Whenever something cannot be batched -- an op family without a batched meaning here, a tile made
before the loop that the loop writes (one it only reads is the same for every iteration), a
valid extent or a condition that differs between iterations, an offset that is
not affine, a failed check or guard -- the loop (or the launch's blocks) is run element-wise from
the start instead (iterations never read what any of them write, so running them again gives the
same GM contents, and the element-wise run stops at the first failing iteration as it would have),
with the traffic counts put back. The cost model is told nothing while a batch runs: a
:class:`~ptodsl.cost.steady.Recorder` keeps one iteration's calls, which are then made on the model
once per iteration in the element-wise order (block by block for a launch), the model advanced
in one step once the iterations settle into a steady state (``cost/steady.py``), so its cycles
are those of the element-wise run. Batches are cut to keep the stacked buffers under
:data:`BUDGET_BYTES`.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ... import sym
from ...cost.steady import Recorder, play
from ...diagnostics import DiagnosticError
from ...dtypes import numpy_dtype
from ...ir import Func, Op, TileType
from ...ir.opdefs import IR_OPS
from ...ir.queues import buffer_of

BUDGET_BYTES = 64 << 20  # stacked on-chip buffers and workspaces of one batch
ENABLED = True  # tests compare batched and element-wise runs by turning this off


@dataclass
class BatchStats:
    """What the batched loops did in this process (tests check that a loop really batched)."""

    batched: int = 0  # loops run batched
    iterations: int = 0  # the iterations they ran batched
    launches: int = 0  # of them, launches whose blocks shared out a loop
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
    "compare", "select", "unary", "binary", "expand_binary", "muladd", "guard",
})

_eligible: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def eligible(kernels: Mapping[str, Func], loop: Op) -> bool:
    """Whether ``loop`` (of a control program or of a compute kernel) may run batched: the parallel
    pass proved its iterations independent, every op of its body and of the kernels it launches
    has a batched meaning, and it writes no tile made before it (each iteration's tiles are its own;
    one made before it and only read is the same for all)."""
    known = _eligible.get(loop)
    if known is None:
        known = _judge(kernels, loop)
        _eligible[loop] = known
    return known


_outer: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def outer_tiles(loop: Op) -> frozenset[str]:
    """The tiles the body of ``loop`` reads but does not make (made before the loop: the loads a
    one-pass row loop hoists, ``passes/tile_fit.py``)."""
    known = _outer.get(loop)
    if known is None:
        body = [o for region in loop.regions for top in region for o in top.walk()]
        made = {r.name for o in body for r in o.results}
        known = frozenset(v.name for o in body for v in o.operands if isinstance(v.type, TileType) and v.name not in made)
        _outer[loop] = known
    return known


def _judge(kernels: Mapping[str, Func], loop: Op) -> bool:
    if loop.attrs.get("kind") in ("implicit", "peeled") or loop.attrs.get("parallel") != 1:
        return False  # the parallel pass's proof (passes/parallel.py) that the iterations are independent
    body = [o for region in loop.regions for top in region for o in top.walk()]
    outer = outer_tiles(loop)
    for op in body:
        if IR_OPS[op.name].family not in FAMILIES:
            return False
        # a tile made before the loop is the same for every iteration only while none writes it
        if any(op.operands[i].name in outer for i in IR_OPS[op.name].reads_writes(len(op.operands))[1]):
            return False
        if op.name == "launch":
            kernel = kernels.get(op.attrs["kernel"])
            if kernel is None or any(IR_OPS[k.name].family not in FAMILIES for k in kernel.walk()):
                return False
    return True


def arena_bytes(kernels: Mapping[str, Func], loop: Op) -> dict[str, int]:
    """Per memory space, the bytes the body of ``loop`` and the kernels it launches place tiles in."""
    used: dict[str, int] = {}
    for op in (o for region in loop.regions for top in region for o in top.walk()):
        inner = kernels[op.attrs["kernel"]].walk() if op.name == "launch" else [op]
        for t in inner:
            if t.name == "tile.alloc" and "offset" in t.attrs:
                ty: TileType = t.result.type
                end = t.attrs["offset"] + math.prod(ty.shape) * np.dtype(numpy_dtype(ty.dtype)).itemsize
                used[buffer_of(t)] = max(used.get(buffer_of(t), 0), end)
    return used


# ------------------------------------------------------------------------------- the loops

# What the cost model is to be told about a loop's iterations, in order: (recorded calls of one
# iteration, how many iterations made them).
Runs = list[tuple[list[tuple], int]]


def _iterations(m, loop: Op, values: np.ndarray, env: dict, tensors: dict, lone,
                own: Mapping[str, np.ndarray] | None = None) -> Runs:
    """Evaluate ``loop``'s body for the iterations whose index takes ``values``: all but the last in
    batches, the last (and a batch's odd one out) alone on the machine ``lone``; ``own``
    gives symbols whose value differs between the iterations (the block index, where they come
    from several blocks), aligned with ``values``. Raises Unbatchable."""
    from . import batch_ops

    used = arena_bytes(m.kernels, loop)
    per_iteration = sum(-(-b // 64) * 64 for b in used.values()) or 64
    chunk = max(2, min(len(values) - 1, BUDGET_BYTES // per_iteration))
    runs: Runs = []
    for start in range(0, len(values) - 1, chunk):
        part = values[start:min(start + chunk, len(values) - 1)]
        if len(part) == 1:  # on the last iteration's machine, with this iteration's own symbols
            mine = {k: v[start].item() for k, v in (own or {}).items()}
            runs.append((_alone(m, loop, int(part[0]), lone, mine), 1))
            continue
        record = Recorder() if m.timeline is not None else None
        stop = start + len(part)
        batch_ops.run_batch(m, loop, part, used, env | {k: v[start:stop] for k, v in (own or {}).items()},
                            tensors, record, lone.tiles)
        runs.append((record.events if record else [], len(part)))
    runs.append((_alone(m, loop, int(values[-1]), lone), 1))
    return runs


def _alone(m, loop: Op, value: int, lone, mine: Mapping[str, object] | None = None) -> list[tuple]:
    """One iteration of ``loop`` run element-wise on ``lone``, seeing ``mine`` (its own block's
    index, where it is not the block of ``lone``); the cost model's calls it made."""
    from . import _block

    record = Recorder() if m.timeline is not None else None
    timeline, lone.timeline = lone.timeline, record
    saved = {k: lone.env[k] for k in (mine or {}) if k in lone.env}
    lone.env.update(mine or {})
    lone.env[loop.attrs["index"]] = value
    try:
        _block(lone, loop.regions[0])
    except DiagnosticError as exc:  # the element-wise run reports it where it happens
        raise Unbatchable(str(exc)) from None
    finally:
        lone.timeline = timeline
        for k in mine or {}:
            if k in saved:
                lone.env[k] = saved[k]
            else:
                lone.env.pop(k, None)
    return record.events if record else []


def _attempt(m, evaluate: Callable[[], object]) -> object:
    """``evaluate()``, or None with the traffic counts and symbols put back when it cannot batch."""
    saved = (dict(m.traffic), {k: dict(v) for k, v in m.traffic_by_buffer.items()}, dict(m.env))
    try:
        return evaluate()
    except Unbatchable as exc:
        m.traffic.clear()
        m.traffic.update(saved[0])
        m.traffic_by_buffer.clear()
        m.traffic_by_buffer.update(saved[1])
        m.env.clear()
        m.env.update(saved[2])
        STATS.fallbacks += 1
        STATS.reasons[str(exc)] = STATS.reasons.get(str(exc), 0) + 1
        return None


def run_loop(m, op: Op, lo: int, hi: int, step: int) -> bool:
    """Run the iterations of ``op`` (a loop of the control program, or of a kernel the machine ``m``
    runs) but the last batched, then the last alone; False (with nothing changed but GM data the
    element-wise run rewrites) when the loop cannot batch."""
    iters = range(lo, hi, step)
    if m.arenas is None or len(iters) < 3 or not ENABLED or not eligible(m.kernels, op):
        return False
    runs = _attempt(m, lambda: _iterations(m, op, np.asarray(iters, np.int64), m.env, m.tensors, m))
    if runs is None:
        return False
    STATS.batched += 1
    STATS.iterations += len(iters) - 1
    if m.timeline is not None:
        play(m.timeline, [("repeat", events, n) for events, n in runs])
    return True


def preamble(ops: list[Op]) -> int:
    """How many leading ops of a kernel are tile work before its first loop (with the
    synchronisations among them): what every block runs before its share of the loop."""
    n = 0
    for o in ops:
        if o.name == "loop" or not (o.name.startswith("tile.") or o.name.startswith("sync.")):
            break
        n += 1
    return n if any(o.name.startswith("tile.") for o in ops[:n]) else 0


def block_loops(kernel: Func) -> tuple[list[Op], dict[str, int]] | None:
    """(the ops of a kernel run as blocks: its tile work before the first loop (``preamble``), its
    loops, which share out their iterations, between synchronisations; the indices of the
    one-trip loops around them, perhaps inside the loop around top-level work), else None
    (``passes/blocks.py``)."""
    ops, before, after, around = kernel.body, [], [], {}
    lead = preamble(ops)
    before, ops = ops[:lead], ops[lead:]
    while True:
        if any(o.name != "loop" and not o.name.startswith("sync.") for o in ops):
            return None
        loops = [o for o in ops if o.name == "loop"]
        if not loops:
            return None
        one = loops[0]
        if len(loops) > 1 or one.attrs.get("kind") not in ("implicit", "peeled") or one.attrs["lo"] != 0 \
                or one.attrs["hi"] != 1:
            return before + ops + after, around
        at = ops.index(one)
        before, after = before + ops[:at], ops[at + 1:] + after
        around[one.attrs["index"]] = 0
        ops = one.regions[0]


def run_blocks(m, kernel: Func, envs: list[dict], machine: Callable, footprint: float | None = None) -> bool:
    """Run the blocks of one launch (``envs``: each block's symbols) as one batched evaluation of
    all the iterations their loops share out: every block's share of a loop, but the loop's last
    iteration, in batches, that one alone (on ``machine(b)``, a fresh machine of block ``b``); then
    the cost model is told of each block in turn, as the element-wise run tells it. False when the
    blocks must run one by one."""
    parts = block_loops(kernel)
    if m.arenas is None or not ENABLED or parts is None:
        return False
    ops, around = parts
    loops = [o for o in ops if o.name == "loop"]
    if not all(eligible(m.kernels, lp) for lp in loops):
        return False
    envs = [env | around for env in envs]
    differing = {k for k in envs[0] if any(env.get(k) != envs[0][k] for env in envs)}
    shares = [[range(*(int(sym.evaluate(lp.attrs[k], env)) for k in ("lo", "hi", "step"))) for lp in loops]
              for env in envs]
    values = [np.concatenate([np.asarray(s[p], np.int64) for s in shares]) for p in range(len(loops))]
    if sum(len(v) for v in values) < 3:
        return False

    lead = preamble(ops)
    first: list[tuple] = []
    ran: dict[int, object] = {}

    def run_preamble() -> None:
        # every block runs it (its loads count once per block, as element-wise); the cost model
        # hears one block's calls, played once per block
        from . import _block

        for b in range(len(envs)):
            k = machine(b)
            k.env.update(around)
            record = Recorder()
            k.timeline = record
            try:
                _block(k, ops[:lead])
            except DiagnosticError as exc:
                raise Unbatchable(str(exc)) from None
            k.timeline = m.timeline
            ran[b] = k
            first[:] = record.events

    def evaluate() -> list[Runs]:
        if lead:
            run_preamble()
        out: list[Runs] = [[] for _ in loops]
        # the loops last to first: they are independent of each other (the parts of one loop, or
        # nests that touch nothing another writes, passes/blocks.py), so any order computes the
        # same, and this one shows a kernel whose later loop reads what an earlier one writes in
        # other blocks (a race between cores) as a wrong answer rather than hiding it
        for p in reversed(range(len(loops))):
            lp = loops[p]
            if not len(values[p]):  # a part no block runs (an unrolled loop's empty remainder)
                continue
            holder = max(b for b, s in enumerate(shares) if len(s[p]))  # the block of the last iteration
            lone = ran[holder] if lead else machine(holder)
            lone.env.update(around)
            # each iteration sees its own block's values of what the blocks differ in (the block
            # index: a cube kernel's share starts inside a column, passes/blocks_flat.py)
            owner = np.concatenate([np.full(len(s[p]), b, np.int64) for b, s in enumerate(shares)])
            per = {k: np.asarray([envs[b][k] for b in owner]) for k in differing}
            out[p] = _iterations(m, lp, values[p], envs[holder], lone.tensors, lone, per)
        return out

    runs = _attempt(m, evaluate)
    if runs is None:
        return False
    STATS.batched += 1
    STATS.launches += 1
    STATS.iterations += sum(max(len(v) - 1, 0) for v in values)
    if m.timeline is not None:
        play(m.timeline, [("begin_launch", kernel.kind, footprint), *_block_events(ops[lead:], shares, runs, first),
                          ("end_launch",)])
    return True


def _block_events(ops: list[Op], shares: list[list[range]], runs: list[Runs],
                  before: list[tuple] | None = None) -> list[tuple]:
    """The cost model's calls for each block in turn (``before``: its preamble's, then its
    synchronisations and its share of each loop's iterations), alike neighbouring blocks as one
    repeat."""
    out: list[tuple] = []
    keys: list[tuple] = []
    firsts = [0] * len(runs)
    for share in shares:
        events: list[tuple] = [("begin_kernel",), *(before or [])]
        key = []
        p = 0
        for o in ops:
            if o.name != "loop":
                events.append(("sync", o))
                continue
            taken = _take(runs[p], firsts[p], len(share[p]))
            firsts[p] += len(share[p])
            events += [("repeat", e, n) for e, n in taken]
            key.append(tuple((id(e), n) for e, n in taken))
            p += 1
        events.append(("end_kernel",))
        if keys and keys[-1] == tuple(key):
            out[-1] = ("repeat", out[-1][1], out[-1][2] + 1)
        else:
            out.append(("repeat", events, 1))
            keys.append(tuple(key))
    return out


def _take(runs: Runs, first: int, count: int) -> Runs:
    """The runs of iterations ``first`` .. ``first + count`` of ``runs``."""
    out: Runs = []
    at = 0
    for events, n in runs:
        lo, hi = max(first, at), min(first + count, at + n)
        if lo < hi:
            out.append((events, hi - lo))
        at += n
    return out


__all__ = ["BUDGET_BYTES", "ENABLED", "STATS", "BView", "BatchStats", "Unbatchable", "affine", "block_loops",
           "eligible", "evaluate", "run_blocks", "run_loop", "uniform"]
