"""Loop-invariant cube operands (Tile IR -> Tile IR): a matmul operand that every iteration of a
user loop loads again from the same place is loaded once, above the loop, and stays in L1.

Requires: a ``level tile`` module after row interchange (``passes/rowgrid.py``), where attention's
KV loop runs inside each query block and loads the block's query tile in every KV iteration.
Produces: the same module where, for each sequential loop of the user's inside a row block loop
(``rows_interchanged``), every ``tile.load`` at the top level
of its body that

- fills an L1 tile allocated at the top level of the body and written by nothing else,
- reads a GM tensor nothing in the function writes (an input: no iteration can change it),
- through a value defined outside the loop, at offsets and valid extents that name nothing the
  loop binds (its index, the indices of loops inside it, values read inside it),

moves with its allocation to just before the loop. Likewise out of a grid loop inside such a user
loop (an output column loop of a product), a load of a tensor the function writes, but not that
grid loop: flash attention's probabilities, which the vector cores store every KV block, are loaded
once per KV block rather than once per column tile of their product with v; the load stays in the
user loop's iteration, after the store that made its data. A loop that may run no iteration (flash
attention's middle KV blocks when there are two blocks or fewer) gets the load under ``if (hi >
lo)``: the original program loads nothing then, and the region need not exist. Loads move only
while the loop's L1 tiles, counted twice (double buffering may give each two buffers), and the
tiles already kept fit the target's L1; the memory plan still checks the result.

Why only inside a row block loop: partitioning keeps such a loop whole, one kernel (a mixed one
for attention, ``passes/persistent.py``), so the load above the inner loop lands in the kernel
that runs the loop; at the top of a function it could land in another kernel than the loop's.

Why not out of a ``parallel`` loop: blocks share such a loop out when it is a kernel's whole
body (``passes/blocks.py``); a load above it would keep the kernel on one core.

Why L1 only: L1 is the cube core's large buffer (512 KiB on 910B) and holds a whole query tile
beside the KV loop's operands; the UB's budget is the vector kernels' and tight, so keeping a
vector tile live across a loop could push a plan over it.
"""

from __future__ import annotations

from .. import sym
from ..ir import Func, Module, Op, TileType
from ..ir.gm import walk_ops
from ..ir.opdefs import indexed_gm
from .context import Pass, PassContext
from .memplan import tile_bytes
from .merge import tile_write_counts
from .parallel import is_user_loop, origins_of
from .persistent import bound_within


def _free(op: Op, tile: TileType) -> set[str]:
    out: set[str] = set()
    for e in [*op.attrs.get("offsets", ()), *tile.valid]:
        if not sym.is_const(e):
            out |= sym.free_symbols(e)
    return out


class _Hoister:
    def __init__(self, func: Func, l1_bytes: int, block_bytes: int):
        self.origins = origins_of(func) or {}
        self.writes = tile_write_counts(func)
        self.written = self._written_in(func)
        self.l1_bytes = l1_bytes
        self.block_bytes = block_bytes  # the unit a tile's rows are padded to (memplan.tile_bytes)
        self.kept = 0  # bytes of L1 tiles already moved out of loops (live across them)
        # a kernel runs only with every dim at least 1 (a zero dim is refused or computes nothing,
        # ptodsl.inputs.check_empty): a grid loop over cdiv(D, 64) runs at least once
        self.dims = {s: (1, None) for p in func.params if p.is_tensor for d in p.type.shape
                     for s in sym.free_symbols(d)}

    def size(self, t: TileType) -> int:
        return tile_bytes(t, self.block_bytes)

    def block(self, ops: list[Op], in_rows: bool = False, in_user: bool = False,
              ranges: dict[str, sym.Bounds] | None = None) -> list[Op]:
        """``ranges``: the indices of the loops around ``ops``, each within its loop's bounds."""
        ranges = ranges or {}
        out: list[Op] = []
        for op in ops:
            inner = in_rows or bool(op.name == "loop" and op.attrs.get("rows_interchanged"))
            user = in_user or bool(in_rows and op.name == "loop" and is_user_loop(op))
            within = ranges
            if op.name == "loop" and op.attrs["step"] == 1:
                within = ranges | {op.attrs["index"]: sym.body_range(op.attrs["lo"], op.attrs["hi"])}
            op.regions = [self.block(r, inner, user, within) for r in op.regions]
            if in_rows and op.name == "loop" and is_user_loop(op) and op.attrs.get("parallel") != 1:
                out.extend(self.hoist(op, ranges=ranges))
            elif in_user and op.name == "loop" and op.attrs.get("kind") == "grid":
                out.extend(self.hoist(op, self._written_in(op), ranges))
            out.append(op)
        return out

    def _written_in(self, where: Func | Op) -> set[str]:
        """The GM roots the ops of ``where`` (a function, a loop) store to."""
        out: set[str] = set()
        for op in where.walk():
            stored = [op.operands[0]] if op.name == "tile.store" else list(indexed_gm(op)[1])
            out |= {self.origins[v.name].root if v.name in self.origins else v.name for v in stored}
        return out

    def hoist(self, loop: Op, written: set[str] | None = None, ranges: dict[str, sym.Bounds] | None = None) -> list[Op]:
        """``written``: the roots a load may not read, by default every root the function writes
        (a load out of a grid loop inside a user loop may read what the function writes, but not
        what the grid loop does: it stays in the user loop's iteration). ``ranges``: those of the
        loops around ``loop``, which may prove it runs (a middle KV block's column tiles: the block
        is whole), so that the load needs no guard and can move on out of the loop around."""
        written = self.written if written is None else written
        body = loop.regions[0]
        bound = bound_within(loop)
        defined = {r.name for op in walk_ops(body) for r in op.results}
        allocs = {op.result.name: op for op in body if op.name == "tile.alloc"}
        # every L1 tile of the loop, nested ones too (a K loop's), counted twice for double buffering
        room = self.l1_bytes - self.kept - 2 * sum(self.size(a.result.type) for a in walk_ops(body)
                                                     if a.name == "tile.alloc" and a.result.type.space == "l1")
        moved: list[Op] = []
        for op in body:
            if op.name != "tile.load":
                continue
            dst, src = op.operands
            t = dst.type
            origin = self.origins.get(src.name)
            if (dst.name not in allocs or t.space != "l1" or self.writes.get(dst.name) != 1
                    or origin is None or origin.root in written or src.name in defined
                    or _free(op, t) & bound or self.size(t) > room):
                continue
            room -= self.size(t)
            self.kept += self.size(t)
            moved += [allocs[dst.name], op]
        if not moved:
            return []
        gone = {id(o) for o in moved}
        loop.regions[0] = [o for o in body if id(o) not in gone]
        lo, hi = loop.attrs["lo"], loop.attrs["hi"]
        trips = sym.sub(hi, lo)
        if isinstance(trips, int) and trips >= 1 or sym.prove_le(1, trips, self.dims | (ranges or {})):
            return moved
        cond = sym.compare(">", hi, lo)
        return [o for o in moved if o.name == "tile.alloc"] + [
            Op("if", [], {"cond": cond}, [], [[o for o in moved if o.name != "tile.alloc"], []], loop.span)]


def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()
    for f in fresh.funcs:
        f.body = _Hoister(f, ctx.target.l1_bytes, ctx.target.ub_block_bytes).block(f.body)
    return fresh


PASS = Pass("licm", "tile", "tile", run, frozenset({"rows-interchanged"}), frozenset({"invariant-hoisted"}))

__all__ = ["PASS", "run"]
