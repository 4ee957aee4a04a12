"""The queues of a compute kernel's ops: which pipe runs each op and, in a mixed kernel, on which
core. Shared by the sync pass and its checker, the emitter and the cost model."""

from __future__ import annotations

from . import Op, TileType
from .opdefs import IR_OPS

# The on-chip spaces of the cube core; the vector core's is the UB.
CUBE_SPACES = frozenset({"l1", "l0a", "l0b", "l0c", "bt"})


def pipe_of(op: Op) -> str | None:
    spaces = [v.type.space if isinstance(v.type, TileType) else None for v in op.operands]
    return IR_OPS[op.name].pipe_for(spaces)


def buffer_of(alloc: Op) -> str:
    """The buffer a ``tile.alloc`` places its tile in: its space, except that the tiles of a mixed
    kernel's second vector core (``aiv = 1``, ``passes/aivsplit.py``) are in that core's own UB,
    ``ub@1``, at offsets of their own (the memory plan places each core's tiles apart)."""
    space = alloc.result.type.space
    return f"{space}@1" if alloc.attrs.get("aiv") == 1 else space


def unit_of(op: Op, mixed: bool) -> str | None:
    """The queue an op runs on: its pipe, and in a ``mixed`` kernel the pipe of its core
    (``cube.MTE2``, ``vec.V``): the cube's and the vector cores' MTE2 are two queues, and an
    order between two cores is a cross-core flag, not a pipe flag."""
    pipe = pipe_of(op)
    if pipe is None or not mixed:
        return pipe
    on_cube = any(isinstance(v.type, TileType) and v.type.space in CUBE_SPACES for v in op.operands)
    return f"{'cube' if on_cube else 'vec'}.{pipe}"


def core_of(op: Op) -> str | None:
    """The core that runs ``op`` in a mixed kernel (``cube`` or ``vec``), or None for what both
    run: the loops, views, element reads and guards of the skeleton (its flags have a core each,
    by their own src and dst)."""
    if op.name == "tile.alloc":
        return "cube" if op.result.type.space in CUBE_SPACES else "vec"
    if op.name == "sync.barrier":
        return "vec"
    unit = unit_of(op, True)
    return None if unit is None else split_unit(unit)[0]


def cores_of(ops: list[Op]) -> set[str]:
    """The cores whose work ``ops`` hold, anywhere inside them: ``cube``, ``vec`` (tile ops; an
    allocation is no work)."""
    return {c for op in ops for o in op.walk() if o.name.startswith("tile.") and o.name != "tile.alloc"
            and (c := core_of(o)) is not None}


def split_unit(unit: str) -> tuple[str | None, str]:
    """(core, pipe) of a queue name: core None outside mixed kernels."""
    core, dot, pipe = str(unit).rpartition(".")
    return (core if dot else None), pipe


def is_cross(src: str, dst: str) -> bool:
    """A flag from one core to another (a mixed kernel's cube and vector cores)."""
    return split_unit(src)[0] != split_unit(dst)[0]


__all__ = ["CUBE_SPACES", "buffer_of", "core_of", "is_cross", "pipe_of", "split_unit", "unit_of"]
