"""Memory planning (Block IR -> Block IR): place every tile of a compute kernel in its buffer.

Requires: a ``level block`` module from partitioning.
Produces: every ``tile.alloc`` carries ``offset`` (bytes into its space: UB, L1, L0A, L0B, L0C)
and ``bytes`` (its physical size). A tile is live from its allocation to its last use; a use
inside a loop that does not contain the allocation keeps the tile live to the end of that loop
(the next iteration reads it again). Tiles whose lives do not overlap share memory; offsets are
aligned to the target's block size. Physical rows are padded as pto-isa requires: every Vec tile is
row-major with each row a whole block, so a column of per-row values (``[R, 1]``, a row sum or
max) is R rows of one block each, valid in column 0. That is the layout pto-isa's row reductions
write with equal source and destination rows, and the one its elementwise, tile-scalar and
broadcast instructions read on every target (a column-major ``R x 1`` tile needs R padded to a
block, which a reduction of fewer rows cannot write).
Over capacity is an error that lists the largest tiles, never a silent overlap.
"""

from __future__ import annotations

from math import prod

from ..diagnostics import Label
from ..dtypes import itemsize
from ..ir import Func, Module, Op, TileType
from .context import Pass, PassContext, on_compute_kernels

SPACE_FIELD = {"ub": "ub_bytes", "l1": "l1_bytes", "l0a": "l0a_bytes", "l0b": "l0b_bytes", "l0c": "l0c_bytes"}


def physical(t: TileType, block: int) -> tuple[str, tuple[int, int]]:
    """(layout, (rows, cols)) of a tile as pto-isa stores it, its last dims flattened to 2-D."""
    rows = prod(t.shape[:-1]) if len(t.shape) > 1 else 1
    cols = t.shape[-1]
    per_block = max(1, block // itemsize(t.dtype))
    return "row", (rows, -(-cols // per_block) * per_block)


def tile_bytes(t: TileType, block: int) -> int:
    _, (r, c) = physical(t, block)
    return r * c * itemsize(t.dtype)


def _intervals(func: Func) -> dict[str, tuple[int, int, Op]]:
    """Live interval [allocation, last use] of every tile, in flattened op order.

    A use inside a loop that does not also enclose the allocation happens on every iteration of
    that loop, so the tile stays live to the loop's end.
    """
    pos = 0
    alloc: dict[str, tuple[int, Op, frozenset[int]]] = {}
    uses: dict[str, list[tuple[int, frozenset[int]]]] = {}
    loop_end: dict[int, int] = {}

    def walk(ops: list[Op], frames: frozenset[int]) -> None:
        nonlocal pos
        for op in ops:
            pos += 1
            here = pos
            if op.name == "tile.alloc":
                alloc[op.result.name] = (here, op, frames)
            for v in op.operands:
                uses.setdefault(v.name, []).append((here, frames))
            if op.regions:
                for r in op.regions:
                    walk(r, frames | {here})
                loop_end[here] = pos

    walk(func.body, frozenset())
    out = {}
    for name, (s, op, frames) in alloc.items():
        e = s
        for u, use_frames in uses.get(name, []):
            e = max(e, u)
            for f in use_frames - frames:
                e = max(e, loop_end[f])
        out[name] = (s, e, op)
    return out


def plan(func: Func, ctx: PassContext) -> dict[str, int]:
    """Assign offsets; returns the peak bytes per space."""
    block = ctx.target.ub_block_bytes
    intervals = _intervals(func)
    placed: dict[str, list[tuple[int, int, int, int]]] = {}  # space -> (start, end, offset, size)
    peak: dict[str, int] = {}
    for _name, (s, e, op) in sorted(intervals.items(), key=lambda kv: (kv[1][0], kv[0])):
        t: TileType = op.result.type
        size = -(-tile_bytes(t, block) // block) * block
        busy = sorted((off, off + sz) for (s2, e2, off, sz) in placed.get(t.space, []) if not (e2 < s or s2 > e))
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        placed.setdefault(t.space, []).append((s, e, offset, size))
        layout, (rows, cols) = physical(t, block)
        op.attrs = {"offset": offset, "bytes": size, "layout": layout, "rows": rows, "cols": cols}
        peak[t.space] = max(peak.get(t.space, 0), offset + size)
    for space, used in peak.items():
        cap = getattr(ctx.target, SPACE_FIELD[space])
        if used > cap:
            ops = {s: op for (s, _, op) in intervals.values()}
            by_span: dict = {}
            for s, _, _, sz in placed[space]:
                span = ops[s].span
                if span is not None and sz > by_span.get(span, 0):
                    by_span[span] = sz  # one label per source line: its largest tile
            secondary = [Label(span, f"needs a {sz}-byte tile")
                         for span, sz in sorted(by_span.items(), key=lambda kv: -kv[1])[:3]]
            key = ("schedule", "cube_tile") if space != "ub" else ("schedule", "vec_tile")
            secondary += ctx.labels(key, "the tile shape is set here")
            ctx.diags.error(
                "E0611", f"the tiles of one compute kernel need {used} bytes of {space.upper()}, the target "
                f"has {cap}", func.span, f"{space.upper()} over capacity", secondary=secondary,
                help="use smaller tiles (`vec_tile:`/`cube_tile:`) or split the loop body")
    func.attrs = dict(func.attrs) | {f"{k}_bytes": v for k, v in sorted(peak.items())}
    return peak


def run(module: Module, ctx: PassContext) -> Module:
    return on_compute_kernels(module, lambda f: plan(f, ctx))


PASS = Pass("memplan", "block", "block", run, frozenset({"partitioned"}), frozenset({"planned"}))
