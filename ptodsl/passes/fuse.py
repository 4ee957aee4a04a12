"""Fusion (Tile IR -> Tile IR): keep intermediates on chip.

Requires: a verified ``level tile`` module from tiling, where every op is its own grid nest that
stores its result to a GM workspace and the next op loads it back.
Produces: the same computation in which
  1. adjacent grid loops with equal bounds merge, when each iteration of the second reads only
     what the same iteration of the first wrote (so no iteration sees another's data);
  2. inside one straight-line region, a load of exactly the tile a store just wrote, or an earlier
     load just read, reuses that tile (forwarding), so an elementwise chain loads each input tile
     once;
  3. workspaces nobody loads any more lose their stores and their allocation, and unused tiles
     disappear, so each output tile is stored once and intermediates stay in UB.
"""

from __future__ import annotations

from typing import Any

from .. import sym
from ..ir import Func, Module, Op, Value
from .context import Pass, PassContext
from .unroll import _subst_attr, _subst_type


def _loads_and_stores(ops: list[Op]):
    loads, stores = [], []
    for op in ops:
        for o in op.walk():
            if o.name == "tile.load":
                loads.append((o.operands[1].name, o.attrs["offsets"]))
            elif o.name == "tile.store":
                stores.append((o.operands[0].name, o.attrs["offsets"]))
            elif o.name in ("read",):
                loads.append((o.operands[0].name, None))
    return loads, stores


def _rename_index(ops: list[Op], old: str, new: str) -> None:
    env = {old: sym.Sym(new)}
    for op in ops:
        for o in op.walk():
            o.attrs = {k: (v if k in ("index", "name", "kind", "sym") else _subst_attr(v, env))
                       for k, v in o.attrs.items()}
            for r in o.results:
                r.type = _subst_type(r.type, env)


def _same_grid(a: Op, b: Op) -> bool:
    return (a.name == b.name == "loop" and a.attrs.get("kind") == b.attrs.get("kind") == "grid"
            and all(a.attrs[k] == b.attrs[k] for k in ("lo", "hi", "step")))


def _can_merge(a: Op, b: Op) -> bool:
    a_loads, a_stores = _loads_and_stores(a.regions[0])
    b_loads, b_stores = _loads_and_stores(b.regions[0])
    written = {t for t, _ in a_stores}
    renamed = {(t, tuple(sym.substitute(x, {b.attrs["index"]: sym.Sym(a.attrs["index"])}) for x in o))
               for t, o in b_loads if o is not None}
    for t, o in renamed:
        if t in written and (t, o) not in set(a_stores):
            return False
    if any(t in written for t, o in b_loads if o is None):
        return False
    if {t for t, _ in b_stores} & ({t for t, _ in a_loads} | written):
        return False
    return True


def merge_loops(ops: list[Op]) -> list[Op]:
    out: list[Op] = []
    pending_allocs: list[Op] = []
    for op in ops:
        op.regions = [merge_loops(r) for r in op.regions]
        if op.name in ("alloc", "guard") and out and out[-1].name == "loop":
            # GM workspaces, and bounds guards (which only read scalars), may move above the
            # previous loop: the guard then stops the call earlier, never later
            pending_allocs.append(op)
            continue
        prev = out[-1] if out else None
        if prev is not None and _same_grid(prev, op) and _can_merge(prev, op):
            _rename_index(op.regions[0], op.attrs["index"], prev.attrs["index"])
            prev.regions[0] = merge_loops(prev.regions[0] + op.regions[0])
            out[-1:-1] = pending_allocs
        else:
            out.extend(pending_allocs)
            out.append(op)
        pending_allocs = []
    out.extend(pending_allocs)
    return out


def _kernel_boundary(op: Op) -> bool:
    """Control work that partitioning keeps on the AICPU: compute kernels end there, and no tile
    survives into the next one, so a load is never forwarded across it."""
    if op.name == "loop":
        return op.attrs.get("kind") != "grid"
    return op.name in ("if", "read", "print")


def forward(ops: list[Op], rename: dict[str, Value]) -> list[Op]:
    """Store-to-load forwarding in one region; ``rename`` maps dropped tiles to their stand-ins."""
    stored: dict[tuple[str, Any], Value] = {}
    out: list[Op] = []
    for op in ops:
        op.operands = [rename.get(v.name, v) for v in op.operands]
        if op.regions:
            op.regions = [forward(r, dict(rename)) for r in op.regions]
            inner = [x for r in op.regions for x in r]
            _, inner_stores = _loads_and_stores(inner)
            written_tiles = {o.operands[0].name for x in inner for o in x.walk()
                             if o.name.startswith("tile.") and o.name != "tile.store" and o.operands}
            for t, _ in inner_stores:
                stored = {k: v for k, v in stored.items() if k[0] != t}
            stored = {k: v for k, v in stored.items() if v.name not in written_tiles}
            if _kernel_boundary(op):
                stored = {}
            out.append(op)
            continue
        if _kernel_boundary(op):
            stored = {}
        if op.name == "tile.store":
            gm, tile = op.operands
            stored = {k: v for k, v in stored.items() if k[0] != gm.name}
            stored[(gm.name, op.attrs["offsets"])] = tile
        elif op.name == "tile.load":
            dst, gm = op.operands
            key = (gm.name, op.attrs["offsets"])
            src = stored.get(key)
            if src is not None and src.type == dst.type:
                rename[dst.name] = src
                continue
            # a second load of the same region reuses the first tile while neither changed
            stored[key] = dst
        elif op.name.startswith("tile.") and op.operands:
            # a tile op writes its first operand: a forwarded tile must not be overwritten later
            dst = op.operands[0]
            stored = {k: v for k, v in stored.items() if v is not dst}
        out.append(op)
    return out


def _uses(func: Func) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in func.walk():
        for v in op.operands:
            counts[v.name] = counts.get(v.name, 0) + 1
    return counts


def sweep(func: Func) -> None:
    """Drop stores into workspaces nobody reads, then unused workspaces and tiles."""
    workspaces = {op.result.name for op in func.walk() if op.name == "alloc"}
    while True:
        readers: set[str] = set()
        for op in func.walk():
            if op.name == "tile.store":
                continue
            if op.name == "tile.load":
                readers.add(op.operands[1].name)
            else:
                readers.update(v.name for v in op.operands)
        dead = workspaces - readers
        uses = _uses(func)

        def keep(op: Op, dead=dead, uses=uses) -> bool:
            if op.name == "tile.store" and op.operands[0].name in dead:
                return False
            if op.name == "alloc" and op.result.name in dead:
                return False
            if op.name == "tile.alloc" and uses.get(op.result.name, 0) == 0:
                return False
            return True

        before = sum(1 for _ in func.walk())
        func.body = _filter(func.body, keep)
        if sum(1 for _ in func.walk()) == before:
            return


def _filter(ops: list[Op], keep) -> list[Op]:
    out = []
    for op in ops:
        if not keep(op):
            continue
        op.regions = [_filter(r, keep) for r in op.regions]
        out.append(op)
    return out


def run(module: Module, ctx: PassContext) -> Module:
    del ctx

    fresh = module.clone()  # passes never mutate their input
    for f in fresh.funcs:
        f.body = merge_loops(f.body)
        f.body = forward(f.body, {})
        sweep(f)
    return fresh


PASS = Pass("fuse", "tile", "tile", run, frozenset({"tiled"}), frozenset({"fused"}))
