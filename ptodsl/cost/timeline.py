"""A pipeline cost model, run alongside the simulator: how long each pipe is busy, and when.

Every tile op runs on one pipe (``ir/opdefs.py``) for a number of cycles taken from the target's
``timing:`` table: transfers by bytes and the path's bandwidth, vector instructions by elements,
matmuls by cube fractal products. Each pipe executes its ops in order; an op starts when its pipe
is free and after every ``sync.wait`` its pipe has passed, which releases when the matching
``sync.set`` was issued, i.e. when the setting pipe had finished its earlier ops. So pipes overlap
exactly as far as the synchronisation the compiler placed allows. Launches of compute kernels run
one after another on one core.

Two numbers come out per run: the estimate (the sum over launches of the last pipe to finish) and
the roofline bound (the busiest pipe's total work): estimate / bound is 1.0 when the busiest pipe
never waits."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil, prod

from ..dtypes import DTYPES
from ..ir import Op, TileType
from ..ir.opdefs import IR_OPS, Handlers
from ..ops import OPS
from ..targets import WIDTHS, Target

LOADS = {"ub": "gm_to_ub", "l1": "gm_to_l1"}
STORES = {"ub": "ub_to_gm", "l0c": "l0c_to_gm", "l1": "gm_to_l1"}
MOVES = {"l0a": "l1_to_l0a", "l0b": "l1_to_l0b", "l1": "l0c_to_l1", "ub": "ub_to_ub"}
# Instructions of the tile ops that are not language ops.
STRUCTURAL = {"fill_tile": "TEXPANDS", "expand": "TROWEXPAND"}


@dataclass
class Timeline:
    target: Target
    free: dict[str, float] = field(default_factory=dict)  # pipe -> when its last op ends
    gate: dict[str, float] = field(default_factory=dict)  # pipe -> the latest wait it passed
    events: dict[tuple, float] = field(default_factory=dict)  # (src, dst, event) -> release time
    busy: dict[str, float] = field(default_factory=dict)  # pipe -> total cycles of work, all launches
    elapsed: float = 0.0  # cycles of the launches finished so far

    def begin_kernel(self) -> None:
        self.free, self.gate, self.events = {}, {}, {}

    def end_kernel(self) -> None:
        self.elapsed += max(self.free.values(), default=0.0)
        self.free = {}

    @property
    def estimate(self) -> float:
        return self.elapsed + max(self.free.values(), default=0.0)

    @property
    def bound(self) -> float:
        return max(self.busy.values(), default=0.0)

    @property
    def bound_pipe(self) -> str | None:
        return max(self.busy, key=self.busy.get) if self.busy else None

    def sync(self, op: Op) -> None:
        a = op.attrs
        if op.name == "sync.set":
            self.events[(a["src"], a["dst"], str(a["event"]))] = self.free.get(a["src"], 0.0)
        elif op.name == "sync.wait":
            at = self.events.get((a["src"], a["dst"], str(a["event"])), 0.0)
            self.gate[a["dst"]] = max(self.gate.get(a["dst"], 0.0), at)
        elif a.get("pipe") == "ALL":
            now = max(self.free.values(), default=0.0)
            self.gate = {p: now for p in set(self.free) | set(self.gate)} | {"_all": now}

    def run(self, op: Op, valid: list[tuple[int, ...]]) -> None:
        """Account for tile op ``op`` whose operands have the evaluated valid extents ``valid``."""
        types = [v.type for v in op.operands]
        spaces = [t.space if isinstance(t, TileType) else None for t in types]
        pipe = IR_OPS[op.name].pipe_for(spaces)
        if pipe is None:
            return
        cycles = self.cycles(op, types, valid)
        start = max(self.free.get(pipe, 0.0), self.gate.get(pipe, 0.0), self.gate.get("_all", 0.0))
        self.free[pipe] = start + cycles
        self.busy[pipe] = self.busy.get(pipe, 0.0) + cycles

    def cycles(self, op: Op, types: list, valid: list[tuple[int, ...]]) -> float:
        return COST[op](self, op, types, valid)


# The cycles of each op family that runs on a pipe (``ir/opdefs.py``).
COST = Handlers("the cost model")


@COST.on("load")
def _load(tl: Timeline, op: Op, types: list, valid: list) -> float:
    return tl.target.timing.transfer_cycles(LOADS.get(types[0].space, "gm_to_ub"), nbytes(types[0].dtype, valid[0]))


@COST.on("store")
def _store(tl: Timeline, op: Op, types: list, valid: list) -> float:
    return tl.target.timing.transfer_cycles(STORES.get(types[1].space, "ub_to_gm"), nbytes(types[1].dtype, valid[1]))


@COST.on("mov")
def _mov(tl: Timeline, op: Op, types: list, valid: list) -> float:
    return tl.target.timing.transfer_cycles(MOVES.get(types[0].space, "ub_to_ub"), nbytes(types[1].dtype, valid[1]))


@COST.on("matmul", "matmul_acc")
def _matmul(tl: Timeline, op: Op, types: list, valid: list) -> float:
    t = tl.target.timing
    (m, k), (_, n) = valid[-2], valid[-1]
    width = DTYPES[types[-2].dtype].itemsize
    rows, c0 = tl.target.cube_fractal_rows, tl.target.cube_c0_bytes
    fractals = ceil(m / rows) * ceil(k / (c0 // width)) * ceil(n / rows)
    return t.cube_head_cycles + fractals * t.cube_fractal_cycles[WIDTHS.get(width, "b32")]


@COST.on("reduce")
def _reduce(tl: Timeline, op: Op, types: list, valid: list) -> float:
    od = OPS[op.name.removeprefix("tile.")]
    src = valid[1]
    last = op.attrs.get("axis") in (None, len(src) - 1, -1)
    ins = od.row_pto if last else od.col_pto
    return tl.target.timing.vector_cycles(ins, DTYPES[types[1].dtype].itemsize, prod(src))


@COST.on("unary", "binary", "cast", "compare", "select")
def _vector(tl: Timeline, op: Op, types: list, valid: list) -> float:
    od = OPS[op.name.removeprefix("tile.")]
    ins = od.pto_scalar if "scalar" in op.attrs and od.pto_scalar else od.pto
    return tl.target.timing.vector_cycles(ins or od.name.upper(), DTYPES[types[0].dtype].itemsize, prod(valid[0]))


@COST.on("fill_tile", "expand")
def _structural(tl: Timeline, op: Op, types: list, valid: list) -> float:
    ins = STRUCTURAL[IR_OPS[op.name].family]
    return tl.target.timing.vector_cycles(ins, DTYPES[types[0].dtype].itemsize, prod(valid[0]))


def nbytes(dtype: str, valid: tuple[int, ...]) -> int:
    """Bytes of ``valid`` elements of ``dtype``."""
    return prod(valid) * DTYPES[dtype].itemsize

from . import timeline_index  # noqa: E402,F401  (registers the indexing ops' cycles)
