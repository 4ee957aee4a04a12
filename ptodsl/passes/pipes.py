"""Which pipe runs each block-level op, and which buffers it reads and writes.

Shared by the sync pass and the sync checker, so both reason about the same dependencies.
"""

from __future__ import annotations

from ..ir import Op, TensorType, TileType
from ..ops import OPS

Range = tuple[str, int, int]  # (space, start byte, end byte); GM tensors are whole buffers

GM_WHOLE = 1 << 62


def pipe_of(op: Op) -> str | None:
    if not op.name.startswith("tile.") or op.name == "tile.alloc":
        return None
    if op.name == "tile.load":
        return "MTE2"
    if op.name == "tile.store":
        return "FIX" if op.operands[1].type.space == "l0c" else "MTE3"
    if op.name == "tile.mov":
        return "MTE1"
    if op.name == "tile.matmul_acc":
        return OPS["matmul"].pipe
    od = OPS.get(op.name.removeprefix("tile."))
    return od.pipe if od is not None else "V"  # fills and expands run on the vector unit


def buffer(v, placement: dict[str, Range]) -> Range:
    if isinstance(v.type, TensorType):
        return ("gm:" + v.name, 0, GM_WHOLE)
    assert isinstance(v.type, TileType)
    return placement[v.name]


def reads_writes(op: Op, placement: dict[str, Range]) -> tuple[list[Range], list[Range]]:
    if op.name == "tile.store":
        return [buffer(op.operands[1], placement)], [buffer(op.operands[0], placement)]
    if op.name == "tile.load":
        return [buffer(op.operands[1], placement)], [buffer(op.operands[0], placement)]
    dst, *srcs = op.operands
    reads = [buffer(v, placement) for v in srcs]
    if op.name == "tile.matmul_acc":
        reads.append(buffer(dst, placement))
    return reads, [buffer(dst, placement)]


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
