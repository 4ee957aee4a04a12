"""Row interchange (Tile IR -> Tile IR): the grid over the rows of the output commutes with the
user loops around it, so query blocks become the outer loop and a state-carrying loop (flash
attention's KV loop) runs inside each block.

Requires: a ``level tile`` module whose independent loops are marked (``passes/parallel.py``).
Produces: with ``pass_options.row_interchange = 1``, for each function that holds a user loop with
tile work and that :func:`row_bands` proves row-wise, the function's body wrapped in one user loop
``_qb`` over ``cdiv(S, R)`` row blocks (``S``: the output's first dim, ``R``: the row tiles' rows),
marked ``parallel = 1``, every grid loop over those row blocks inlined with its index replaced by
``_qb``; the top-level GM workspaces are allocated once, before it. Without the option, or when the
proof fails, the module is unchanged.

Why the order may change. Call the grid loops ``loop g in 0..cdiv(S, R)`` (step 1) the row grids.
The proof asks that

- every GM tensor written anywhere in the function (a ``tile.store``; a gather or scatter refuses)
  is touched only inside row grids, and there only in rows ``[g * R, g * R + R)`` of its root (the
  offset along the root's first dim is exactly ``g * R`` and the tile has at most ``R`` rows);
- no tile allocated outside a row grid is written inside one (state carried across row blocks);
- outside row grids, tile work only loads tensors nothing writes and writes tiles (no GM), and a
  scalar ``read`` reads a tensor nothing writes;
- nothing prints, guards, reshapes or permutes, and row grids do not nest.

Then the work of row grid iteration ``g`` touches band ``g`` of the written tensors and its own
tiles only, and everything outside row grids computes the same values whatever ``g`` is (it reads
only unwritten data and loop indices). So the effect on band ``g`` is the program with every row
grid fixed to ``g``; running those programs one after another, or in parallel, leaves every band
as the original order does. The outer loop's iterations are therefore independent (the property
``parallel`` states), although ``passes/parallel.py``'s rule, which refuses reading what is
written, cannot see it.

Off by default: until a loop mixing cube and vector work can run as one kernel, the interchanged
loop stays in the control program and launches the body's kernels once per row block.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import sym
from ..diagnostics import Span
from ..ir import Func, Module, Op, TensorType, TileType, Value
from ..ir.gm import Origin, walk_ops
from ..ir.opdefs import IR_OPS, indexed_gm
from ..ir.schedule import schedule_of
from .context import Pass, PassContext
from .parallel import is_user_loop, origins_of
from .persistent import bound_within
from .unroll import _subst_attr, _subst_type

OUTER = "_qb"
REFUSED = frozenset({"print", "guard", "reshape", "permute"})


def row_extent(func: Func) -> sym.Expr | None:
    """The first dim of the function's first output tensor: the rows the blocks share out."""
    for p in func.params:
        if p.is_tensor and p.mode in ("out", "inout") and p.type.shape:
            return p.type.shape[0]
    return None


def _row_grids(func: Func, rows: sym.Expr) -> dict[str, int]:
    """Index -> tile rows of every grid loop over ``cdiv(rows, R)`` row blocks."""
    out: dict[str, int] = {}
    for op in func.walk():
        if op.name != "loop" or op.attrs.get("kind") != "grid" or op.attrs["lo"] != 0 or op.attrs["step"] != 1:
            continue
        for r in _tile_rows(op):
            if sym.sub(op.attrs["hi"], sym.ceildiv(rows, r)) == 0:
                out[op.attrs["index"]] = r
                break
    return out


def _tile_rows(loop: Op) -> Iterable[int]:
    seen: set[int] = set()
    for o in walk_ops(loop.regions[0]):
        for v in (*o.operands, *o.results):
            if isinstance(v.type, TileType) and v.type.shape and isinstance(v.type.shape[0], int):
                if v.type.shape[0] not in seen:
                    seen.add(v.type.shape[0])
                    yield v.type.shape[0]


def row_bands(func: Func) -> tuple[sym.Expr, int, dict[str, int]] | None:
    """``(S, R, row grid index -> its tile rows)`` when ``func``'s row grids commute with everything around them
    (module docstring), else None."""
    rows = row_extent(func)
    origins = origins_of(func)
    if rows is None or origins is None:
        return None
    grids = _row_grids(func, rows)
    if not grids:
        return None
    tile_rows = max(grids.values())
    if any(tile_rows % r for r in grids.values()):
        return None  # a row block must hold whole row tiles of every grid
    written: set[str] = set()
    for o in func.walk():
        if o.name in REFUSED or any(indexed_gm(o)):
            return None
        if o.name == "tile.store":
            written.add(origins[o.operands[0].name].root)
    if not _has_user_loop_with_grid(func.body, set(grids)):
        return None
    ok = _Checker(origins, written, grids).region(func.body, None, set())
    return (rows, tile_rows, grids) if ok else None


def _has_user_loop_with_grid(ops: list[Op], grids: set[str]) -> bool:
    return any(is_user_loop(o) and any(x.name == "loop" and x.attrs["index"] in grids
                                       for x in walk_ops(o.regions[0])) for o in walk_ops(ops))


class _Checker:
    def __init__(self, origins: dict[str, Origin], written: set[str], grids: dict[str, int]):
        self.origins = origins
        self.written = written
        self.grids = grids

    def region(self, ops: list[Op], grid: str | None, tiles: set[str]) -> bool:
        """``grid``: the index of the row grid around ``ops``; ``tiles``: the tiles allocated
        inside that row grid so far."""
        for op in ops:
            if op.name == "loop" and op.attrs["index"] in self.grids:
                if grid is not None:
                    return False  # nested row grids
                if not all(self.region(r, op.attrs["index"], set()) for r in op.regions):
                    return False
                continue
            if op.name == "tile.alloc" and grid is not None:
                tiles.add(op.result.name)
            if not self.op(op, grid, tiles):
                return False
            if not all(self.region(r, grid, tiles) for r in op.regions):
                return False
        return True

    def op(self, op: Op, grid: str | None, tiles: set[str]) -> bool:
        if op.name == "read":
            return self.origins[op.operands[0].name].root not in self.written
        if not op.name.startswith("tile.") or op.name == "tile.alloc":
            return True
        for v in op.operands:
            if isinstance(v.type, TensorType) and self.origins[v.name].root in self.written and not self._in_band(op, v, grid):
                return False
        if op.name == "tile.store":
            return grid is not None  # checked in band above
        if op.name not in IR_OPS:
            return False
        d = IR_OPS[op.name].dest
        dst = op.operands[d] if d is not None and d < len(op.operands) else None
        if grid is not None and dst is not None and isinstance(dst.type, TileType) and dst.name not in tiles:
            return False  # a tile carried across row blocks
        return True

    def _in_band(self, op: Op, v: Value, grid: str | None) -> bool:
        if grid is None:
            return False
        origin = self.origins[v.name]
        tile = next((x for x in op.operands if isinstance(x.type, TileType)), None)
        if origin.offsets is None or tile is None or op.name not in ("tile.load", "tile.store"):
            return False
        offsets = op.attrs.get("offsets", ())
        if len(offsets) != len(origin.offsets) or len(tile.type.shape) != len(origin.offsets):
            return False
        first = sym.add(origin.offsets[0], offsets[0])
        rows = self.grids[grid]
        return sym.sub(first, sym.mul(sym.Sym(grid), rows)) == 0 and \
            isinstance(tile.type.shape[0], int) and tile.type.shape[0] <= rows


class _Inliner:
    """Copies a body, dropping the row grid loops of the block's rows (their bodies take their
    place, their indices replaced by the outer loop's) and narrowing a row grid of finer tiles to
    the tiles of the block."""

    def __init__(self, grids: dict[str, int], tile_rows: int, bound: set[str], outer: str,
                 values: dict[str, Value]):
        self.bound = bound
        self.outer = outer
        self.env: dict[str, sym.Expr] = {g: sym.Sym(outer) for g, r in grids.items() if r == tile_rows}
        self.grids = grids
        self.tile_rows = tile_rows
        self.values = values  # old name -> value in the copy, shared by the copies of one function

    def ops(self, ops: list[Op]) -> list[Op]:
        out: list[Op] = []
        for op in ops:
            index = op.attrs.get("index") if op.name == "loop" else None
            if index in self.env:
                out.extend(self.ops(op.regions[0]))
            elif index in self.grids:
                per = self.tile_rows // self.grids[index]
                lo = sym.mul(sym.Sym(self.outer), per)
                narrowed = self.op(op)
                narrowed.attrs["lo"] = lo
                narrowed.attrs["hi"] = sym.min_(sym.add(lo, per), op.attrs["hi"])
                out.append(narrowed)
            else:
                out.append(self.op(op))
        return out

    def op(self, op: Op) -> Op:
        operands = [self.values.get(v.name, v) for v in op.operands]
        attrs = {k: (v if k in ("index", "name", "kind", "sym") else _subst_attr(v, self.env))
                 for k, v in op.attrs.items()}
        results = []
        for r in op.results:
            t = _subst_type(r.type, self.env)
            if op.name == "alloc" and "fill" not in op.attrs and not any(
                    sym.free_symbols(d) & self.bound for d in t.shape) and any(
                    sym.free_symbols(d) & self.bound for d in t.valid_shape):
                t = TensorType(t.dtype, t.shape, None)  # allocated once: see _hoist_workspaces
            nv = Value(r.name, t)
            self.values[r.name] = nv
            results.append(nv)
        return Op(op.name, operands, attrs, results, [self.ops(r) for r in op.regions], op.span)


def _hoist_workspaces(ops: list[Op], bound: set[str]) -> list[Op]:
    """Take out of ``ops`` (in place, at any depth) each GM workspace whose shape nothing in them
    binds, for the caller to allocate once before the row block loop. A valid shape naming what
    a loop binds (the last KV block's columns) widens to the whole shape: every op touching the
    workspace takes its extent from its tile, and an iteration reads only what it wrote (a
    workspace is a temporary the iteration fills before reading), so one allocation serves all."""
    taken: list[Op] = []

    def region(r: list[Op]) -> None:
        kept = []
        for op in r:
            t = op.result.type if op.name == "alloc" else None
            if t is not None and "fill" not in op.attrs and not any(sym.free_symbols(d) & bound for d in t.shape):
                taken.append(op)
                continue
            for sub in op.regions:
                region(sub)
            kept.append(op)
        r[:] = kept

    region(ops)
    return taken


class _Wrapper:
    """Puts each run of the body between branches in a row block loop of its own, and the
    branches' arms likewise (also inside user loops holding a branch): a branch, whose condition
    names no row block, then stays outside (kernels run no branches of the control program). Splitting one row block loop into several
    in turn keeps the order of every band's work, since each touches only its own band."""

    def __init__(self, grids: dict[str, int], rows: sym.Expr, tile_rows: int, bound: set[str]):
        self.grids, self.rows, self.tile_rows = grids, rows, tile_rows
        self.bound = bound
        self.values: dict[str, Value] = {}
        self.count = 0

    def ops(self, ops: list[Op], at: Span | None = None) -> list[Op]:
        """``at``: where the user loop around ``ops`` is, if any."""
        out: list[Op] = []
        run: list[Op] = []
        for op in ops:
            if op.name == "if":
                out.extend(self.loop(run, at))
                run = []
                out.append(Op("if", [], dict(op.attrs), [], [self.ops(r, at) for r in op.regions], op.span))
            elif op.name == "loop" and op.attrs.get("kind") not in ("grid", "split") and any(
                    o.name == "if" for o in op.walk()):
                # (a loop holding a branch, a peeled KV block that may also be the last, keeps the
                # branch outside the row block loops too)
                out.extend(self.loop(run, at))
                run = []
                out.append(Op("loop", [], dict(op.attrs), [], [self.ops(op.regions[0], op.span or at)], op.span))
            else:
                run.append(op)
        out.extend(self.loop(run, at))
        return out

    def loop(self, run: list[Op], at: Span | None) -> list[Op]:
        if not any(o.name.startswith("tile.") for op in run for o in op.walk()):
            return [_Inliner(self.grids, self.tile_rows, self.bound, OUTER, self.values).op(op) for op in run]
        name = f"{OUTER}{self.count}"
        self.count += 1
        body = _Inliner(self.grids, self.tile_rows, self.bound | {name}, name, self.values).ops(run)
        attrs = {"index": name, "lo": 0, "hi": sym.ceildiv(self.rows, self.tile_rows), "step": 1,
                 "name": "query_blocks", "parallel": 1, "rows_interchanged": 1}
        # located at the user loop it holds (attention's KV loop): what makes it a mixed kernel
        span = next((o.span for op in run for o in op.walk() if o.name == "loop" and o.span is not None
                     and o.attrs.get("kind") not in ("grid", "split")), at or run[0].span)
        return [Op("loop", [], attrs, [], [body], span)]


def interchange(func: Func) -> Func | None:
    """``func`` with its row blocks as the outer loops, or None when :func:`row_bands` refuses or a
    GM workspace could not be allocated once for all row blocks."""
    proved = row_bands(func)
    if proved is None:
        return None
    rows, tile_rows, grids = proved
    bound: set[str] = set()
    for op in func.body:
        bound |= bound_within(op)
    wrapper = _Wrapper(grids, rows, tile_rows, bound)
    body = wrapper.ops(func.body)
    outers = {f"{OUTER}{i}" for i in range(wrapper.count)}
    hoisted = _hoist_workspaces(body, bound | outers)
    if any(o.name == "alloc" for op in body for o in op.walk()):
        return None  # a workspace per row block could not be seen by a later row block loop
    return Func(func.name, func.params, [*hoisted, *body], func.kind, dict(func.attrs), func.span)


def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()
    if not schedule_of(module).pass_options.get("row_interchange", 0):
        return fresh
    funcs = [interchange(f) or f for f in fresh.funcs]
    return Module(fresh.name, fresh.level, funcs, dict(fresh.attrs))


PASS = Pass("rowgrid", "tile", "tile", run, frozenset({"independent-marked"}), frozenset({"rows-interchanged"}))

__all__ = ["PASS", "interchange", "row_bands", "row_extent", "run"]
