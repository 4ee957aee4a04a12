"""Rematerialisation (step 4 of fusion, see ``fuse.py``): a workspace written by a short
elementwise chain from read-only inputs, and read back by a later grid nest with the same bounds at
the same offsets, is recomputed there from the inputs: reading an input again costs what reading
the workspace did, and the workspace's store disappears.

Only pairs of nests that could match are looked at (the producer stores a workspace the consumer
loads), and what a tile's writers are is indexed once per region and body, so a region of many
grid nests costs time linear in its size, not in the square (or cube) of its number of nests.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable

from .. import sym
from ..ir import Func, Op, Value
from ..ir.opdefs import indexed_gm
from ..ops import OPS
from .merge import is_grid, reads_writes, same_bounds
from .unroll import _subst_attr, _subst_type

# The longest elementwise chain recomputed in place of a workspace load: recomputing costs vector
# work per tile, a workspace costs a store and a load per tile; a short chain is the cheaper.
MAX_REMAT_OPS = 4


def bases(func: Func) -> dict[str, str]:
    """GM value name -> the name of the tensor it views (itself for parameters and workspaces)."""
    return view_bases(func.walk())


def view_bases(ops: Iterable[Op]) -> dict[str, str]:
    """:func:`bases` of the views, reshapes and permutes among ``ops`` (in program order)."""
    base: dict[str, str] = {}
    for op in ops:
        if op.name in ("view", "reshape", "permute"):
            src = op.operands[0].name
            base[op.result.name] = base.get(src, src)
    return base


def _elementwise(op: Op) -> bool:
    if op.name in ("tile.expand", "tile.fill"):
        return True
    od = OPS.get(op.name[len("tile."):]) if op.name.startswith("tile.") else None
    return od is not None and od.kind in ("unary", "binary", "cast", "compare", "select")


def grid_nest(op: Op) -> list[Op]:
    """The grid loops of a perfect nest rooted at ``op``, outermost first."""
    nest = [op]
    while len(nest[-1].regions[0]) == 1 and is_grid(nest[-1].regions[0][0]):
        nest.append(nest[-1].regions[0][0])
    return nest


def _tiles_set(op: Op) -> set[str]:
    """Tiles allocated or written anywhere in ``op`` (stores write GM, not a tile)."""
    out: set[str] = set()
    for o in op.walk():
        if o.name == "tile.alloc":
            out.add(o.result.name)
        elif o.name.startswith("tile.") and o.name != "tile.store":
            out.update(v.name for v in reads_writes(o)[1])
    return out


class _Writers:
    """Who writes each tile of one loop body, by position: answers, for any prefix ``body[:upto]``,
    what the per-prefix walk of :func:`_chain` used to rebuild for every store."""

    def __init__(self, body: list[Op]):
        self.body = body
        self.writes: dict[str, list[tuple[int, Op | None]]] = {}  # tile -> (position, op; None inside a loop)
        self.allocs: dict[str, list[tuple[int, Op]]] = {}
        self.order = {id(o): i for i, o in enumerate(body)}
        for i, op in enumerate(body):
            if op.regions:
                for inner in op.walk():
                    for w in reads_writes(inner)[1] if inner is not op else ():
                        self.writes.setdefault(w.name, []).append((i, None))
            elif op.name == "tile.alloc":
                self.allocs.setdefault(op.result.name, []).append((i, op))
            elif op.name.startswith("tile.") and op.name != "tile.store":
                for w in reads_writes(op)[1]:
                    self.writes.setdefault(w.name, []).append((i, op))

    def writer(self, name: str, upto: int) -> tuple[bool, Op | None]:
        """(whether ``body[:upto]`` writes the tile, its one plain writer or None)."""
        ws = self.writes.get(name, ())
        n = bisect_left(ws, upto, key=lambda w: w[0])
        if n == 0:
            return False, None
        return True, (ws[0][1] if n == 1 else None)

    def alloc(self, name: str, upto: int) -> Op | None:
        allocs = self.allocs.get(name, ())
        n = bisect_left(allocs, upto, key=lambda a: a[0])
        return allocs[n - 1][1] if n else None  # the last one before upto


def _chain(body: _Writers, upto: int, tile: Value, read_only: set[str], base: dict[str, str],
           outside_ok: Callable[[Value], bool]) -> list[Op] | None:
    """The ops of ``body[:upto]`` that compute ``tile`` (with their tile.allocs), if that is a short
    elementwise chain whose leaves are loads of read-only tensors or tiles ``outside_ok`` accepts.
    A tile written inside a nested loop (a reduction's accumulator) or twice is no plain value:
    recomputing it would need more than the ops beside it."""
    need = [tile]
    seen: set[str] = set()
    chain: list[Op] = []
    while need:
        v = need.pop()
        if v.name in seen:
            continue
        seen.add(v.name)
        written, op = body.writer(v.name, upto)
        alloc = body.alloc(v.name, upto)
        if op is None:
            if written or alloc is not None or not outside_ok(v):
                return None  # written twice, never written here, or a tile that may change
            continue
        if alloc is None:
            return None
        if op.name == "tile.load":
            if base.get(op.operands[1].name, op.operands[1].name) not in read_only:
                return None
        elif not _elementwise(op) or reads_writes(op)[1] != [v] or v in reads_writes(op)[0]:
            return None
        else:
            need.extend(reads_writes(op)[0])
        chain += [alloc, op]
    if sum(1 for o in chain if o.name != "tile.alloc" and o.name != "tile.load") > MAX_REMAT_OPS:
        return None
    return sorted(chain, key=lambda o: body.order[id(o)])


class _Remat:
    def __init__(self, func: Func):
        self.func = func
        self.base = bases(func)
        stored = {self.base.get(g, g) for g in _stored(func.body)}
        self.read_only = {p.name for p in func.params if p.is_tensor} - stored
        self.workspaces = {o.result.name for o in func.walk() if o.name == "alloc"}
        self.count = 0
        self.changed = False
        self._writers: dict[int, tuple[list[Op], _Writers]] = {}  # loop body -> its writers, per region

    def _gm(self, body: list[Op], name: str, index: int) -> set[str]:
        return {o.operands[index].name for o in body if o.name == name and o.operands[index].name in self.workspaces}

    def region(self, ops: list[Op]) -> None:
        for op in ops:
            for r in op.regions:
                self.region(r)
        nests = {k: grid_nest(op) for k, op in enumerate(ops) if is_grid(op)}
        if len(nests) < 2:
            return
        self._writers = {}
        # workspaces each level of each nest stores and loads in its own body
        stores = {k: [self._gm(n.regions[0], "tile.store", 0) for n in nest] for k, nest in nests.items()}
        loads = {k: [self._gm(n.regions[0], "tile.load", 1) for n in nest] for k, nest in nests.items()}
        # top-level positions at which each tile is allocated or written, for "unchanged between"
        where: dict[str, list[int]] = {}
        for k, op in enumerate(ops):
            for t in _tiles_set(op):
                where.setdefault(t, []).append(k)
        # top-level positions storing into each GM tensor (through its views), for "not stored again between"
        stored_at: dict[str, list[int]] = {}
        for k, op in enumerate(ops):
            for gm in {self.base.get(g, g) for g in _stored([op])}:
                stored_at.setdefault(gm, []).append(k)
        self._stored_at = stored_at
        producers: dict[str, list[int]] = {}  # workspace -> the earlier nests storing it
        for j, cnest in nests.items():
            candidates = sorted({i for level in loads[j] for ws in level for i in producers.get(ws, ())})
            for i in candidates:
                depth = min(len(nests[i]), len(cnest))
                if stores[i][depth - 1] & loads[j][depth - 1]:
                    self.pair(ops, i, j, nests, where)
            for ws in set().union(*stores[j]):
                producers.setdefault(ws, []).append(j)

    def pair(self, ops: list[Op], i: int, j: int, nests: dict[int, list[Op]], where: dict[str, list[int]]) -> None:
        pnest, cnest = nests[i], nests[j]
        depth = min(len(pnest), len(cnest))
        env: dict[str, sym.Expr] = {}
        for p, c in zip(pnest[:depth], cnest[:depth]):
            if not same_bounds(c, p, env):
                return
            env[p.attrs["index"]] = sym.Sym(c.attrs["index"])
        pbody, cbody = pnest[depth - 1].regions[0], cnest[depth - 1].regions[0]

        def outside_ok(v: Value) -> bool:
            at = where.get(v.name, ())
            n = bisect_left(at, i)
            return n == len(at) or at[n] > j  # neither allocated nor written by ops[i..j]

        writers = self._writers.get(id(pbody))
        if writers is None or writers[0] is not pbody:
            writers = self._writers[id(pbody)] = (pbody, _Writers(pbody))
        root = self.base.get
        # a workspace stored again after the producer's store (later in its body, by an op in
        # between, or in the consumer before its load) no longer holds what the chain computes
        last_store = {root(g, g): k for k, op in enumerate(pbody) for g in _stored([op])}
        first_store: dict[str, int] = {}
        for k, op in enumerate(cbody):
            for g in _stored([op]):
                first_store.setdefault(root(g, g), k)

        def stored_between(gm: str) -> bool:
            at = self._stored_at.get(gm, ())
            n = bisect_left(at, i + 1)
            return n < len(at) and at[n] < j

        by_ws: dict[str, list[Op]] = {}
        for k, load in enumerate(cbody):
            if load.name == "tile.load" and k <= first_store.get(root(load.operands[1].name, load.operands[1].name), k):
                by_ws.setdefault(load.operands[1].name, []).append(load)
        replaced: dict[int, list[Op]] = {}
        new_tiles: set[str] = set()
        for k, store in enumerate(pbody):
            if store.name != "tile.store" or store.operands[0].name not in self.workspaces:
                continue
            ws = store.operands[0]
            if last_store.get(root(ws.name, ws.name), k) > k or stored_between(root(ws.name, ws.name)):
                continue
            offsets = _subst_attr(store.attrs["offsets"], env)
            matching = [load for load in by_ws.get(ws.name, ())
                        if id(load) not in replaced and load.operands[1] is ws and load.attrs["offsets"] == offsets
                        and _subst_type(store.operands[1].type, env) == load.operands[0].type]
            if not matching:
                continue
            chain = _chain(writers[1], k, store.operands[1], self.read_only, self.base, outside_ok)
            if chain is None:
                continue
            for load in matching:
                replaced[id(load)] = new = self.clone(chain, env, store.operands[1], load.operands[0])
                new_tiles.update(*map(_tiles_set, new))
                self.changed = True
        if replaced:
            cbody[:] = [x for op in cbody for x in replaced.get(id(op), [op])]
        for t in new_tiles:  # later pairs see the recomputed tiles as written at ops[j]
            at = where.setdefault(t, [])
            if not at or at[-1] != j:
                at.append(j)

    def clone(self, chain: list[Op], env: dict[str, sym.Expr], result: Value, into: Value) -> list[Op]:
        self.count += 1
        values: dict[str, Value] = {result.name: into}
        out = []
        for op in chain:
            if op.name == "tile.alloc" and op.result.name == result.name:
                continue  # the consumer's tile takes the result
            results = []
            for r in op.results:
                values[r.name] = Value(f"{r.name}_re{self.count}", _subst_type(r.type, env))
                results.append(values[r.name])
            attrs = {k: (v if k in ("index", "name", "kind", "sym") else _subst_attr(v, env))
                     for k, v in op.attrs.items()}
            out.append(Op(op.name, [values.get(v.name, v) for v in op.operands], attrs, results, [], op.span))
        return out


def rematerialise(func: Func) -> bool:
    r = _Remat(func)
    r.region(func.body)
    return r.changed


__all__ = ["MAX_REMAT_OPS", "bases", "grid_nest", "rematerialise"]


def _stored(ops: list[Op]) -> set[str]:
    """The GM values ``ops`` store to, a scatter's table too (any of its rows may change)."""
    out: set[str] = set()
    for op in ops:
        for o in op.walk():
            if o.name == "tile.store":
                out.add(o.operands[0].name)
            else:
                out.update(v.name for v in indexed_gm(o)[1])
    return out
