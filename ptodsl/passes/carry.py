"""Accumulators carried through GM (a step of ``fuse``): a user loop whose body is one grid nest
that loads a GM region, updates it and stores it back at offsets its index does not move (a
partial accumulation's row, ``passes/splitred.py``; ``acc[:] = acc + x[b, :]``) runs inside that
grid instead, and the region stays in a tile across its iterations.

Before (``b`` the user loop, ``g`` the grid)::

    loop b:  views;  loop g: load A <- W[O(g)]; ...; C = f(A, ...); store W[O(g)] <- C
After::

    loop g:  T = load W[O(g)];  loop b: views; ...; T = f(T, ...);  store W[O(g)] <- T

so each tile of the region crosses GM twice per grid iteration rather than twice per iteration of
``b``, and no iteration of ``b`` waits for the previous one's store to land before loading (on the
NPU an MTE3 -> MTE2 round trip per row).

Legal when the interchanged nest's grid iterations are independent (``parallel.independent``,
with ``b`` bound inside them: every write of an iteration of ``g``, over all of ``b``, lies in its
own band, and it reads what it writes only there), which makes any interleaving of the grid's
iterations compute the same; the region is then ``W``'s only access in the body, loaded before it
is stored, at the same offsets free of ``b``; the loaded tile is read nowhere after the op that
computes the stored one, which becomes the update of ``T`` in place.
"""

from __future__ import annotations

import itertools

from .. import sym
from ..ir import Func, Op, TileType, Value
from ..ir.gm import walk_ops
from ..ir.opdefs import IR_OPS, indexed_gm
from .merge import reads_writes
from .parallel import NOT_USER, _access, independent, origins_of


def carry_accumulators(func: Func) -> bool:
    """Rewrite every such loop of ``func`` in place; whether any was."""
    origins = origins_of(func)
    if origins is None:
        return False
    names = itertools.count()
    taken = {v.name for op in func.walk() for v in (*op.operands, *op.results)}
    values = {p.name: p.value for p in func.params if p.is_tensor and p.value is not None}
    values |= {op.result.name: op.result for op in func.walk() if op.name == "alloc"}
    changed = False

    def fresh() -> str:
        while True:
            name = f"_carry{next(names)}"
            if name not in taken:
                taken.add(name)
                return name

    def region(ops: list[Op]) -> list[Op]:
        nonlocal changed
        out: list[Op] = []
        for op in ops:
            op.regions = [region(r) for r in op.regions]
            new = _carried(op, origins, values, fresh)
            changed |= new is not None
            out.append(new or op)
        return out

    func.body = region(func.body)
    return changed


def _carried(loop: Op, origins, values: dict[str, Value], fresh) -> Op | None:
    """The interchanged, promoted nest of a user ``loop`` (module docstring), or None."""
    if loop.name != "loop" or loop.attrs.get("kind") in NOT_USER or "unroll_var" in loop.attrs:
        return None
    b = loop.attrs["index"]
    body = loop.regions[0]
    if not body or body[-1].name != "loop" or body[-1].attrs.get("kind") != "grid" or \
            any(op.name != "view" for op in body[:-1]):
        return None
    grid = body[-1]
    if b in sym.free_symbols(grid.attrs["lo"]) | sym.free_symbols(grid.attrs["hi"]):
        return None
    inner = Op("loop", [], dict(loop.attrs), [], [[*body[:-1], *grid.regions[0]]], loop.span)
    nest = Op("loop", [], dict(grid.attrs), [], [[inner]], grid.span)
    found = _accumulator(inner, origins, values)
    if found is None:
        return None
    trips = sym.sub(grid.attrs["hi"], grid.attrs["lo"])
    if not (sym.is_const(trips) and trips <= 1) and not independent(nest, origins):
        return None
    load, store, root, offsets = found
    tile = Value(fresh(), load.operands[0].type)
    gone = {load.operands[0].name, store.operands[1].name}
    kept = [op for op in inner.regions[0]
            if op is not load and op is not store
            and not (op.name == "tile.alloc" and op.result.name in gone)]
    for op in kept:  # the producer of the stored tile now updates ``tile`` in place
        op.operands = [tile if v.name in gone else v for v in op.operands]
    inner.regions[0] = kept
    nest.regions[0] = [Op("tile.alloc", [], {}, [tile], span=load.span),
                       Op("tile.load", [tile, root], {"offsets": offsets}, span=load.span),
                       inner,
                       Op("tile.store", [root, tile], {"offsets": offsets}, span=store.span)]
    return nest


def _accumulator(inner: Op, origins, values: dict[str, Value]):
    """(load, store, root value, offsets) of the one GM region ``inner``'s body loads and stores
    back, or None."""
    body = inner.regions[0]
    bound = {inner.attrs["index"]} | {o.attrs["index"] for o in walk_ops(body) if o.name == "loop"} | \
        {o.attrs["sym"] for o in walk_ops(body) if o.name == "read"}
    stores = [op for op in body if op.name == "tile.store"]
    for store in stores:
        root = origins[store.operands[0].name].root
        region = _access(origins[store.operands[0].name], store, store.operands[1])
        if region.offsets is None or root not in values or \
                any(sym.free_symbols(o) & bound for o in region.offsets):
            continue
        touching = [op for op in walk_ops(body) if _touches(op, root, origins)]
        loads = [op for op in touching if op.name == "tile.load"]
        if len(touching) != 2 or len(loads) != 1 or loads[0].operands[0].type != store.operands[1].type:
            continue
        load = loads[0]
        if _access(origins[load.operands[1].name], load, load.operands[0]) != region:
            continue
        at_load, at_store = body.index(load) if load in body else -1, body.index(store)
        a, c = load.operands[0].name, store.operands[1].name
        writers = [i for i, op in enumerate(body) if _dest(op) in (a, c)]
        if at_load < 0 or at_load > at_store or writers != [at_load, writers[-1]] or len(writers) != 2:
            continue
        at_producer = writers[-1]
        if _dest(body[at_producer]) != c or not at_load < at_producer < at_store or \
                any(a in _reads(op) for op in body[at_producer + 1:]) or \
                any(_reads_nested(op, (a, c)) for op in body if op.regions):
            continue
        if any(sym.free_symbols(e) & bound for e in load.operands[0].type.valid):
            continue
        return load, store, values[root], region.offsets
    return None


def _touches(op: Op, root: str, origins) -> bool:
    if op.name in ("tile.load", "tile.store", "read"):
        v = op.operands[1] if op.name == "tile.load" else op.operands[0]
        return v.name in origins and origins[v.name].root == root
    read, written = indexed_gm(op)
    return any(v.name in origins and origins[v.name].root == root for v in (*read, *written))


def _dest(op: Op) -> str | None:
    d = IR_OPS[op.name].dest if op.name in IR_OPS else None
    if d is None or not op.operands or not isinstance(op.operands[d].type, TileType):
        return None
    return op.operands[d].name


def _reads(op: Op) -> set[str]:
    return {v.name for v in reads_writes(op)[0]}


def _reads_nested(op: Op, names: tuple[str, ...]) -> bool:
    return any(v.name in names for o in op.walk() for v in o.operands)


__all__ = ["carry_accumulators"]
