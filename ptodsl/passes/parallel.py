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
  element;
- nothing written (outside the iteration's own workspaces) is also read, by a tile load or by a
  scalar ``read``, so no iteration sees another's results;
- no tile allocated outside the loop is written inside it (an accumulator carried across it);
- nothing prints (the output order would change).

A guard inside does not make a loop sequential: its condition reads nothing that iterations write,
and each backend reports the failure of the first iteration in loop order (blocks run contiguous
ranges of iterations and the host takes the first block that stopped).
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


def independent(loop: Op, origins: dict[str, Origin]) -> bool:
    """Whether the iterations of ``loop`` (in a function whose GM values are ``origins``) are
    independent (module docstring)."""
    step = loop.attrs["step"]
    if not isinstance(step, int) or step < 1:
        return False
    trip = sym.sub(loop.attrs["hi"], loop.attrs["lo"])
    if isinstance(trip, int) and trip <= step:
        return False  # a single iteration: nothing to share out
    body = loop.regions[0]
    index = loop.attrs["index"]
    local: set[str] = set()
    inner: set[str] = set()  # symbols bound inside the loop: inner indices, values read
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
    writes: dict[str, list[_Write]] = {}
    reads: set[str] = set()
    for op in walk_ops(body):
        if op.name == "print":
            return False
        if op.name == "read":
            reads.add(origins[op.operands[0].name].root)
        elif op.name == "tile.load":
            reads.add(origins[op.operands[1].name].root)
        elif op.name == "tile.store":
            origin = origins[op.operands[0].name]
            offsets = None
            if origin.offsets is not None:
                offsets = tuple(sym.add(a, b) for a, b in zip(origin.offsets, op.attrs["offsets"]))
            writes.setdefault(origin.root, []).append(_Write(offsets, tuple(op.operands[1].type.shape)))
        elif any(indexed_gm(op)):  # a gather or scatter: which rows only the data knows
            read, written = indexed_gm(op)
            reads.update(origins[v.name].root for v in read)
            for v in written:
                writes.setdefault(origins[v.name].root, []).append(_Write(None, ()))
        elif op.name.startswith("tile.") and op.operands and isinstance(op.operands[0].type, TileType):
            if op.operands[0].name not in tiles_inside and _writes_dst(op):
                return False  # a tile carried across iterations
    for root, ws in writes.items():
        if root in local:
            continue
        if root in reads or not _disjoint(ws, index, step, inner):
            return False
    return True


def _writes_dst(op: Op) -> bool:
    return IR_OPS[op.name].dest == 0


def _disjoint(writes: list[_Write], index: str, step: int, inner: set[str]) -> bool:
    """Some dim along which every iteration writes its own band of ``k * step`` indices."""
    if any(w.offsets is None or len(w.offsets) != len(w.extents) for w in writes):
        return False
    bound = inner | {index}
    for dim in range(len(writes[0].offsets)):
        bands: list[tuple[sym.Expr, sym.Expr, int]] = []  # (k, c, extent)
        for w in writes:
            o = w.offsets[dim]
            if sym.free_symbols(o) & inner:
                break
            k = sym.sub(sym.substitute(o, {index: sym.add(sym.Sym(index), 1)}), o)
            c = sym.substitute(o, {index: 0})
            if sym.free_symbols(k) & bound or sym.free_symbols(c) & bound:
                break  # not of the form k * i + c
            bands.append((k, c, w.extents[dim]))
        else:
            k0, c0 = bands[0][0], bands[0][1]
            if any(sym.sub(k, k0) != 0 for k, _, _ in bands) or not sym.prove_le(1, k0, _at_least_one(k0)):
                continue
            shifts = [sym.sub(c, c0) for _, c, _ in bands]
            if not all(isinstance(s, int) for s in shifts):
                continue
            low = min(shifts)
            high = max(s + e for s, (_, _, e) in zip(shifts, bands))
            if sym.prove_le(high - low, sym.mul(k0, step), _at_least_one(k0)):
                return True
    return False


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
