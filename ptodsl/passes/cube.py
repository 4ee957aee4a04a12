"""The cube path of tiling: a matmul becomes grids of 2-D cube products (mixed into the tiler).

Per output tile ``[tm, tn]``: GM -> L1 (Mat) -> L0A / L0B (Left / Right) -> L0C (Acc) -> GM. The
first k tile starts the accumulation (TMATMUL, or TMATMUL_BIAS after the bias row went through
L1 into the bias table) and the rest continue it (TMATMUL_ACC), so the k loop is peeled rather
than branching on its first iteration. The accumulator leaves L0C once, through the fixpipe,
which rounds it to the output dtype on the way (f32 to f16 or bf16): one rounding per element.

Batch dims (the result's dims before the last two) become grid loops around that; each operand
is read at the batch entry it broadcasts to (entry 0 along a dim of 1 or a missing dim). Cube
tiles keep their tensor's rank with the batch dims of extent 1, so every transfer is a plain
region of its tensor at the batch offsets.

Split-K (``cube_tile.split_k: S``) cuts the k tiles into at most S contiguous ranges. A ``split``
loop computes each range's partial product into its own slice of a GM workspace in the
accumulator's dtype (slice ``p`` at ``p * d0`` along the result's first dim), and a vector grid
sums the slices in order and converts the sum to the output dtype. The partials write disjoint
slices and read nothing the others write, so the blocks pass shares them out over the cube
cores (their slices lie whole output tiles apart, so the parallel proof sees each partial's own
band). A bias is added by the vector grid, to the first partial before the others: the partials
are then alike and run as one loop, one launch, rather than the first one before the rest. A relu
folded into the matmul (``relu = true``, passes/epilogue.py) is the fixpipe's as the accumulator
leaves L0C (TSTORE with ``ReluPreMode::NormalRelu``), or the vector grid's, on the sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import sym
from ..dtypes import itemsize
from ..ir import Op, TensorType, TileType, Value
from ..ops import MATMUL_ACCUMULATOR


@dataclass
class _Product:
    """One matmul, its dims after the operands' transposes and its tile extents."""

    op: Op
    a: Value
    b: Value
    bias: Value | None
    ta: bool
    tb: bool
    in_dt: str
    acc_dt: str
    out_dt: str
    batch: tuple[sym.Expr, ...]  # the result's batch dims and their valid extents
    batch_valid: tuple[sym.Expr, ...]
    mn_valid: tuple[sym.Expr, sym.Expr]  # valid extents of the product's rows and columns
    vk: sym.Expr
    tiles: tuple[int, int, int]  # L0 extents of m, k, n
    relu: bool  # relu of the product (passes/epilogue.py): the fixpipe's, or the split-K sum's

    @property
    def nk(self) -> sym.Expr:
        return sym.ceildiv(self.vk, self.tiles[1])


class CubeTiling:
    """Needs from the tiler: ctx, schedule, emit, out, fresh, grid, emit_loop_header, close,
    store, vec_tile, load_operand and cast_tile."""

    def matmul(self, op: Op, dest) -> None:
        p = self.product(op)
        if p is None:
            return
        split = self.schedule.split_k
        nk = p.nk
        if split <= 1 or (sym.is_const(nk) and nk <= 1):
            self.partial(p, 0, nk, dest, p.bias is not None, p.relu)
            return
        per = sym.ceildiv(nk, split)
        parts = sym.ceildiv(nk, per)
        if sym.is_const(parts) and parts <= 1:
            self.partial(p, 0, nk, dest, p.bias is not None, p.relu)
            return
        rt: TensorType = op.result.type
        # the partials' slices lie ``d0`` rows apart: for a 2-D product the rows rounded up to whole
        # output tiles, so that a slice's last tile stays inside it (each partial's writes are then
        # a band of their own, which lets the parallel proof share the partials out as blocks)
        d0 = rt.shape[0] if rt.rank > 2 else sym.mul(sym.ceildiv(rt.shape[0], p.tiles[0]), p.tiles[0])
        ws = Value(self.fresh("ws"), TensorType(p.acc_dt, (sym.mul(parts if sym.is_const(parts) else split, d0),
                                                           *rt.shape[1:])))
        self.emit(Op("alloc", [], {}, [ws], span=op.span))
        zeros = tuple(0 for _ in rt.shape)
        idx = self.fresh("split")
        self.out.append([Op("loop", [], {"index": idx, "lo": 0, "hi": parts, "step": 1, "name": idx,
                                         "kind": "split"}, span=op.span)])
        at = sym.Sym(idx)
        self.partial(p, sym.mul(at, per), sym.min_(sym.mul(sym.add(at, 1), per), nk),
                     (ws, (sym.mul(at, d0), *zeros[1:])), False, False)
        self.close(1)
        self.sum_partials(p, ws, parts, d0, dest)

    # ------------------------------------------------------------ the product

    def product(self, op: Op) -> _Product | None:
        """The product's dims and tiles, or None after reporting what the target cannot do."""
        a, b = op.operands[:2]
        bias = op.operands[2] if len(op.operands) > 2 else None
        ta, tb = bool(op.attrs.get("trans_a", False)), bool(op.attrs.get("trans_b", False))
        at: TensorType = a.type
        bt: TensorType = b.type
        rt: TensorType = op.result.type
        in_dt, out_dt = at.dtype, rt.dtype
        acc_dt = MATMUL_ACCUMULATOR.get(in_dt)
        target = self.ctx.target
        if acc_dt is None or not target.supports_matmul(acc_dt, in_dt, in_dt):
            self.no_cube(op, f"a matmul of {in_dt}", f"TMATMUL does not take {in_dt} operands", "cube_dtypes")
            return None
        if not target.stores_from_acc(acc_dt, out_dt):
            self.no_cube(op, f"a matmul of {in_dt} written as {out_dt}",
                         f"TSTORE does not write a {acc_dt} accumulator as {out_dt}", "cube_stores")
            return None
        if bias is not None and bias.type.dtype != acc_dt and not target.moves_bias(acc_dt, bias.type.dtype):
            self.no_cube(op, f"a matmul with a {bias.type.dtype} bias",
                         f"TMOV does not widen {bias.type.dtype} into the {acc_dt} bias table", "bias_moves",
                         f"give the bias as {acc_dt}: `bias=cast(..., {acc_dt})`")
            return None
        (m, k), (vm, vk) = _matrix(at, ta)
        (_, n), (vkb, vn) = _matrix(bt, tb)
        # the product sums over the k both operands hold: a row of b past its valid rows (the last
        # KV block's v) is no data to load, whatever a's valid columns say, and the other way round
        vk = sym.min_(vk, vkb)
        tiles = self.cube_tile(m, k, n, in_dt)
        return _Product(op, a, b, bias, ta, tb, in_dt, acc_dt, out_dt, tuple(rt.shape[:-2]),
                        tuple(rt.valid_shape[:-2]), (vm, vn), vk, tiles, bool(op.attrs.get("relu", False)))

    def no_cube(self, op: Op, what: str, why: str, field: str, fix: str | None = None) -> None:
        target = self.ctx.target
        self.ctx.diags.error(
            "E0608", f"{what} has no instruction on target `{target.name}`", op.span, f"{why} on {target.name}",
            notes=[f"rule from `{field}` in the target file, read from pto-isa's headers"],
            help=fix or "use dtypes the target's cube takes (`cube_dtypes` and `cube_stores` in its file)")

    def cube_tile(self, m, k, n, in_dt: str) -> tuple[int, int, int]:
        """L0 tile extents of m, k, n: the schedule's, else the default, cut down to a static dim
        rounded up to a whole number of cube fractals (the tail's valid extent covers the rest)."""
        target = self.ctx.target
        given = self.schedule.cube_tile or {}
        rows = target.cube_fractal_rows
        quantum = {"m": rows, "k": math.lcm(rows, max(1, target.cube_c0_bytes // itemsize(in_dt)))}
        quantum["n"] = quantum["k"]
        sizes = []
        for axis, dim in (("m", m), ("k", k), ("n", n)):
            t = given[axis][0] if axis in given else target.default_cube_tile[axis]
            q = quantum[axis]
            sizes.append(min(t, -(-dim // q) * q) if sym.is_const(dim) else t)
        return tuple(sizes)

    # ------------------------------------------------------------ one (partial) product

    def partial(self, p: _Product, k_lo: sym.Expr, k_hi: sym.Expr, dest, with_bias: bool, relu: bool) -> None:
        """The product over the k tiles [k_lo, k_hi) (at least one), stored to ``dest`` (through the
        fixpipe's relu with ``relu``): grid loops over the batch and the output tiles, the first k
        tile peeled."""
        span = p.op.span
        boffs, bdepth = self.batch_grid(p, span)
        tm, tk, tn = p.tiles
        # the tiles as cut (not clipped again to a static dim: they stay whole fractals)
        tshape, offs, tvalid, depth = self.grid((tm, tn), p.mn_valid, (tm, tn), span)
        tm, tn = tshape
        lead = (1,) * len(p.batch)
        acc = Value(self.fresh("t"), TileType("l0c", p.acc_dt, (*lead, tm, tn), (*lead, *tvalid)))
        self.emit(Op("tile.alloc", [], {}, [acc], span=span))
        bias = self.bias_row(p, offs[1], tvalid[1], tn) if with_bias else None

        def step(kt: sym.Expr, first: bool) -> None:
            koff = sym.mul(kt, tk)
            kvalid = sym.min_(sym.sub(p.vk, koff), tk)
            left = self.cube_operand(p, p.a, p.ta, "l0a", (tm, offs[0], tvalid[0]), (tk, koff, kvalid), boffs)
            right = self.cube_operand(p, p.b, p.tb, "l0b", (tk, koff, kvalid), (tn, offs[1], tvalid[1]), boffs)
            if not first:
                self.emit(Op("tile.matmul_acc", [acc, acc, left, right], {}, span=span))
            elif bias is not None:
                self.emit(Op("tile.matmul_bias", [acc, left, right, bias], {}, span=span))
            else:
                self.emit(Op("tile.matmul", [acc, left, right], {}, span=span))

        step(k_lo, True)
        rest_lo = sym.add(k_lo, 1)
        if not (sym.is_const(k_hi) and sym.is_const(rest_lo) and k_hi <= rest_lo):
            kidx = self.fresh("k")
            self.out.append([Op("loop", [], {"index": kidx, "lo": rest_lo, "hi": k_hi, "step": 1, "name": kidx,
                                             "kind": "grid"}, span=span)])
            step(sym.Sym(kidx), False)
            self.close(1)
        self.store(dest, acc, (*boffs, *offs), span, {"relu": True} if relu else None)
        self.close(depth)
        self.close(bdepth)

    def batch_grid(self, p: _Product, span) -> tuple[list[sym.Expr], int]:
        """Grid loops over the result's batch dims: (the batch offsets, loop depth)."""
        offs: list[sym.Expr] = []
        depth = 0
        for s, v in zip(p.batch, p.batch_valid):
            if s == 1 and v == 1:
                offs.append(0)
                continue
            idx = self.fresh("b")
            self.out.append([])
            self.emit_loop_header(idx, v, span)
            offs.append(sym.Sym(idx))
            depth += 1
        return offs, depth

    def cube_operand(self, p: _Product, src: Value, trans: bool, space: str, rows, cols,
                     boffs: list[sym.Expr]) -> Value:
        """Load one operand's tile into L1 at its batch entry and move it to L0A / L0B."""
        span = p.op.span
        (r, ro, rv), (c, co, cv) = rows, cols
        lshape, loffs, lvalid = ((c, r), (co, ro), (cv, rv)) if trans else ((r, c), (ro, co), (rv, cv))
        t: TensorType = src.type
        nb = t.rank - 2
        # the operand's batch dims line up with the result's last ones; a dim of 1 is broadcast
        mine = boffs[len(boffs) - nb:] if nb else []
        at = [0 if t.shape[d] == 1 else o for d, o in enumerate(mine)]
        lead = (1,) * nb
        l1 = Value(self.fresh("t"), TileType("l1", p.in_dt, (*lead, *lshape), (*lead, *lvalid)))
        self.emit(Op("tile.alloc", [], {}, [l1], span=span))
        self.emit(Op("tile.load", [l1, src], {"offsets": (*at, *loffs)}, span=span))
        l0 = Value(self.fresh("t"), TileType(space, p.in_dt, (*lead, r, c), (*lead, rv, cv)))
        self.emit(Op("tile.alloc", [], {}, [l0], span=span))
        self.emit(Op("tile.mov", [l0, l1], {"transpose": True} if trans else {}, span=span))
        return l0

    def bias_row(self, p: _Product, off: sym.Expr, valid: sym.Expr, tn: int) -> Value:
        """The bias values of one output tile's columns, loaded into L1 and moved into the bias
        table (widened to the accumulator's dtype on the way). Both rows are a whole number of the
        target's bias bursts for both dtypes, as TMOV into the bias table requires."""
        span = p.op.span
        target = self.ctx.target
        burst = target.bias_row_bytes
        quantum = math.lcm(*(max(1, burst // itemsize(d)) for d in (p.bias.type.dtype, p.acc_dt)))
        cols = -(-tn // quantum) * quantum
        l1 = Value(self.fresh("t"), TileType("l1", p.bias.type.dtype, (cols,), (valid,)))
        self.emit(Op("tile.alloc", [], {}, [l1], span=span))
        self.emit(Op("tile.load", [l1, p.bias], {"offsets": (off,)}, span=span))
        row = Value(self.fresh("t"), TileType("bt", p.acc_dt, (cols,), (valid,)))
        self.emit(Op("tile.alloc", [], {}, [row], span=span))
        self.emit(Op("tile.mov", [row, l1], {}, span=span))
        return row

    # ------------------------------------------------------------ split-K: the sum of the partials

    def sum_partials(self, p: _Product, ws: Value, parts: sym.Expr, d0: sym.Expr, dest) -> None:
        """dest = the partials' sum (slice ``p`` of ``ws`` from row ``p * d0``), converted to the
        output dtype once; a vector grid over the result in the kernel's vector tile, each tile
        summing the partials in order."""
        op = p.op
        span = op.span
        rt: TensorType = op.result.type
        tile = self.vec_tile(rt.rank, op, pad=True)
        tshape, offs, tvalid, depth = self.grid(rt.shape, rt.valid_shape, tile, span)
        total = Value(self.fresh("t"), TileType("ub", p.acc_dt, tuple(tshape), tuple(tvalid)))
        self.emit(Op("tile.alloc", [], {}, [total], span=span))
        self.emit(Op("tile.load", [total, ws], {"offsets": tuple(offs)}, span=span))
        if p.bias is not None:
            self.out_valid = rt.valid_shape
            bias = self.load_operand(p.bias, rt.shape, tshape, offs, tvalid, span)
            if bias.type.dtype != p.acc_dt:
                bias = self.cast_tile(bias, p.acc_dt, span)
            self.emit(Op("tile.add", [total, total, bias], {}, span=span))
        idx = self.fresh("split")
        self.out.append([Op("loop", [], {"index": idx, "lo": 1, "hi": parts, "step": 1, "name": idx,
                                         "kind": "grid"}, span=span)])
        part = Value(self.fresh("t"), TileType("ub", p.acc_dt, tuple(tshape), tuple(tvalid)))
        self.emit(Op("tile.alloc", [], {}, [part], span=span))
        at = (sym.add(sym.mul(sym.Sym(idx), d0), offs[0]), *offs[1:])
        self.emit(Op("tile.load", [part, ws], {"offsets": at}, span=span))
        self.emit(Op("tile.add", [total, total, part], {}, span=span))
        self.close(1)
        if p.relu:
            self.emit(Op("tile.relu", [total, total], {}, span=span))
        out = total
        if p.out_dt != p.acc_dt:
            out = Value(self.fresh("t"), TileType("ub", p.out_dt, tuple(tshape), tuple(tvalid)))
            self.emit(Op("tile.alloc", [], {}, [out], span=span))
            self.emit(Op("tile.cast", [out, total], {"to": p.out_dt, "mode": "rint"}, span=span))
        self.store(dest, out, offs, span)
        self.close(depth)


def _matrix(t: TensorType, trans: bool):
    """(rows, cols) of an operand's matrix after its transpose, and their valid extents."""
    (r, c), (rv, cv) = t.shape[-2:], t.valid_shape[-2:]
    return ((c, r), (cv, rv)) if trans else ((r, c), (rv, cv))


__all__ = ["CubeTiling"]
