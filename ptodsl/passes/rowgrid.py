"""Row interchange (Tile IR -> Tile IR): the grid over the rows of the output commutes with the
user loops around it, so query blocks become the outer loop and a state-carrying loop (flash
attention's KV loop) runs inside each block.

Requires: a ``level tile`` module whose independent loops are marked (``passes/parallel.py``).
Produces: with ``pass_options.row_interchange = 1``, for each statement (a top-level op, or one
of an implicit top-level loop's body) that holds a loop of the user's around row grids and that
:func:`row_bands` proves row-wise, its work wrapped in user loops ``_qbN`` over ``cdiv(S, R)`` row
blocks (``S``: the first dim of the first tensor it stores to that has row grids, ``R``: the row
tiles' rows; one loop per run of the statement between branches, which stay outside), marked
``parallel = 1`` and ``rows_interchanged = 1``, every grid loop over those row blocks inlined with
its index replaced by ``_qbN`` (a grid of finer row tiles narrowed to the block's); the
statement's GM workspaces are allocated once, before it. In the functions it changes, a grid loop
that the ranges of the loops around it prove runs exactly once (a KV block one tile wide, inside
its KV loop) then becomes its body, and the row block's straight-line work is forwarded
(``fuse.forward``) and swept, so a score block stored by one op and loaded by the next stays in UB.
Partitioning runs such a loop needing
cube and vector work as one ``mixed`` kernel (``passes/persistent.py``). Without the option, or
where the proof fails, the module is unchanged.

Why the order may change. Call the grid loops ``loop g in 0..cdiv(S, R)`` (step 1) the row grids.
The proof asks, of the statement, that

- every GM tensor written anywhere in it (a ``tile.store``; a gather or scatter refuses)
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

Off by default (the library's attention specs turn it on): the NPU form of a mixed kernel has
been checked by the sync checker and by compiling its parts, not yet on a device.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .. import sym
from ..diagnostics import Span
from ..ir import Func, Module, Op, TensorType, TileType, Value
from ..ir.gm import Origin, walk_ops
from ..ir.opdefs import IR_OPS, indexed_gm
from ..ir.queues import cores_of
from ..ir.schedule import schedule_of
from .branches import trips_of
from .context import Pass, PassContext
from .fuse import forward, sweep
from .merge import merge_loops, substitute_index
from .parallel import origins_of
from .persistent import bound_within
from .remat import bases
from .unroll import _subst_attr, _subst_type

OUTER = "_qb"
REFUSED = frozenset({"print", "guard", "reshape", "permute"})


def _row_grids(ops: list[Op], rows: sym.Expr) -> dict[str, int]:
    """Index -> tile rows of every grid loop over ``cdiv(rows, R)`` row blocks."""
    out: dict[str, int] = {}
    for op in walk_ops(ops):
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


Proof = tuple[sym.Expr, int, dict[str, int]]  # (S, R, row grid index -> its tile rows)


def row_bands(func: Func) -> dict[int, Proof]:
    """For each statement of ``func`` (by ``id``: a top-level op, or an op of the body of an
    implicit top-level loop, which runs once) whose row grids commute with everything around
    them in it (module docstring), the proof; the statements are taken one at a time, as the
    others run before or after them unchanged."""
    origins = origins_of(func)
    if origins is None:
        return {}
    roots = _roots(func)
    out: dict[int, Proof] = {}
    for op in _statements(func.body):
        proof = statement_bands([op], origins, roots)
        if proof is not None:
            out[id(op)] = proof
    return out


def statement_runs(func: Func, single: dict[int, Proof], dtypes: dict[str, str]) -> dict[int, tuple[int, Proof]]:
    """Runs of two or more consecutive statements (of the body, or of an implicit top-level
    loop's) that each do tile work and together do cube and vector work, whose row grids commute
    with everything in the run (module docstring, the run taken as one statement), by the ``id``
    of their first op: (how many ops, the proof). A run holds no statement :func:`row_bands`
    proves on its own, and a branch in it compares integers only (``passes/branches.py``), so
    that it runs inside a kernel. Such a run (an FFN's two products and the activation between
    them) runs each row block's statements in turn, in one row block loop: one mixed kernel
    whose row blocks are its blocks."""
    origins = origins_of(func)
    if origins is None:
        return {}
    roots = _roots(func)
    out: dict[int, tuple[int, Proof]] = {}
    for ops in _statement_lists(func.body):
        k = 0
        while k < len(ops):
            found = None
            for end in range(len(ops), k + 1, -1):
                run = ops[k:end]
                if _runnable(run, single, dtypes) and not _escapes(run, func):
                    proof = statement_bands(run, origins, roots, run=True)
                    if proof is not None:
                        found = (end - k, proof)
                        break
            if found is None:
                k += 1
                continue
            out[id(ops[k])] = found
            k += found[0]
    return out


def _roots(func: Func) -> dict[str, TensorType]:
    """Each GM tensor of ``func`` a view or access may have as its root: parameters and workspaces."""
    roots: dict[str, TensorType] = {p.name: p.type for p in func.params if p.is_tensor}
    roots |= {o.result.name: o.result.type for o in func.walk() if o.name == "alloc"}
    return roots


def _statement_lists(ops: list[Op]) -> Iterator[list[Op]]:
    yield ops
    for op in ops:
        if op.name == "loop" and op.attrs.get("kind") == "implicit":
            yield from _statement_lists(op.regions[0])


def _escapes(run: list[Op], func: Func) -> bool:
    """Whether a tile the run defines is used after it (an accumulator's set-up that fusion moved
    up from the statement after the run): inside the row block loop it would be out of reach."""
    inside = {id(o) for op in run for o in op.walk()}
    tiles = {id(r) for op in run for o in op.walk() for r in o.results if isinstance(r.type, TileType)}
    return any(id(v) in tiles for o in func.walk() if id(o) not in inside for v in o.operands)


def _runnable(run: list[Op], single: dict[int, Proof], dtypes: dict[str, str]) -> bool:
    working = [op for op in run if any(o.name.startswith("tile.") for o in op.walk())]
    if len(working) < 2 or any(id(op) in single for op in run):
        return False
    if any(o.name == "if" and trips_of(o.attrs["cond"], dtypes) is None for op in run for o in op.walk()):
        return False
    if any(o.name == "loop" and o.attrs.get("kind") not in ("grid", "split") for op in run for o in op.walk()):
        return False  # a loop of the user's: the statement's own proof is the one to use
    return {"cube", "vec"} <= cores_of(run)


def _statements(ops: list[Op]) -> Iterator[Op]:
    for op in ops:
        if op.name == "loop" and op.attrs.get("kind") == "implicit":
            yield from _statements(op.regions[0])
        else:
            yield op


def statement_bands(ops: list[Op], origins: dict[str, Origin], roots: dict[str, TensorType],
                    run: bool = False) -> Proof | None:
    """The proof for ``ops`` (module docstring); the rows shared out are the first dim of the
    first tensor they store to that has row grids. ``run``: ``ops`` are a run of statements
    (:func:`statement_runs`), which need no loop of the user's."""
    written: list[str] = []
    own = {o.result.name for o in walk_ops(ops) if o.name == "tile.alloc"}
    for o in walk_ops(ops):
        if o.name in REFUSED or any(indexed_gm(o)):
            return None
        if any(isinstance(v.type, TileType) and v.name not in own for v in o.operands):
            # a tile of the code before (an accumulator fusion set up above the statement): the
            # row block loop's kernel would not see it, and every row block would update it
            return None
        if o.name == "tile.store" and origins[o.operands[0].name].root not in written:
            written.append(origins[o.operands[0].name].root)
    for root in written:
        shape = roots[root].shape
        grids = _row_grids(ops, shape[0]) if shape else {}
        if not grids:
            continue
        tile_rows = max(grids.values())
        if any(tile_rows % r for r in grids.values()) or not (run or _has_user_loop_with_grid(ops, set(grids))):
            return None  # a row block must hold whole row tiles of every grid
        ok = _Checker(origins, set(written), grids).region(ops, None, set())
        return (shape[0], tile_rows, grids) if ok else None
    return None


def _has_user_loop_with_grid(ops: list[Op], grids: set[str]) -> bool:
    """Some loop of the user's (also a peeled or implicit one) around a row grid: the statements
    worth interchanging; a bare grid nest already runs as blocks (``passes/blocks.py``)."""
    return any(o.name == "loop" and o.attrs.get("kind") not in ("grid", "split") and any(
        x.name == "loop" and x.attrs["index"] in grids for x in walk_ops(o.regions[0])) for o in walk_ops(ops))


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


def _hoist_workspaces(ops: list[Op], bound: set[str], elsewhere: set[str]) -> list[Op]:
    """Take out of ``ops`` (in place, at any depth) each GM workspace whose shape nothing in them
    binds, for the caller to allocate once before the row block loop. A valid shape naming what
    a loop binds (the last KV block's columns) widens to the whole shape: every op touching the
    workspace takes its extent from its tile, and an iteration reads only what it wrote (a
    workspace is a temporary the iteration fills before reading), so one allocation serves all.
    A workspace the rest of the function reads (``elsewhere``: a statement after the run reading
    what the run's last statement wrote, all rows of it) is one tensor for every iteration, not
    one each: it records no loop (``within``), or a block would fill a copy nobody reads."""
    taken: list[Op] = []

    def region(r: list[Op], within: tuple[str, ...]) -> None:
        kept = []
        for op in r:
            t = op.result.type if op.name == "alloc" else None
            if t is not None and "fill" not in op.attrs and not any(sym.free_symbols(d) & bound for d in t.shape):
                if within and op.result.name not in elsewhere:
                    # each iteration of those loops filled a workspace of its own (as partitioning records)
                    op.attrs = dict(op.attrs) | {"within": within}
                taken.append(op)
                continue
            inner = (*within, op.attrs["index"]) if op.name == "loop" else within
            for sub in op.regions:
                region(sub, inner)
            kept.append(op)
        r[:] = kept

    region(ops, ())
    return taken


class _Wrapper:
    """Puts each run of the body between branches in a row block loop of its own, and the
    branches' arms likewise (also inside user loops holding a branch): a branch, whose condition
    names no row block, then stays outside (kernels run no branches of the control program). Splitting one row block loop into several
    in turn keeps the order of every band's work, since each touches only its own band."""

    def __init__(self, grids: dict[str, int], rows: sym.Expr, tile_rows: int, bound: set[str], count: int = 0,
                 inside: dict[str, str] | None = None):
        """``inside``: the scalar dtypes, for a run of statements (:func:`statement_runs`), whose
        branches on integers go inside the one row block loop (a kernel runs them as loops of 0
        or 1 trips, ``passes/branches.py``)."""
        self.grids, self.rows, self.tile_rows = grids, rows, tile_rows
        self.bound = bound
        self.values: dict[str, Value] = {}
        self.count = count  # row block loops of the function so far: each gets its own index
        self.inside = inside

    def ops(self, ops: list[Op], at: Span | None = None) -> list[Op]:
        """``at``: where the user loop around ``ops`` is, if any."""
        out: list[Op] = []
        run: list[Op] = []
        for op in ops:
            if op.name == "if" and self.inside is not None and trips_of(op.attrs["cond"], self.inside) is not None:
                run.append(op)
            elif op.name == "if":
                out.extend(self.loop(run, at))
                run = []
                out.append(Op("if", [], dict(op.attrs), [], [self.ops(r, at) for r in op.regions], op.span))
            elif op.name == "loop" and op.attrs.get("kind") not in ("grid", "split") and any(
                    o.name == "if" and (self.inside is None or trips_of(o.attrs["cond"], self.inside) is None)
                    for o in op.walk()):
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
                 "name": "query_blocks" if self.inside is None else "row_blocks", "parallel": 1,
                 "rows_interchanged": 1}
        # located at the user loop it holds (attention's KV loop): what makes it a mixed kernel
        span = next((o.span for op in run for o in op.walk() if o.name == "loop" and o.span is not None
                     and o.attrs.get("kind") not in ("grid", "split")), at or run[0].span)
        return [Op("loop", [], attrs, [], [body], span)]


def interchange(func: Func, fuse: bool = False) -> Func | None:
    """``func`` with the row blocks of each statement :func:`row_bands` proves as the outer loops
    of its work, or None when it proves none (or a GM workspace of such a statement could not be
    allocated once for all row blocks: that statement is left as it is). ``fuse``
    (``pass_options.row_fusion``): consecutive statements proved over the same row blocks share
    one row block loop (:func:`_peers`)."""
    proofs = row_bands(func)
    dtypes = {p.name: p.dtype for p in func.params if not p.is_tensor}
    dtypes |= {o.attrs["sym"]: o.attrs["dtype"] for o in func.walk() if o.name == "read"}
    runs = statement_runs(func, proofs, dtypes)
    count = 0

    def region(ops: list[Op]) -> list[Op]:
        nonlocal count
        out: list[Op] = []
        k = 0
        while k < len(ops):
            op = ops[k]
            if op.name == "loop" and op.attrs.get("kind") == "implicit":
                out.append(Op("loop", [], dict(op.attrs), [], [region(op.regions[0])], op.span))
                k += 1
                continue
            n, proof = runs.get(id(op), (1, proofs.get(id(op))))
            if n == 1 and proof is not None and fuse:
                n, proof = _peers(ops, k, proof, proofs, func, dtypes)
            if proof is None:
                out.append(op)
                k += 1
                continue
            statements = ops[k:k + n]
            k += n
            rows, tile_rows, grids = proof
            bound = set().union(*(bound_within(x) for x in statements))
            wrapper = _Wrapper(grids, rows, tile_rows, bound, count, dtypes if n > 1 else None)
            new = wrapper.ops(statements)
            inside = {id(o) for x in statements for o in x.walk()}
            elsewhere = {v.name for o in func.walk() if id(o) not in inside for v in o.operands}
            if n > 1:
                new = [_localize(x, rows, tile_rows, elsewhere) if x.attrs.get("rows_interchanged") else x
                       for x in new]
            hoisted = _hoist_workspaces(new, bound | {f"{OUTER}{n}" for n in range(count, wrapper.count)},
                                        elsewhere)
            if any(o.name == "alloc" for x in new for o in x.walk()):
                out += statements  # a workspace per row block could not be seen by a later row block loop
                continue
            count = wrapper.count
            out += [*hoisted, *new]
        return out

    body = region(func.body)
    if count == 0:
        return None
    return Func(func.name, func.params, body, func.kind, dict(func.attrs), func.span)


def _peers(ops: list[Op], k: int, proof: Proof, proofs: dict[int, Proof], func: Func,
           dtypes: dict[str, str]) -> tuple[int, Proof]:
    """The statements from ``ops[k]`` on that one row block loop can hold: the longest run of
    consecutive statements each proved on its own over the same rows (a KV loop and its peeled
    first and last blocks) that is proved as a whole too, with every branch in it comparing
    integers, so that it runs inside the kernel (``passes/branches.py``), and no tile it defines
    used after it. One row block loop makes them one kernel: what they hand each other (the
    running max, sum and accumulator) crosses GM in the block's own rows inside it, rather than
    between launches, and the launches between them go."""
    rows, tile_rows, _ = proof
    end = k + 1
    while end < len(ops) and (p := proofs.get(id(ops[end]))) is not None and p[1] == tile_rows \
            and sym.sub(p[0], rows) == 0:
        end += 1
    origins = origins_of(func) if end > k + 1 else None
    if origins is None:  # no peers (row_bands, which proved them, knew the GM layout)
        return 1, proof
    roots = _roots(func)
    while end > k + 1:
        run = ops[k:end]
        if not _escapes(run, func) and all(trips_of(o.attrs["cond"], dtypes) is not None
                                           for op in run for o in op.walk() if o.name == "if"):
            whole = statement_bands(run, origins, roots)
            if whole is not None and whole[1] == tile_rows:
                return end - k, whole
        end -= 1
    return 1, proof


def _localize(loop: Op, rows: sym.Expr, tile_rows: int, elsewhere: set[str]) -> Op:
    """``loop`` (a run's row block loop) with each workspace of rows ``rows`` that only tile loads
    and stores in it touch (and nothing outside the run, ``elsewhere`` naming the values the rest
    of the function uses) allocated in its body at one row block's rows, the offsets of those
    accesses moved up by the block's first row: a row block's intermediates (an FFN's hidden
    activations) then live in a buffer of one row block, rather than in bands of a tensor of every
    row. Each such workspace records the loop as the one it belongs to (``row_block``), which the
    blocks pass reads to give each block a copy of its own (``passes/blocks.py``): shared, every
    block would fill the one buffer at once."""
    allocs = [o for o in loop.walk() if o.name == "alloc" and "fill" not in o.attrs
              and o.result.type.shape and sym.sub(o.result.type.shape[0], rows) == 0]
    first = sym.mul(sym.Sym(loop.attrs["index"]), tile_rows)
    moved: list[Op] = []
    for alloc in allocs:
        v = alloc.result
        if v.name in elsewhere:
            continue
        users = [o for o in loop.walk() if any(x is v for x in o.operands)]
        if any(o.name not in ("tile.load", "tile.store") for o in users):
            continue
        for o in users:
            offsets = list(o.attrs["offsets"])
            offsets[0] = sym.sub(offsets[0], first)
            o.attrs = dict(o.attrs) | {"offsets": tuple(offsets)}
        t = v.type
        v.type = TensorType(t.dtype, (tile_rows, *t.shape[1:]), None)
        alloc.attrs = dict(alloc.attrs) | {"row_block": loop.attrs["index"]}
        moved.append(alloc)
    if not moved:
        return loop
    body = [*moved, *_without(loop.regions[0], {id(a) for a in moved})]
    return Op("loop", [], dict(loop.attrs), [], [body], loop.span)


def _without(ops: list[Op], drop: set[int]) -> list[Op]:
    out = []
    for op in ops:
        if id(op) in drop:
            continue
        op.regions = [_without(r, drop) for r in op.regions]
        out.append(op)
    return out


def unwrap_one_trip(ops: list[Op], ranges: dict[str, tuple[sym.Expr, sym.Expr]] | None = None) -> list[Op]:
    """``ops`` with every grid loop that runs exactly once, as the ranges of the loops around it
    prove (attention's KV block, one tile wide, inside its KV loop), replaced by its body at the
    loop's first index; the values its body defines keep their objects, retyped in place.

    Inlining row grids leaves a row block's work as sibling grid loops of one trip each; as loops,
    what one stores another must load back (forwarding stops at a loop's region), as straight-line
    code it is forwarded and stays in UB."""
    ranges = dict(ranges or {})
    out: list[Op] = []
    for op in ops:
        if op.name != "loop":
            op.regions = [unwrap_one_trip(r, ranges) for r in op.regions]
            out.append(op)
            continue
        a = op.attrs
        trips = sym.sub(a["hi"], a["lo"])
        if a.get("kind") == "grid" and a["step"] == 1 and sym.prove_le(trips, 1, ranges) and \
                sym.prove_le(1, trips, ranges):
            substitute_index(op.regions[0], a["index"], a["lo"])
            out.extend(unwrap_one_trip(op.regions[0], ranges))
            continue
        inner = dict(ranges)
        if a["step"] == 1:
            inner[a["index"]] = sym.body_range(a["lo"], a["hi"])
        op.regions = [unwrap_one_trip(r, inner) for r in op.regions]
        out.append(op)
    return out


def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()
    options = schedule_of(module).pass_options
    if not options.get("row_interchange", 0):
        return fresh
    funcs = []
    for f in fresh.funcs:
        g = interchange(f, bool(options.get("row_fusion", 0)))
        if g is not None:
            # the statements fusion saw apart are now one row block's straight-line work: a tile one
            # of them stored and the next loads again is forwarded (attention's rescaled accumulator)
            base = bases(g)
            g.body = forward(merge_loops(unwrap_one_trip(g.body), base), {}, base)
            sweep(g)
        funcs.append(g or f)
    return Module(fresh.name, fresh.level, funcs, dict(fresh.attrs))


PASS = Pass("rowgrid", "tile", "tile", run, frozenset({"independent-marked"}), frozenset({"rows-interchanged"}))

__all__ = ["PASS", "Proof", "interchange", "row_bands", "run", "statement_bands", "statement_runs"]
