"""Loop-invariant operands of a grid nest, part of fusion (``passes/fuse.py``, its step 5).

A rows x columns grid nest whose body loads an operand that is the same for every row block (a
``[1, C]`` row broadcast, the column indices of an ``index_select``) swaps its loops when no
iteration depends on another, and the load, with the tile work that only reads what such loads
brought in (the indices' conversion to i32), moves above the loop over rows: it then runs once per
column block instead of once per tile.
"""

from __future__ import annotations

from typing import Any

from .. import sym
from ..ir import Op
from ..ir.opdefs import IR_OPS
from ..ir.opdefs import indexed_gm as _gm_reads_writes
from .merge import gm_touching as _gm_touching
from .merge import is_grid as _is_grid
from .merge import reads_writes as _reads_writes


def loads_and_stores(ops: list[Op]) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """The (tensor, offsets) of every GM read and write in ``ops``; offsets are None where only
    the data knows them (a gather's, a scatter's, a scalar read's)."""
    loads, stores = [], []
    for op in ops:
        for o in op.walk():
            if o.name == "tile.load":
                loads.append((o.operands[1].name, o.attrs["offsets"]))
            elif o.name == "tile.store":
                stores.append((o.operands[0].name, o.attrs["offsets"]))
            elif o.name in ("read",):
                loads.append((o.operands[0].name, None))
            elif _gm_touching(o):
                r, w = _gm_reads_writes(o)
                loads.extend((v.name, None) for v in r)
                stores.extend((v.name, None) for v in w)
    return loads, stores


def tile_access(ops: list[Op]) -> tuple[set[str], set[str], set[str]]:
    """(tiles read, tiles written, tiles defined) anywhere in ``ops``."""
    read: set[str] = set()
    written: set[str] = set()
    defined: set[str] = set()
    for op in ops:
        for o in op.walk():
            if o.name == "tile.alloc":
                defined.add(o.result.name)
            elif o.name.startswith("tile."):
                r, w = _reads_writes(o)
                read.update(v.name for v in r if o.name != "tile.store" or v is o.operands[1])
                written.update(v.name for v in w if o.name != "tile.store")
    return read, written, defined


def _mentions(v: Any, index: str) -> bool:
    if isinstance(v, (tuple, list)):
        return any(_mentions(x, index) for x in v)
    if isinstance(v, str) or v is None or isinstance(v, bool):
        return False
    try:
        return index in sym.free_symbols(v)
    except (TypeError, AttributeError):
        return False


def _pure_tile_op(op: Op) -> bool:
    """A tile op that writes its first operand (a tile) from the others and touches no GM."""
    d = IR_OPS.get(op.name)
    return d is not None and op.name.startswith("tile.") and op.name not in ("tile.load", "tile.store", "tile.alloc") \
        and d.dest == 0 and not d.reads_dest and not _gm_touching(op) and not op.regions


def _invariant_ops(outer: Op, inner: Op, base: dict[str, str]) -> list[Op]:
    """The ops of ``inner``'s body that every iteration of ``outer`` repeats: loads whose offsets
    and tile do not depend on the outer index, of tensors nothing in the nest stores to, then
    tile ops that only read tiles such loads (or such ops) wrote, each the only writer of its
    tile."""
    stored = {base.get(o.operands[0].name, o.operands[0].name) for o in outer.walk() if o.name == "tile.store"}
    stored |= {base.get(v.name, v.name) for o in outer.walk() if _gm_touching(o) for v in _gm_reads_writes(o)[1]}
    idx = outer.attrs["index"]
    body = inner.regions[0]
    writers: dict[str, int] = {}
    for o in body:
        for v in _reads_writes(o)[1] if o.name.startswith("tile.") and o.name != "tile.store" else ():
            writers[v.name] = writers.get(v.name, 0) + 1
    hoisted: list[Op] = []
    ready: set[str] = set()  # tiles whose value the hoisted ops make
    for o in body:
        if o.name == "tile.load":
            ok = not _mentions(o.attrs["offsets"], idx) and base.get(o.operands[1].name, o.operands[1].name) not in stored
        elif _pure_tile_op(o):
            ok = all(v.name in ready for v in o.operands[1:]) and not _mentions(o.attrs, idx)
        else:
            continue
        dst = o.operands[0]
        if ok and not _mentions(dst.type.valid, idx) and writers.get(dst.name) == 1:
            hoisted.append(o)
            ready.add(dst.name)
    return hoisted


def _interchangeable(outer: Op, inner: Op, base: dict[str, str]) -> bool:
    """Whether the two loops of a perfect grid nest may swap: the inner bounds do not depend on
    the outer index, no tile carries a value from one iteration to the next, and every store
    writes a place only its own iteration writes (its offsets use both indices), and a tensor
    stored in the nest is read only where its iteration stored it (a tensor nothing in the nest
    writes may be read anywhere, a gather's table too)."""
    idx, jdx = outer.attrs["index"], inner.attrs["index"]
    if any(_mentions(inner.attrs[k], idx) for k in ("lo", "hi", "step")):
        return False
    _, written, defined = tile_access(inner.regions[0])
    if written - defined:
        return False
    loads, stores = loads_and_stores(inner.regions[0])
    if any(not (_mentions(o, idx) and _mentions(o, jdx)) for _, o in stores):
        return False
    stored = set(stores)
    written_roots = {base.get(t, t) for t, _ in stores}
    return all((t, o) in stored for t, o in loads if base.get(t, t) in written_roots)


def hoist_broadcast_loads(ops: list[Op], base: dict[str, str]) -> list[Op]:
    """A grid nest over (rows, columns) that repeats work in every row block (module docstring)
    swaps its loops, and that work moves above the loop over rows, once per column block."""
    for op in ops:
        op.regions = [hoist_broadcast_loads(r, base) for r in op.regions]
    out = []
    for op in ops:
        body = op.regions[0] if _is_grid(op) else None
        if body is not None and len(body) == 1 and _is_grid(body[0]) and _interchangeable(op, body[0], base):
            inner = body[0]
            hoisted = _invariant_ops(op, inner, base)
            if hoisted:
                names = {o.operands[0].name for o in hoisted}
                allocs = [o for o in inner.regions[0] if o.name == "tile.alloc" and o.result.name in names]
                rest = [o for o in inner.regions[0] if o not in hoisted and o not in allocs]
                new_inner = Op("loop", [], dict(op.attrs), [], [rest], op.span)
                op = Op("loop", [], dict(inner.attrs), [], [allocs + hoisted + [new_inner]], inner.span)
        out.append(op)
    return out


__all__ = ["hoist_broadcast_loads", "loads_and_stores", "tile_access"]
