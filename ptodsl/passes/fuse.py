"""Fusion (Tile IR -> Tile IR): keep intermediates on chip.

Requires: a verified ``level tile`` module from tiling, where every op is its own grid nest that
stores its result to a GM workspace and the next op loads it back.
Produces: the same computation in which
  1. identity casts (``tile.cast`` to the dtype the tile already has) are gone;
  2. adjacent grid loops with equal bounds merge, nests of them level by level, when each
     iteration of the second reads only what the same iteration of the first wrote (so no
     iteration sees another's data) and no tile carried across the first (an accumulator) is
     touched by the second. Ops between the two that touch nothing the first loop touches (the
     accumulator set-up of a reduction) move above it, so a reduction's grid fuses into the grid
     of the elementwise chain that produces its operand. Where both nests' column loops run at
     most once (a block one tile wide, attention's KV block), the second may read what a sibling
     column loop of the first stored, and a tile such a loop stored at its one trip's offsets
     (a matmul's first K tile); a load in a loop that never runs reads nothing;
  3. inside one straight-line region, and from a region into the grid loops it holds, a load of
     exactly the tile a store just wrote, or an earlier load just read, reuses that tile
     (forwarding), so an elementwise chain loads each input tile once;
  4. a workspace written by a short elementwise chain from read-only inputs, and read back by a
     later grid nest with the same bounds at the same offsets, is recomputed there from the
     inputs (rematerialisation): reading an input again costs what reading the workspace did, and
     the workspace's store disappears;
  5. a rows x columns grid nest that loads a row-broadcast operand (or an index_select's columns)
     in every iteration swaps its loops (when no iteration depends on another), so the operand is
     loaded, and the tile work on it alone done, once per column block (``passes/hoist.py``);
  6. a region computes each tile op once (common subexpressions), and each matmul accumulation
     once (``passes/twins.py``: bmm's f32 and T outputs of one product);
  6b. a user loop whose body is one grid nest carrying an accumulator through GM (a partial
     accumulation's row) runs inside that grid, the accumulator in a tile across its iterations
     (``passes/carry.py``);
  7. a running max over a row and a sum of exp(t - max) over it, in two grid loops, become one
     (the online form: the sum is rescaled by exp(old max - new max)), so softmax-like ops read a
     row that does not fit on chip twice rather than three times;
  7b. a row's reduction whose column loop provably runs exactly once writes its result without
     the identity fill before the loop and the combine in it (``passes/reinit.py``);
  8. in the one-pass version of a row loop (``passes/tile_fit.py``), loads of read-only tensors
     at offsets the loop does not move, and the casts and arithmetic on them alone, move before
     the loop (gamma and beta are loaded once, not once per row);
  9. workspaces nobody loads any more lose their stores and their allocation, tile ops whose
     result nobody reads go, and unused tiles and empty grid loops disappear, so each output tile
     is stored once and intermediates stay in UB.

Where a whole extent is static and fits one tile, tiling emits no grid loop at all, and the whole
body stays in UB.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping
from typing import Any

from .. import sym
from ..ir import Func, Module, Op, Value
from ..ir.opdefs import in_kernel_loop
from ..ir.opdefs import indexed_gm as _gm_reads_writes
from .carry import carry_accumulators
from .context import Pass, PassContext
from .hoist import hoist_broadcast_loads
from .hoist import loads_and_stores as _loads_and_stores
from .hoist import tile_access as _tile_access
from .merge import (
    Access,
    can_merge,
    hoistable,
    merge_loops,
    rename_index,
    rename_values,
    same_grid,
    tile_write_counts,
)
from .merge import gm_touching as _gm_touching
from .merge import is_grid as _is_grid
from .merge import reads_writes as _reads_writes
from .reinit import fold_reduction_inits
from .remat import bases, rematerialise
from .tile_fit import hoist_invariant
from .twins import twin_accumulations
from .unroll import _subst_attr, _subst_type

# the lowest finite value per float dtype: the online max is clamped to it, never subtracting -inf
LOWEST = {"f32": -3.4028234663852886e38, "bf16": -3.3895313892515355e38, "f16": -65504.0}


def _kernel_boundary(op: Op) -> bool:
    """Control work that partitioning keeps on the AICPU: compute kernels end there, and no tile
    survives into the next one, so a load is never forwarded across it."""
    if op.name == "loop":
        return not in_kernel_loop(op)
    return op.name in ("if", "read", "print")


class _Known:
    """GM regions whose value a tile holds, (tensor, offsets) -> tile, indexed by the tensor each
    region views and by tile, so that forgetting what a store or a tile write invalidates costs
    what it removes, not the size of the map."""

    def __init__(self, base: dict[str, str]):
        self.base = base
        self.map: dict[tuple[str, Any], Value] = {}
        self.by_base: dict[str, set[tuple[str, Any]]] = {}
        self.by_tile: dict[str, set[tuple[str, Any]]] = {}

    def copy(self) -> _Known:
        new = _Known(self.base)
        for k, v in self.map.items():
            new.put(k, v)
        return new

    def get(self, key: tuple[str, Any]) -> Value | None:
        return self.map.get(key)

    def put(self, key: tuple[str, Any], tile: Value) -> None:
        self._drop(key)
        self.map[key] = tile
        self.by_base.setdefault(self.base.get(key[0], key[0]), set()).add(key)
        self.by_tile.setdefault(tile.name, set()).add(key)

    def _drop(self, key: tuple[str, Any]) -> None:
        tile = self.map.pop(key, None)
        if tile is not None:
            self.by_base[self.base.get(key[0], key[0])].discard(key)
            self.by_tile[tile.name].discard(key)

    def forget_gm(self, name: str) -> None:
        """Every region of the tensor ``name`` views."""
        for key in list(self.by_base.get(self.base.get(name, name), ())):
            self._drop(key)

    def forget_tile(self, tile: Value) -> None:
        for key in list(self.by_tile.get(tile.name, ())):
            if self.map[key] is tile:
                self._drop(key)

    def forget_tiles(self, names: set[str]) -> None:
        for name in names:
            for key in list(self.by_tile.get(name, ())):
                self._drop(key)

    def clear(self) -> None:
        self.map.clear()
        self.by_base.clear()
        self.by_tile.clear()


def forward(ops: list[Op], rename: Mapping[str, Value], base: dict[str, str], seed: _Known | None = None) -> list[Op]:
    """Store-to-load forwarding in one region; ``rename`` maps dropped tiles to their stand-ins and
    ``seed`` holds what the enclosing region knows on entry (GM region -> tile holding it)."""
    # a tile dropped inside the region is renamed only there (a ChainMap layer, not a copy)
    rename = rename.new_child() if isinstance(rename, ChainMap) else ChainMap(dict(rename))
    stored = seed.copy() if seed is not None else _Known(base)
    out: list[Op] = []
    for op in ops:
        op.operands = [rename.get(v.name, v) for v in op.operands]
        if op.regions:
            inner = [x for r in op.regions for x in r]
            _, inner_stores = _loads_and_stores(inner)
            _, written_tiles, _ = _tile_access(inner)
            for t, _ in inner_stores:
                stored.forget_gm(t)
            stored.forget_tiles(written_tiles)
            # a grid loop runs in the same compute kernel as the ops around it: what is known
            # before it and that no iteration changes is known in every iteration
            inner_seed = stored if _is_grid(op) else None
            op.regions = [forward(r, rename, base, inner_seed) for r in op.regions]
            if _kernel_boundary(op):
                stored.clear()
            out.append(op)
            continue
        if _kernel_boundary(op):
            stored.clear()
        if op.name == "tile.store":
            gm, tile = op.operands
            stored.forget_gm(gm.name)
            stored.put((gm.name, op.attrs["offsets"]), tile)
        elif op.name == "tile.load":
            dst, gm = op.operands
            key = (gm.name, op.attrs["offsets"])
            src = stored.get(key)
            if src is not None and src.type == dst.type:
                rename[dst.name] = src
                continue
            # a second load of the same region reuses the first tile while neither changed
            stored.forget_tile(dst)
            stored.put(key, dst)
        elif op.name.startswith("tile.") and op.operands:
            for gm in _gm_reads_writes(op)[1]:
                stored.forget_gm(gm.name)  # a scatter: any row of it may have changed
            # a tile op writes its destination: a forwarded tile must not be overwritten later
            for w in _reads_writes(op)[1]:
                stored.forget_tile(w)
        out.append(op)
    return out


# ------------------------------------------------------------------ identity casts


def drop_identity_casts(func: Func) -> None:
    """``tile.cast(dst, src)`` to src's own dtype copies src; when each tile is written once (so
    both hold the same value wherever dst is read), dst's readers read src instead."""
    writes = tile_write_counts(func)
    rename: dict[str, Value] = {}

    def keep(op: Op) -> bool:
        if op.name != "tile.cast":
            return True
        dst, src = op.operands
        if dst.type != src.type or writes.get(dst.name) != 1 or writes.get(src.name) != 1:
            return True
        rename[dst.name] = rename.get(src.name, src)
        return False

    func.body = _filter(func.body, keep)
    rename_values(func.body, rename)


# ------------------------------------------------------------------ common subexpressions


def cse(func: Func) -> None:
    """Within one straight-line region, a tile op computing what an earlier one computed (same op,
    attributes and operands) reuses the earlier tile, unless control work that may end a compute
    kernel stands between them (``_kernel_boundary``). Only tiles written once take part, so both
    hold the same value wherever the later one is read."""
    writes = tile_write_counts(func)
    rename: dict[str, Value] = {}

    def region(ops: list[Op]) -> list[Op]:
        seen: dict[tuple, Value] = {}
        out = []
        for op in ops:
            op.operands = [rename.get(v.name, v) for v in op.operands]
            op.regions = [region(r) for r in op.regions]
            reads, dests = _reads_writes(op) if op.name.startswith("tile.") else ([], [])
            if (op.name.startswith("tile.") and op.name not in ("tile.load", "tile.store", "tile.alloc")
                    and not _gm_touching(op) and len(dests) == 1 and writes.get(dests[0].name) == 1
                    and all(writes.get(v.name) == 1 for v in reads)):
                key = (op.name, repr(sorted(op.attrs.items())), tuple(v.name for v in reads), dests[0].type)
                if key in seen:
                    rename[dests[0].name] = seen[key]
                    continue
                seen[key] = dests[0]
            if _kernel_boundary(op):
                # no tile lives from one compute kernel into the next: a later op computing the
                # same again (a second `zeros` after a loop the control program keeps) recomputes it
                seen.clear()
            out.append(op)
        return out

    func.body = region(func.body)


# ------------------------------------------------------------------ online max and sum


class _Online:
    """Softmax's two reductions over one row in one pass (the online form).

    Where a grid loop A keeps a running max ``M = maximum(M, amax(t))`` and the next grid loop B,
    with the same bounds, uses M only as ``sum(exp(t - M))`` accumulated into L, the two merge: in
    each iteration the new max is taken first, L is rescaled by ``exp(M_old - M_new)``, and B's
    body then adds ``sum(exp(t - M_new))``. After the loop, M and L hold what the two loops gave
    (``sum_i exp(t_i - M)`` regroups exactly), so the row is read once for both, not twice. The
    merge happens only when B subtracts M from the very tile A took the max of (so no exp overflows).
    """

    def __init__(self, func: Func, base: dict[str, str]):
        self.func = func
        self.base = base
        self.count = 0
        self.changed = False

    def region(self, ops: list[Op]) -> list[Op]:
        for op in ops:
            op.regions = [self.region(r) for r in op.regions]
        i = 0
        while i < len(ops):
            a = ops[i]
            j = i + 1
            before, after = [], []  # ops between A and B: hoisted above A, or casts of A's max kept below
            acc: Access | None = None
            while _is_grid(a) and j < len(ops) and not _is_grid(ops[j]):
                acc = acc or Access.of(a.regions[0], self.base)
                if hoistable(ops[j], acc):
                    before.append(ops[j])
                elif ops[j].name == "tile.cast" and not ops[j].regions:
                    after.append(ops[j])
                else:
                    break
                j += 1
            if _is_grid(a) and j < len(ops) and same_grid(a, ops[j]):
                merged = self.pair(a, ops[j], after)
                if merged is not None:
                    ops[i:j + 1] = before + [merged] + after
                    self.changed = True
                    continue
            i += 1
        return ops

    def pair(self, a: Op, b: Op, casts: list[Op]) -> Op | None:
        body_a = a.regions[0]
        upd = [o for o in body_a if o.name == "tile.maximum" and o.operands[0] is o.operands[1]]
        if len(upd) != 1:
            return None
        m, r = upd[0].operands[0], upd[0].operands[2]
        a_read, a_written, a_defined = _tile_access(body_a)
        if m.name in a_defined or m.type.dtype not in LOWEST:
            return None
        amax = [o for o in body_a if o.name == "tile.amax" and o.operands[0] is r]
        if len(amax) != 1 or sum(1 for o in body_a for w in _reads_writes(o)[1] if w is m) != 1:
            return None
        # the casts between A and B must all be of the max: B may read them in its place
        views = {m.name: None}
        for c in casts:
            if c.operands[1] is not m or c.operands[0].type.dtype not in LOWEST:
                return None
            views[c.operands[0].name] = c
        if not can_merge(a, b, Access.of(body_a, self.base), Access.of(b.regions[0], self.base),
                         frozenset({m.name})):
            return None
        # B may use the max only as sum([cast](exp(t - expand(max)))) accumulated into one tile L
        body_b = b.regions[0]
        readers = self._readers(body_b)
        for v in views:
            if any(o is None or o.name != "tile.expand" for o in readers.get(v, [])) or \
                    any(w.name == v for o in body_b for w in _reads_writes(o)[1]):
                return None
        expands = [o for v in views for o in readers.get(v, [])]
        if len(expands) != 1:
            return None
        e = expands[0].operands[0]
        sub = self._only(readers, e, "tile.sub", 2)
        p = sub and self._only(readers, sub.operands[0], "tile.exp", 1)
        if p:
            cast = self._only(readers, p.operands[0], "tile.cast", 1)
            q = self._only(readers, (cast.operands[0] if cast else p.operands[0]), "tile.sum", 1)
        acc = p and q and self._only(readers, q.operands[0], "tile.add", None)
        if not acc or acc.operands[1] is not acc.operands[0] or q.attrs.get("axis") != amax[0].attrs.get("axis"):
            return None
        acc = acc.operands[0]
        if acc.name in a_written | a_read or sum(1 for o in body_b for w in _reads_writes(o)[1] if w is acc) != 1 or \
                any(o is None or o.name != "tile.add" for o in readers.get(acc.name, [])):
            return None
        # B must subtract the max from the values A took it of, or from what A widened exactly
        # (f16/bf16 -> f32), so that no exp overflows
        t_b = self._expr(body_b, sub.operands[1], b.attrs["index"])
        t_a = self._expr(body_a, amax[0].operands[1], a.attrs["index"])
        widened = t_a[0] == "tile.cast" and t_a[2].dtype == "f32" and t_a[3] == (t_b,)
        if t_b != t_a and not widened:
            return None
        rename_index(body_b, b.attrs["index"], a.attrs["index"])
        a.regions[0] = body_a + body_b
        return self.rescale(a, upd[0], m, r, acc, expands[0], views[expands[0].operands[1].name])

    def _expr(self, body: list[Op], v: Value, index: str) -> Any:
        """What ``v`` holds in one iteration of a loop with body ``body``, as a tree of the ops and
        loads that compute it (the loop index made anonymous), for comparing two loops' values."""
        defs = {}
        for op in body:
            if op.name.startswith("tile.") and op.name not in ("tile.alloc", "tile.store") and not op.regions:
                for w in _reads_writes(op)[1]:
                    defs.setdefault(w.name, []).append(op)
        env = {index: sym.Sym("#")}

        def expr(x: Value, depth: int) -> Any:
            ops = defs.get(x.name, [])
            if depth > 16 or len(ops) > 1:
                return ("opaque", x.name, id(body))
            if not ops:
                return ("outer", x.name)
            op = ops[0]
            attrs = repr(sorted((k, _subst_attr(val, env)) for k, val in op.attrs.items()))
            if op.name == "tile.load":
                return ("load", self.base.get(op.operands[1].name, op.operands[1].name), attrs)
            return (op.name, attrs, _subst_type(x.type, env),
                    tuple(expr(r, depth + 1) for r in _reads_writes(op)[0]))

        return expr(v, 0)

    def rescale(self, loop: Op, upd: Op, m: Value, r: Value, acc: Value, expand: Op, cast: Op | None) -> Op:
        """Before A's max update: L *= exp(M - max(M_new, lowest)); B subtracts max(M_new, lowest).
        Clamping the max to the lowest finite float keeps a tile of -inf (a masked block) from
        giving -inf - -inf = NaN: its exp is then 0, as in the two-pass form."""
        self.count += 1
        ty = m.type
        new, safe, diff, alpha = (Value(f"_online{self.count}_{n}", ty) for n in ("max", "safe", "diff", "alpha"))
        ops = [Op("tile.alloc", [], {}, [v], [], upd.span) for v in (new, safe, diff, alpha)]
        lowest = LOWEST[(cast.operands[0] if cast else m).type.dtype]  # of the dtype B subtracts in
        ops += [Op("tile.maximum", [new, m, r], {}, [], [], upd.span),
                Op("tile.maximum", [safe, new], {"scalar": lowest}, [], [], upd.span),
                Op("tile.sub", [diff, m, safe], {}, [], [], upd.span),
                Op("tile.exp", [alpha, diff], {}, [], [], upd.span),
                Op("tile.mul", [acc, acc, alpha], {}, [], [], upd.span)]
        if cast is not None:
            narrow = Value(f"_online{self.count}_safe_{cast.operands[0].type.dtype}", cast.operands[0].type)
            ops += [Op("tile.alloc", [], {}, [narrow], [], cast.span),
                    Op("tile.cast", [narrow, safe], dict(cast.attrs), [], [], cast.span)]
            safe = narrow
        body = loop.regions[0]
        at = next(k for k, o in enumerate(body) if o is upd)
        body[at:at] = ops
        expand.operands = [expand.operands[0], safe]
        return loop

    @staticmethod
    def _readers(ops: list[Op]) -> dict[str, list[Op | None]]:
        out: dict[str, list[Op | None]] = {}
        for op in ops:
            for o in op.walk():
                if o.name.startswith("tile."):
                    for v in _reads_writes(o)[0]:
                        out.setdefault(v.name, []).append(o if o is op else None)
                else:
                    for v in o.operands:
                        out.setdefault(v.name, []).append(None)
        return out

    @staticmethod
    def _only(readers: dict[str, list[Op | None]], v: Value, name: str, index: int | None) -> Op | None:
        """The one op of the body that reads ``v``, if it is a ``name`` reading it at ``index``."""
        rs = readers.get(v.name, [])
        if len(rs) != 1 or rs[0] is None or rs[0].name != name:
            return None
        op = rs[0]
        if index is not None and (len(op.operands) <= index or op.operands[index] is not v):
            return None
        return op if index is not None or v in op.operands[1:] else None


def online_max_sum(func: Func, base: dict[str, str]) -> bool:
    o = _Online(func, base)
    func.body = o.region(func.body)
    return o.changed


# ------------------------------------------------------------------ clean-up


def _uses(func: Func) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in func.walk():
        for v in op.operands:
            counts[v.name] = counts.get(v.name, 0) + 1
    return counts


def sweep(func: Func) -> None:
    """Drop stores into workspaces nobody reads, tile ops whose result nobody reads, then unused
    workspaces and tiles, and grid loops left empty."""
    workspaces = {op.result.name for op in func.walk() if op.name == "alloc"}
    while True:
        readers: set[str] = set()
        tile_readers: set[str] = set()
        for op in func.walk():
            if op.name == "tile.store":
                tile_readers.add(op.operands[1].name)
                continue
            if op.name == "tile.load":
                readers.add(op.operands[1].name)
            elif op.name.startswith("tile."):
                tile_readers.update(v.name for v in _reads_writes(op)[0])
                readers.update(v.name for v in _gm_reads_writes(op)[0])
            else:
                readers.update(v.name for v in op.operands)
                tile_readers.update(v.name for v in op.operands)
        dead = workspaces - readers
        uses = _uses(func)

        def keep(op: Op, dead=dead, uses=uses, tile_readers=tile_readers) -> bool:
            if op.name == "tile.store" and op.operands[0].name in dead:
                return False
            if _gm_touching(op) and any(v.name in dead for v in _gm_reads_writes(op)[1]):
                return False  # a scatter into a workspace nobody reads
            if op.name == "alloc" and op.result.name in dead:
                return False
            if op.name == "tile.alloc" and uses.get(op.result.name, 0) == 0:
                return False
            if (op.name.startswith("tile.") and op.name not in ("tile.store", "tile.alloc") and op.operands
                    and not _gm_reads_writes(op)[1]
                    and all(w.name not in tile_readers for w in _reads_writes(op)[1])
                    and _reads_writes(op)[1]):
                return False  # computes a tile nobody reads
            if _is_grid(op) and not op.regions[0]:
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
        base = bases(f)
        drop_identity_casts(f)
        f.body = merge_loops(f.body, base)
        f.body = forward(f.body, {}, base)
        sweep(f)
        for _ in range(4):  # each round may expose another (a recomputed chain frees the next)
            if not rematerialise(f):
                break
            sweep(f)
            f.body = merge_loops(f.body, base)
            f.body = forward(f.body, {}, base)
            sweep(f)
        if carry_accumulators(f):
            f.body = forward(f.body, {}, base)
            sweep(f)
        f.body = hoist_broadcast_loads(f.body, base)
        cse(f)
        twin_accumulations(f, base)
        if online_max_sum(f, base):
            f.body = merge_loops(f.body, base)
            f.body = forward(f.body, {}, base)
            cse(f)
        if fold_reduction_inits(f):
            sweep(f)
        sweep(f)
        _, stores = _loads_and_stores(f.body)
        f.body = hoist_invariant(f.body, {name for name, _ in stores})
    return fresh


PASS = Pass("fuse", "tile", "tile", run, frozenset({"tiled"}), frozenset({"fused"}))
