"""Which pipe runs each block-level op, and which buffers it reads and writes.

Shared by the sync pass and the sync checker, so both reason about the same dependencies.
"""

from __future__ import annotations

from .. import sym
from ..ir import Op, TensorType, TileType
from ..ir.opdefs import IR_OPS

Range = tuple[str, int, int]  # (space, start byte, end byte); GM tensors are whole buffers

GM_WHOLE = 1 << 62


def pipe_of(op: Op) -> str | None:
    spaces = [v.type.space if isinstance(v.type, TileType) else None for v in op.operands]
    return IR_OPS[op.name].pipe_for(spaces)


def buffer(v, placement: dict[str, Range]) -> Range:
    if isinstance(v.type, TensorType):
        return ("gm:" + v.name, 0, GM_WHOLE)
    assert isinstance(v.type, TileType)
    return placement[v.name]


def reads_writes(op: Op, placement: dict[str, Range]) -> tuple[list[Range], list[Range]]:
    reads, writes = IR_OPS[op.name].reads_writes(len(op.operands))
    return ([buffer(op.operands[i], placement) for i in reads],
            [buffer(op.operands[i], placement) for i in writes])


def overlap(a: Range, b: Range) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def covers(a: Range, b: Range) -> bool:
    return a[0] == b[0] and a[1] <= b[1] and b[2] <= a[2]


def placement_of(ops) -> dict[str, Range]:
    out: dict[str, Range] = {}
    for top in ops:
        for o in top.walk():
            if o.name == "tile.alloc" and "offset" in o.attrs:
                t = o.result.type
                out[o.result.name] = (t.space, o.attrs["offset"], o.attrs["offset"] + o.attrs["bytes"])
    return out


def at_most_once(loop: Op) -> bool:
    """A loop that provably runs at most once (a double-buffered body's second copy) carries no
    dependency to a next trip: the sync pass and its checker run its body once, not twice."""
    a = loop.attrs
    trips = sym.ceildiv(sym.sub(a["hi"], a["lo"]), a["step"]) if a["step"] != 1 else sym.sub(a["hi"], a["lo"])
    return sym.prove_le(trips, 1, {})
