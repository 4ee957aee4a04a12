"""The chip around the cores: launches one after another on one stream, each launch's blocks
spread over the cores of its kernel's kind, and every core sharing the chip's HBM.

:class:`~.timeline.Timeline` models one core's pipes; it hands each finished block's time, GM
bytes and pipe work to a :class:`Chip`. At the end of a launch the chip places the launch's blocks
on the cores of the kernel's kind in block order, each block on the core that frees first (as the
hardware dispatches them), and charges the launch::

    launch_us + max(the last core's finish, the launch's GM bytes / the HBM bandwidth)

The chip's lower bound (:meth:`Chip.roofline`) is the largest of the HBM time of the bytes the op
must move (``ptodsl ir --stats`` gives the compulsory minimum: every input read once, every
output written once) and, per kind of core, its busiest pipe's work spread evenly over all the
cores of that kind. Launch costs are left out of the bound: they are what fusing launches or
running them as blocks of one kernel removes. Every number comes from the target's ``chip:`` and
``timing:`` data.

L2: a launch whose GM tensors together fit in the chip's L2 (``chip.l2_bytes``; the bytes of the
distinct tensors the launch passes its kernel, :func:`launch_footprint`) reads each of their bytes
from HBM at most once, since nothing it touches is ever evicted (and writes back each byte it
writes once: a tensor the kernel takes ``inout`` counts twice): its HBM term is
``min(the GM bytes it moves, that footprint) / the HBM bandwidth``. The blocks of a matmul
re-reading the same A and B panels then pay HBM once for them. A launch whose tensors do not fit,
or whose footprint the caller does not give, pays HBM for every byte it moves. A hit still
moves at its core's transfer pipe's rate (MTE2 and the rest are charged every byte, per core):
the target's L2 read rate per core is above those pipes' (targets/ascend910b.yaml).

Blocks of one launch are kept as runs of equal durations in block order, so a launch of many alike
blocks (the dry run models one and multiplies, see :mod:`.dryrun`) costs one entry, not one per block.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import sym
from ..dtypes import DTYPES
from ..ir import Func, Op, TensorType
from ..ir.queues import split_unit
from ..targets import Target

# Which resource bounds the modelled time: every launch adds its fixed cost to "launch", and the
# rest of its time to "HBM" when the HBM limit binds, else to its busiest pipe.
LAUNCH, HBM = "launch", "HBM"
# The pipes whose work a call needs whatever its schedule (Chip.roofline): vector and cube compute.
COMPUTE_PIPES = frozenset({"V", "M"})


@dataclass
class Chip:
    target: Target
    time: float = 0.0  # cycles of the launches finished so far, one after another
    launches: int = 0
    block_dim: int = 0  # the most blocks of one launch
    cores_used: int = 0  # the most cores one launch keeps busy
    hbm_bytes: float = 0.0  # GM bytes of every launch
    hbm_paid: float = 0.0  # of those, the bytes that went through HBM (the rest hit L2)
    work: dict[tuple[str, str], float] = field(default_factory=dict)  # (kind, pipe) -> cycles, all blocks
    spent: dict[str, float] = field(default_factory=dict)  # resource -> the cycles it bounds (see LAUNCH, HBM)
    # the launch under way: its kind, its blocks as [duration, count] runs, its GM bytes and pipe work
    kind: str | None = None
    runs: list[list[float]] = field(default_factory=list)
    launch_bytes: float = 0.0
    launch_work: dict[str, float] = field(default_factory=dict)
    footprint: float | None = None  # bytes of the launch's distinct GM tensors, when known (L2)

    # ------------------------------------------------------------------ the launch under way
    def begin_launch(self, kind: str, footprint: float | None = None) -> None:
        """A launch of a ``kind`` kernel starts; ``footprint``: the bytes of the distinct GM tensors
        it passes (:func:`launch_footprint`), which lets its re-reads hit L2 when they fit."""
        self.kind, self.runs, self.launch_bytes, self.launch_work = kind, [], 0.0, {}
        self.footprint = footprint

    def add_bytes(self, n: float) -> None:
        self.launch_bytes += n

    def block(self, cycles: float, work: dict[str, float], count: int = 1) -> None:
        """``count`` blocks of ``cycles`` each (on one core, from a fresh start), each with ``work``."""
        if count <= 0:
            return
        if self.runs and self.runs[-1][0] == cycles:
            self.runs[-1][1] += count
        else:
            self.runs.append([cycles, count])
        for pipe, c in work.items():
            self.launch_work[pipe] = self.launch_work.get(pipe, 0.0) + c * count

    def end_launch(self) -> float:
        """Charge the launch under way; returns its cycles."""
        kind = self.kind or "vector"
        cores = self.target.chip.cores(kind)
        blocks = int(sum(c for _, c in self.runs))
        makespan = spread(self.runs, cores)
        charged = self.hbm_charged
        hbm = charged / self.hbm_bytes_per_cycle
        launch = self.launch_cycles
        self.time += launch + max(makespan, hbm)
        self.launches += 1
        self.block_dim = max(self.block_dim, blocks)
        self.cores_used = max(self.cores_used, min(blocks, cores))
        self.hbm_bytes += self.launch_bytes
        self.hbm_paid += charged
        for unit, c in self.launch_work.items():
            # a mixed kernel's pipes are its cube core's (``cube.M``) or its vector core's (``vec.V``)
            core, pipe = split_unit(unit)
            on = ("cube" if core == "cube" else "vector") if kind == "mixed" else kind
            self.work[(on, pipe)] = self.work.get((on, pipe), 0.0) + c
        self.spent[LAUNCH] = self.spent.get(LAUNCH, 0.0) + launch
        if hbm >= makespan:
            what = HBM
        else:
            what = split_unit(max(self.launch_work, key=self.launch_work.get))[1] if self.launch_work else LAUNCH
        self.spent[what] = self.spent.get(what, 0.0) + max(makespan, hbm)
        self.kind, self.runs, self.launch_bytes, self.launch_work, self.footprint = None, [], 0.0, {}, None
        return launch + max(makespan, hbm)

    @property
    def hbm_charged(self) -> float:
        """The GM bytes of the launch under way that go through HBM: every byte it moves, or each
        byte of its tensors once when they all fit in L2 (module docstring)."""
        fits = self.footprint is not None and 0 < self.footprint <= self.target.chip.l2_bytes
        return min(self.launch_bytes, self.footprint) if fits else self.launch_bytes

    # ------------------------------------------------------------------ results
    @property
    def hbm_bytes_per_cycle(self) -> float:
        return self.target.chip.hbm_gib_per_s * 2**30 / self.target.timing.clock_hz

    @property
    def launch_cycles(self) -> float:
        return self.target.chip.launch_us * 1e-6 * self.target.timing.clock_hz

    def roofline(self, hbm_bytes: float | None = None) -> float:
        """Cycles no schedule of this work can beat on this chip: ``hbm_bytes`` (by default every
        GM byte the launches moved through HBM, L2 hits left out) through the shared HBM, and each kind's busiest compute pipe's
        work spread over all the cores of that kind. The pipes that move data (MTE1/2/3, FIX) and
        the scalar pipe are left out: their work is what the schedule makes of it (a matmul whose
        output tiles re-read their K strips loads more through MTE2 than one with larger tiles),
        so counting it would let a better schedule beat the roofline; the compulsory part of the
        data movement is the HBM term."""
        per_kind = [c / self.target.chip.cores(kind) for (kind, pipe), c in self.work.items()
                    if pipe in COMPUTE_PIPES]
        moved = self.hbm_paid if hbm_bytes is None else hbm_bytes
        return max([moved / self.hbm_bytes_per_cycle, *per_kind], default=0.0)

    @property
    def bound(self) -> str | None:
        """The resource the modelled time is mostly spent on: ``HBM``, a pipe, or ``launch``."""
        return max(self.spent, key=self.spent.get) if self.spent else None

    def us(self, cycles: float) -> float:
        return cycles / self.target.timing.clock_hz * 1e6

    # ------------------------------------------------------------------ state, for the dry run's sampling
    def state(self) -> dict:
        s: dict = {("chip", k): getattr(self, k) for k in ("time", "launches", "hbm_bytes", "hbm_paid", "launch_bytes")}
        s |= {("work", k): v for k, v in self.work.items()}
        s |= {("spent", k): v for k, v in self.spent.items()}
        s |= {("launch_work", k): v for k, v in self.launch_work.items()}
        return s

    def set_state(self, s: dict) -> None:
        for (group, key), v in s.items():
            if group == "chip":
                setattr(self, key, v)
        self.work = {k: v for (g, k), v in s.items() if g == "work"}
        self.spent = {k: v for (g, k), v in s.items() if g == "spent"}
        self.launch_work = {k: v for (g, k), v in s.items() if g == "launch_work"}


def launch_footprint(launch: Op, dim: Callable[[sym.Expr], int], kernel: Func | None = None) -> int | None:
    """The bytes of the distinct GM tensors ``launch`` passes its kernel (each view as the part it
    views), with ``dim`` evaluating a dimension; None when one has no value. A launch passing two
    views of one tensor carries the bytes as its ``footprint`` (passes/blocks.py). A tensor the
    ``kernel`` takes ``inout`` counts twice: its bytes come in from HBM and go back out (an
    in-place update, swap_halves, is read and written once each, whatever L2 holds)."""
    if "footprint" in launch.attrs:
        try:
            return int(dim(launch.attrs["footprint"]))
        except (KeyError, TypeError, ValueError):
            return None
    sizes: dict[str, int] = {}
    modes = [p.mode for p in kernel.params if p.is_tensor] if kernel is not None else []
    tensors = [v for v in launch.operands if isinstance(v.type, TensorType)]
    twice = {v.name for v, m in zip(tensors, modes) if m == "inout"}
    for v in launch.operands:
        t = v.type
        if not isinstance(t, TensorType):
            continue
        try:
            n = 1
            for d in t.shape:
                n *= max(int(dim(d)), 0)
        except (KeyError, TypeError, ValueError):
            return None
        sizes[v.name] = n * DTYPES[t.dtype].itemsize * (2 if v.name in twice else 1)
    return sum(sizes.values())


def spread(runs: list[list[float]], cores: int) -> float:
    """When the last of ``cores`` cores finishes ``runs`` of blocks ([duration, count], in block
    order), each block going to the core that frees first."""
    free = [0.0] * max(1, cores)
    for duration, count in runs:
        count = int(count)
        if duration <= 0:
            continue
        while count > 0:
            lo, hi = min(free), max(free)
            if count >= len(free) and hi - lo <= duration:
                # every core takes one block per round, in the same order round after round
                rounds = count // len(free)
                free = [f + rounds * duration for f in free]
                count -= rounds * len(free)
                continue
            heapq.heapify(free)
            first = heapq.heappop(free)
            after = free[0] if free else float("inf")
            # the earliest core keeps taking blocks until it passes the next one
            take = min(count, int((after - first) // duration) + 1)
            heapq.heappush(free, first + take * duration)
            count -= take
    return max(free)


__all__ = ["HBM", "LAUNCH", "Chip", "launch_footprint", "spread"]
