"""The IR's ops, each defined once: the levels it may appear at, its operands and their roles, the
attributes it needs, its regions, the pipe it runs on and what it reads and writes.

The verifier, the pipe model of the sync pass and checker (``passes/pipes.py``) and the completeness
tests read this table; the simulator and the C++ emitter are the one place per backend that gives
each op its meaning. Language ops (``ptodsl.ops``) appear twice: as whole-tensor ops at the tensor
level and as ``tile.NAME`` destination-passing ops at the tile and block levels.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ops import OPS

LEVELS = ("tensor", "tile", "block")
# Operand kinds: "tensor", "tile"; "dst" marks the destination of a destination-passing op.
TENSOR, TILE = "tensor", "tile"
# Attributes whose values are names (loop indices, kernels, pipes, ...) rather than expressions.
NAME_ATTRS = frozenset({"index", "sym", "name", "unroll_var", "kind", "kernel", "src", "dst", "pipe", "layout"})


@dataclass(frozen=True)
class IROp:
    name: str
    levels: tuple[str, ...]
    # Kinds of the operands in order; None: any number of operands of ``rest``.
    operands: tuple[str, ...] | None = None
    rest: str = TENSOR  # kind of each operand when ``operands`` is None
    required: tuple[str, ...] = ()  # attributes every instance carries
    regions: int = 0
    # The pipe it runs on (block level), by the memory space of operand ``pipe_space_of`` when the
    # pipe depends on it (stores from L0C leave through FIX); None for ops that run on no pipe.
    pipe: str | None = None
    pipe_by_space: tuple[tuple[str, str], ...] = ()
    pipe_space_of: int = 0
    dest: int | None = None  # index of the operand it writes (destination passing)
    reads_dest: bool = False  # accumulates into its destination
    control: bool = False  # partitioning keeps it in the control program (scalar and GM bookkeeping)

    def __post_init__(self) -> None:
        bad = set(self.levels) - set(LEVELS)
        if bad:
            raise ValueError(f"IR op {self.name}: unknown levels {sorted(bad)}")
        if self.dest is not None and self.operands is not None and not 0 <= self.dest < len(self.operands):
            raise ValueError(f"IR op {self.name}: destination {self.dest} is not an operand")
        if self.reads_dest and self.dest is None:
            raise ValueError(f"IR op {self.name}: reads its destination but has none")
        if self.pipe_by_space and self.pipe is None:
            raise ValueError(f"IR op {self.name}: a per-space pipe needs a default pipe")

    def pipe_for(self, operand_spaces: list[str | None]) -> str | None:
        if self.pipe_by_space and self.pipe_space_of < len(operand_spaces):
            return dict(self.pipe_by_space).get(operand_spaces[self.pipe_space_of], self.pipe)
        return self.pipe

    def reads_writes(self, n_operands: int) -> tuple[list[int], list[int]]:
        """Operand indices the op reads and writes."""
        if self.dest is None:
            return list(range(n_operands)), []
        reads = [i for i in range(n_operands) if i != self.dest or self.reads_dest]
        return reads, [self.dest]


ALL = ("tensor", "tile", "block")
TILE_LEVELS = ("tile", "block")

_DEFS: list[IROp] = [
    # structure, at every level
    IROp("loop", ALL, (), required=("index", "lo", "hi", "step", "name"), regions=1, control=True),
    IROp("if", ALL, (), required=("cond",), regions=2, control=True),
    IROp("print", ALL, None, required=("format", "args"), control=True),
    IROp("read", ALL, (TENSOR,), required=("index", "sym", "dtype"), control=True),
    IROp("guard", ALL, (), required=("cond", "tensor", "axis", "offset", "extent", "dim"), control=True),
    # GM tensors
    IROp("view", ALL, (TENSOR,), required=("offsets",), control=True),
    IROp("reshape", ALL, (TENSOR,), control=True),
    IROp("alloc", ALL, (), control=True),
    IROp("assemble", ("tensor",), (TENSOR, TENSOR), required=("offsets",)),
    IROp("fill", ("tensor",), (TENSOR,), required=("offsets", "shape", "scalar")),
    IROp("broadcast", ("tensor",), (TENSOR,)),
    # tiles
    IROp("tile.alloc", TILE_LEVELS, ()),
    IROp("tile.load", TILE_LEVELS, (TILE, TENSOR), required=("offsets",), pipe="MTE2", dest=0),
    IROp("tile.store", TILE_LEVELS, (TENSOR, TILE), required=("offsets",), pipe="MTE3",
         pipe_by_space=(("l0c", "FIX"),), pipe_space_of=1, dest=0),
    IROp("tile.fill", TILE_LEVELS, (TILE,), required=("scalar",), pipe="V", dest=0),
    IROp("tile.expand", TILE_LEVELS, (TILE, TILE), pipe="V", dest=0),
    IROp("tile.mov", TILE_LEVELS, (TILE, TILE), pipe="MTE1", dest=0),
    IROp("tile.matmul_acc", TILE_LEVELS, None, rest=TILE, pipe=OPS["matmul"].pipe, dest=0, reads_dest=True),
    # the block level: launches from the control program, synchronisation inside compute kernels
    IROp("launch", ("block",), None, required=("kernel", "scalars")),
    IROp("sync.set", ("block",), (), required=("src", "dst", "event")),
    IROp("sync.wait", ("block",), (), required=("src", "dst", "event")),
    IROp("sync.barrier", ("block",), (), required=("pipe",)),
]
# Every language op, whole-tensor and per tile.
_DEFS += [IROp(name, ("tensor",), None) for name in OPS]
_DEFS += [IROp(f"tile.{name}", TILE_LEVELS, None, rest=TILE, pipe=od.pipe, dest=0) for name, od in OPS.items()]

IR_OPS: dict[str, IROp] = {}
for _d in _DEFS:
    if _d.name in IR_OPS:
        raise ValueError(f"IR op {_d.name} is defined twice")
    IR_OPS[_d.name] = _d

LEVEL_OPS: dict[str, frozenset[str]] = {lv: frozenset(n for n, d in IR_OPS.items() if lv in d.levels) for lv in LEVELS}
