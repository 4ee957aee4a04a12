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
A mixed kernel's second vector core has a UB of its own: the tiles of its copy of the vector
work (``aiv = 1``, ``passes/aivsplit.py``) are placed in that buffer (``ub@1``), apart from the
first core's, each buffer within the target's UB; the kernel's ``ub_bytes`` is the larger peak.
The two copies of a double-buffered loop body (``passes/dbuf.py``: allocs tagged ``buffer`` and
``buffer_of``) never share memory with each other, whatever their lives; in L1 (``APART``) no two
tiles of such a body do.
Over capacity is an error (E0611) that names the tiles live at the peak, never a silent
overlap; it is the one check of on-chip memory (the checker estimates none). The pass also
estimates each kernel's scalar stack frame (``passes/stack.py``): near the NPU compiler's limit is
a warning (W0613), over it an error (E0613).
"""

from __future__ import annotations

import heapq
from math import prod
from typing import Any

from ..diagnostics import Label
from ..dtypes import itemsize
from ..ir import Func, Module, Op, TileType
from ..ir.opdefs import FUSED, spread_in_blocks
from ..ir.queues import buffer_of
from ..ir.schedule import schedule_of
from ..schedule import Schedule
from . import stack
from .context import Pass, PassContext, on_compute_kernels

# tile.alloc attributes the double-buffering pass sets: which copy of which paired loop body
BUFFER, BUFFER_OF = "buffer", "buffer_of"

SHOWN_PLACES = 4  # source places labelled in an over-capacity error; the rest are counted in a note
SPACE_FIELD = {"ub": "ub_bytes", "l1": "l1_bytes", "l0a": "l0a_bytes", "l0b": "l0b_bytes", "l0c": "l0c_bytes",
               "bt": "bias_bytes"}


def physical(t: TileType, block: int) -> tuple[str, tuple[int, int]]:
    """(layout, (rows, cols)) of a tile as pto-isa stores it, its last dims flattened to 2-D."""
    rows = prod(t.shape[:-1]) if len(t.shape) > 1 else 1
    cols = t.shape[-1]
    per_block = max(1, block // itemsize(t.dtype))
    return "row", (rows, -(-cols // per_block) * per_block)


def tile_bytes(t: TileType, block: int) -> int:
    _, (r, c) = physical(t, block)
    return r * c * itemsize(t.dtype)


# pto-isa's A2/A3 TTRANS stages the transpose in its tmp tile in rows of the source's valid rows
# rounded up to 16 elements (32 for 1-byte ones), one such row per source column rounded up to
# a UB block: the largest of those roundings is what the scratch must hold.
TRANS_ROW_QUANTUM = 32


def trans_scratch(t: TileType, block: int) -> tuple[int, int]:
    """The rows and columns of the scratch tile a TTRANS of source tile ``t`` writes through (the C++
    emitter's, ``backends/cpp/kernel_layout.py``): a transposed row per source column."""
    per_block = max(1, block // itemsize(t.dtype))
    rows, cols = prod(t.shape[:-1]) if len(t.shape) > 1 else 1, t.shape[-1]
    return -(-cols // per_block) * per_block, -(-rows // TRANS_ROW_QUANTUM) * TRANS_ROW_QUANTUM


def scratch_bytes(ops: list[Op], block: int, repeat: int | None = None) -> int:
    """The largest UB an instruction of ``ops`` takes above the plan for its scratch tiles (the C++
    emitter's row-reduction tmp and the like, placed above the planned peak): at most a tile as
    large as its largest operand per scratch tile (``stack.scratch_ub_tiles``), and a transpose's
    tile of its own shape (:func:`trans_scratch`: a one-row source of 4096 columns takes 4096 rows)."""
    return _largest_scratch(ops, block, repeat)[0]


def _largest_scratch(ops: list[Op], block: int, repeat: int | None = None) -> tuple[int, Op | None]:
    """:func:`scratch_bytes`, and the instruction taking them. ``repeat``: the target's bytes per
    vector repeat, which bound a row-spread fused instruction's tmp (``kernel_fused.py``): without
    it, that tmp counts as large as its largest operand."""
    out: tuple[int, Op | None] = (0, None)
    for op in (o for x in ops for o in x.walk()):
        tiles = [tile_bytes(v.type, block) for v in op.operands if isinstance(v.type, TileType)]
        size = 0
        if op.name == "tile.trans":
            src: TileType = op.operands[1].type
            r, c = trans_scratch(src, block)
            size = -(-r * c * itemsize(src.dtype) // block) * block
        elif repeat is not None and op.name in FUSED and FUSED[op.name].spread == "row":
            # the emitter's one scratch tile: a block per row of the destination where it expands
            # the spread operand, else one repeat beside a column view of it
            dst: TileType = op.operands[0].type
            rows = physical(dst, block)[1][0]
            size = rows * block if spread_in_blocks(op) else -(-repeat // block) * block
        elif tiles:
            size = stack.scratch_ub_tiles(op) * -(-max(tiles) // block) * block
        if size > out[0]:
            out = (size, op)
    return out


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


def plan(func: Func, ctx: PassContext, schedule: Schedule | None = None) -> dict[str, int]:
    """Assign offsets; returns the peak bytes per space."""
    block = ctx.target.ub_block_bytes
    intervals = _intervals(func)
    placed: dict[str, list[tuple[int, int, int, int, Op]]] = {}  # space -> (start, end, offset, size, alloc)
    # Tiles are placed in the order their lives start, so a placed tile overlaps this one exactly
    # while its life has not ended: the live ones are kept in a heap by end, and the ended ones
    # leave it for good (placing stays linear in the number of tiles, not quadratic).
    live: dict[str, list[tuple[int, int, tuple[int, int, int, int, Op]]]] = {}  # space -> heap of (end, n, placed)
    copies: dict[tuple[str, Any], list[tuple[int, int, int, int, Op]]] = {}  # (space, buffer_of) -> placed
    peak: dict[str, int] = {}
    for n, (_name, (s, e, op)) in enumerate(sorted(intervals.items(), key=lambda kv: (kv[1][0], kv[0]))):
        t: TileType = op.result.type
        size = -(-tile_bytes(t, block) // block) * block
        space = buffer_of(op)
        heap = live.setdefault(space, [])
        while heap and heap[0][0] < s:
            heapq.heappop(heap)
        overlapping = [p for _, _, p in heap]
        if BUFFER_OF in op.attrs:
            seen = {id(p) for p in overlapping}
            overlapping += [p for p in copies.get((space, op.attrs[BUFFER_OF]), ())
                            if id(p) not in seen and (_other_copy(op, p[4]) or t.space in APART)]
        busy = sorted((off, off + sz) for (_, _, off, sz, _) in overlapping)
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        entry = (s, e, offset, size, op)
        placed.setdefault(space, []).append(entry)
        heapq.heappush(heap, (e, n, entry))
        if BUFFER_OF in op.attrs:
            copies.setdefault((space, op.attrs[BUFFER_OF]), []).append(entry)
        layout, (rows, cols) = physical(t, block)
        kept = {k: op.attrs[k] for k in (BUFFER, BUFFER_OF, "aiv") if k in op.attrs}
        op.attrs = {"offset": offset, "bytes": size, "layout": layout, "rows": rows, "cols": cols, **kept}
        peak[space] = max(peak.get(space, 0), offset + size)
    for space, used in peak.items():
        kind = space.partition("@")[0]
        cap = getattr(ctx.target, SPACE_FIELD[kind])
        if used > cap:
            _over_capacity(func, ctx, kind, used, cap, placed[space], schedule)
    # per memory kind, the larger of the two vector cores' peaks: what each core's buffer must hold
    by_kind: dict[str, int] = {}
    for space, used in peak.items():
        kind = space.partition("@")[0]
        by_kind[kind] = max(by_kind.get(kind, 0), used)
    if "ub" in by_kind and by_kind["ub"] <= ctx.target.ub_bytes:
        # the emitter places its instructions' scratch tiles above the plan (kernel.py refuses
        # what does not fit there too): said here, `ptodsl check` says it
        scratch, op = _largest_scratch(func.body, block, ctx.target.vector_repeat_bytes)
        used = -(-by_kind["ub"] // block) * block + scratch
        if op is not None and used > ctx.target.ub_bytes:
            ctx.diags.error(
                "E0611", f"kernel `{func.name}` needs {used} bytes of UB with the scratch tiles of its "
                f"instructions, more than the {ctx.target.ub_bytes} bytes of {ctx.target.name}", op.span,
                "this instruction's scratch does not fit", notes=[f"the memory plan uses {by_kind['ub']} bytes"],
                help="use a smaller vec_tile in the schedule")
    func.attrs = dict(func.attrs) | {f"{k}_bytes": v for k, v in sorted(by_kind.items())}
    return by_kind


# Spaces where no two tiles of a double-buffered body share memory, not even within one copy: a
# cube step's L1 tiles (the A and B tiles MTE2 loads, MTE1 moves on to L0A/L0B) would otherwise
# make the load of B wait until MTE1 has moved A out of the bytes they share, putting MTE1's time
# between the MTE2 loads the doubling is there to keep back to back. L1 holds many steps' tiles;
# where the copies do not fit apart, the double-buffering pass's fit trial leaves the loop single.
APART = frozenset({"l1"})


def _other_copy(a: Op, b: Op) -> bool:
    """Tiles of the two copies of one double-buffered body never share memory, even where their
    lives do not overlap: sharing would make the copies wait for each other again."""
    return BUFFER_OF in a.attrs and a.attrs.get(BUFFER_OF) == b.attrs.get(BUFFER_OF) \
        and a.attrs[BUFFER] != b.attrs[BUFFER]


def _tile_key(shapes: list[tuple[int, ...]], schedule: Schedule | None) -> tuple:
    """The YAML key of the vec tile the tiles at the peak were cut by: the schedule entry whose
    shape ends like the largest of them (tiles are clipped to static tensor dims, so this is the
    entry that shaped them), else the kernel's ``vec_tile``."""
    entries = []
    if schedule is not None:
        entries += [(("schedule", "loops", n, "vec_tile"), ls.vec_tile) for n, ls in schedule.loops.items()
                    if ls.vec_tile is not None]
        if schedule.vec_tile is not None:
            entries.append((("schedule", "vec_tile"), schedule.vec_tile))
    for shape in shapes:
        for key, tile in entries:
            tile = tuple(tile)
            if len(shape) <= len(tile) and tile[len(tile) - len(shape):] == tuple(shape):
                return key
    return ("schedule", "vec_tile")


def _over_capacity(func: Func, ctx: PassContext, space: str, used: int, cap: int,
                   placed: list[tuple[int, int, int, int, Op]], schedule: Schedule | None) -> None:
    """E0611, naming the tiles live where the plan peaks: the tile placed highest, and every tile
    whose life overlaps its start (one label per source place, with their bytes)."""
    top = max(placed, key=lambda p: (p[2] + p[3], -p[0]))
    at = top[0]
    live = [p for p in placed if p[0] <= at <= p[1]]
    by_span: dict = {}
    for _, _, _, size, op in live:
        if op.span is not None:
            n, total, shapes = by_span.get(op.span, (0, 0, []))
            by_span[op.span] = (n + 1, total + size, shapes + [op.result.type.shape])
    shown = sorted(by_span.items(), key=lambda kv: -kv[1][1])
    secondary = [Label(span, f"{n} tile{'s' if n != 1 else ''}, {total} bytes, live at the peak")
                 for span, (n, total, _) in shown[:SHOWN_PLACES]]
    if space == "ub":
        shapes = [op.result.type.shape for *_, op in sorted(live, key=lambda p: -p[3])]
        key = _tile_key(shapes, schedule)
    else:
        key = ("schedule", "cube_tile")
    secondary += ctx.labels(key, "the tile shape in effect is set here")
    live_bytes = sum(p[3] for p in live)
    notes = [f"in compute kernel `{func.name}`: {len(live)} tiles ({live_bytes} bytes) are live at the peak of the plan; tiles whose lives do "
             "not overlap already share memory"]
    if len(shown) > SHOWN_PLACES:
        notes.append(f"{len(shown) - SHOWN_PLACES} more source places hold tiles live at the peak")
    ctx.diags.error(
        "E0611", f"the tiles of one compute kernel need {used} bytes of {space.upper()}, the target "
        f"has {cap}", func.span, f"{space.upper()} over capacity", secondary=secondary, notes=notes,
        help=f"use smaller tiles (`{'.'.join(key)}`) or split the loop body")


def run(module: Module, ctx: PassContext) -> Module:
    schedule = schedule_of(module)
    planned = on_compute_kernels(module, lambda f: plan(f, ctx, schedule))
    stack.check(planned, ctx)  # the kernels are final here but for sync, which declares no object
    return planned


PASS = Pass("memplan", "block", "block", run, frozenset({"partitioned"}), frozenset({"planned"}))
