"""Parallel (Tile IR -> Tile IR): mark the user loops whose iterations are independent.

Requires: a fused ``level tile`` module.
Produces: the same module with ``parallel = 1`` on every loop of the user's (not a grid, split,
implicit or peeled loop) that provably has no dependency between its iterations, so they may run in
any order, on any number of cores. Partitioning reads the attribute (the outermost such loop inside
a compute kernel becomes its block loop, and a parallel loop mixing cube and vector work is split
into one loop per kind), and the cpu backend runs such a loop that stays in the control program
with OpenMP. The same proof (:func:`independent`) decides which grid loop of a kernel without a
user loop may be shared out as blocks.

The proof is deliberately conservative. For the loop with index ``i`` and step ``s``:

- every GM write inside it (a ``tile.store``; a scatter's rows, which only the data knows, count
  as unknown) goes either to a workspace the iteration allocates itself, or to a region whose offset along one dim is ``k * i + c`` (``k >= 1`` and ``c`` free of
  ``i`` and of everything bound inside the loop), all writes to that tensor using the same dim and
  ``k`` and their extents fitting in ``k * s`` indices, so two iterations never touch the same
  element; an offset ``j + c`` where ``j`` indexes an inner step-1 loop from ``lo`` (free of what
  the loop binds) for at most ``span`` trips counts as the band ``lo + c`` of ``span - 1`` more
  indices (the share of rows a partial accumulation runs, ``passes/splitred.py``);
- what is written (outside the iteration's own workspaces) is read, if at all, only by tile loads
  inside the iteration's own band of the same dim (never by a scalar ``read``), so no iteration
  sees another's results (a partial accumulation reading and writing its own row of a workspace);
- no tile allocated outside the loop is written inside it (an accumulator carried across it);
- a scatter whose positions are declared unique (``tile.scatter_rows {unique = true}``, its index
  checked for repeats by the call, E0731) writes distinct rows in distinct iterations when its
  index tile is loaded (and converted) in the iteration from a region of the index that is
  disjoint over iterations, as above, and nothing else in the loop touches the tensor it writes;
- nothing prints (the output order would change).

A guard inside does not make a loop sequential: its condition reads nothing that iterations write,
and each backend reports the failure of the first iteration in loop order (blocks run contiguous
ranges of iterations and the host takes the first block that stopped; of a parallel loop nested in
sequential ones that every block runs, ``passes/blocks.py``, the first block's first failure).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import sym
from ..ir import Func, Module, Op, TileType
from ..ir.gm import GmLayoutError, Origin, trace_origins, walk_ops
from ..ir.opdefs import IR_OPS, indexed_gm
from .context import Pass, PassContext

# Loops that are not the user's: a grid or split loop is the tiling's, an implicit or peeled loop
# runs once.
NOT_USER = frozenset({"grid", "split", "implicit", "peeled"})


@dataclass(frozen=True)
class _Write:
    offsets: tuple[sym.Expr, ...] | None  # in the root's coordinates; None when unknown
    extents: tuple[int, ...]  # the stored tile's static shape


def is_user_loop(op: Op) -> bool:
    return op.name == "loop" and op.attrs.get("kind") not in NOT_USER


def origins_of(func: Func) -> dict[str, Origin] | None:
    """Where each GM value of ``func`` points (``ir/gm.py``), or None when some value cannot be placed
    (then nothing in the function is proved independent)."""
    try:
        return trace_origins(func)
    except GmLayoutError:
        return None


def independent(loop: Op, origins: dict[str, Origin], outer: frozenset[str] = frozenset(),
                private: frozenset[str] = frozenset()) -> bool:
    """Whether the iterations of ``loop`` (in a function whose GM values are ``origins``) are
    independent (module docstring). ``outer``: symbols bound around the loop that may differ
    between the two iterations compared (the indices of loops around it that every block runs in
    full, ``passes/blocks.py``), so a band's offset must not name them either; ``private``: roots
    that are workspaces of the iteration's own although allocated outside it."""
    step = loop.attrs["step"]
    if not isinstance(step, int) or step < 1:
        return False
    trip = sym.sub(loop.attrs["hi"], loop.attrs["lo"])
    if isinstance(trip, int) and trip <= step:
        return False  # a single iteration: nothing to share out
    body = loop.regions[0]
    index = loop.attrs["index"]
    local: set[str] = set(private)
    inner: set[str] = set(outer)  # symbols bound inside the loop: inner indices, values read
    tiles_inside: set[str] = set()
    for op in walk_ops(body):
        if op.name == "alloc":
            local.add(op.result.name)
        elif op.name == "tile.alloc":
            tiles_inside.add(op.result.name)
        elif op.name == "loop":
            inner.add(op.attrs["index"])
            if "unroll_var" in op.attrs:
                inner.add(op.attrs["unroll_var"])
        elif op.name == "read":
            inner.add(op.attrs["sym"])
    ranges = _inner_ranges(body, inner | {index})
    writes: dict[str, list[_Write]] = {}
    loads: dict[str, list[_Write]] = {}  # the regions read, per root (None offsets: unknown)
    # a unique scatter writes the rows its index tile names: disjoint over iterations when the
    # iterations load disjoint elements of the index (whose values the call checked are distinct)
    scattered: dict[str, list[_Write]] = {}  # written root -> the regions of the index loaded
    filled = _filled_from(body, origins)
    for op in walk_ops(body):
        if op.name == "print":
            return False
        if op.name == "read":
            loads.setdefault(origins[op.operands[0].name].root, []).append(_Write(None, ()))
        elif op.name == "tile.load":
            loads.setdefault(origins[op.operands[1].name].root, []).append(
                _access(origins[op.operands[1].name], op, op.operands[0]))
        elif op.name == "tile.store":
            writes.setdefault(origins[op.operands[0].name].root, []).append(
                _access(origins[op.operands[0].name], op, op.operands[1]))
        elif op.name == "tile.scatter_rows" and op.attrs.get("unique") and op.operands[2].name in filled:
            dst_root = origins[op.operands[0].name].root
            scattered.setdefault(dst_root, []).append(filled[op.operands[2].name])
        elif any(indexed_gm(op)):  # a gather or scatter: which rows only the data knows
            read, written = indexed_gm(op)
            for v in read:
                loads.setdefault(origins[v.name].root, []).append(_Write(None, ()))
            for v in written:
                writes.setdefault(origins[v.name].root, []).append(_Write(None, ()))
        elif op.name.startswith("tile.") and op.operands and isinstance(op.operands[0].type, TileType):
            if op.operands[0].name not in tiles_inside and _writes_dst(op):
                return False  # a tile carried across iterations
    for root, regions in scattered.items():
        # the rows of `root` only unique scatters touch in the loop, each through its own index rows
        if root in writes or root in loads or not _disjoint(regions, index, step, inner, ranges):
            return False
    for root, ws in writes.items():
        if root in local:
            continue
        # what an iteration reads of a tensor it writes must lie in its own band of that tensor (a
        # partial accumulator's row, passes/splitred.py): then no iteration sees another's results
        if not _disjoint(ws + loads.get(root, []), index, step, inner, ranges):
            return False
    return True


def _filled_from(body: list[Op], origins: dict[str, Origin]) -> dict[str, _Write]:
    """Tile -> the region of a GM tensor it holds, for the tiles of ``body`` one ``tile.load``
    fills (through conversions: a scatter's i32 index tile cast from the index's dtype) and nothing
    else writes."""
    out: dict[str, _Write] = {}
    writers: dict[str, int] = {}
    for op in walk_ops(body):
        if op.name.startswith("tile.") and op.operands and isinstance(op.operands[0].type, TileType) \
                and _writes_dst(op):
            writers[op.operands[0].name] = writers.get(op.operands[0].name, 0) + 1
    for op in walk_ops(body):
        dst = op.operands[0].name if op.operands else None
        if dst is None or writers.get(dst) != 1:
            continue
        if op.name == "tile.load":
            out[dst] = _access(origins[op.operands[1].name], op, op.operands[0])
        elif op.name == "tile.cast" and op.operands[1].name in out:
            out[dst] = out[op.operands[1].name]
    return out


def _access(origin: Origin, op: Op, tile) -> _Write:
    """The region of its root a tile load or store touches."""
    offsets = None
    if origin.offsets is not None:
        offsets = tuple(sym.add(a, b) for a, b in zip(origin.offsets, op.attrs["offsets"]))
    return _Write(offsets, tuple(tile.type.shape))


def _writes_dst(op: Op) -> bool:
    return IR_OPS[op.name].dest == 0


def _inner_ranges(body: list[Op], bound: set[str]) -> dict[str, tuple[sym.Expr, sym.Expr]]:
    """``j -> (lo, span)`` for the step-1 loops inside a body whose first index ``lo`` is free of
    what the body binds and which run at most ``span`` trips, ``span`` free of it too: the share
    ``[lo + p * c, min(hi, lo + (p + 1) * c))`` a split reduction gives each partial
    (``passes/splitred.py``) runs at most ``c``."""
    out: dict[str, tuple[sym.Expr, sym.Expr]] = {}
    for op in walk_ops(body):
        if op.name != "loop" or op.attrs["step"] != 1 or "unroll_var" in op.attrs:
            continue
        lo, hi = op.attrs["lo"], op.attrs["hi"]
        candidates = _upper_bounds(hi)
        for c in candidates:
            span = sym.sub(c, lo)
            if not sym.free_symbols(span) & bound:
                out[op.attrs["index"]] = (lo, span)
                break
    return out


def _upper_bounds(e: sym.Expr) -> list[sym.Expr]:
    """Expressions no smaller than ``e`` (for ``e >= 0``), ``e`` itself first: each argument of a
    ``min``, and ``cdiv(u, d)`` for each such ``u`` of ``cdiv(a, d)`` with ``d`` a positive
    constant (a grid over the rows of one row block: ``cdiv(min(B - i * R, R), R)``)."""
    out = [e]
    if isinstance(e, sym.CallExpr) and e.fn == "min":
        for a in e.args:
            out += [u for u in _upper_bounds(a) if u not in out]
    elif isinstance(e, sym.CallExpr) and e.fn == "cdiv" and isinstance(e.args[1], int) and e.args[1] > 0:
        out += [sym.ceildiv(u, e.args[1]) for u in _upper_bounds(e.args[0])[1:]]
    return out


def _disjoint(writes: list[_Write], index: str, step: int, inner: set[str],
              ranges: dict[str, tuple[sym.Expr, sym.Expr]] | None = None) -> bool:
    """Some dim along which every iteration writes its own band of ``k * step`` indices. An offset
    ``a * j + c`` with ``j`` the index of an inner loop of ``ranges`` and ``a >= 0`` free of what the
    loop binds counts as its whole range: the band from ``a * lo + c``, ``a * (span - 1)`` indices
    longer; several such indices add up (a mixed-radix offset, ``(b * S + s) * NQ + n * (NQ // N) +
    g * G``), which may need a divisor's floor product (``sym._floor_products``)."""
    if any(w.offsets is None or len(w.offsets) != len(w.extents) for w in writes):
        return False
    bound = inner | {index}
    writes = _positive_divisors(writes, ranges or {}, bound)
    if writes is None:
        return False
    writes, ranges = writes
    for dim in range(len(writes[0].offsets)):
        bands: list[tuple[sym.Expr, sym.Expr, sym.Expr]] = []  # (k, c, extent)
        for w in writes:
            band = _band(w.offsets[dim], w.extents[dim], inner, ranges)
            if band is None:
                break
            o, extent = band
            k = sym.sub(sym.substitute(o, {index: sym.add(sym.Sym(index), 1)}), o)
            c = sym.substitute(o, {index: 0})
            if sym.free_symbols(k) & bound or sym.free_symbols(c) & bound:
                break  # not of the form k * i + c
            bands.append((k, c, extent))
        else:
            k0, c0 = bands[0][0], bands[0][1]
            if any(sym.sub(k, k0) != 0 for k, _, _ in bands):
                continue
            shifts = [sym.sub(c, c0) for _, c, _ in bands]
            if not all(isinstance(s, int) for s in shifts):
                continue
            low = min(shifts)
            high = sym.add(shifts[0], bands[0][2])
            for s, (_, _, e) in zip(shifts[1:], bands[1:]):
                high = sym.max_(high, sym.add(s, e))
            extents = [e for _, _, e in bands]
            # no `k >= 1` of its own: an iteration that writes at all runs every loop around the
            # write at least once, so its band is at least a tile long, and `k * step` is no shorter
            if sym.prove_le(sym.sub(high, low), sym.mul(k0, step), _at_least_one(k0, *extents)):
                return True
    return False


def _band(o: sym.Expr, extent: sym.Expr, inner: set[str],
          ranges: dict[str, tuple[sym.Expr, sym.Expr]]) -> tuple[sym.Expr, sym.Expr] | None:
    """The offset and extent of the band an access at offset ``o`` covers over all the inner loops
    it names (each in ``ranges``), or None when some inner symbol is not such a loop's index or its
    coefficient is not a non-negative value free of what the loop binds."""
    for j in sorted(sym.free_symbols(o) & inner):
        if j not in ranges:
            return None
        lo, span = ranges[j]
        a = sym.sub(sym.substitute(o, {j: sym.add(sym.Sym(j), 1)}), o)
        if sym.free_symbols(a) & inner or sym.free_symbols(lo) & inner:
            return None
        if not (isinstance(a, int) and a >= 0) and not sym.prove_nonneg(a, _at_least_one(a)):
            return None
        rest = sym.sub(o, sym.mul(a, sym.Sym(j)))
        o, extent = sym.add(sym.mul(a, lo), rest), sym.add(extent, sym.mul(a, sym.sub(span, 1)))
    if sym.free_symbols(o) & inner:
        return None
    return o, extent


def _positive_divisors(writes: list[_Write], ranges: dict[str, tuple[sym.Expr, sym.Expr]], bound: set[str]):
    """``writes`` and ``ranges`` with every divisor of a floor division that is not a constant
    (``QR // (B * NQ)``) replaced by a fresh symbol, at least 1 in the proofs: it is never negative
    (every symbol of an offset or bound is at least 1) and the call checks each division by a
    runtime value non-zero before any kernel runs (``check/types.Requirement``). None when a
    divisor may be negative or names what the loop binds (an index that starts at 0)."""
    found: list[sym.Expr] = []
    exprs = [o for w in writes for o in w.offsets] + [e for pair in ranges.values() for e in pair]
    for e in exprs:
        _divisors(e, found)
    if not found:
        return writes, ranges
    names: dict[str, sym.Expr] = {}
    for d in found:
        if sym.free_symbols(d) & bound or not sym.prove_nonneg(d, _at_least_one(d)):
            return None
        names[f"\x00div{len(names)}"] = d

    def swap(e: sym.Expr) -> sym.Expr:
        for name, d in names.items():
            e = sym.replace(e, d, sym.Sym(name))
        return e
    return ([_Write(tuple(swap(o) for o in w.offsets), w.extents) for w in writes],
            {j: (swap(lo), swap(span)) for j, (lo, span) in ranges.items()})


def _divisors(e: sym.Expr, out: list[sym.Expr]) -> None:
    """The divisors of ``e``'s floor divisions that are not constants, outermost first."""
    if isinstance(e, sym.BinExpr):
        if e.op == "//" and not sym.is_const(e.right) and e.right not in out:
            out.append(e.right)
        _divisors(e.left, out)
        _divisors(e.right, out)
    elif isinstance(e, sym.CallExpr):
        for x in e.args:
            _divisors(x, out)
    elif isinstance(e, sym.NegExpr):
        _divisors(e.operand, out)


def _at_least_one(*exprs: sym.Expr) -> dict[str, tuple[int, None]]:
    """Every symbol of a coefficient or an extent (dims, loop bounds) is at least 1."""
    names: set[str] = set()
    for e in exprs:
        names |= sym.free_symbols(e)
    return {n: (1, None) for n in names}


def mark(func: Func) -> list[Op]:
    """Set ``parallel = 1`` on the independent user loops of ``func`` (in place); returns them."""
    origins = origins_of(func)
    found: list[Op] = []
    if origins is None:
        return found
    for op in walk_ops(func.body):
        if is_user_loop(op):
            op.attrs.pop("parallel", None)
            if independent(op, origins):
                op.attrs["parallel"] = 1
                found.append(op)
    return found


def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()
    for f in fresh.funcs:
        mark(f)
    return fresh


PASS = Pass("parallel", "tile", "tile", run, frozenset({"fused"}), frozenset({"independent-marked"}))

__all__ = ["PASS", "independent", "is_user_loop", "mark", "origins_of", "run"]
