"""GM regions a loop carries, kept on chip (Block IR -> Block IR).

Requires: a ``level block`` module from partitioning (tiles not yet placed).
Produces: in each compute kernel, for each loop of the user's that runs inside it (attention's KV
loop, in a row block's mixed kernel), every GM region that the loop's body touches only by loads
and stores of whole tiles of one type, at its top level, at offsets the loop does not move (the
running max, sum and output of a query block: ``m``, ``l``, ``acc``), is held in one tile ``T``
across the loop instead:

    loop j:  X = load W[O]; ...; Y = f(X, ...); store W[O] <- Y
becomes
    T = load W[O]  (if the loop runs);  loop j: ...; T = f(T, ...);  store W[O] <- T  (if it ran)

so the region crosses GM once per loop, not twice per iteration, and no iteration waits for the
previous one's store to land before loading it (on the NPU an MTE3 -> MTE2 round trip on the
critical path of every KV step). A region the body only loads (a read-only operand) is loaded
once, before the loop.

Legal when:
- every access to the region's tensor (any view of it, and any parameter a launch fills with a
  view of the same tensor, ``pipes.param_aliases``) inside the loop is one of those loads and
  stores, directly on the tensor or through plain views of a kernel parameter (offsets only, the
  rank kept: the view's offsets plus the access's are the region's), so nothing else in the body
  sees GM change less often;
- the loads' tiles are allocated in the body and written by nothing but their load, and the
  offsets and valid extents name nothing bound inside the loop;
- a region the body stores to is stored once, after every load of it in the body, from a UB tile
  of a float dtype, and no reader of a load's tile comes after the store: the loads' tiles
  become ``T`` itself, which holds what the iteration loaded until the store's place, and the
  stored value becomes ``T`` by renaming when its producers all come after the loads' last reader
  (the running sum ``l``), else by a copy (``T = Y * 1``, exact for floats) where the store was
  (the running max ``m``, whose old value is read after the new one is made);
- the loop may run no iteration, so the load before it and the store after it sit in loops of
  ``min(trips, 1)`` trips: the kernel touches the region exactly when the original did.

The kernel must still plan its memory, synchronise and fit its stack with ``T`` live across the
loop (``passes/trial.py``); a loop whose promotion would not is left as it is.
"""

from __future__ import annotations

import itertools

from .. import sym
from ..ir import Func, Module, Op, TensorType, TileType, Value
from ..ir.gm import walk_ops
from ..ir.opdefs import in_kernel_loop, indexed_gm
from . import stack, trial
from .context import Pass, PassContext
from .merge import at_most_once, reads_writes
from .persistent import KERNEL_KINDS
from .pipes import param_aliases
from .remat import bases

FLOATS = frozenset({"f32", "f16", "bf16"})


class _Kernel:
    def __init__(self, func: Func, aliases: dict[str, str]):
        self.held = 0  # regions held so far
        base = bases(func)
        self.root = lambda name: aliases.get(base.get(name, name), base.get(name, name))
        # plain views (offsets only, rank kept): name -> (source value, offsets)
        self.views = {op.result.name: (op.operands[0], op.attrs["offsets"]) for op in func.walk()
                      if op.name == "view" and set(op.attrs) == {"offsets"}
                      and op.result.type.rank == op.operands[0].type.rank}
        self.params = {p.name: p.value or Value(p.name, p.type) for p in func.params if p.is_tensor}
        taken = {v.name for op in func.walk() for v in (*op.operands, *op.results)}
        self.names = (f"_held{n}" for n in itertools.count() if f"_held{n}" not in taken)
        self.indices = (f"_once{n}" for n in itertools.count() if f"_once{n}" not in taken)

    def region(self, ops: list[Op]) -> list[Op]:
        out: list[Op] = []
        for op in ops:
            op.regions = [self.region(r) for r in op.regions]
            if op.name == "loop" and not in_kernel_loop(op) and op.attrs["step"] == 1 and not at_most_once(op):
                before, after = self.loop(op)
                out += [*before, op, *after]
            else:
                out.append(op)
        return out

    def loop(self, loop: Op) -> tuple[list[Op], list[Op]]:
        """Promote what ``loop`` carries (in place); the ops to put before and after it."""
        before: list[Op] = []
        after: list[Op] = []
        for root in self._candidates(loop):
            done = self._promote(loop, root)
            if done is not None:
                self.held += 1
                before += done[0]
                after = done[1] + after
        return before, after

    def absolute(self, v: Value, offsets: tuple) -> tuple[Value, tuple] | None:
        """``(tensor, offsets)`` of an access at ``offsets`` of ``v`` made on the kernel parameter
        ``v`` views through plain views, or None (a reshape, a strided view, a workspace)."""
        while v.name in self.views:
            v, at = self.views[v.name]
            offsets = tuple(sym.add(a, b) for a, b in zip(at, offsets))
        return (self.params[v.name], offsets) if v.name in self.params else None

    def _candidates(self, loop: Op) -> list[str]:
        """Tensors touched in ``loop`` only by top-level loads and stores of themselves (directly or
        through plain views of parameters)."""
        body = loop.regions[0]
        top = {id(op) for op in body}
        seen: dict[str, bool] = {}
        for o in walk_ops(body):
            if o.name == "view":
                continue  # an address, not an access
            for v in o.operands:
                if not isinstance(v.type, TensorType):
                    continue
                root = self.root(v.name)
                direct = v.name == root or (v.name in self.views and self.root(v.name) == root
                                            and root in self.params)
                plain = o.name in ("tile.load", "tile.store") and id(o) in top and direct and \
                    not any(indexed_gm(o))
                seen[root] = seen.get(root, True) and plain
        return [r for r, ok in seen.items() if ok]

    def _promote(self, loop: Op, root: str) -> tuple[list[Op], list[Op]] | None:
        body = loop.regions[0]
        at = [i for i, op in enumerate(body) if op.name in ("tile.load", "tile.store") and
              any(isinstance(v.type, TensorType) and self.root(v.name) == root for v in op.operands)]
        ops = [body[i] for i in at]
        tiles = [op.operands[0] if op.name == "tile.load" else op.operands[1] for op in ops]
        ttype = tiles[0].type
        gm = [op.operands[1] if op.name == "tile.load" else op.operands[0] for op in ops]
        places = [(v, op.attrs["offsets"]) if v.name == root else self.absolute(v, op.attrs["offsets"])
                  for v, op in zip(gm, ops)]
        if any(p is None for p in places):
            return None
        tensor, offsets = places[0]
        if any(p[0].name != tensor.name for p in places):
            return None  # two parameters a launch fills with views of one tensor: regions apart
        # (a view made in the body at offsets it binds names them in the absolute offsets)
        bound = {loop.attrs["index"]} | {o.attrs["index"] for o in walk_ops(body) if o.name == "loop"} | \
            {o.attrs["sym"] for o in walk_ops(body) if o.name == "read"}
        if any(t.type != ttype or not _same(p[1], offsets) for t, p in zip(tiles, places)) or \
                any(sym.free_symbols(x) & bound for x in (*offsets, *ttype.valid)):
            return None
        loads = [i for i, op in zip(at, ops) if op.name == "tile.load"]
        stores = [i for i, op in zip(at, ops) if op.name == "tile.store"]
        loaded = {body[i].operands[0].name for i in loads}
        writers = _writers(body)
        allocated = {op.result.name for op in body if op.name == "tile.alloc"}
        if any(writers.get(x, []) != [i] or x not in allocated
               for i, x in zip(loads, (body[i].operands[0].name for i in loads))):
            return None  # a loaded tile written by something else, or one that lives past the body
        if stores and (len(stores) != 1 or stores[0] < max(loads, default=-1) or ttype.space != "ub" or
                       ttype.dtype not in FLOATS):
            return None
        last_read = max((i for i, op in enumerate(body) if i not in loads and
                         any(v.name in loaded for o in op.walk() for v in o.operands)), default=-1)
        if stores and last_read > stores[0]:
            return None  # a load's tile is still read after the store: T would change under it
        held = Value(next(self.names), ttype)
        rename = {x: held for x in loaded}
        body_out = [op for i, op in enumerate(body) if i not in loads and i not in stores]
        copy: Op | None = None
        if stores:
            store = body[stores[0]]
            y = store.operands[1]
            ws = writers.get(y.name, [])
            if y.name in allocated and ws and min(ws) > last_read and max(ws) < stores[0] and y.name not in loaded and \
                    not any(y.name in _names(op) for op in body[stores[0] + 1:]):
                rename[y.name] = held
            else:
                copy = Op("tile.mul", [held, y], {"scalar": 1.0}, span=store.span)
        gone = set(rename)
        kept: list[Op] = []
        for op in body_out:
            if not (op.name == "tile.alloc" and op.result.name in gone):
                kept.append(op)
        if copy is not None:
            # the copy stands where the store stood: after everything before it in the body
            position = sum(1 for i, op in enumerate(body) if i < stores[0] and i not in loads and not (
                op.name == "tile.alloc" and op.result.name in gone))
            kept.insert(position, copy)
        for op in kept:
            for o in op.walk():
                o.operands = [rename.get(v.name, v) for v in o.operands]
        loop.regions[0] = kept
        span = ops[0].span
        trips = sym.min_(sym.sub(loop.attrs["hi"], loop.attrs["lo"]), 1)
        before = [Op("tile.alloc", [], {}, [held], span=span)]
        if loads and (not stores or loads[0] < stores[0]):
            before.append(self._once(trips, Op("tile.load", [held, tensor], {"offsets": offsets}, span=span)))
        after = [self._once(trips, Op("tile.store", [tensor, held], {"offsets": offsets},
                                      span=body[stores[0]].span))] if stores else []
        return before, after

    def _once(self, trips: sym.Expr, op: Op) -> Op:
        """``op`` in a loop that runs once when the promoted loop runs at all."""
        index = next(self.indices)
        return Op("loop", [], {"index": index, "lo": 0, "hi": trips, "step": 1, "name": index, "kind": "grid"},
                  [], [[op]], op.span)


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(sym.sub(x, y) == 0 for x, y in zip(a, b))


def _writers(body: list[Op]) -> dict[str, list[int]]:
    """Tile name -> positions in ``body`` of the top-level ops writing it (anywhere inside them)."""
    out: dict[str, list[int]] = {}
    for i, op in enumerate(body):
        for o in op.walk():
            if o.name.startswith("tile.") and o.name not in ("tile.alloc", "tile.store"):
                for w in reads_writes(o)[1]:
                    if isinstance(w.type, TileType):
                        out.setdefault(w.name, []).append(i)
    return out


def _names(op: Op) -> set[str]:
    return {v.name for o in op.walk() for v in o.operands}


def promote_kernel(func: Func, aliases: dict[str, str], ctx: PassContext, strided: set[str]) -> Func:
    """``func`` with its carried regions held on chip, where it then still compiles."""
    tried = Module("promote", "block", [func]).clone().funcs[0]
    kernel = _Kernel(tried, aliases)
    tried.body = kernel.region(tried.body)
    if not kernel.held or not trial.compiles(tried, ctx, strided):
        return func
    return tried


def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()  # passes never mutate their input
    aliases = param_aliases(fresh)
    strided = stack.strided_params(fresh)
    funcs = [promote_kernel(f, aliases.get(f.name, {}), ctx,
                            stack.every_tensor(f) if strided is None else strided.get(f.name, set()))
             if f.kind in KERNEL_KINDS else f for f in fresh.funcs]
    return Module(fresh.name, fresh.level, funcs, dict(fresh.attrs))


PASS = Pass("promote", "block", "block", run, frozenset({"partitioned"}), frozenset({"promoted"}))

__all__ = ["PASS", "promote_kernel", "run"]
