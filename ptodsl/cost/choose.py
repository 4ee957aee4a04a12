"""Schedules the spec leaves out, chosen by the cost model.

Where a spec gives no ``vec_tile`` (and no loop gives one) or no ``cube_tile``, the compiler tries
a fixed list of aligned candidates, compiles each through the passes up to the memory plan (which
refuses those that do not fit), runs each on the spec's largest test shape per variant with
:func:`~.dryrun.estimate`, and keeps the cheapest: the least pipe work (every pipe's cycles added
up), then the least on-chip memory. The search skips the sync pass: synchronisation decides how the
pipes overlap, not how much work they do, and it is the slowest pass on large kernels. Vector and
cube tiles are chosen one after the other (cube first), so the search stays under twenty compiles.
Unroll lists are not chosen: a loop without ``unroll:`` is not unrolled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..diagnostics import Diagnostics
from ..ir import Module, TensorType
from ..ir.opdefs import IR_OPS
from ..ir.schedule import reschedule, schedule_of
from ..passes import PIPELINE
from ..passes.context import PassContext
from ..schedule import Schedule
from ..targets import Target
from .dryrun import MAX_OPS, TooLong, estimate

# (rows, cols) of a vector tile's two trailing dims; leading dims are 1. Every row is a multiple
# of 32 bytes for every dtype (64 one-byte elements and up).
VEC_2D = ((1, 256), (1, 1024), (1, 2048), (4, 256), (4, 512), (4, 1024), (8, 256), (8, 512), (16, 128),
          (16, 256), (32, 64), (64, 64), (64, 128))
VEC_1D = (256, 1024, 2048, 4096)
# L0 extents (m, k, n); the L1 tile along each axis is twice the L0 one.
CUBE = ((64, 64, 64), (128, 64, 128), (128, 128, 128), (64, 128, 64))
DEFAULT_DIM = 128  # a dim the spec's test cases do not give


@dataclass
class Case:
    control: str  # the control program of the variant
    symbols: dict[str, int]
    scalars: dict[str, float]
    # tensor -> the value its element reads give, or its values as nested lists (a case's `inputs:`)
    reads: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclass
class Candidate:
    schedule: Schedule
    cycles: float | None = None  # pipe work, summed over pipes and cases; None when it does not compile
    gm_bytes: int = 0
    on_chip: int = 0  # the largest per-kernel peak of any on-chip buffer
    problem: str = ""
    too_long: bool = False  # the dry run gave up (MAX_OPS)

    @property
    def key(self) -> tuple:
        return (self.cycles, self.on_chip)


def left_out(tensor_ir: Module) -> tuple[str, ...]:
    """The tiles the module's schedule leaves to the compiler: ``vec_tile`` where it has vector work
    and no vec_tile (global or per loop), ``cube_tile`` where it has a matmul and no cube_tile."""
    s = schedule_of(tensor_ir)
    vec = s.vec_tile is None and not any(ls.vec_tile for ls in s.loops.values()) and has_vector_work(tensor_ir)
    cube = s.cube_tile is None and has_matmul(tensor_ir)
    return tuple(k for k, left in (("cube_tile", cube), ("vec_tile", vec)) if left)


def evaluate(tensor_ir: Module, target: Target, schedule: Schedule, cases: Sequence[Case]) -> Candidate:
    """Compile ``tensor_ir`` with ``schedule`` and estimate it on ``cases``."""
    c = Candidate(schedule)
    ir = tensor_ir.clone()
    reschedule(ir, schedule)
    diags = Diagnostics()
    ctx = PassContext(target, diags)
    for p in PIPELINE:
        if p.name == "sync":
            continue
        ir = p.run(ir, ctx)
        if diags.has_errors:
            c.problem = diags.errors[0].message
            return c
    c.cycles = 0.0
    for case in cases:
        try:
            e = estimate(ir, case.control, case.symbols, target, case.scalars, case.reads)
        except TooLong:
            c.cycles, c.problem, c.too_long = None, f"over {MAX_OPS} ops to model on the test shapes", True
            return c
        c.cycles += sum(e.timeline.busy.values())
        c.gm_bytes += e.gm_bytes
    c.on_chip = max((v for f in ir.funcs for k, v in f.attrs.items() if k.endswith("_bytes")), default=0)
    return c


def vector_rank(tensor_ir: Module, target: Target) -> int:
    ranks = [r.type.rank for op in tensor_ir.walk() for r in op.results if isinstance(r.type, TensorType)]
    ranks += [p.type.rank for f in tensor_ir.funcs for p in f.params if p.is_tensor]
    return max(1, min(max(ranks, default=1), target.max_tile_rank))


def has_matmul(tensor_ir: Module) -> bool:
    return any(op.name == "matmul" for op in tensor_ir.walk())


def has_vector_work(tensor_ir: Module) -> bool:
    """Any tensor-level computation but a matmul (a write, an elementwise op, a gather, ...): the
    control program's ops (loops, reads, guards, views) need no tiles."""
    return any(not IR_OPS[op.name].control and op.name != "matmul" for op in tensor_ir.walk())


def vec_candidates(rank: int) -> list[tuple[int, ...]]:
    if rank == 1:
        return [(c,) for c in VEC_1D]
    return [(1,) * (rank - 2) + (r, c) for r, c in VEC_2D]


def cube_candidates() -> list[dict[str, tuple[int, int]]]:
    return [{"m": (m, 2 * m), "k": (k, 2 * k), "n": (n, 2 * n)} for m, k, n in CUBE]


Evaluator = Callable[[list[Schedule]], list[Candidate]]


def choose(tensor_ir: Module, target: Target, cases: Sequence[Case], evaluate_all: Evaluator | None = None,
           everything: bool = False) -> tuple[Schedule, list[Candidate]]:
    """The schedule to compile with, and every candidate tried. ``everything`` searches the tiles
    the spec gives too (``ptodsl tune``); ``evaluate_all`` evaluates a batch of schedules (a
    process pool, a cluster), by default one after the other here."""
    if evaluate_all is None:
        def evaluate_all(schedules: list[Schedule]) -> list[Candidate]:
            out: list[Candidate] = []
            for s in schedules:
                out.append(evaluate(tensor_ir, target, s, cases))
                if out[-1].too_long:  # the test shapes are too big to model: the rest would be too
                    out += [Candidate(r, problem=out[-1].problem, too_long=True) for r in schedules[len(out):]]
                    break
            return out
    given = schedule_of(tensor_ir)
    left = ("cube_tile", "vec_tile") if everything else left_out(tensor_ir)
    tried: list[Candidate] = []
    best = given
    if "cube_tile" in left and has_matmul(tensor_ir):
        best = _best(evaluate_all, [dataclasses.replace(best, cube_tile=t) for t in cube_candidates()], tried) or best
    if "vec_tile" in left and has_vector_work(tensor_ir):
        rank = vector_rank(tensor_ir, target)
        loops = {n: dataclasses.replace(ls, vec_tile=None) for n, ls in best.loops.items()} if everything else best.loops
        best = _best(evaluate_all, [dataclasses.replace(best, vec_tile=t, loops=loops)
                                    for t in vec_candidates(rank)], tried) or best
    return best, tried


def _best(evaluate_all: Evaluator, schedules: list[Schedule], tried: list[Candidate]) -> Schedule | None:
    found = list(evaluate_all(schedules))
    # the test shapes are too big to model from the first candidate that is: the search gives up
    # there whoever evaluates (a pool may have modelled later ones), so every evaluator chooses alike
    cut = next((i for i, c in enumerate(found) if c.too_long), len(found))
    found[cut:] = [c if c.too_long else Candidate(c.schedule, problem=found[cut].problem, too_long=True)
                   for c in found[cut:]]
    tried.extend(found)
    ok = [c for c in found if c.cycles is not None]
    if not ok:
        return None
    least = min(c.cycles for c in ok)
    # within 1% of the fastest, the one that needs the least on-chip memory
    return min((c for c in ok if c.cycles <= least * 1.01), key=lambda c: (c.on_chip, c.cycles)).schedule
