"""The meaning of each op in a batched loop (:mod:`.batch`): the element-wise simulator's meaning,
on tiles that stack every iteration's tile along a leading axis.

Arithmetic, casts, compares, selects, fills and moves run the element-wise simulator's own handler
(its ``untimed`` function) on batched tiles, whose ``region()`` covers every iteration; loads and
stores move strided views of all the iterations' GM regions; a reduction reduces one axis further
in; a matrix product is computed per iteration, by the element-wise handler, so that each is the
same numpy call as there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ... import sym
from ...cost.chip import launch_footprint
from ...cost.steady import Recorder
from ...diagnostics import DiagnosticError
from ...dtypes import numpy_dtype
from ...ir import Op, TileType
from ...ir.opdefs import FUSED, IR_OPS, launched_params, spread_operand
from ...ir.queues import buffer_of
from ...ops import OPS
from . import SIM, Machine, SimError, _f32, _round_to, _slices, _Tile, spread, stored
from .batch import BView, Unbatchable, affine, evaluate, outer_tiles, uniform
from .fused import expand_binary_values


class _BTile(_Tile):
    """A tile of every iteration: ``data`` has a leading iteration axis, ``valid`` is one
    iteration's valid extents (the same for all)."""

    def region(self) -> tuple[slice, ...]:
        return (slice(None), *(slice(0, v) for v in self.valid))


@dataclass
class BMachine(Machine):
    n: int = 1
    stacked: dict[str, np.ndarray] = field(default_factory=dict)  # space -> (n, bytes) buffers

    def ev(self, e: sym.Expr):  # type: ignore[override]
        try:
            return evaluate(e, self.env)
        except KeyError as k:
            raise SimError(f"symbol {k} has no value") from None

    def evi(self, e: sym.Expr):  # type: ignore[override]
        v = self.ev(e)
        return v.astype(np.int64) if isinstance(v, np.ndarray) else int(v)

    def uniform(self, e: sym.Expr, what: str):
        return uniform(self.ev(e), what)


def run_batch(m: Machine, loop: Op, values: np.ndarray, used: dict[str, int], env: dict, tensors: dict,
              record: Recorder | None, outer: Mapping[str, _Tile] | None = None) -> None:
    """Run the body of ``loop`` once for the iterations whose index takes ``values`` (``env`` and
    ``tensors``: what the body sees besides; ``outer``: the tiles made before the loop, which
    the body only reads: every iteration sees the same), telling ``record`` what one iteration did."""
    n = len(values)
    stacked = {space: np.empty((n, -(-size // 64) * 64), np.uint8) for space, size in used.items()}
    bm = BMachine(dict(env) | {loop.attrs["index"]: values}, m.poison, tensors=dict(tensors), arenas=m.arenas,
                  kernels=m.kernels, traffic=m.traffic, timeline=record, traffic_by_buffer=m.traffic_by_buffer,
                  n=n, stacked=stacked)
    for name in outer_tiles(loop):
        t = (outer or {}).get(name)
        if t is None:
            raise Unbatchable("a tile made before the loop is not there")
        bm.tiles[name] = _BTile(np.broadcast_to(t.data, (n, *t.data.shape)), t.valid)
    try:
        _block(bm, loop.regions[0])
    except DiagnosticError as exc:  # the element-wise run reports it where it happens
        raise Unbatchable(str(exc)) from None


def _block(bm: BMachine, ops: list[Op]) -> None:
    for op in ops:
        handler = BATCHED.get(IR_OPS[op.name].family)
        if handler is None:
            raise Unbatchable(f"`{op.name}` has no batched meaning")
        handler(bm, op)


BATCHED: dict[str, Callable[[BMachine, Op], None]] = {}


def on(*families: str) -> Callable:
    def register(fn: Callable) -> Callable:
        for f in families:
            BATCHED[f] = fn
        return fn

    return register


# ------------------------------------------------------------------------ control and GM views


@on("loop")
def _loop(bm: BMachine, op: Op) -> None:
    lo, hi, step = (int(bm.uniform(op.attrs[k], "a loop bound")) for k in ("lo", "hi", "step"))
    for i in range(lo, hi, step):
        bm.env[op.attrs["index"]] = i
        _block(bm, op.regions[0])


@on("if")
def _if(bm: BMachine, op: Op) -> None:
    _block(bm, op.regions[0] if bm.uniform(op.attrs["cond"], "a branch condition") else op.regions[1])


def _placed_region(bm: BMachine, gm, offsets: list, extents: tuple[int, ...], op: Op, what: str):
    """Every iteration's region of ``gm`` at ``offsets`` (each the same for all iterations or
    affine in them) of ``extents``: a plain array when all iterations share it, else a BView."""
    starts, steps = zip(*(affine(o, "a GM offset") for o in offsets)) if offsets else ((), ())
    base = gm.base if isinstance(gm, BView) else gm
    step = gm.step if isinstance(gm, BView) else 0
    last = [s + d * (bm.n - 1) for s, d in zip(starts, steps)]
    # the element-wise run's bounds check, for the first and the last iteration (offsets are affine)
    _slices(last, extents, base.shape, op, what)
    region = base[_slices(list(starts), extents, base.shape, op, what)]
    step += sum(d * stride for d, stride in zip(steps, base.strides))
    return region if step == 0 and not isinstance(gm, BView) else BView(region, step)


@on("view")
def _view(bm: BMachine, op: Op) -> None:
    gm = bm.tensors[op.operands[0].name]
    t = op.result.type
    base_shape = gm.shape
    offs = [bm.evi(o) for o in op.attrs["offsets"]]
    shapes = []
    for s, o, b in zip(t.shape, offs, base_shape):
        o_first, o_step = affine(o, "a view offset")
        o_last = o_first + o_step * (bm.n - 1)
        if min(o_first, o_last) < 0 or max(o_first, o_last) > b:
            raise Unbatchable("a view offset is outside its tensor")
        size = bm.uniform(s, "a view extent")
        first, last = max(0, min(size, b - o_first)), max(0, min(size, b - o_last))
        if first != last:
            raise Unbatchable("a view is clipped in some iterations only")
        shapes.append(first)
    bm.tensors[op.result.name] = _placed_region(bm, gm, offs, tuple(shapes), op, "view")


@on("reshape")
def _reshape(bm: BMachine, op: Op) -> None:
    if isinstance(bm.tensors[op.operands[0].name], BView) or any(
            isinstance(bm.ev(s), np.ndarray) for s in op.result.type.shape):
        raise Unbatchable("a reshape of data that moves with the iteration")
    SIM.table["reshape"](bm, op)


@on("alloc")
def _alloc(bm: BMachine, op: Op) -> None:
    t = op.result.type
    shape = tuple(int(bm.uniform(s, "a workspace extent")) for s in t.shape)
    stacked = bm.fresh(t.dtype, (bm.n, *shape))
    bm.tensors[op.result.name] = BView(stacked[0], stacked.strides[0])


def _footprint(bm: BMachine, op: Op, kernel) -> int | None:
    """The launch's GM tensor bytes (L2, ``cost/chip.py``), None when they differ between the
    iterations evaluated together."""
    try:
        return launch_footprint(op, lambda d: bm.uniform(d, "a launched tensor's size"), kernel)
    except Unbatchable:
        return None


@on("launch")
def _launch(bm: BMachine, op: Op) -> None:
    """Each iteration's launch, as the element-wise simulator runs one: block after block."""
    kernel = bm.kernels[op.attrs["kernel"]]
    env = {p.name: bm.ev(e) for p, e in zip(launched_params(kernel), op.attrs["scalars"])}
    blocks = int(bm.uniform(op.attrs.get("block_dim", 1), "a launch's block count"))
    index, count = kernel.attrs.get("block_index"), kernel.attrs.get("block_count")
    if blocks < 1:
        raise Unbatchable("a launch of no block")
    if bm.timeline is not None:
        bm.timeline.begin_launch(kernel.kind, _footprint(bm, op, kernel))
    for b in range(blocks):
        benv = env | ({index: b} if index is not None else {}) | ({count: blocks} if count is not None else {})
        k = BMachine(benv, bm.poison, arenas=bm.arenas, kernels=bm.kernels, traffic=bm.traffic,
                     traffic_by_buffer=bm.traffic_by_buffer, timeline=bm.timeline, n=bm.n, stacked=bm.stacked)
        for p, v in zip((p for p in kernel.params if p.is_tensor), op.operands):
            k.tensors[p.name] = bm.tensors[v.name]
        if k.timeline is not None:
            k.timeline.begin_kernel()
        _block(k, kernel.body)
        if k.timeline is not None:
            k.timeline.end_kernel()
    if bm.timeline is not None:
        bm.timeline.end_launch()


@on("guard")
def _guard(bm: BMachine, op: Op) -> None:
    """A guard every iteration passes; when one fails, the element-wise run reports the first."""
    if op.operands:
        raise Unbatchable("a guard on an index's repeats")
    if not np.all(bm.ev(op.attrs["cond"])):
        raise Unbatchable("a guard fails")


@on("sync_set", "sync_wait", "sync_barrier")
def _sync(bm: BMachine, op: Op) -> None:
    if bm.timeline is not None:
        bm.timeline.sync(op)


# ------------------------------------------------------------------------------- tile ops


def _time(bm: BMachine, op: Op) -> None:
    if bm.timeline is not None:
        bm.timeline.run(op, [bm.tiles[v.name].valid if v.name in bm.tiles else bm.tensors[v.name].shape
                             for v in op.operands])


@on("tile_alloc")
def _tile_alloc(bm: BMachine, op: Op) -> None:
    t: TileType = op.result.type
    valid = []
    for v, s in zip(t.valid, t.shape):
        e = int(bm.uniform(v, "a valid extent"))
        if e > s:
            raise Unbatchable("a valid extent exceeds its tile")
        valid.append(max(0, e))
    npd = np.dtype(numpy_dtype(t.dtype))
    if "offset" in op.attrs and buffer_of(op) in bm.stacked:
        offset, size = op.attrs["offset"], math.prod(t.shape) * npd.itemsize
        if offset + size > bm.arenas[buffer_of(op)].size:
            raise Unbatchable("a tile outside its buffer")
        buffer = bm.stacked[buffer_of(op)]
        inner = tuple(npd.itemsize * math.prod(t.shape[d + 1:]) for d in range(len(t.shape)))
        data = np.ndarray((bm.n, *t.shape), npd, buffer=buffer, offset=offset, strides=(buffer.strides[0], *inner))
        data[...] = bm.fresh(t.dtype, (1,) * (len(t.shape) + 1))
    else:
        data = bm.fresh(t.dtype, (bm.n, *t.shape))
    bm.tiles[op.result.name] = _BTile(data, tuple(valid))


def _gm_bytes(bm: BMachine, kind: str, gm, tile: _Tile) -> None:
    base = gm.base if isinstance(gm, BView) else gm
    bm.count(kind, base, int(np.prod(tile.valid)) * base.dtype.itemsize * bm.n)


@on("load")
def _load(bm: BMachine, op: Op) -> None:
    dst = bm.tiles[op.operands[0].name]
    gm = bm.tensors[op.operands[1].name]
    region = _placed_region(bm, gm, [bm.evi(o) for o in op.attrs["offsets"]], dst.valid, op, "tile load")
    dst.data[dst.region()] = region.stacked(bm.n) if isinstance(region, BView) else region
    _gm_bytes(bm, "load", gm, dst)
    _time(bm, op)


@on("store")
def _store(bm: BMachine, op: Op) -> None:
    gm = bm.tensors[op.operands[0].name]
    src = bm.tiles[op.operands[1].name]
    region = _placed_region(bm, gm, [bm.evi(o) for o in op.attrs["offsets"]], src.valid, op, "tile store")
    if not isinstance(region, BView) or region.step == 0:
        raise Unbatchable("every iteration stores to the same place")
    target = region.stacked(bm.n)
    target[...] = stored(op, src.data[src.region()], target.dtype)
    _gm_bytes(bm, "store", gm, src)
    _time(bm, op)


def _elementwise(bm: BMachine, op: Op) -> None:
    for key in ("scalar", "scalar2"):
        if key in op.attrs:
            bm.uniform(op.attrs[key], "a scalar operand")
    SIM.table[IR_OPS[op.name].family](bm, op)  # the element-wise handler, timed once


for _family in ("fill_tile", "mov", "cast", "compare", "select", "unary", "binary", "muladd"):
    BATCHED[_family] = _elementwise


@on("expand")
def _expand(bm: BMachine, op: Op) -> None:
    dst, src = bm.tiles[op.operands[0].name], bm.tiles[op.operands[1].name]
    dst.data[dst.region()] = spread(src, dst, bm.n)
    _time(bm, op)


@on("expand_binary")
def _expand_binary(bm: BMachine, op: Op) -> None:
    dst, x, y = (bm.tiles[o.name] for o in op.operands)
    reg, k = dst.region(), spread_operand(op)
    a, b = (_f32(spread(t, dst, bm.n) if i == k else t.data[reg]) for i, t in ((1, x), (2, y)))
    dst.data[reg] = expand_binary_values(FUSED[op.name].op, a, b, op.operands[0].type.dtype)
    _time(bm, op)


@on("reduce")
def _reduce(bm: BMachine, op: Op) -> None:
    dst, src = bm.tiles[op.operands[0].name], bm.tiles[op.operands[1].name]
    dtype = op.operands[0].type.dtype
    od = OPS[op.name.removeprefix("tile.")]
    vals = _f32(src.data[src.region()])
    axis = op.attrs["axis"]
    axis = axis + 1 if axis >= 0 else vals.ndim + axis
    if vals.shape[axis] == 0:
        out = np.full([1 if d == axis else n for d, n in enumerate(vals.shape)], od.identity_for(dtype), vals.dtype)
    else:
        out = od.sim(vals, axis=axis, keepdims=True)
    dst.data[dst.region()] = _round_to(out[(slice(None), *(slice(0, v) for v in dst.valid))], dtype)
    _time(bm, op)


@dataclass
class _Iteration:
    """One iteration's view of a batch, for the handlers that run per iteration."""

    tiles: dict
    env: dict
    timeline: None = None

    def ev(self, e: sym.Expr):
        return sym.evaluate(e, self.env)


@on("matmul", "matmul_acc", "matmul_bias")
def _matmul(bm: BMachine, op: Op) -> None:
    handler = SIM.table[IR_OPS[op.name].family].untimed
    names = [v.name for v in op.operands]
    for i in range(bm.n):
        tiles = {name: _Tile(bm.tiles[name].data[i], bm.tiles[name].valid) for name in names}
        handler(_Iteration(tiles, {}), op)
    _time(bm, op)


__all__ = ["BATCHED", "BMachine", "run_batch"]
