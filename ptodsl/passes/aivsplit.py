"""AIV split (Block IR -> Block IR): a mixed kernel's vector work shared by both vector cores.

Requires: a partitioned ``level block`` module (tiles not yet placed, no flags yet).
Produces: in each ``mixed`` kernel that qualifies (below), every vector op twice: copy ``s`` (attr
``aiv = s``) works on rows ``[s * H, s * H + H)`` of each vector tile of ``R = 2 * H`` rows, in a
tile of ``H`` rows of its own whose valid rows are the original's clamped to that half (at least
one: a tile has a row), and at GM rows ``+ s * H``. A block of a mixed kernel runs on one cube core and two vector cores
(sub-blocks); before, sub-block 0 ran all the vector work and sub-block 1 only the flags. Now each
runs its copy (``backends/cpp/kernel_mixed.py``), halving the vector time of attention's row
blocks, where the vector core bounds the kernel.

Both copies stay in one program: the CPU build and the simulator run copy 0 then copy 1 of each
run of vector ops, which computes what the original did, since each op is row-wise (so rows of a
tile never meet); the NPU's vector cores each run theirs with every flag of the kernel, as both
did before (each core has its own pipes, events and UB; the cube's wait for a vector flag completes
when both have set it). A copy 1 whose rows may be empty (a partial last row block) runs inside a
loop of ``min(max(v - H, 0), 1)`` trips, so no instruction sees a tile of no rows. The cost model
times copy 0 on the block's vector core and charges copy 1's work and GM bytes to the chip
(``cost/timeline.py``).

A kernel qualifies when:
- every vector tile has rank 2 and the same number of rows ``R >= 2``, ``R`` even;
- every vector op is row-wise: elementwise, a cast, a fill, a broadcast of a column, a reduction
  along the row (``axis = 1``), or a load or store of a rank-2 GM region;
- no cube op names a vector tile, and no tensor the vector ops write is passed to the kernel
  twice, as two views (``pipes.param_aliases``);
- for each GM tensor the vector ops write, every vector access to it starts at a row that is a
  multiple of ``R`` (so one core never reads or overwrites rows the other wrote: the halves of
  two accesses either coincide or do not meet), or the accesses are stores at one row offset
  whose instances at different loop indices write rows apart (``_stores_apart``: paged
  attention's output rows, a head group's offset inside a batch; varlen attention's, each
  sequence's rows inside its band of a ``nondecreasing:`` tensor, ``passes/ordered.py``);
- the kernel still compiles with the copies, its stack frame estimate below the target's warning
  threshold unless it was above it already (``passes/trial.py``).
Otherwise it is left as it is. ``pass_options: {aiv_split: false}`` turns the pass off.
"""

from __future__ import annotations

import itertools

from .. import sym
from ..ir import Func, Module, Op, TileType, Value
from ..ir.gm import GmLayoutError, trace_origins, walk_ops
from ..ir.opdefs import IR_OPS
from ..ir.queues import core_of
from ..ir.schedule import schedule_of
from ..schedule import PASS_OPTION_DEFAULTS
from . import stack, trial
from .context import Pass, PassContext
from .ordered import bands, block_ranges, holding, ordered_params
from .pipes import param_aliases

AIV = "aiv"  # the attribute naming the vector core (sub-block) that runs a copy
ROW_WISE = frozenset({"unary", "binary", "expand_binary", "cast", "fill_tile", "expand", "muladd"})


def split_kernel(func: Func, ctx: PassContext, strided: set[str], aliases: dict[str, str],
                 ordered: frozenset[str] = frozenset()) -> Func:
    """``func`` with its vector work split between the two vector cores, where it qualifies;
    ``aliases``: its tensor parameters that a launch fills with views of one tensor, each mapped
    to one of them (``pipes.param_aliases``); ``ordered``: those the spec declares
    ``nondecreasing:`` (``passes/ordered.py``)."""
    rows = _rows(func, aliases, ordered)
    if rows is None:
        return func
    tried = Module("aivsplit", "block", [func]).clone().funcs[0]
    counter = itertools.count()
    tried.body = _split(tried.body, rows // 2, {}, counter)
    if not trial.compiles(tried, ctx, strided) or not trial.keeps_frame(func, tried, ctx.target, strided):
        return func
    return tried


def _rows(func: Func, aliases: dict[str, str], ordered: frozenset[str] = frozenset()) -> int | None:
    """The rows ``R`` every vector tile of a qualifying kernel has, else None."""
    if func.kind != "mixed":
        return None
    rows: set[int] = set()
    vec_ops = [op for op in walk_ops(func.body) if core_of(op) == "vec"]
    for op in vec_ops:
        if op.name == "tile.alloc":
            t = op.result.type
            if t.rank != 2:
                return None
            rows.add(t.shape[0])
    if len(rows) != 1:
        return None
    (r,) = rows
    if r < 2 or r % 2:
        return None
    vec_tiles = {op.result.name for op in vec_ops if op.name == "tile.alloc"}
    for op in walk_ops(func.body):
        if op.regions or op.name == "tile.alloc" or not op.name.startswith("tile."):
            continue
        if core_of(op) != "vec":
            if any(v.name in vec_tiles for v in op.operands):
                return None  # a cube op reading or writing a vector tile
            continue
        if not _row_wise(op):
            return None
    try:
        origins = trace_origins(func)
    except GmLayoutError:
        return None
    written = {origins[op.operands[0].name].root for op in vec_ops if op.name == "tile.store"}
    if written & (set(aliases) | set(aliases.values())):
        return None  # rows of another view of the same tensor: their alignment is not known here
    rows_at: dict[str, list[tuple[Op, sym.Expr, tuple[Op, ...]]]] = {}  # root -> (access, row, loops around)
    for op, loops in _with_loops(func.body, ()):
        if core_of(op) == "vec" and op.name in ("tile.load", "tile.store"):
            origin = origins[op.operands[1 if op.name == "tile.load" else 0].name]
            if origin.root not in written:
                continue
            if origin.offsets is None:
                return None
            rows_at.setdefault(origin.root, []).append((op, sym.add(origin.offsets[0], op.attrs["offsets"][0]), loops))
    for accesses in rows_at.values():
        if not all(_multiple_of(row, r) for _, row, _ in accesses) and \
                not _stores_apart(accesses, origins, ordered, block_ranges(func)):
            return None
    return r


def _with_loops(ops: list[Op], loops: tuple[Op, ...]):
    """Each op of ``ops``, nested ones included, with the loops around it."""
    for op in ops:
        yield op, loops
        inner = (*loops, op) if op.name == "loop" else loops
        for region in op.regions:
            yield from _with_loops(region, inner)


def _stores_apart(accesses: list[tuple[Op, sym.Expr, tuple[Op, ...]]], origins: dict | None = None,
                  ordered: frozenset[str] = frozenset(), known: dict[str, tuple] | None = None) -> bool:
    """Whether the vector accesses to a tensor are stores that write the same rows or rows apart
    whenever they run at different loop indices, so the two cores' halves of them never overlap
    unless they coincide (each core then writes its own rows in program order): all are stores at
    one row offset (the index of a loop that runs at most once taken at its start), and each loop
    around one runs at most once, is marked ``parallel`` (its iterations write disjoint bands of
    every tensor, ``passes/parallel.py``), leaves the offset as it is (the offset names neither
    its index nor a value read inside it), or keeps each iteration's store inside its row band
    of a tensor the spec declares ``nondecreasing:`` (``passes/ordered.py``: varlen attention's
    rows of one sequence). Two instances first differ at some loop: a parallel or banded one
    keeps them apart; around the others they coincide or differ further in."""
    def at_start(row: sym.Expr, loops: tuple[Op, ...]) -> sym.Expr:
        once = {lp.attrs["index"]: lp.attrs["lo"] for lp in loops if _at_most_once(lp)}
        return sym.substitute(row, once) if once else row

    row0 = at_start(accesses[0][1], accesses[0][2])
    banded: dict[int, set[int]] = {}  # loop -> the bands that hold every store inside it so far
    for op, row, loops in accesses:
        if op.name != "tile.store" or sym.sub(at_start(row, loops), row0) != 0:
            return False
        for k, loop in enumerate(loops):
            if loop.attrs.get("parallel") == 1 or _at_most_once(loop):
                continue
            bound = {loop.attrs["index"], loop.attrs.get("unroll_var")}
            bound |= {o.attrs["sym"] for o in walk_ops(loop.regions[0]) if o.name == "read"}
            if not sym.free_symbols(row) & bound:
                continue
            held = holding(op, loops[k + 1:], bands(loop, ordered), origins, known) if origins is not None else set()
            banded[id(loop)] = banded.get(id(loop), held) & held
            if not banded[id(loop)]:
                return False  # (the stores of one tensor in one band: two bands could meet)
    return True


def _at_most_once(loop: Op) -> bool:
    trips = sym.sub(loop.attrs["hi"], loop.attrs["lo"])
    step = loop.attrs["step"]
    hi = sym.bounds(trips, {})[1]
    return loop.attrs.get("kind") == "peeled" or (isinstance(step, int) and hi is not None and hi <= step)


def _row_wise(op: Op) -> bool:
    family = IR_OPS[op.name].family
    if family in ("load", "store"):
        gm = op.operands[1 if family == "load" else 0]
        return gm.type.rank == 2 and len(op.attrs["offsets"]) == 2
    if family == "reduce":
        return op.attrs.get("axis") in (1, -1)
    return family in ROW_WISE


def _multiple_of(e: sym.Expr, r: int) -> bool:
    """Whether ``e`` is a multiple of ``r`` for every integer value of its symbols: a sum of
    terms whose constant coefficients are."""
    if isinstance(e, int):
        return e % r == 0
    form = sym.linear(e)
    if form is not None:
        coeffs, const = form
        return const % r == 0 and all(isinstance(c, int) and c % r == 0 for c in coeffs.values())
    if isinstance(e, sym.BinExpr) and e.op == "*":
        return any(isinstance(x, int) and x % r == 0 for x in (e.left, e.right)) or \
            _multiple_of(e.left, r) or _multiple_of(e.right, r)
    if isinstance(e, sym.BinExpr) and e.op in ("+", "-"):
        return _multiple_of(e.left, r) and _multiple_of(e.right, r)
    return False


def _half(v: Value, s: int, h: int, names: dict[tuple[str, int], Value]) -> Value:
    got = names.get((v.name, s))
    if got is None:
        t = v.type
        rows = t.valid[0]
        # the second half's rows, at least one: a tile has at least one valid row, and its ops run
        # only where the rows are there (the guard loop of _split)
        valid = sym.min_(rows, h) if s == 0 else sym.max_(sym.min_(sym.sub(rows, h), h), 1)
        got = names[(v.name, s)] = Value(f"{v.name}_aiv{s}", TileType(t.space, t.dtype, (h, t.shape[1]),
                                                                        (valid, t.valid[1])))
    return got


def _copy(op: Op, s: int, h: int, names: dict[tuple[str, int], Value]) -> Op:
    def swap(v: Value) -> Value:
        return _half(v, s, h, names) if isinstance(v.type, TileType) else v
    attrs = dict(op.attrs)
    if op.name in ("tile.load", "tile.store"):
        offsets = list(attrs["offsets"])
        offsets[0] = sym.add(offsets[0], s * h)
        attrs["offsets"] = offsets
    if op.name != "tile.alloc" or s == 1:
        attrs[AIV] = s  # (an allocation of copy 1: a tile of the second vector core's own UB)
    return Op(op.name, [swap(v) for v in op.operands], attrs, [swap(v) for v in op.results], [], op.span)


def _split(ops: list[Op], h: int, names: dict[tuple[str, int], Value], counter) -> list[Op]:
    """``ops`` with each run of vector ops laid out as: the tile declarations of both copies, copy
    0, then copy 1 (inside loops of at most one trip where its rows may be empty)."""
    out: list[Op] = []
    run: list[Op] = []

    def flush() -> None:
        allocs = [op for op in run if op.name == "tile.alloc"]
        work = [op for op in run if op.name != "tile.alloc"]
        out.extend(_copy(op, s, h, names) for op in allocs for s in (0, 1))
        out.extend(_copy(op, 0, h, names) for op in work)
        guard: sym.Expr | None = None
        body: list[Op] = []
        for op in work:
            # whether the second half has rows, from the original's valid rows (the copy's own are
            # clamped to at least one, so they cannot tell)
            cond = sym.min_(sym.max_(sym.sub(op.operands[_tile_at(op)].type.valid[0], h), 0), 1)
            if cond == 0:
                continue  # rows that never reach the second half
            copy = _copy(op, 1, h, names)
            if guard is not None and sym.sub(cond, guard) != 0:
                _close(out, guard, body, counter)
                body = []
            guard = cond
            body.append(copy)
        if guard is not None:
            _close(out, guard, body, counter)
        run.clear()

    for op in ops:
        if not op.regions and core_of(op) == "vec":
            run.append(op)
            continue
        flush()
        if op.regions:
            op.regions = [_split(r, h, names, counter) for r in op.regions]
        out.append(op)
    flush()
    return out


def _tile_at(op: Op) -> int:
    return next(i for i, v in enumerate(op.operands) if isinstance(v.type, TileType))


def _close(out: list[Op], guard: sym.Expr, body: list[Op], counter) -> None:
    if guard == 1:
        out.extend(body)
        return
    name = f"_aiv{next(counter)}"
    out.append(Op("loop", [], {"index": name, "lo": 0, "hi": guard, "step": 1, "name": name, "kind": "grid"},
                  [], [body], body[0].span))


def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()  # passes never mutate their input
    if not schedule_of(module).pass_options.get("aiv_split", PASS_OPTION_DEFAULTS["aiv_split"]):
        return fresh
    strided = stack.strided_params(fresh)
    aliases = param_aliases(fresh)
    funcs = [split_kernel(f, ctx, stack.every_tensor(f) if strided is None else strided.get(f.name, set()),
                          aliases.get(f.name, {}), ordered_params(fresh, f))
             if f.kind == "mixed" else f for f in fresh.funcs]
    return Module(fresh.name, fresh.level, funcs, dict(fresh.attrs))


PASS = Pass("aivsplit", "block", "block", run, frozenset({"partitioned"}), frozenset({"aiv-split"}))

__all__ = ["AIV", "PASS", "run", "split_kernel"]
