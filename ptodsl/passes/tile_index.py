"""Tiling of the indexing ops (registered on the tables of ``passes/tile.py``).

- ``index_select`` along dim 0 and ``scatter_update``: grids of row tiles ``[R, 1, ..., C]``;
  each tile's R row positions are loaded as an i32 index tile ``[R]`` and the rows move between GM
  and the tile through pto-isa's MGATHER / MSCATTER in ``Coalesce::Row`` form
  (``tile.gather_rows`` / ``tile.scatter_rows``), whose table is the tensor's dim 0 whole.
- ``index_select`` along the last dim and ``gather``: one-row tiles ``[1, ..., C]``; each reads
  its source row through MGATHER's ``Coalesce::Elem`` form (``tile.gather_elem``).
- ``arange``: TCI per tile, started at the tile's offset; ``tri``: TTRI per tile, its diagonal
  moved by the tile's offsets. Both in an integer or f32 dtype the target's instruction takes,
  then converted.
- ``argmax``/``argmin`` (last dim): per tile TROWMAX/TROWMIN and TROWARGMAX/TROWARGMIN; a row
  spanning several tiles keeps the best (value, index) so far, a later tile winning only with a
  strictly better value, so the first index among equal values is the one kept.
- ``topk`` (and ``argsort``, a ``topk`` of the whole row): a row in one tile; k rounds, each
  taking the best value among the elements not taken yet and the lowest column holding it
  (TROWMAX/TROWMIN, TCMP, TSEL over a TCI column ramp), so equal values come out in index order
  and +-inf values are ranked like any other. pto-isa's TSORT32/TMRGSORT sort only f16/f32 in
  blocks of 32 value-index pairs merged four lists at a time; this form works for every dtype of
  at most 32 bits and any row length a tile holds.
"""

from __future__ import annotations

from .. import sym
from ..dtypes import DTYPES, value_range
from ..ir import Op, TensorType, Value
from . import native
from .tile import COMPUTE, TILING, _Tiler

E_ROW = "E0856"  # a topk / argsort row longer than the vec tile's last dim

TILING.on("index_select", "gather", "arange", "tri", "argreduce")(_Tiler.computation)


def _unsupported(tl: _Tiler, op: Op, instr: str, what: str) -> None:
    tl.unsupported(op, [instr], what)


def _rows_tile(tile: tuple[int, ...]) -> tuple[int, ...]:
    """A tile whose logical rows are the tensor's dim-0 rows: the middle dims are 1."""
    return (tile[0], *(1 for _ in tile[1:-1]), tile[-1]) if len(tile) > 1 else tile


def _cast(tl: _Tiler, src: Value, dtype: str, op: Op) -> Value | None:
    """``src`` converted to ``dtype`` (through f32 when one TCVT cannot), or None after E0608."""
    if src.type.dtype == dtype:
        return src
    route = native.cast_route(tl.ctx.target, dtype, src.type.dtype)
    if route is None:
        _unsupported(tl, op, "TCVT", f"from {src.type.dtype} to {dtype}")
        return None
    for d in route:
        src = tl.cast_tile(src, d, op.span)
    return src


def _index_tile(tl: _Tiler, idx: Value, shape, offs, valid, op: Op) -> Value | None:
    """The i32 index tile the gather and scatter instructions take, loaded from ``idx``."""
    t = tl.tile(idx.type.dtype, shape, valid, op.span)
    tl.emit(Op("tile.load", [t, idx], {"offsets": tuple(offs)}, span=op.span))
    # the guards before the op proved every index in [0, dim) with dim < 2**31: narrowing is exact
    return _cast(tl, t, "i32", op)


def _generated_dtype(tl: _Tiler, instr: str, dtype: str) -> str | None:
    """The dtype to run a generating instruction (TCI, TTRI) in: the result's, else i32 or f32."""
    target = tl.ctx.target
    for d in (dtype, "i32" if not DTYPES[dtype].is_float else "f32", "f32", "i32"):
        if target.computes(instr, d) and native.cast_route(target, dtype, d) is not None:
            return d
    return None


# ------------------------------------------------------------------ gathers and scatters


@COMPUTE.on("index_select", "gather")
def gather(tl: _Tiler, op: Op, dest) -> None:
    src, idx = op.operands
    rt: TensorType = op.result.type
    rank, axis = rt.rank, op.attrs["axis"]
    tile = tl.vec_tile(rank, op)
    if tile is None:
        return
    rows = op.name == "index_select" and axis == 0 and rank >= 2
    tile = _rows_tile(tile) if rows else (*(1 for _ in tile[:-1]), tile[-1])
    tshape, offs, tvalid, depth = tl.grid(rt.shape, rt.valid_shape, tile, op.span)
    if rows:
        it = _index_tile(tl, idx, (tshape[0],), (offs[0],), (tvalid[0],), op)
        name, at = "tile.gather_rows", (0, *offs[1:])
    else:
        if idx.type.rank == 1:
            it = _index_tile(tl, idx, (tshape[-1],), (offs[-1],), (tvalid[-1],), op)
        else:
            it = _index_tile(tl, idx, tshape, offs, tvalid, op)
        name, at = "tile.gather_elem", (*offs[:-1], 0)
    if it is None:
        tl.close(depth)
        return
    dst = tl.tile(rt.dtype, tshape, tvalid, op.span)
    tl.emit(Op(name, [dst, src, it], {"offsets": tuple(at)}, span=op.span))
    tl.store(dest, dst, offs, op.span)
    tl.close(depth)


@TILING.on("scatter_update")
def scatter(tl: _Tiler, op: Op, nxt: Op | None) -> None:
    dst, idx, src = op.operands
    st: TensorType = src.type
    tile = tl.vec_tile(st.rank, op)
    if tile is None:
        return
    tshape, offs, tvalid, depth = tl.grid(st.shape, st.valid_shape, _rows_tile(tile), op.span)
    rows = tl.tile(st.dtype, tshape, tvalid, op.span)
    tl.emit(Op("tile.load", [rows, src], {"offsets": tuple(offs)}, span=op.span))
    it = _index_tile(tl, idx, (tshape[0],), (offs[0],), (tvalid[0],), op)
    if it is not None:
        attrs = {"offsets": (0, *offs[1:]), **({"unique": True} if op.attrs.get("unique") else {})}
        tl.emit(Op("tile.scatter_rows", [dst, rows, it], attrs, span=op.span))
    tl.close(depth)


# ------------------------------------------------------------------ generated tensors


def _generated(tl: _Tiler, op: Op, dest, instr: str, name: str, attrs_of) -> None:
    rt: TensorType = op.result.type
    tile = tl.vec_tile(rt.rank, op)
    if tile is None:
        return
    if name == "tile.tri":  # TTRI numbers the rows of a tile: one matrix of the batch per tile
        tile = (*(1 for _ in tile[:-2]), *tile[-2:])
    tshape, offs, tvalid, depth = tl.grid(rt.shape, rt.valid_shape, tile, op.span)
    work = _generated_dtype(tl, instr, rt.dtype)
    if work is None:
        _unsupported(tl, op, instr, rt.dtype)
        tl.close(depth)
        return
    t = tl.tile(work, tshape, tvalid, op.span)
    tl.emit(Op(name, [t], attrs_of(offs), span=op.span))
    out = _cast(tl, t, rt.dtype, op)
    if out is not None:
        tl.store(dest, out, offs, op.span)
    tl.close(depth)


@COMPUTE.on("arange")
def arange(tl: _Tiler, op: Op, dest) -> None:
    _generated(tl, op, dest, "TCI", "tile.ci", lambda offs: {"start": sym.add(op.attrs["start"], offs[0])})


@COMPUTE.on("tri")
def tri(tl: _Tiler, op: Op, dest) -> None:
    # element (r0 + i, c0 + j) is kept when (c0 + j) - (r0 + i) <= d: in the tile, j - i <= d + r0 - c0
    _generated(tl, op, dest, "TTRI", "tile.tri", lambda offs: {
        "lower": op.attrs["lower"], "diagonal": sym.add(op.attrs["diagonal"], sym.sub(offs[-2], offs[-1]))})


# ------------------------------------------------------------------ arg-reductions


def _work_dtype(dtype: str) -> str:
    """What arg-reductions and top-k compare in: f32 for floats (exact for f16 and bf16), i32 for
    integers; the masks and index tiles they select with are then all of 32-bit elements."""
    return "f32" if DTYPES[dtype].is_float else "i32"


@COMPUTE.on("argreduce")
def argreduce(tl: _Tiler, op: Op, dest) -> None:
    x = op.operands[0]
    st: TensorType = x.type
    axis = op.attrs["axis"]
    tile = tl.vec_tile(st.rank, op)
    if tile is None:
        return
    largest = op.name == "argmax"
    value_op, arg_op = ("tile.amax", "tile.argmax") if largest else ("tile.amin", "tile.argmin")
    work = _work_dtype(st.dtype)
    for instr in (("TROWMAX", "TROWARGMAX") if largest else ("TROWMIN", "TROWARGMIN")):
        if not tl.ctx.target.computes(instr, work):
            _unsupported(tl, op, instr, work)
            return
    tshape, offs, tvalid, depth = tl.grid(st.shape, st.valid_shape, tile, op.span, skip_axis=axis)
    ax_tile = min(tile[axis], st.shape[axis]) if sym.is_const(st.shape[axis]) else tile[axis]
    n = sym.ceildiv(st.valid_shape[axis], ax_tile)

    def part(koff) -> tuple[Value, Value] | None:
        in_shape, in_offs, in_valid = list(tshape), list(offs), list(tvalid)
        in_shape[axis], in_offs[axis] = ax_tile, koff
        in_valid[axis] = sym.min_(sym.sub(st.valid_shape[axis], koff), ax_tile)
        t = tl.tile(st.dtype, in_shape, in_valid, op.span)
        tl.emit(Op("tile.load", [t, x], {"offsets": tuple(in_offs)}, span=op.span))
        t = _cast(tl, t, work, op)
        if t is None:
            return None
        v = tl.tile(work, tshape, tvalid, op.span)
        tl.emit(Op(value_op, [v, t], {"axis": axis}, span=op.span))
        i = tl.tile("i32", tshape, tvalid, op.span)
        tl.emit(Op(arg_op, [i, t], {"axis": axis}, span=op.span))
        if koff != 0:
            tl.emit(Op("tile.add", [i, i], {"scalar": koff}, span=op.span))
        return v, i

    first = part(0)
    if first is None:
        tl.close(depth)
        return
    best_v, best_i = first
    if n != 1:
        k = tl.fresh("k")
        tl.out.append([Op("loop", [], {"index": k, "lo": 1, "hi": n, "step": 1, "name": k, "kind": "grid"},
                          span=op.span)])
        nxt = part(sym.mul(sym.Sym(k), ax_tile))
        if nxt is not None:
            v, i = nxt
            better = tl.tile("bool", tshape, tvalid, op.span)
            tl.emit(Op("tile.cmp", [better, v, best_v], {"mode": "gt" if largest else "lt"}, span=op.span))
            tl.emit(Op("tile.where", [best_v, better, v, best_v], {}, span=op.span))
            tl.emit(Op("tile.where", [best_i, better, i, best_i], {}, span=op.span))
        tl.close(1)
    tl.store(dest, best_i, offs, op.span)
    tl.close(depth)


# ------------------------------------------------------------------ top-k


def _extreme(dtype: str, low: bool) -> float | int:
    if DTYPES[dtype].is_float:
        return float("-inf") if low else float("inf")
    lo, hi = value_range(dtype)
    return int(lo if low else hi)


@TILING.on("topk")
def topk_results(tl: _Tiler, op: Op, nxt: Op | None) -> None:
    """Two results, each a workspace the assembles after it copy out (fusion forwards them)."""
    for r in op.results:
        tl.emit(Op("alloc", [], {}, [r], span=op.span))
    COMPUTE[op](tl, op, None)


@COMPUTE.on("topk")
def topk(tl: _Tiler, op: Op, dest) -> None:
    values, indices = op.results
    x = op.operands[0]
    st: TensorType = x.type
    rank, n, k = st.rank, int(st.shape[-1]), int(op.attrs["k"])
    largest = bool(op.attrs["largest"])
    tile = tl.vec_tile(rank, op)
    if tile is None:
        return
    if tile[-1] < n:
        tl.ctx.diags.error(
            E_ROW, f"this op ranks a row of {n} elements within one tile, but the vec tile's last dim is {tile[-1]}",
            op.span, f"rows of {n}", secondary=tl.ctx.labels(("schedule", "vec_tile"), "the tile is set here"),
            help=f"give the loop a vec_tile whose last dim is at least {n}, e.g. {[*tile[:-1], n]}")
        return
    work = _work_dtype(st.dtype)
    target = tl.ctx.target
    needed = [("TROWMAX" if largest else "TROWMIN", work), ("TROWMIN", "i32"), ("TCI", "i32"), ("TCMP", work),
              ("TCMP", "i32"), ("TCMPS", "i32"), ("TSEL", work), ("TSEL", "i32")]
    for instr, dt in needed:
        if not target.computes(instr, dt):
            _unsupported(tl, op, instr, dt)
            return
    tshape, offs, tvalid, depth = tl.grid(st.shape, st.valid_shape, (*tile[:-1], n), op.span)
    span = op.span
    row_shape, row_valid = (*tshape[:-1], 1), (*tvalid[:-1], 1)
    t = tl.tile(st.dtype, tshape, tvalid, span)
    tl.emit(Op("tile.load", [t, x], {"offsets": tuple(offs)}, span=span))
    w = _cast(tl, t, work, op)
    if w is None:
        tl.close(depth)
        return
    ramp = tl.tile("i32", (*(1 for _ in tshape[:-1]), n), (*(1 for _ in tshape[:-1]), n), span)
    tl.emit(Op("tile.ci", [ramp], {"start": 0}, span=span))
    cols = tl.tile("i32", tshape, tvalid, span)
    tl.emit(Op("tile.expand", [cols, ramp], {}, span=span))
    taken = tl.tile("i32", tshape, tvalid, span)
    tl.emit(Op("tile.fill", [taken], {"scalar": 0}, span=span))
    j = tl.fresh("j")
    tl.out.append([])
    tl.emit_loop_header(j, k, span)

    def new(dtype: str, row: bool = False) -> Value:
        return tl.tile(dtype, row_shape if row else tshape, row_valid if row else tvalid, span)

    out_of_play = new("bool")
    tl.emit(Op("tile.cmp", [out_of_play, taken], {"mode": "ne", "scalar": 0}, span=span))
    masked = new(work)
    tl.emit(Op("tile.where", [masked, out_of_play, w], {"scalar": _extreme(work, largest)}, span=span))
    best = new(work, row=True)
    tl.emit(Op("tile.amax" if largest else "tile.amin", [best, masked], {"axis": rank - 1}, span=span))
    spread = new(work)
    tl.emit(Op("tile.expand", [spread, best], {}, span=span))
    equal = new("bool")
    tl.emit(Op("tile.cmp", [equal, w, spread], {"mode": "eq"}, span=span))
    # the lowest column holding the best value among those not taken yet
    where_equal = new("i32")
    tl.emit(Op("tile.where", [where_equal, equal, cols], {"scalar2": n}, span=span))
    candidates = new("i32")
    tl.emit(Op("tile.where", [candidates, out_of_play, where_equal], {"scalar": n}, span=span))
    col = new("i32", row=True)
    tl.emit(Op("tile.amin", [col, candidates], {"axis": rank - 1}, span=span))
    col_spread = new("i32")
    tl.emit(Op("tile.expand", [col_spread, col], {}, span=span))
    hit = new("bool")
    tl.emit(Op("tile.cmp", [hit, cols, col_spread], {"mode": "eq"}, span=span))
    tl.emit(Op("tile.where", [taken, hit, taken], {"scalar": 1}, span=span))
    value = _cast(tl, best, st.dtype, op)
    at = (*offs[:-1], sym.Sym(j))
    if value is not None:
        tl.emit(Op("tile.store", [values, value], {"offsets": at}, span=span))
    tl.emit(Op("tile.store", [indices, col], {"offsets": at}, span=span))
    tl.close(1)
    tl.close(depth)


# ------------------------------------------------------------------ what the emitter declares


def index_table(op: Op, shape: tuple[sym.Expr, ...], strides: tuple[sym.Expr, ...]) -> tuple[list, list]:
    """The GM table a gather or scatter instruction moves rows or elements of, as the last two
    dims of its GlobalTensor: ``([rows, cols], [row stride, 1])``. A row op's table is the
    tensor's dim 0 from its offset (every row an index may name) by the tile's valid columns; an
    element gather's is the one source row. The C++ emitter and the stack estimate both use it."""
    if op.name == "tile.gather_elem":
        return [1, shape[-1]], [1, 1]
    tile = op.operands[1] if op.name == "tile.scatter_rows" else op.operands[0]
    return [sym.sub(shape[0], op.attrs["offsets"][0]), tile.type.valid[-1]], [strides[0], 1]


SCRATCH_TILES = {"tile.argmax": 1, "tile.argmin": 1}  # TROWARGMAX / TROWARGMIN take a tmp tile
