"""A numpy interpreter of the Tile IR: how ptodsl knows a kernel is right without an NPU.

Tiles are numpy arrays of their static shape; every op touches only the destination's valid region
(reductions: the source's), exactly as pto-isa's instructions do. Arithmetic runs in f32 and is
rounded to each destination's dtype (ml_dtypes for bf16), and reductions accumulate in f32. With
``poison=True`` every fresh tile and workspace holds NaN (integers: a sentinel), so a kernel that
reads padding or an unwritten region shows it in the golden test instead of passing by luck.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ... import sym
from ...cost.chip import launch_footprint
from ...cost.timeline import Timeline
from ...diagnostics import Diagnostic, DiagnosticError
from ...dtypes import DTYPES, numpy_dtype
from ...ir import Func, Module, Op, TensorType, TileType
from ...ir.opdefs import IR_OPS, Handlers, launched_params
from ...ir.queues import buffer_of
from ...ops import COMPARE_SIM, OPS
from ..guards import guard_failure
from . import batch
from .convert import convert

INT_POISON = -0x5A5A5A5A


_FIELD = re.compile(r"\{\{|\}\}|\{\}")


def _print_text(fmt: str, args: list) -> str:
    """``fmt`` with each ``{}`` replaced by the next value, as the C++ backend prints it.

    Not ``str.format``, whose fields reach into Python objects (``{0.__class__}``); the checker
    (E0343) leaves exactly one ``{}`` per value and no other field.
    """
    rest = iter(args)
    return _FIELD.sub(lambda m: m.group()[0] if m.group() in ("{{", "}}") else str(next(rest)), fmt)


class SimError(DiagnosticError):
    """The kernel did something the hardware would not survive (an out-of-bounds access): the
    simulator's counterpart of a failed CPU-header check, reported as the same diagnostic (E0712)
    at the source line the operation was compiled from."""

    def __init__(self, message: str, op: Op | None = None):
        what = f" (`{op.name}`)" if op is not None else ""
        super().__init__(Diagnostic(
            "E0712", f"a check failed inside the simulated kernel: {message}{what}",
            op.span if op is not None else None, "the operation was compiled from here", (), (),
            "if the inputs are valid this is a compiler bug: please report it with the spec and the call "
            "(see `ptodsl explain E0712`)"))
        self.op = op


@dataclass
class _Tile:
    data: np.ndarray
    valid: tuple[int, ...]

    def region(self) -> tuple[slice, ...]:
        return tuple(slice(0, v) for v in self.valid)


@dataclass
class Machine:
    env: dict[str, sym.Number]
    poison: bool = False
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    tiles: dict[str, _Tile] = field(default_factory=dict)
    printed: list[str] = field(default_factory=list)
    # Block IR: on-chip buffers by space, the compute kernels by name, GM traffic in bytes
    arenas: dict[str, np.ndarray] | None = None
    kernels: dict[str, Func] = field(default_factory=dict)
    traffic: dict[str, int] = field(default_factory=lambda: {"load": 0, "store": 0})
    timeline: Timeline | None = None  # the cost model, when the caller asks for one
    # the same bytes by the GM buffer they move (id of the array that owns the memory): which
    # tensor is read more than once, and how much goes through workspaces
    traffic_by_buffer: dict[int, dict[str, int]] = field(default_factory=dict)

    def count(self, kind: str, gm: np.ndarray, nbytes: int) -> None:
        self.traffic[kind] += nbytes
        per = self.traffic_by_buffer.setdefault(id(gm_root(gm)), {"load": 0, "store": 0})
        per[kind] += nbytes

    def ev(self, e: sym.Expr) -> sym.Number:
        try:
            return sym.evaluate(e, self.env)
        except KeyError as k:
            raise SimError(f"symbol {k} has no value") from None

    def evi(self, e: sym.Expr) -> int:
        return int(self.ev(e))

    def fresh(self, dtype: str, shape) -> np.ndarray:
        npd = numpy_dtype(dtype)
        if not self.poison:
            return np.zeros(shape, npd)
        if DTYPES[dtype].is_float:
            return np.full(shape, np.nan, npd)
        if dtype == "bool":
            return np.ones(shape, npd)
        return np.full(shape, INT_POISON, npd) if np.dtype(npd).itemsize >= 4 else np.full(shape, -1, npd)


# The simulator's meaning of each op family of the tile and block levels (``ir/opdefs.py``).
SIM = Handlers("the simulator")


def gm_root(a: np.ndarray) -> np.ndarray:
    """The array that owns the memory of a view (a view of a view of a parameter: the parameter)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _f32(a: np.ndarray) -> np.ndarray:
    # no copy of f32 data: the ops read their operands and write a new array
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        return a.astype(np.float32, copy=False)
    return a


def _round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """A computed result stored in ``dtype``: rounded to nearest even (integers: saturated);
    ``tile.cast`` converts under its rounding mode (``convert.py``)."""
    npd = numpy_dtype(dtype)
    if DTYPES[dtype].is_float or dtype == "bool":
        with np.errstate(over="ignore"):  # a value past the dtype's range is infinity, as on the device
            return values.astype(npd, copy=False)
    if values.dtype.kind == "f":
        values = np.rint(values)
    info = np.iinfo(npd)
    return np.clip(values, info.min, info.max).astype(npd)


def _slices(offsets, extents, shape, op: Op, what: str) -> tuple[slice, ...]:
    out = []
    for o, n, s in zip(offsets, extents, shape):
        if n > 0 and (o < 0 or o + n > s):
            raise SimError(f"{what} [{o}, {o + n}) is outside a dim of {s}", op)
        out.append(slice(o, o + max(n, 0)))
    return tuple(out)


def run(func: Func, tensors: Mapping[str, np.ndarray], scalars: Mapping[str, sym.Number],
        symbols: Mapping[str, int], poison: bool = False) -> Machine:
    """Execute a Tile IR kernel; out/inout arrays in ``tensors`` are written in place."""
    m = Machine(dict(symbols) | dict(scalars), poison)
    for p in func.params:
        if p.is_tensor:
            m.tensors[p.name] = tensors[p.name]
    _block(m, func.body)
    return m


SPACE_BYTES = {"ub": "ub_bytes", "l1": "l1_bytes", "l0a": "l0a_bytes", "l0b": "l0b_bytes", "l0c": "l0c_bytes",
               "bt": "bias_bytes"}


def run_block(module: Module, control: str, tensors: Mapping[str, np.ndarray],
              scalars: Mapping[str, sym.Number], symbols: Mapping[str, int], target,
              poison: bool = False) -> Machine:
    """Execute a Block IR control program and the compute kernels it launches.

    Every tile lives at its planned offset inside one buffer per memory space, sized from the
    target, so tiles that share memory really alias: a memory plan that overlaps live tiles gives
    wrong answers here instead of on the device.
    """
    func = module.func(control)
    arenas = {space: np.zeros(getattr(target, attr), np.uint8) for space, attr in SPACE_BYTES.items()}
    arenas["ub@1"] = np.zeros(target.ub_bytes, np.uint8)  # a mixed kernel's second vector core's UB
    m = Machine(dict(symbols) | dict(scalars), poison, arenas=arenas,
                kernels={f.name: f for f in module.funcs if f.kind in ("vector", "cube", "mixed")},
                timeline=Timeline(target))
    for p in func.params:
        if p.is_tensor:
            m.tensors[p.name] = tensors[p.name]
    _block(m, func.body)
    return m


@SIM.on("launch")
def _launch(m: Machine, op: Op) -> None:
    """Run the kernel once per block, one block after another. Each block is a core of its own:
    it starts from fresh on-chip buffers and receives its index and the block count in the
    parameters the kernel's ``block_index`` and ``block_count`` attributes name. Blocks sharing out
    a parallel loop run as one batched evaluation of its iterations (``batch.py``)."""
    kernel = m.kernels[op.attrs["kernel"]]
    env = {p.name: m.ev(e) for p, e in zip(launched_params(kernel), op.attrs["scalars"])}
    blocks = m.evi(op.attrs.get("block_dim", 1))
    if blocks < 1:
        raise SimError(f"a launch of {blocks} blocks", op)
    index, count = kernel.attrs.get("block_index"), kernel.attrs.get("block_count")
    envs = [env | ({index: b} if index is not None else {}) | ({count: blocks} if count is not None else {})
            for b in range(blocks)]

    def machine(b: int) -> Machine:
        arenas = m.arenas
        if blocks > 1 and arenas is not None:
            arenas = {space: np.zeros(a.size, np.uint8) for space, a in arenas.items()}
        k = Machine(dict(envs[b]), m.poison, arenas=arenas, kernels=m.kernels, traffic=m.traffic,
                    traffic_by_buffer=m.traffic_by_buffer, timeline=m.timeline)
        for p, v in zip((p for p in kernel.params if p.is_tensor), op.operands):
            k.tensors[p.name] = m.tensors[v.name]
        return k

    footprint = launch_footprint(op, m.evi, kernel)
    if blocks > 1 and batch.run_blocks(m, kernel, envs, machine, footprint):
        return
    if m.timeline is not None:
        m.timeline.begin_launch(kernel.kind, footprint)
    for b in range(blocks):
        k = machine(b)
        if k.timeline is not None:
            k.timeline.begin_kernel()
        _block(k, kernel.body)
        if k.timeline is not None:
            k.timeline.end_kernel()
    if m.timeline is not None:
        m.timeline.end_launch()


def _block(m: Machine, ops: list[Op]) -> None:
    for op in ops:
        _op(m, op)


def _op(m: Machine, op: Op) -> None:
    SIM[op](m, op)


def _timed(fn):
    """A tile op that the cost model charges to its pipe once it has run."""

    def run(m: Machine, op: Op) -> None:
        fn(m, op)
        if m.timeline is not None:
            m.timeline.run(op, [m.tiles[v.name].valid if v.name in m.tiles else m.tensors[v.name].shape
                                for v in op.operands])

    run.untimed = fn  # type: ignore[attr-defined]  # the batched loops time an op once per batch
    return run


@SIM.on("loop")
def _loop(m: Machine, op: Op) -> None:
    lo, hi, step = m.evi(op.attrs["lo"]), m.evi(op.attrs["hi"]), m.evi(op.attrs["step"])
    idx = op.attrs["index"]
    if batch.run_loop(m, op, lo, hi, step):
        return
    for i in range(lo, hi, step):
        m.env[idx] = i
        _block(m, op.regions[0])


@SIM.on("if")
def _if(m: Machine, op: Op) -> None:
    _block(m, op.regions[0] if m.ev(op.attrs["cond"]) else op.regions[1])


@SIM.on("alloc")
def _alloc(m: Machine, op: Op) -> None:
    r = op.result
    t: TensorType = r.type
    m.tensors[r.name] = m.fresh(t.dtype, tuple(m.evi(s) for s in t.shape))


@SIM.on("view")
def _view(m: Machine, op: Op) -> None:
    base = m.tensors[op.operands[0].name]
    t = op.result.type
    offs = [m.evi(o) for o in op.attrs["offsets"]]
    # A view may reach past its parent (its valid shape is clipped there); only the part inside
    # the parent exists, and loads/stores are checked against it.
    shape = [max(0, min(m.evi(s), b - o)) for s, o, b in zip(t.shape, offs, base.shape)]
    if any(o < 0 or o > b for o, b in zip(offs, base.shape)):
        raise SimError(f"view offset {offs} is outside a tensor of shape {list(base.shape)}", op)
    m.tensors[op.result.name] = base[tuple(slice(o, o + n) for o, n in zip(offs, shape))]


@SIM.on("reshape")
def _reshape(m: Machine, op: Op) -> None:
    base = m.tensors[op.operands[0].name]
    shape = tuple(m.evi(s) for s in op.operands[0].type.shape)
    m.tensors[op.result.name] = layout.reshaped(base, shape, tuple(m.evi(s) for s in op.result.type.shape))


@SIM.on("read")
def _read(m: Machine, op: Op) -> None:
    base = m.tensors[op.operands[0].name]
    idx = tuple(m.evi(i) for i in op.attrs["index"])
    if any(not 0 <= i < s for i, s in zip(idx, base.shape)):
        raise SimError(f"element read {list(idx)} is outside a tensor of shape {list(base.shape)}", op)
    v = base[idx]
    m.env[op.attrs["sym"]] = v.item() if hasattr(v, "item") else v


@SIM.on("print")
def _print(m: Machine, op: Op) -> None:
    args = [m.ev(a) for a in op.attrs["args"]]
    text = _print_text(op.attrs["format"], args)
    m.printed.append(text)
    print(text)


@SIM.on("guard")
def _guard(m: Machine, op: Op) -> None:
    a = op.attrs
    if op.operands:  # `repeat`: the index's valid elements are distinct
        n = m.evi(a["extent"])
        values = np.asarray(m.tensors[op.operands[0].name][:n]).astype(np.int64)
        first = repeated(values)
        if first is not None:
            raise guard_failure(a, op.span, int(values[first]), first, m.evi(a["dim"]))
    elif not m.ev(a["cond"]):
        raise guard_failure(a, op.span, m.evi(a["offset"]), m.evi(a["extent"]), m.evi(a["dim"]))


def repeated(values: np.ndarray) -> int | None:
    """The first position whose value an earlier position holds, or None when all are distinct."""
    _, first = np.unique(values, return_index=True)
    if len(first) == len(values):
        return None
    seen = np.zeros(len(values), bool)
    seen[first] = True
    return int(np.argmin(seen))


@SIM.on("sync_set", "sync_wait", "sync_barrier")
def _sync(m: Machine, op: Op) -> None:
    if m.timeline is not None:  # the simulator runs one op at a time; only the cost model waits
        m.timeline.sync(op)


@SIM.on("tile_alloc")
def _tile_alloc(m: Machine, op: Op) -> None:
    r = op.result
    t: TileType = r.type
    valid = tuple(max(0, min(m.evi(v), s)) for v, s in zip(t.valid, t.shape))
    for v, s in zip(t.valid, t.shape):
        if m.evi(v) > s:
            raise SimError(f"valid extent {m.evi(v)} exceeds the tile dim {s}", op)
    if m.arenas is not None and "offset" in op.attrs:
        data = _placed(m, op, t)
    else:
        data = m.fresh(t.dtype, t.shape)
    m.tiles[r.name] = _Tile(data, valid)


def _placed(m: Machine, op: Op, t: TileType) -> np.ndarray:
    """The tile as a view of its bytes in the buffer of its space, freshly filled."""
    npd = numpy_dtype(t.dtype)
    arena = m.arenas[buffer_of(op)]
    offset, size = op.attrs["offset"], int(np.prod(t.shape)) * np.dtype(npd).itemsize
    if offset + size > arena.size:
        raise SimError(f"tile at {offset}+{size} bytes is outside {t.space.upper()} ({arena.size} bytes)", op)
    data = np.ndarray(t.shape, npd, buffer=arena.data, offset=offset)
    data[...] = m.fresh(t.dtype, t.shape)
    return data


@SIM.on("load")
@_timed
def _load(m: Machine, op: Op) -> None:
    dst = m.tiles[op.operands[0].name]
    gm = m.tensors[op.operands[1].name]
    offs = [m.evi(o) for o in op.attrs["offsets"]]
    sl = _slices(offs, dst.valid, gm.shape, op, "tile load")
    dst.data[dst.region()] = gm[sl]
    m.count("load", gm, int(np.prod(dst.valid)) * gm.dtype.itemsize)


@SIM.on("store")
@_timed
def _store(m: Machine, op: Op) -> None:
    gm = m.tensors[op.operands[0].name]
    src = m.tiles[op.operands[1].name]
    offs = [m.evi(o) for o in op.attrs["offsets"]]
    sl = _slices(offs, src.valid, gm.shape, op, "tile store")
    gm[sl] = stored(op, src.data[src.region()], gm.dtype)
    m.count("store", gm, int(np.prod(src.valid)) * gm.dtype.itemsize)


def stored(op: Op, values: np.ndarray, gm_dtype: np.dtype) -> np.ndarray:
    """What a tile store writes: through the fixpipe's relu when it has one, and an f32
    accumulator leaving L0C for f16 / bf16 data rounded once, to nearest even."""
    if op.attrs.get("relu"):
        values = OPS["relu"].sim(values)
    return values if values.dtype == gm_dtype else _round_to(values, op.operands[0].type.dtype)


def _tiles(m: Machine, op: Op) -> tuple[_Tile, list[_Tile]]:
    return m.tiles[op.operands[0].name], [m.tiles[v.name] for v in op.operands[1:]]


@SIM.on("fill_tile")
@_timed
def _fill(m: Machine, op: Op) -> None:
    dst, _ = _tiles(m, op)
    value = m.ev(op.attrs["scalar"])
    dtype = op.operands[0].type.dtype
    if DTYPES[dtype].is_float or dtype == "bool":
        dst.data[dst.region()] = _round_to(np.asarray(value, np.float64), dtype)
    else:
        dst.data[dst.region()] = _int_scalar(value, dtype)


def _int_scalar(value, dtype: str) -> np.ndarray:
    """An integer scalar as an element of ``dtype``, as the C++ kernels convert it: the control
    program computes in int64 and the instruction takes the element type, both wrapping (a length
    of 2**31 - 1 read from a tensor, doubled and written into an i32 tensor, is -2)."""
    v = (int(value) + 2**63) % 2**64 - 2**63
    return np.asarray(np.int64(v)).astype(numpy_dtype(dtype))


def spread(src: _Tile, dst: _Tile, n: int | None = None) -> np.ndarray:
    """The valid values of ``src`` spread over the valid region of ``dst``, as ``tile.expand`` and
    the fused broadcast instructions spread them; with ``n``, of tiles that stack the tiles of ``n``
    iterations along a leading axis (``batch_ops.py``)."""
    lead = () if n is None else (n,)
    piece = src.data[src.region()]
    inner = piece.shape[len(lead):]
    piece = piece.reshape(lead + (1,) * (len(dst.valid) - len(inner)) + inner)
    # Dims of 1 broadcast; the others cover at least the destination's valid extent, which a
    # data-dependent valid shape can make smaller than the source's.
    piece = piece[(slice(None),) * len(lead) + tuple(
        slice(None) if k == 1 else slice(0, v) for k, v in zip(piece.shape[len(lead):], dst.valid))]
    return np.broadcast_to(piece, lead + tuple(dst.valid))


@SIM.on("expand")
@_timed
def _expand(m: Machine, op: Op) -> None:
    dst, (src,) = _tiles(m, op)
    dst.data[dst.region()] = spread(src, dst)


@SIM.on("mov")
@_timed
def _mov(m: Machine, op: Op) -> None:
    dst, (src,) = _tiles(m, op)
    piece = src.data[src.region()]
    if op.attrs.get("transpose"):
        piece = np.swapaxes(piece, -1, -2)
    reg = dst.region()
    dst.data[reg] = piece[reg]  # into the bias table, an f16 / bf16 row widens to f32 exactly


def _matrix(t: _Tile) -> tuple[np.ndarray, int, int]:
    """A cube tile as its 2-D matrix (the dims before the last two are 1) and its valid extents."""
    return t.data.reshape(t.data.shape[-2:]), t.valid[-2], t.valid[-1]


def _cube_values(a: np.ndarray) -> np.ndarray:
    """Products accumulate in f32, or exactly for 8-bit integers (i32 accumulators)."""
    return a.astype(np.int64) if a.dtype.kind in "iu" else _f32(a)


@SIM.on("matmul", "matmul_acc", "matmul_bias")
@_timed
def _matmul(m: Machine, op: Op) -> None:
    d = IR_OPS[op.name]
    bound = dict(zip((x.name for x in d.args), op.operands))
    dst = m.tiles[op.operands[0].name]
    (a, am, k), (b, bk, bn) = (_matrix(m.tiles[bound[x].name]) for x in ("a", "b"))
    out, rows, cols = _matrix(dst)
    if bk != k:
        raise SimError(f"matmul k extents differ: left {k}, right {bk}", op)
    if (am, bn) != (rows, cols):
        raise SimError(f"a {am}x{k} by {bk}x{bn} product into a {rows}x{cols} accumulator", op)
    prod = _cube_values(a[:rows, :k]) @ _cube_values(b[:k, :cols])
    if "acc" in bound:  # matmul_acc: adds to the accumulator it is given
        prod = _cube_values(_matrix(m.tiles[bound["acc"].name])[0][:rows, :cols]) + prod
    if "bias" in bound:  # matmul_bias: one value per column, added after the product
        bias = m.tiles[bound["bias"].name]
        prod = prod + _cube_values(bias.data[: cols])
    out[:rows, :cols] = prod.astype(out.dtype)


@SIM.on("reduce")
@_timed
def _reduce(m: Machine, op: Op) -> None:
    dst, (src,) = _tiles(m, op)
    dtype = op.operands[0].type.dtype
    od = OPS[op.name.removeprefix("tile.")]
    axis = op.attrs["axis"]
    vals = _f32(src.data[src.region()])
    if vals.shape[axis] == 0:
        out = np.full([1 if d == axis else n for d, n in enumerate(vals.shape)], od.identity_for(dtype), vals.dtype)
    else:
        out = od.sim(vals, axis=axis, keepdims=True)
    dst.data[dst.region()] = _round_to(out[tuple(slice(0, v) for v in dst.valid)], dtype)


@SIM.on("cast")
@_timed
def _cast(m: Machine, op: Op) -> None:
    dst, (src,) = _tiles(m, op)
    reg = dst.region()
    dst.data[reg] = convert(src.data[reg], op.operands[1].type.dtype, op.attrs["to"], op.attrs.get("mode", "rint"))


@SIM.on("compare")
@_timed
def _compare(m: Machine, op: Op) -> None:
    dst, srcs = _tiles(m, op)
    reg = dst.region()
    args = [_f32(s.data[reg]) for s in srcs]
    f = COMPARE_SIM[op.attrs["mode"]]
    if "scalar" in op.attrs:
        s = m.ev(op.attrs["scalar"])
        out = f(s, args[0]) if op.attrs.get("side") == "left" else f(args[0], s)
    else:
        out = f(args[0], args[1])
    dst.data[reg] = out


@SIM.on("select")
@_timed
def _select(m: Machine, op: Op) -> None:
    dst, srcs = _tiles(m, op)
    reg = dst.region()
    dtype = op.operands[0].type.dtype
    cond = srcs[0].data[reg].astype(bool)
    rest = [_f32(s.data[reg]) for s in srcs[1:]]
    a = m.ev(op.attrs["scalar"]) if "scalar" in op.attrs else rest.pop(0)
    b = m.ev(op.attrs["scalar2"]) if "scalar2" in op.attrs else rest.pop(0)
    # floats select in f32; integers as integers (through f32, one past 2**24 would lose its low bits)
    picked = np.where(cond, a, b)
    dst.data[reg] = _round_to(np.asarray(picked, np.float32 if DTYPES[dtype].is_float else np.int64), dtype)


@SIM.on("unary", "binary")
@_timed
def _arith(m: Machine, op: Op) -> None:
    dst, srcs = _tiles(m, op)
    reg = dst.region()
    dtype = op.operands[0].type.dtype
    od = OPS[op.name.removeprefix("tile.")]
    args = [_f32(s.data[reg]) for s in srcs]
    if "scalar" in op.attrs:
        s = np.float32(m.ev(op.attrs["scalar"])) if DTYPES[dtype].is_float else m.ev(op.attrs["scalar"])
        args = [s, args[0]] if op.attrs.get("side") == "left" else [args[0], s]
    with np.errstate(all="ignore"):
        out = od.sim(*args)
    dst.data[reg] = _round_to(np.asarray(out), dtype)


from . import fused, indexing, layout  # noqa: E402,F401  (the fused, indexing and layout ops' handlers register on SIM)
