"""Tiling: Tensor IR -> Tile IR (like PyPTO's ExpandFunction).

Requires: a verified ``level tensor`` module.
Produces: a ``level tile`` module in which every computation is a grid of tile ops. The grid is
``cdiv(valid, tile)`` per dim; each tile carries its valid extent ``min(valid - offset, tile)``, so
tails are exact and nothing outside a valid region is ever stored. Broadcast operands are loaded
once and expanded; reductions whose axis spans several tiles combine per-tile partials in an f32
(or integer) accumulator; composite ops expand into primitives from the op table; matmuls take
the cube path (``cube.py``). An op whose only use is the ``assemble`` right after it stores
straight into the destination region.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

from .. import sym
from ..dtypes import accumulator_dtype
from ..ir import Func, Module, Op, TensorType, TileType, Value
from ..ir.opdefs import Handlers
from ..ir.schedule import schedule_of
from ..ops import OPS, TEMPLATE_COMPARES, Template
from ..schedule import Schedule
from . import fuse, fusedops, native, tile_fit
from .context import Pass, PassContext
from .cube import CubeTiling
from .templates import template_names, template_scalars
from .tile_bcast import forward_broadcasts
from .tile_rows import reduction_tile, whole_rows
from .tile_shape import spread_rows

# How each op family of the tensor level becomes tile work: TILING for every op, COMPUTE for the
# computations whose result has a destination region.
TILING = Handlers("tiling")
COMPUTE = Handlers("tiling a computation")


class _Tiler(CubeTiling):
    def __init__(self, func: Func, ctx: PassContext, schedule: Schedule):
        self.func = func
        self.ctx = ctx
        self.schedule = schedule
        self.counter = itertools.count()
        self.out: list[list[Op]] = [[]]
        self.uses = Counter(v.name for op in func.walk() for v in op.operands)
        self.loop_names: list[str] = []
        self.fused: set[int] = set()  # ids of assemble ops already done by their producer
        self.reported: set[tuple] = set()
        # one-pass versions (passes/tile_fit.py): loop id -> (dim, cap) to version; inside a fit
        # version, the dim's range [1, cap] (tiles of cap columns along it, no grid loop)
        self.versions: dict[int, tuple[str, int, int]] = {}  # loop id -> (dim, cap, least dim)
        self.fit_inner: dict[int, frozenset[str]] = {}  # loop id -> its inner row loops' indices
        self.only_fit = False  # measuring: emit the fit version alone
        # the dims the spec bounds (`max_dims:`) are fit everywhere: every call has 1 <= dim <= max
        self.bounded = frozenset(schedule.max_dims)
        self.fit: dict[str, tuple[int, int]] = {d: (1, m) for d, m in schedule.max_dims.items()}

    # ------------------------------------------------------------ plumbing
    def emit(self, op: Op) -> Op:
        self.out[-1].append(op)
        return op

    def fresh(self, hint: str) -> str:
        return f"_{hint}{next(self.counter)}"

    def tile(self, dtype: str, shape: Sequence[int], valid: Sequence[sym.Expr], span) -> Value:
        v = Value(self.fresh("t"), TileType("ub", dtype, tuple(shape), tuple(valid)))
        self.emit(Op("tile.alloc", [], {}, [v], span=span))
        return v

    def vec_tile(self, rank: int, op: Op, pad: bool = False) -> tuple[int, ...] | None:
        """The vector tile in effect for an op whose output has ``rank`` dims; one of fewer dims is
        reported (E0601), or with ``pad`` (work the compiler adds, not the user's op) extended
        with leading 1s."""
        sched = self.schedule
        tile = sched.vec_tile
        where = ("schedule", "vec_tile")
        for name in reversed(self.loop_names):
            ls = sched.loops.get(name)
            if ls is not None and ls.vec_tile is not None:
                tile, where = ls.vec_tile, ("schedule", "loops", name, "vec_tile")
                break
        if tile is None:
            # the target's default names the trailing dims only: an op of higher rank is split by
            # 1 along the others, as the tile the cost model would choose is (cost/choose.py)
            tile = self.ctx.target.default_vec_tile
            tile = (1,) * (rank - len(tile)) + tuple(tile)
        tile = tuple(tile)
        if len(tile) < rank and pad:
            return (1,) * (rank - len(tile)) + tile
        if len(tile) < rank:
            key = (where, rank, op.span)
            if key not in self.reported:
                self.reported.add(key)
                named = [n for n in self.loop_names if not n.startswith("_")]  # "_" names are the compiler's
                loop = f"loop `{named[-1]}`" if named else "the kernel's top level"
                shape = op.results[0].type.shape if op.results else ()
                self.ctx.diags.error(
                    "E0601", f"vec tile {list(tile)} has rank {len(tile)}, but this op's output has rank {rank}",
                    op.span, f"output shape [{', '.join(sym.to_text(s) for s in shape)}] in {loop}",
                    secondary=self.ctx.labels(where, "the tile is set here"),
                    help=f"give the tile {rank} dims, e.g. {[1] * (rank - len(tile)) + list(tile)}")
            return None
        return tile[len(tile) - rank:]

    # ------------------------------------------------------------ walk
    def run(self) -> Func:
        self.block(self.func.body)
        return Func(self.func.name, self.func.params, self.out[0], self.func.kind, self.func.attrs, self.func.span)

    def block(self, ops: list[Op]) -> None:
        for i, op in enumerate(ops):
            nxt = ops[i + 1] if i + 1 < len(ops) else None
            self.op(op, nxt)

    def op(self, op: Op, nxt: Op | None) -> None:
        TILING[op](self, op, nxt)

    @TILING.on("loop", "if")
    def structure(self, op: Op, nxt: Op | None) -> None:
        plan = self.versions.get(id(op))
        if plan is not None and self.fit.keys() <= self.bounded:
            self.versioned(op, *plan)
            return
        name = op.name
        if name == "loop":
            self.loop_names.append(op.attrs["name"])
        regions = []
        for region in op.regions:
            self.out.append([])
            self.block(region)
            regions.append(self.out.pop())
        if name == "loop":
            self.loop_names.pop()
        self.emit(Op(name, [], dict(op.attrs), [], regions, op.span))

    def versioned(self, loop: Op, dim: str, cap: int, lo: int = 1) -> None:
        """The loop's fit version for rows of ``lo`` to ``cap`` along ``dim`` beside the loop as
        scheduled, chosen at call time (passes/tile_fit.py)."""
        self.fit[dim] = (lo, cap)
        self.out.append([])
        copy = tile_fit.fit_copy(loop, dim, cap, self.fit_inner.get(id(loop), frozenset()))
        found = self.rewrite_joining_rows_whole(copy.regions[0])
        if found is not None:
            copy.regions[0] = tile_fit.without_copy(copy.regions[0], found)
        # the copy's values are new: count their uses, so a result used once is still stored
        # straight into its assemble's region (computation)
        self.uses.update(v.name for o in copy.walk() for v in o.operands)
        self.structure(copy, None)
        fit = self.out.pop()
        del self.fit[dim]
        if self.only_fit:
            self.out[-1].extend(fit)
            return
        self.out.append([])
        del self.versions[id(loop)]
        self.structure(loop, None)
        self.versions[id(loop)] = (dim, cap, lo)
        rest = self.out.pop()
        self.emit(Op("if", [], {"cond": tile_fit.condition(dim, cap, lo)}, [], [fit, rest], loop.span))

    def rewrite_joining_rows_whole(self, ops: list[Op]):
        """The rewrite of a tensor from a copy of itself in ``ops`` (``tile_fit.rewrite_of``) when
        its concat, at the fit dims in effect, leaves each row block as one tile (TCONCAT of whole
        parts): its row block is then loaded whole before it is stored, and the copy can go."""
        found = tile_fit.rewrite_of(ops)
        from .tile_layout import _row_concat
        return found if found is not None and _row_concat(self, found[2]) is not None else None

    def fit_width(self, extent: sym.Expr) -> int | None:
        """The tile width along a dim of ``extent`` inside a fit version or bounded by the spec,
        else None: the dim's largest value, rounded up to a multiple of the UB block's bytes in
        columns, so that a row of any dtype (one byte an element at least) stays aligned (a fit
        version's cap is such a multiple already)."""
        block = self.ctx.target.ub_block_bytes
        if isinstance(extent, sym.Sym) and extent.name in self.fit:
            return -(-int(self.fit[extent.name][1]) // block) * block
        free = sym.free_symbols(extent) if not sym.is_const(extent) else set()
        if free and free <= set(self.fit):
            # an extent computed from fit dims only (a concat part's `D - D // 2`): its largest value
            top = sym.bounds(extent, self.fit)[1]
            if top is not None and top >= 1:
                return -(-int(top) // block) * block
        return None

    @TILING.on("view", "reshape", "read", "print", "guard")
    def control(self, op: Op, nxt: Op | None) -> None:
        self.emit(op)

    @TILING.on("alloc")
    def alloc(self, op: Op, nxt: Op | None) -> None:
        self.emit(Op("alloc", [], {}, op.results, span=op.span))
        if "fill" in op.attrs:
            t = op.result.type
            self.fill_region(op.result, tuple(0 for _ in t.shape), t.shape, op.attrs["fill"], op)

    @TILING.on("assemble")
    def assemble(self, op: Op, nxt: Op | None) -> None:
        if id(op) not in self.fused:
            self.copy(op)

    @TILING.on("fill")
    def fill(self, op: Op, nxt: Op | None) -> None:
        self.fill_region(op.operands[0], op.attrs["offsets"], op.attrs["shape"], op.attrs["scalar"], op)

    @TILING.on("unary", "binary", "cast", "compare", "select", "reduce", "matmul", "broadcast")
    def computation(self, op: Op, nxt: Op | None) -> None:
        """Store straight into an assemble's region when that is the result's only use."""
        r = op.result
        if nxt is not None and nxt.name == "assemble" and nxt.operands[1] is r and self.uses[r.name] == 1:
            dest = (nxt.operands[0], nxt.attrs["offsets"])
            self.fused.add(id(nxt))
        else:
            self.emit(Op("alloc", [], {}, [r], span=op.span))
            dest = (r, tuple(0 for _ in r.type.shape))
        COMPUTE[op](self, op, dest)

    # ------------------------------------------------------------ grids
    def grid(self, shape: Sequence[sym.Expr], valid: Sequence[sym.Expr], tile: Sequence[int], span,
             skip_axis: int | None = None):
        """Open loops over the tile grid; returns (tile shape, tile offsets, tile valid, depth)."""
        tile = whole_rows(tile, shape, valid, skip_axis)
        tshape, offs, tvalid = [], [], []
        depth = 0
        last = len(shape) - 1
        for d, (s, v, t) in enumerate(zip(shape, valid, tile)):
            ts = min(t, s) if sym.is_const(s) else t
            wide = self.fit_width(s) if d == last else None
            if wide is not None:
                ts = wide
            if d == skip_axis:
                tshape.append(1)
                offs.append(0)
                tvalid.append(1)
                continue
            # one tile and no loop only where the extent is provably 1 .. ts: a valid extent read
            # at run time may be 0, and a tile op of no columns is no op pto-isa takes
            n = 1 if wide is not None and sym.prove_le(v, ts, self.fit) and sym.prove_le(1, v, self.fit) \
                else sym.ceildiv(v, ts)
            if n == 1:
                off = 0
            else:
                idx = self.fresh("g")
                self.out.append([])
                self.emit_loop_header(idx, n, span)
                off = sym.mul(sym.Sym(idx), ts)
                depth += 1
            tshape.append(ts)
            offs.append(off)
            # a constant extent the tile divides has no tail: every tile is whole (the C++ emitter
            # needs rank-3/4 tiles' inner row dims whole, and proves it from these expressions)
            whole = sym.is_const(v) and sym.is_const(ts) and ts > 0 and int(v) % int(ts) == 0
            tvalid.append(ts if whole else sym.min_(sym.sub(v, off), ts, self.fit or None))
        return tshape, offs, tvalid, depth

    def emit_loop_header(self, idx: str, n: sym.Expr, span) -> None:
        # the loop op itself is emitted when the grid closes; remember its attributes
        self.out[-1].append(Op("loop", [], {"index": idx, "lo": 0, "hi": n, "step": 1, "name": idx, "kind": "grid"},
                               span=span))

    def close(self, depth: int) -> None:
        for _ in range(depth):
            body = self.out.pop()
            header, ops = body[0], body[1:]
            header.regions = [ops]
            self.emit(header)

    def load_operand(self, v: Value, out_shape, tshape, offs, tvalid, span) -> Value:
        """Load operand v's tile for an output tile, expanding broadcast dims."""
        t: TensorType = v.type
        rank = len(out_shape)
        pad = rank - t.rank
        lshape, loffs, lvalid = [], [], []
        bcast = pad > 0
        for d in range(t.rank):
            od = d + pad
            if t.shape[d] == 1 and out_shape[od] != 1:
                lshape.append(1)
                loffs.append(0)
                lvalid.append(1)
                bcast = True
            else:
                lshape.append(tshape[od])
                loffs.append(offs[od])
                if t.valid_shape[d] == self.out_valid[od]:
                    lvalid.append(tvalid[od])  # same extent as the output: the same tail
                else:
                    lvalid.append(sym.min_(sym.max_(sym.sub(t.valid_shape[d], offs[od]), 0, self.fit or None),
                                           tshape[od], self.fit or None))
        tl = self.tile(t.dtype, lshape, lvalid, span)
        self.emit(Op("tile.load", [tl, v], {"offsets": tuple(loffs)}, span=span))
        if not bcast or (pad == 0 and tuple(lshape) == tuple(tshape)):
            return tl  # a broadcast dim the tile holds one index of spreads over nothing
        full = self.tile(t.dtype, tshape, tvalid, span)
        self.emit(Op("tile.expand", [full, tl], {}, span=span))
        return full

    # ------------------------------------------------------------ ops
    def output_grid(self, op: Op):
        """The grid of output tiles of an op computed tile by tile: (result type, tile shape,
        offsets, valid extents, loop depth), or None when its tile is reported as wrong."""
        rt: TensorType = op.result.type
        tile = self.vec_tile(rt.rank, op)
        if tile is None:
            return None
        tile = spread_rows(rt.shape, tile, [v.type.shape for v in op.operands])
        tshape, offs, tvalid, depth = self.grid(rt.shape, rt.valid_shape, tile, op.span)
        self.out_valid = rt.valid_shape
        return rt, tshape, offs, tvalid, depth

    @COMPUTE.on("unary", "binary", "cast", "compare", "select")
    def elementwise(self, op: Op, dest) -> None:
        grid = self.output_grid(op)
        if grid is None:
            return
        rt, tshape, offs, tvalid, depth = grid
        work = self.work_dtype(op)
        if work is None:
            self.close(depth)
            return
        srcs = [self.load_operand(v, rt.shape, tshape, offs, tvalid, op.span) for v in op.operands]
        dst = self.tile(rt.dtype, tshape, tvalid, op.span)
        if op.name == "cast":
            self.convert(dst, srcs[0], work, op)
        elif work in (rt.dtype, op.operands[0].type.dtype):
            self.compute(op.name, dst, srcs, dict(op.attrs), op.span)
        else:  # computed in a wider dtype the target's instructions take, between two casts
            wide = [self.cast_tile(s, work, op.span) if s.type.dtype != "bool" else s for s in srcs]
            out = dst if rt.dtype == "bool" else self.tile(work, tshape, tvalid, op.span)
            self.compute(op.name, out, wide, dict(op.attrs), op.span)
            if out is not dst:
                self.emit(Op("tile.cast", [dst, out], {"to": rt.dtype, "mode": "rint"}, span=op.span))
        self.store(dest, dst, offs, op.span)
        self.close(depth)

    def work_dtype(self, op: Op) -> str | tuple[str, ...] | None:
        """The dtype the target computes ``op`` in (for a cast, the dtypes it converts through);
        None, with E0608 reported, when the target has no instruction for it."""
        target = self.ctx.target
        data = op.operands[0].type.dtype if OPS[op.name].kind in ("cast", "compare") else op.result.type.dtype
        if op.name == "cast":
            route = native.cast_route(target, op.result.type.dtype, data)
            if route is None:
                self.unsupported(op, ["TCVT"], f"from {data} to {op.result.type.dtype}")
            return route
        work = native.compute_dtype(target, op.name, op.attrs, data)
        if work is None:
            self.unsupported(op, native.unsupported_instructions(target, op.name, op.attrs, data), data)
        return work

    def unsupported(self, op: Op, instrs: list[str], what: str) -> None:
        target = self.ctx.target
        headers = sorted({f"{i}: {target.vector_rule(i).header}" for i in instrs if target.vector_rule(i)})
        self.ctx.diags.error(
            "E0608", f"`{op.name}` on {what} has no instruction on target `{target.name}`", op.span,
            f"{', '.join(instrs)} {'does' if len(instrs) == 1 else 'do'} not take {what} on {target.name}",
            notes=[f"rule from pto-isa {h}" for h in headers],
            help="use a dtype variant the target computes (see `vector_instructions` in its target file), or cast to one first")

    def cast_tile(self, src: Value, dtype: str, span) -> Value:
        t = self.tile(dtype, src.type.shape, src.type.valid, span)
        self.emit(Op("tile.cast", [t, src], {"to": dtype, "mode": "rint"}, span=span))
        return t

    def convert(self, dst: Value, src: Value, route: tuple[str, ...], op: Op) -> None:
        """A cast, through f32 when one TCVT cannot do it on the target."""
        for dtype in route[:-1]:
            src = self.cast_tile(src, dtype, op.span)
        self.emit(Op("tile.cast", [dst, src], dict(op.attrs), span=op.span))

    @COMPUTE.on("broadcast")
    def broadcast(self, op: Op, dest) -> None:
        """A value spread over a wider write region: each output tile loads the source's tile
        and expands it (TROWEXPAND / TCOLEXPAND), so every row and column of the region is stored."""
        grid = self.output_grid(op)
        if grid is None:
            return
        rt, tshape, offs, tvalid, depth = grid
        full = self.load_operand(op.operands[0], rt.shape, tshape, offs, tvalid, op.span)
        self.store(dest, full, offs, op.span)
        self.close(depth)

    def compute(self, name: str, dst: Value, srcs: list[Value], attrs: dict, span) -> None:
        form = OPS[name].expand or native.fallback(self.ctx.target, name, attrs, dst.type.dtype)
        if form is None:
            self.emit(Op(f"tile.{name}", [dst, *srcs], attrs, span=span))
            return
        # a composite, or an op the target computes in another form: evaluate the template over
        # primitive tile ops
        result = self.template(form, template_names(OPS[name], srcs, attrs), dst, span, top=True)
        assert result is dst

    def template(self, node: Template, names: dict, dst: Value, span, top: bool = False):
        if isinstance(node, str):
            return names[node]
        if isinstance(node, float):
            return node
        name, *args = node
        if name == "let":  # ("let", var, value, body): value computed once, named var in body
            var, value, body = args
            bound = self.template(value, names, dst, span)
            return self.template(body, names | {var: bound}, dst, span, top)
        vals = [self.template(a, names, dst, span) for a in args]
        if name in TEMPLATE_COMPARES:  # a comparison: a bool tile for a `where` of the template
            out = self.tile("bool", dst.type.shape, dst.type.valid, span)
            name, attrs = "cmp", {"mode": name}
        else:
            out = dst if top else self.tile(dst.type.dtype, dst.type.shape, dst.type.valid, span)
            attrs = {}
        tiles = [v for v in vals if isinstance(v, Value)]
        attrs |= template_scalars(name, vals)
        self.compute(name, out, tiles, attrs, span)
        return out

    def store(self, dest, tile: Value, offs, span, attrs: dict | None = None) -> None:
        gm, base = dest
        at = tuple(sym.add(b, o) for b, o in zip(base, offs)) if len(base) == len(offs) else self.align(base, offs)
        self.emit(Op("tile.store", [gm, tile], {"offsets": at, **(attrs or {})}, span=span))

    @staticmethod
    def align(base, offs):
        pad = len(base) - len(offs)
        return tuple(base[:pad]) + tuple(sym.add(b, o) for b, o in zip(base[pad:], offs))

    @COMPUTE.on("reduce")
    def reduction(self, op: Op, dest) -> None:
        src = op.operands[0]
        st: TensorType = src.type
        axis = op.attrs["axis"] % st.rank
        tile = self.vec_tile(st.rank, op)
        if tile is None:
            return
        tile = reduction_tile(tile, axis)
        od = OPS[op.name]
        acc_dt = accumulator_dtype(st.dtype)
        out_dt = op.result.type.dtype
        tshape, offs, tvalid, depth = self.grid(st.shape, st.valid_shape, tile, op.span, skip_axis=axis)
        ax_tile = min(tile[axis], st.shape[axis]) if sym.is_const(st.shape[axis]) else tile[axis]
        wide = self.fit_width(st.shape[axis]) if axis == st.rank - 1 else None
        ax_tile = ax_tile if wide is None else wide
        ax_valid = st.valid_shape[axis]
        n = 1 if wide is not None and sym.prove_le(ax_valid, ax_tile, self.fit) and \
            sym.prove_le(1, ax_valid, self.fit) else sym.ceildiv(ax_valid, ax_tile)
        acc = self.tile(acc_dt, tshape, tvalid, op.span)
        one_tile = n == 1
        if not one_tile:
            self.emit(Op("tile.fill", [acc], {"scalar": od.identity_for(acc_dt)}, span=op.span))
            k = self.fresh("k")
            self.out.append([])
            self.emit_loop_header(k, n, op.span)
            koff = sym.mul(sym.Sym(k), ax_tile)
        else:
            koff = 0
        in_shape = list(tshape)
        in_shape[axis] = ax_tile
        in_offs = list(offs)
        in_offs[axis] = koff
        in_valid = list(tvalid)
        in_valid[axis] = sym.min_(sym.sub(ax_valid, koff), ax_tile, self.fit or None)
        t_in = self.tile(st.dtype, in_shape, in_valid, op.span)
        self.emit(Op("tile.load", [t_in, src], {"offsets": tuple(in_offs)}, span=op.span))
        if st.dtype != acc_dt:
            t_c = self.tile(acc_dt, in_shape, in_valid, op.span)
            self.emit(Op("tile.cast", [t_c, t_in], {"to": acc_dt, "mode": "rint"}, span=op.span))
            t_in = t_c
        red = od.mean_of or op.name
        if one_tile:
            self.emit(Op(f"tile.{red}", [acc, t_in], {"axis": axis}, span=op.span))
        else:
            part = self.tile(acc_dt, tshape, tvalid, op.span)
            self.emit(Op(f"tile.{red}", [part, t_in], {"axis": axis}, span=op.span))
            self.emit(Op(f"tile.{od.combine}", [acc, acc, part], {}, span=op.span))
            self.close(1)
        if od.mean_of is not None:
            self.emit(Op("tile.mul", [acc, acc], {"scalar": sym.truediv(1.0, ax_valid)}, span=op.span))
        res = acc
        if acc_dt != out_dt:
            res = self.tile(out_dt, tshape, tvalid, op.span)
            self.emit(Op("tile.cast", [res, acc], {"to": out_dt, "mode": "rint"}, span=op.span))
        self.store(dest, res, offs, op.span)
        self.close(depth)

    # the cube path (passes/cube.py)
    matmul = COMPUTE.on("matmul")(CubeTiling.matmul)

    def copy(self, op: Op) -> None:
        dst, src = op.operands
        st: TensorType = src.type
        tile = self.vec_tile(st.rank, op)
        if tile is None:
            return
        tshape, offs, tvalid, depth = self.grid(st.shape, st.valid_shape, tile, op.span)
        t = self.tile(st.dtype, tshape, tvalid, op.span)
        self.emit(Op("tile.load", [t, src], {"offsets": tuple(offs)}, span=op.span))
        self.store((dst, op.attrs["offsets"]), t, offs, op.span)
        self.close(depth)

    def fill_region(self, dst: Value, offsets, shape, scalar, op: Op) -> None:
        tile = self.vec_tile(len(shape), op)
        if tile is None:
            return
        tshape, offs, tvalid, depth = self.grid(shape, shape, tile, op.span)
        t = self.tile(dst.type.dtype, tshape, tvalid, op.span)
        self.emit(Op("tile.fill", [t], {"scalar": scalar}, span=op.span))
        self.store((dst, offsets), t, offs, op.span)
        self.close(depth)


def _bounded_by_outer_loops(ops: list[Op], outer: list[Op]) -> dict[str, Op]:
    """The loops whose bounds use the index of a loop around them (a split reduction's share of the
    iterations, ``passes/splitred.py``), by index, each with the outermost loop around it: such a
    loop's one-pass version is that whole nest, so that the branch between the versions stays
    outside the shares' loop and its blocks (a branch inside would keep that loop in the control
    program)."""
    out: dict[str, Op] = {}
    for op in ops:
        if op.name == "loop":
            around = {o.attrs["index"] for o in outer}
            if (sym.free_symbols(op.attrs["lo"]) | sym.free_symbols(op.attrs["hi"])) & around:
                out[op.attrs["index"]] = outer[0]
            out |= _bounded_by_outer_loops(op.regions[0], [*outer, op])
        else:
            for region in op.regions:
                out |= _bounded_by_outer_loops(region, outer)
    return out


def _escapes(loop: Op, f: Func) -> bool:
    """Whether a value ``loop``'s body defines is used outside it (an implicit top-level loop
    holding the first statements, a local's ``alloc`` among them, whose later statements follow)."""
    inside = {id(o) for o in loop.walk()}
    defined = {r.name for o in loop.walk() for r in o.results}
    return any(v.name in defined for o in f.walk() if id(o) not in inside for v in o.operands)


def _least(loop: Op, dim: str) -> int:
    """The least ``dim`` the loop's fit version takes: 1, or for a rewrite from a copy, the least
    at which every part of its concat has a column (``tile_fit.least_dim``; a fit version for less
    is not worth a case of its own: the scheduled loop takes those)."""
    found = tile_fit.rewrite_of(loop.regions[0])
    if found is None:
        return 1
    parts = [v.type.shape[-1] for v in found[2].operands]
    return tile_fit.least_dim(parts, dim, tile_fit.GRANULE) or 1


def _tile_func(f: Func, ctx: PassContext, sched: Schedule, module: Module) -> Func:
    """``f`` tiled, with a one-pass version beside each row loop that has one (passes/tile_fit.py)."""
    tiler = _Tiler(f, ctx, sched)
    dims = tile_fit.call_dims(f)
    if ctx.diags.has_errors or not dims:
        return tiler.run()
    inner_shares = _bounded_by_outer_loops(f.body, [])
    for row_loop in (o for o in f.walk() if o.name == "loop"):
        # a split reduction's share (passes/splitred.py) is versioned as the nest around it
        loop = inner_shares.get(row_loop.attrs["index"], row_loop)
        if loop is not row_loop and id(loop) in tiler.versions:
            continue
        dim = tile_fit.row_dim(row_loop, dims) or tile_fit.inplace_dim(row_loop, dims)
        if dim is None or dim in sched.max_dims:
            continue  # (a bounded dim is tiled whole already: the loop is one pass as it is)
        if _escapes(loop, f):
            continue  # the fit copy renames what its body defines: nothing after may use it
        tiler.loop_names = [row_loop.attrs["name"]]
        width = tiler.vec_tile(1, row_loop, pad=True)
        tiler.loop_names = []
        if width is None:
            continue

        lo = _least(row_loop, dim)
        if loop.attrs.get("kind") == "implicit" and tile_fit.rewrite_of(row_loop.regions[0]) is None:
            # rows one scheduled tile wide are one pass already, and there the scheduled grid of
            # row tiles is double buffered, which the fit version's cap-wide tiles leave no room for
            lo = max(lo, width[-1] + 1)
        inner = frozenset({row_loop.attrs["index"]} if loop is not row_loop else ())

        def measure(cap: int, loop=loop, dim=dim, lo=lo, inner=inner) -> int | None:
            quiet = PassContext(ctx.target)
            # the workspaces the loop uses (a split reduction's partials), without their set-up
            allocs = [Op("alloc", [], {}, o.results, span=o.span) for o in f.body if o.name == "alloc"]
            t = _Tiler(Func(f.name, f.params, [*allocs, loop], f.kind, f.attrs, f.span), quiet, sched)
            t.versions, t.only_fit = {id(loop): (dim, cap, lo)}, True
            t.fit_inner = {id(loop): inner}
            tiled = t.run()
            if quiet.diags.has_errors:
                return None
            fused = fusedops.run(fuse.run(Module(module.name, "tile", [tiled], dict(module.attrs)), quiet), quiet).funcs[0]
            return tile_fit.fit_bytes(fused, dim, quiet)

        cap = tile_fit.choose_cap(measure, width[-1], ctx.target.ub_bytes)
        if cap is not None:
            tiler.versions[id(loop)] = (dim, cap, lo)
            tiler.fit_inner[id(loop)] = inner
    return tiler.run()


def run(module: Module, ctx: PassContext) -> Module:
    sched = schedule_of(module)
    module = module.clone()
    for f in module.funcs:
        forward_broadcasts(f)
    return Module(module.name, "tile", [_tile_func(f, ctx, sched, module) for f in module.funcs], dict(module.attrs))


PASS = Pass("tile", "tensor", "tile", run, frozenset({"in-loops", "unrolled"}), frozenset({"tiled"}))

from . import tile_elem, tile_index, tile_layout  # noqa: E402,F401  (they register their families' handlers on TILING/COMPUTE)
