"""Which pipe runs each block-level op, and which buffers it reads and writes.

Shared by the sync pass and the sync checker, so both reason about the same dependencies.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..ir import Func, Module, Op, TensorType, TileType
from ..ir.gm import GmLayoutError, trace_origins, walk_ops
from ..ir.opdefs import IR_OPS
from ..ir.queues import buffer_of, is_cross, pipe_of, split_unit, unit_of  # noqa: F401  (the passes' view of them)
from .merge import at_most_once  # noqa: F401  (the sync pass's and checker's)
from .remat import bases

Range = tuple[str, int, int]  # (space, start byte, end byte); GM tensors are whole buffers

GM_WHOLE = 1 << 62



def buffer(v, placement: dict[str, Range]) -> Range:
    if isinstance(v.type, TensorType):
        return placement.get("gm:" + v.name) or ("gm:" + v.name, 0, GM_WHOLE)
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
                out[o.result.name] = (buffer_of(o), o.attrs["offset"], o.attrs["offset"] + o.attrs["bytes"])
    return out


def gm_buffers(func: Func, same: Mapping[str, str] | None = None) -> dict[str, Range]:
    """Each GM value of a compute kernel -> the one buffer it is part of: a view, reshape or permute
    made in the kernel is its source's, and tensor parameters ``same`` maps to one name (views of
    one tensor that a launch passes as two parameters, :func:`param_aliases`) are one. A store
    through one name and a load through another of the same buffer are then ordered, as the
    NPU's pipes need (MTE3 writing GM before MTE2 reads it back)."""
    same = same or {}
    out: dict[str, Range] = {}
    for p in func.params:
        if p.is_tensor:
            out["gm:" + p.name] = ("gm:" + same.get(p.name, p.name), 0, GM_WHOLE)
    for view, source in bases(func).items():
        out["gm:" + view] = out.get("gm:" + source) or ("gm:" + source, 0, GM_WHOLE)
    return out


def param_aliases(module: Module) -> dict[str, dict[str, str]]:
    """Kernel -> its tensor parameters that some launch passes views of one tensor of the control
    program (a workspace and its reshape, a tensor and a row of it), each mapped to one of them;
    every tensor parameter, when a control program's GM values cannot be placed."""
    funcs = {f.name: f for f in module.funcs}
    leader: dict[tuple[str, str], tuple[str, str]] = {}

    def find(k: tuple[str, str]) -> tuple[str, str]:
        while leader.get(k, k) != k:
            k = leader[k]
        return k

    for control in (f for f in module.funcs if f.kind == "control"):
        try:
            origins = trace_origins(control)
        except GmLayoutError:
            origins = None
        for op in walk_ops(control.body):
            kernel = funcs.get(op.attrs["kernel"]) if op.name == "launch" else None
            if kernel is None:
                continue
            firsts: dict[str, tuple[str, str]] = {}
            tensors = [p.name for p in kernel.params if p.is_tensor]
            for name, v in zip(tensors, op.operands):
                root = origins[v.name].root if origins is not None and v.name in origins else ""
                key = (kernel.name, name)
                if root in firsts:
                    a, b = find(firsts[root]), find(key)
                    if a != b:
                        leader[b] = a
                else:
                    firsts[root] = key
    out: dict[str, dict[str, str]] = {}
    for key in leader:
        out.setdefault(key[0], {})[key[1]] = find(key)[1]
    return out
