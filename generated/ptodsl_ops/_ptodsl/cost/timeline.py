"""A pipeline cost model, run alongside the simulator: how long each pipe is busy, and when.

Every tile op runs on one pipe (``ir/opdefs.py``) for a number of cycles taken from the target's
``timing:`` table: transfers by bytes and the path's bandwidth, vector instructions by elements,
matmuls by cube fractal products. Each pipe executes its ops in order; an op starts when its pipe
is free and after every ``sync.wait`` its pipe has passed, which releases when the matching
``sync.set`` was issued, i.e. when the setting pipe had finished its earlier ops. So pipes overlap
exactly as far as the synchronisation the compiler placed allows.

Two views come out of one run. The one-core view, which the schedule search and ``ptodsl tune``
compare: every block of every launch run one after another on one core, the estimate (the sum
over blocks of the last pipe to finish) against the roofline bound (the busiest pipe's total
work); estimate / bound is 1.0 when the busiest pipe never waits. And the chip view
(:class:`~.chip.Chip`): each finished block handed to the chip, which spreads a launch's blocks
over the cores of their kind, limits each launch by the shared HBM and charges launches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import ceil, prod

from ..dtypes import DTYPES
from ..ir import Op, TileType
from ..ir.opdefs import IR_OPS, Handlers, indexed_gm
from ..ir.queues import is_cross, split_unit, unit_of
from ..ops import OPS
from ..targets import WIDTHS, Target
from .chip import Chip

LOADS = {"ub": "gm_to_ub", "l1": "gm_to_l1"}
STORES = {"ub": "ub_to_gm", "l0c": "l0c_to_gm", "l1": "gm_to_l1"}
MOVES = {"l0a": "l1_to_l0a", "l0b": "l1_to_l0b", "bt": "l1_to_bt", "l1": "l0c_to_l1", "ub": "ub_to_ub"}
# Instructions of the tile ops that are not language ops.
STRUCTURAL = {"fill_tile": "TEXPANDS", "expand": "TROWEXPAND"}


@dataclass
class Timeline:
    target: Target
    free: dict[str, float] = field(default_factory=dict)  # pipe -> when its last op ends
    gate: dict[str, float] = field(default_factory=dict)  # pipe -> the latest wait it passed
    events: dict[tuple, float] = field(default_factory=dict)  # (src, dst, event) -> release time
    busy: dict[str, float] = field(default_factory=dict)  # pipe -> total cycles of work, all launches
    instructions: dict[str, float] = field(default_factory=dict)  # pipe -> instructions issued, all launches
    elapsed: float = 0.0  # cycles of the blocks finished so far, one after another
    chip: Chip = None  # type: ignore[assignment]  # the chip the blocks run on; made from the target
    _busy_at_start: dict[str, float] = field(default_factory=dict)
    mixed: bool = False  # the launch under way is a mixed kernel: its cube and vector pipes are apart

    def __post_init__(self) -> None:
        if self.chip is None:
            self.chip = Chip(self.target)

    def begin_launch(self, kind: str, footprint: float | None = None) -> None:
        """A launch of a compute kernel of ``kind`` starts; its blocks follow (``begin_kernel``).
        ``footprint``: the bytes of the GM tensors it passes (``chip.launch_footprint``, for L2)."""
        self.mixed = kind == "mixed"
        self.chip.begin_launch(kind, footprint)

    def end_launch(self) -> None:
        self.chip.end_launch()

    def begin_kernel(self) -> None:
        """One block starts on a fresh core."""
        self.free, self.gate, self.events = {}, {}, {}
        self._busy_at_start = dict(self.busy)

    def end_kernel(self) -> float:
        """The block under way is done; returns its cycles (also handed to the chip)."""
        cycles = max(self.free.values(), default=0.0)
        self.elapsed += cycles
        self.free = {}
        work = {p: c - self._busy_at_start.get(p, 0.0) for p, c in self.busy.items()}
        self.chip.block(cycles, {p: c for p, c in work.items() if c})
        return cycles

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
            if is_cross(a["src"], a["dst"]):
                # the flag travels to the other core, whose issue stalls at the wait: all its pipes
                at += self.target.chip.cross_core_flag_cycles
                core = "_core:" + str(split_unit(a["dst"])[0])
                self.gate[core] = max(self.gate.get(core, 0.0), at)
            self.gate[a["dst"]] = max(self.gate.get(a["dst"], 0.0), at)
        elif a.get("pipe") == "ALL":
            now = max(self.free.values(), default=0.0)
            self.gate = {p: now for p in set(self.free) | set(self.gate)} | {"_all": now}

    def run(self, op: Op, valid: list[tuple[int, ...]]) -> None:
        """Account for tile op ``op`` whose operands have the evaluated valid extents ``valid``."""
        types = [v.type for v in op.operands]
        pipe = unit_of(op, self.mixed)
        if pipe is None:
            return
        cycles = self.cycles(op, types, valid)
        family = IR_OPS[op.name].family
        if family in ("load", "store"):  # GM traffic, which every core shares through the HBM
            k = 0 if family == "load" else 1
            self.chip.add_bytes(nbytes(types[k].dtype, valid[k]))
        else:
            read, written = indexed_gm(op)
            if read or written:  # a gather or scatter moves its data tile's bytes through the HBM too
                k = 1 if written else 0
                self.chip.add_bytes(nbytes(types[k].dtype, valid[k]))
        extra = EXTRA_INSTRUCTIONS.get(family)
        if op.attrs.get("aiv") == 1:
            # the block's other vector core runs it, alongside the one timed here, which runs the
            # same flags and the first half of the rows (passes/aivsplit.py). Its time does not add
            # to the block's; its work is what the op over both halves costs beyond the first
            # half, so that splitting leaves the work the chip's roofline counts as it was.
            pipe = "vec1." + pipe.rpartition(".")[2]
            whole = self.cycles(op, types, _rows_plus(types, valid, True))
            first = self.cycles(op, types, _rows_plus(types, valid, False))
            self.instructions[pipe] = self.instructions.get(pipe, 0.0) + 1 + (extra(op) if extra else 0)
            self.busy[pipe] = self.busy.get(pipe, 0.0) + max(whole - first, 0.0)
            return
        self.instructions[pipe] = self.instructions.get(pipe, 0.0) + 1 + (extra(op) if extra else 0)
        start = max(self.free.get(pipe, 0.0), self.gate.get(pipe, 0.0), self.gate.get("_all", 0.0),
                    self.gate.get("_core:" + str(split_unit(pipe)[0]), 0.0))
        self.free[pipe] = start + cycles
        self.busy[pipe] = self.busy.get(pipe, 0.0) + cycles

    def state(self) -> dict:
        """Every number the model accumulates, flat (with the chip's), for the dry run's sampling:
        iterations alike in everything that decides their cost advance it by the same amounts."""
        s: dict = {("free", k): v for k, v in self.free.items()}
        s |= {("gate", k): v for k, v in self.gate.items()}
        s |= {("events", k): v for k, v in self.events.items()}
        s |= {("busy", k): v for k, v in self.busy.items()}
        s |= {("instructions", k): v for k, v in self.instructions.items()}
        s |= {("start", k): v for k, v in self._busy_at_start.items()}
        s[("elapsed", "")] = self.elapsed
        return s | self.chip.state()

    def set_state(self, s: dict) -> None:
        group = {g: {} for g in ("free", "gate", "events", "busy", "start", "instructions")}
        for (g, k), v in s.items():
            if g in group:
                group[g][k] = v
        self.free, self.gate, self.events, self.busy = group["free"], group["gate"], group["events"], group["busy"]
        self._busy_at_start = group["start"]
        self.instructions = group["instructions"]
        self.elapsed = s[("elapsed", "")]
        self.chip.set_state(s)

    def cycles(self, op: Op, types: list, valid: list[tuple[int, ...]]) -> float:
        return COST[op](self, op, types, valid)


def _rows_plus(types: list, valid: list[tuple[int, ...]], whole: bool) -> list[tuple[int, ...]]:
    """The valid extents of a second vector core's copy of an op (``passes/aivsplit.py``) as the
    op over both halves has them (``whole``: the first half's full tile rows added to each rank-2
    operand's rows) or as the first half has them (every such operand's rows the tile's)."""
    half = next(t.shape[0] for t in types if isinstance(t, TileType))
    return [(v[0] + half if whole else half, v[1]) if len(v) == 2 else v for v in valid]


# The cycles of each op family that runs on a pipe (``ir/opdefs.py``).
COST = Handlers("the cost model")
# Families whose op the emitter writes as more than one instruction: family -> (op -> how many more)
EXTRA_INSTRUCTIONS: dict[str, Callable[[Op], int]] = {}


@COST.on("load")
def _load(tl: Timeline, op: Op, types: list, valid: list) -> float:
    return tl.target.timing.transfer_cycles(LOADS.get(types[0].space, "gm_to_ub"), nbytes(types[0].dtype, valid[0]))


@COST.on("store")
def _store(tl: Timeline, op: Op, types: list, valid: list) -> float:
    return tl.target.timing.transfer_cycles(STORES.get(types[1].space, "ub_to_gm"), nbytes(types[1].dtype, valid[1]))


@COST.on("mov")
def _mov(tl: Timeline, op: Op, types: list, valid: list) -> float:
    return tl.target.timing.transfer_cycles(MOVES.get(types[0].space, "ub_to_ub"), nbytes(types[1].dtype, valid[1]))


@COST.on("matmul", "matmul_acc", "matmul_bias")
def _matmul(tl: Timeline, op: Op, types: list, valid: list) -> float:
    t = tl.target.timing
    names = [a.name for a in IR_OPS[op.name].args]
    left, right = names.index("a"), names.index("b")
    (m, k), (_, n) = valid[left][-2:], valid[right][-2:]
    width = DTYPES[types[left].dtype].itemsize
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


def _spread_value(op: Op) -> int:
    """A single value spread over rows and columns: a TROWEXPAND into one row, then a TCOLEXPAND."""
    d, s = op.operands[0].type.shape, op.operands[1].type.shape
    rows = prod(d[:-1])
    return int(prod(s) == 1 and d[-1] != 1 and rows != 1)


EXTRA_INSTRUCTIONS["expand"] = _spread_value


def nbytes(dtype: str, valid: tuple[int, ...]) -> int:
    """Bytes of ``valid`` elements of ``dtype``."""
    return prod(valid) * DTYPES[dtype].itemsize


from . import timeline_fused, timeline_index, timeline_layout  # noqa: E402,F401  (the fused, indexing and layout ops' cycles register on COST)
