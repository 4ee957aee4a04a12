"""Merging adjacent grid nests (step 2 of fusion, see ``fuse.py``), in time linear in the program.

A chain of N elementwise statements tiles into N grid nests that merge one after another into the
first. Deciding each merge needs what the merged loop reads and writes so far; re-reading its whole
body after every merge made compiling such a chain quadratic (minutes for a thousand statements).
Here every loop keeps a summary of its accesses (:class:`Access`), computed once and extended
with the summary of each loop it absorbs; and merging the bodies of two merged loops continues the
scan of the first body where it stopped instead of scanning both bodies again. The decisions are
those of a full rescan: a scanned body is a fixpoint of the scan (a pair that cannot merge stays
unable to once either side has grown), so rescanning it would change nothing.
"""

from __future__ import annotations

from typing import Any

from .. import sym
from ..ir import Func, Op, Value
from ..ir.opdefs import IR_OPS, indexed_gm
from ..ir.queues import cores_of
from .parallel import _disjoint, _Write
from .unroll import _subst_attr, _subst_type


def reads_writes(op: Op) -> tuple[list[Value], list[Value]]:
    d = IR_OPS.get(op.name)
    if d is None:
        return list(op.operands), []
    r, w = d.reads_writes(len(op.operands))
    return [op.operands[i] for i in r], [op.operands[i] for i in w]


def tile_write_counts(func: Func) -> dict[str, int]:
    """How many tile ops write each tile (a tile written once holds one value wherever it is read)."""
    counts: dict[str, int] = {}
    for op in func.walk():
        if op.name.startswith("tile.") and op.name != "tile.store":
            for w in reads_writes(op)[1]:
                counts[w.name] = counts.get(w.name, 0) + 1
    return counts


def rename_values(ops: list[Op], rename: dict[str, Value]) -> None:
    """Every operand of ``ops`` (nested ones too) named in ``rename`` replaced by its value."""
    for op in ops:
        for o in op.walk():
            o.operands = [rename.get(v.name, v) for v in o.operands]


def gm_touching(op: Op) -> bool:
    """A tile op other than a load or store that reads or writes a GM tensor (a gather or scatter
    through an index tile): the region it touches is known only to the data."""
    r, w = indexed_gm(op)
    return bool(r or w)


def is_grid(op: Op) -> bool:
    return op.name == "loop" and op.attrs.get("kind") == "grid"


def same_bounds(a: Op, b: Op, env: dict[str, sym.Expr]) -> bool:
    return all(a.attrs[k] == _subst_attr(b.attrs[k], env) for k in ("lo", "hi", "step"))


def same_grid(a: Op, b: Op) -> bool:
    return is_grid(a) and is_grid(b) and same_bounds(a, b, {})


def nest_env(a: Op, b: Op) -> dict[str, sym.Expr]:
    """Index renaming of b's grid nest onto a's: the outer indices, and inner ones while both
    bodies are one grid loop with the same bounds (such nests cover the same index sets)."""
    env: dict[str, sym.Expr] = {b.attrs["index"]: sym.Sym(a.attrs["index"])}
    ra, rb = a.regions[0], b.regions[0]
    while (len(ra) == 1 and len(rb) == 1 and is_grid(ra[0]) and is_grid(rb[0])
           and same_bounds(ra[0], rb[0], env)):
        env[rb[0].attrs["index"]] = sym.Sym(ra[0].attrs["index"])
        ra, rb = ra[0].regions[0], rb[0].regions[0]
    return env


def rename_index(ops: list[Op], old: str, new: str) -> None:
    substitute_index(ops, old, sym.Sym(new))


def substitute_index(ops: list[Op], index: str, value: sym.Expr) -> None:
    """Put ``value`` for loop index ``index`` in every attribute and result type of ``ops``, in
    place (the values keep their objects, so every use sees the new type)."""
    env = {index: value}
    for op in ops:
        for o in op.walk():
            # (a loop's `index` is a name and stays; an element read's is the position it reads)
            o.attrs = {k: (v if k in ("name", "kind", "sym") else _subst_attr(v, env))
                       for k, v in o.attrs.items()}
            for r in o.results:
                r.type = _subst_type(r.type, env)


class Access:
    """What a list of ops reads and writes, anywhere inside it: GM regions loaded and stored
    (tensor name, offsets), tiles read, written and allocated, and every value named."""

    def __init__(self, base: dict[str, str]):
        self.base = base
        self.loads: set[tuple[str, Any]] = set()  # (tensor, offsets) of tile.load
        # tensors read where only the data knows (`read`, a gather's table): no offsets
        self.scalar_reads: set[str] = set()
        self.loaded: set[str] = set()  # tensors loaded or read
        self.stores: set[tuple[str, Any]] = set()
        self.stored: set[str] = set()
        self.stored_bases: set[str] = set()  # the tensors those view
        self.read: set[str] = set()  # tiles
        self.written: set[str] = set()
        self.defined: set[str] = set()
        self.carried: set[str] = set()  # written - defined: tiles that outlive an iteration
        self.free: set[str] = set()  # read - defined
        self.names: set[str] = set()  # every value an op operates on or defines
        self.produced: set[str] = set()  # every value an op defines

    @classmethod
    def of(cls, ops: list[Op], base: dict[str, str]) -> Access:
        acc = cls(base)
        for op in ops:
            for o in op.walk():
                acc.names.update(v.name for v in o.operands)
                acc.names.update(v.name for v in o.results)
                acc.produced.update(v.name for v in o.results)
                if o.name == "tile.load":
                    acc.loads.add((o.operands[1].name, o.attrs["offsets"]))
                    acc.loaded.add(o.operands[1].name)
                elif o.name == "tile.store":
                    acc.stores.add((o.operands[0].name, o.attrs["offsets"]))
                    acc.stored.add(o.operands[0].name)
                elif o.name == "read":
                    acc.scalar_reads.add(o.operands[0].name)
                    acc.loaded.add(o.operands[0].name)
                elif gm_touching(o):  # a scatter's rows are known only to the data: offsets None
                    r, w = indexed_gm(o)
                    acc.scalar_reads.update(v.name for v in r)
                    acc.loaded.update(v.name for v in r)
                    acc.stores.update((v.name, None) for v in w)
                    acc.stored.update(v.name for v in w)
                if o.name == "tile.alloc":
                    acc.defined.add(o.result.name)
                elif o.name.startswith("tile."):
                    r, w = reads_writes(o)
                    acc.read.update(v.name for v in r if o.name != "tile.store" or v is o.operands[1])
                    acc.written.update(v.name for v in w if o.name != "tile.store")
        acc.stored_bases = {base.get(s, s) for s in acc.stored}
        acc.carried = acc.written - acc.defined
        acc.free = acc.read - acc.defined
        return acc

    def add(self, other: Access) -> None:
        """Extend with ``other``'s accesses, in time proportional to ``other``."""
        self.carried.difference_update(other.defined)
        self.free.difference_update(other.defined)
        self.carried.update(t for t in other.written if t not in self.defined and t not in other.defined)
        self.free.update(t for t in other.read if t not in self.defined and t not in other.defined)
        for mine, theirs in ((self.loads, other.loads), (self.scalar_reads, other.scalar_reads),
                             (self.loaded, other.loaded), (self.stores, other.stores), (self.stored, other.stored),
                             (self.stored_bases, other.stored_bases), (self.read, other.read),
                             (self.written, other.written), (self.defined, other.defined),
                             (self.names, other.names), (self.produced, other.produced)):
            mine.update(theirs)


def can_merge(a: Op, b: Op, acc_a: Access, acc_b: Access, carried_ok: frozenset[str] = frozenset()) -> bool:
    """Whether grid nest ``b`` may run inside ``a``'s iterations: each iteration of b reads only
    what the same iteration of a wrote, and no tile carried across a (an accumulator) is touched
    by b, which may see its value only after the whole loop. Tensors are compared by the tensor
    they view (``acc_a.base``): a load through a view of what a stores, whose offsets count from
    elsewhere, is not the tile a stored."""
    base = acc_a.base
    written = {base.get(t, t) for t in acc_a.stored}
    loaded = {base.get(t, t) for t in acc_a.loaded}
    scalar = {base.get(t, t) for t in acc_a.scalar_reads}
    env = nest_env(a, b)
    inner = _sibling_envs(a, b, env)
    stores = acc_a.stores | _first_trip_stores(a)
    never = {o.attrs["index"] for o in b.walk() if o.name == "loop" and _no_trip(o)}
    for t, o in acc_b.loads:
        if base.get(t, t) not in written or any(sym.free_symbols(x) & never for x in o):
            continue  # (a load in a loop that never runs reads nothing)
        if not any((t, tuple(sym.substitute(x, e) for x in o)) in stores for e in (env, *inner)):
            return False
    if any(base.get(t, t) in written for t in acc_b.scalar_reads):
        return False
    kinds_a, kinds_b = cores_of([a]), cores_of([b])
    if kinds_a and kinds_b and not kinds_a & kinds_b and not any(base.get(t, t) in written for t, _ in acc_b.loads):
        # work of the other kind of core that reads nothing of a's: one loop gains no reuse (each
        # kind's part runs on its own core either way), and would take b away from the next nest
        # of its own kind (attention's `acc * alpha` merged into the product with v, instead of
        # into the `+ pv` after it, went through GM)
        return False
    for t in acc_b.stored:
        root = base.get(t, t)
        if root in written or root in scalar or (root in loaded and not _tile_war(a, b, t, env, base)):
            return False
    if any(t in acc_a.carried and t not in carried_ok for t in (*acc_b.read, *acc_b.written)):
        return False
    if (acc_a.carried or acc_b.carried) and not at_most_once(a) and {"cube", "vec"} <= cores_of([a, b]):
        # a loop carrying a tile across its iterations (a sum over rows) and work of the other
        # kind of core in one loop: partitioning splits such a loop by kind of core, and the
        # accumulator's set-up and store around it would not go with the half that updates it
        # (a loop of at most one trip, attention's KV block one tile wide, carries nothing)
        return False
    return not any(t in acc_a.free for t in acc_b.written)


def _first_trip_stores(a: Op) -> set[tuple[str, Any]]:
    """The stores of ``a`` inside inner loops of at most one trip, at that trip's offsets: a matmul
    reading the first column tile of a row (offset 0) reads what such a column loop stored."""
    out: set[tuple[str, Any]] = set()
    for loop in a.walk():
        if loop is a or loop.name != "loop" or not at_most_once(loop):
            continue
        first = {loop.attrs["index"]: loop.attrs["lo"]}
        for o in loop.walk():
            if o.name == "tile.store":
                out.add((o.operands[0].name, tuple(sym.substitute(x, first) for x in o.attrs["offsets"])))
    return out


def _no_trip(loop: Op) -> bool:
    a = loop.attrs
    return a["step"] == 1 and sym.prove_le(sym.sub(a["hi"], a["lo"]), 0, {})


def _sibling_envs(a: Op, b: Op, env: dict[str, sym.Expr]) -> list[dict[str, sym.Expr]]:
    """Renamings of an inner grid loop of b onto one of a with the same bounds (each directly in
    its nest's body): in a merged iteration, the inner loop of a runs to its end before the one of
    b starts, so b may read any tile that loop of a stored at the same inner index (a row's scores
    stored by one column loop and read back by the next). Only loops of at most one trip (a row
    that fits one tile): merging nests whose column loops run many times gains no reuse and
    keeps more tiles in flight than a kernel has flags for."""
    if any(k != b.attrs["index"] for k in env):
        return []  # the nests already line up level by level
    mine = [o for o in a.regions[0] if is_grid(o) and at_most_once(o)]
    theirs = [o for o in b.regions[0] if is_grid(o) and at_most_once(o)]
    return [{**env, lb.attrs["index"]: sym.Sym(la.attrs["index"])}
            for lb in theirs for la in mine if same_bounds(la, lb, env)]


def _tile_war(a: Op, b: Op, t: str, env: dict[str, sym.Expr], base: dict[str, str]) -> bool:
    """Whether ``b`` storing to ``t``, which ``a`` loads, may run in ``a``'s iterations: each of a's
    loads of ``t`` reads a tile b's same iteration overwrites (same offsets and extents, after
    renaming b's indices onto a's), and those tiles lie in bands of a's index that no two
    iterations share, so no iteration of a reads what an earlier iteration of b wrote (an
    in-place update ``acc[:] = acc * 0.5 + x[b, :]`` split over two grids). Every access of the
    tensor goes through ``t`` itself, not a view of it."""
    root = base.get(t, t)
    loads = [(o.operands[1].name, tuple(o.attrs["offsets"]), tuple(o.operands[0].type.shape)) for o in a.walk()
             if o.name == "tile.load" and base.get(o.operands[1].name, o.operands[1].name) == root]
    stores = {(o.operands[0].name, tuple(sym.substitute(x, env) for x in o.attrs["offsets"]),
               tuple(o.operands[1].type.shape))
              for o in b.walk() if o.name == "tile.store" and base.get(o.operands[0].name, o.operands[0].name) == root}
    if not loads or any(access not in stores for access in loads) or any(name != t for name, _, _ in stores):
        return False
    inner = {o.attrs["index"] for o in (*a.walk(), *b.walk()) if o.name == "loop" and o is not a and o is not b}
    accesses = [_Write(offs, shape) for _, offs, shape in {*loads, *stores}]
    return _disjoint(accesses, a.attrs["index"], a.attrs["step"], inner, {})


def hoistable(op: Op, loop: Access) -> bool:
    """Whether ``op`` may run before the loop summarised by ``loop`` instead of after it: it
    touches no value the loop touches, and a load of it reads no tensor the loop stores to."""
    if op.name in ("alloc", "guard"):
        return True  # a GM workspace, or a guard (it reads only scalars: it then stops the call earlier)
    if op.name == "view":
        # an address, reading no data: it may be made before a loop that does not define its source
        # (the view of the next row between two grids of an elementwise chain, which then fuse)
        return op.operands[0].name not in loop.produced
    if op.regions or not op.name.startswith("tile.") or op.name == "tile.store" or gm_touching(op):
        return False  # (a gather or scatter never runs before the loop that may hold its index guards)
    if op.name == "tile.load":
        dst, gm = op.operands
        return dst.name not in loop.names and loop.base.get(gm.name, gm.name) not in loop.stored_bases
    return not any(v.name in loop.names for v in op.operands + op.results)


class Merger:
    """Merges adjacent grid nests with equal bounds in a region, nests level by level. Ops between
    two loops that touch nothing the first touches move above it when the two merge."""

    def __init__(self, base: dict[str, str]):
        self.base = base
        # keyed by id(op), with the op itself so that the id stays its own while the entry lives
        self._access: dict[int, tuple[Op, Access]] = {}
        self._waiting: dict[int, tuple[Op, int]] = {}  # loop -> how many last ops of its body wait to move up

    def access(self, loop: Op) -> Access:
        entry = self._access.get(id(loop))
        if entry is None or entry[0] is not loop:
            entry = self._access[id(loop)] = (loop, Access.of(loop.regions[0], self.base))
        return entry[1]

    def region(self, ops: list[Op]) -> list[Op]:
        out: list[Op] = []
        pending = self._scan(out, [], ops, fresh=True)
        return out + pending

    def _scan(self, out: list[Op], pending: list[Op], ops: list[Op], fresh: bool) -> list[Op]:
        """Continue scanning a region whose ops so far are ``out`` followed by ``pending`` (ops that
        may still move above the loop ``out[-1]``) with ``ops``; ``fresh`` ops have their regions
        merged first. Returns the ops still pending at the end."""
        for op in ops:
            if fresh:
                for k, r in enumerate(op.regions):
                    inner: list[Op] = []
                    waiting = self._scan(inner, [], r, fresh=True)
                    op.regions[k] = inner + waiting
                    if op.name == "loop":
                        self._waiting[id(op)] = (op, len(waiting))
            prev = out[-1] if out else None
            if prev is not None and prev.name == "loop" and hoistable(op, self.access(prev)):
                pending.append(op)
                continue
            if prev is not None and same_grid(prev, op) and can_merge(prev, op, self.access(prev), self.access(op)):
                self._absorb(prev, op)
                out[-1:-1] = pending
            else:
                out.extend(pending)
                out.append(op)
            pending = []
        return pending

    def _absorb(self, prev: Op, op: Op) -> None:
        """Append ``op``'s iterations to ``prev``'s and merge the two bodies."""
        acc = self.access(prev)
        for o in op.walk():  # their summaries name op's indices, which are renamed now
            self._access.pop(id(o), None)
        rename_index(op.regions[0], op.attrs["index"], prev.attrs["index"])
        body = prev.regions[0]
        entry = self._waiting.get(id(prev))
        count = entry[1] if entry is not None and entry[0] is prev else 0
        pending = body[len(body) - count:] if count else []
        del body[len(body) - count:]
        pending = self._scan(body, pending, op.regions[0], fresh=False)
        body.extend(pending)
        self._waiting[id(prev)] = (prev, len(pending))
        acc.add(Access.of([op], self.base))  # after every renaming of op's indices


def merge_loops(ops: list[Op], base: dict[str, str]) -> list[Op]:
    """``ops`` with adjacent grid nests merged where :func:`can_merge` allows."""
    return Merger(base).region(ops)


def at_most_once(loop: Op) -> bool:
    """A loop that provably runs at most once (a double-buffered body's second copy) carries no
    dependency to a next trip: the sync pass and its checker run its body once, not twice."""
    a = loop.attrs
    trips = sym.ceildiv(sym.sub(a["hi"], a["lo"]), a["step"]) if a["step"] != 1 else sym.sub(a["hi"], a["lo"])
    return sym.prove_le(trips, 1, {})


__all__ = ["Access", "Merger", "at_most_once", "can_merge", "gm_touching", "hoistable", "is_grid", "merge_loops", "nest_env", "reads_writes",
           "rename_index", "same_bounds", "same_grid", "substitute_index"]
