"""Fused vector instructions (Tile IR -> Tile IR): fewer instructions for the same results.

Requires: a fused ``level tile`` module (after ``fuse``, whose analyses see only the language's
tile ops and ``tile.expand``).
Produces: where the target has the instruction for the dtype (its ``vector_instructions``), in
each straight-line region:
  1. a broadcast (``tile.expand``) whose every reader is a binary op (add, sub, mul, div, maximum,
     minimum) becomes part of each reader: ``tile.rowexpand_<op>`` when it spreads one value per
     row (TROWEXPAND<OP>), ``tile.colexpand_<op>`` when it spreads one row (TCOLEXPAND<OP>), and
     the broadcast tile is gone: softmax's ``x - max`` is one instruction, not a TROWEXPAND and a
     TSUB over a whole tile;
  2. a broadcast subtraction whose only reader is an ``exp`` becomes ``tile.<row|col>expand_expdif``
     (exp(x - y), TROWEXPANDEXPDIF / TCOLEXPANDEXPDIF);
  3. ``t = a * b`` read only by ``d = t + c`` becomes one multiply-add into the tile that dies
     there: ``tile.muladddst(c, a, b)`` (TMULADDDST, c = a * b + c) when ``c`` is read nowhere else
     (or is ``d`` itself, an accumulation), else ``tile.fusedmuladd(a, b, c)`` (TFUSEDMULADD,
     a = b * a + c) when ``a`` (or ``b``) is; later readers of ``d`` read that tile.
Every fused op computes what the ops it replaces computed, each intermediate rounded to the tile's
dtype (the A2/A3 implementations run those instructions in sequence; for the multiply-adds,
pto-isa's headers do not say whether vmla and vmadd round the product, and its CPU simulation
has neither: ptodsl rounds it, as TMUL then TADD), so results are bitwise those of the unfused form on the simulator and the CPU backend.
``pass_options: {fused_ops: false}`` keeps the unfused form; the multiply-adds (3.) are opt-in,
``pass_options: {multiply_add: true}``: pto-isa's CPU simulation implements neither, so a kernel
with one builds only against ptodsl's own CPU header and for the NPU (a case run against a
pto-isa checkout skips, ``backends/cpp/run.unbuildable_reason``).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from .. import sym
from ..dtypes import itemsize
from ..ir import Func, Module, Op, TileType, Value
from ..ir.opdefs import EXPAND_SUFFIX, FUSED
from ..ir.schedule import schedule_of
from ..schedule import PASS_OPTION_DEFAULTS
from ..targets import Target
from .context import Pass, PassContext
from .merge import reads_writes

BINARY = tuple(k for k in EXPAND_SUFFIX if k != "expdif")


@dataclass
class _Counts:
    reads: dict[str, int]
    writes: dict[str, int]


def _counts(func: Func) -> _Counts:
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    for op in func.walk():
        if op.name.startswith("tile.") and op.name != "tile.alloc":
            r, w = reads_writes(op)
            for v in r:
                reads[v.name] = reads.get(v.name, 0) + 1
            for v in w:
                writes[v.name] = writes.get(v.name, 0) + 1
        else:
            for v in op.operands:
                reads[v.name] = reads.get(v.name, 0) + 1
    return _Counts(reads, writes)


def _rows_cols(shape) -> tuple[int, int]:
    return prod(shape[:-1]), shape[-1]


def _valid_rows(t: TileType) -> sym.Expr:
    rows: sym.Expr = 1
    for d, v in zip(t.shape[:-1], t.valid[:-1]):
        rows = sym.mul(rows, 1 if d == 1 else v)
    return rows


def _spread_kind(dst: TileType, src: TileType) -> str | None:
    """How ``tile.expand(dst, src)`` spreads: ``row`` (one value per row), ``col`` (one row), or
    None (a single value over rows and columns, or something else)."""
    (rd, cd), (rs, cs) = _rows_cols(dst.shape), _rows_cols(src.shape)
    if rs == 1 and cs == cd and src.rank <= dst.rank and src.valid[-1] == dst.valid[-1]:
        return "col"
    if rs == rd and cs == 1 and cd != 1 and src.rank == dst.rank and _valid_rows(src) == _valid_rows(dst):
        return "row"
    return None


def _block_elems(target: Target, dtype: str) -> int:
    return target.ub_block_bytes // itemsize(dtype)


def _takes(target: Target, instruction: str, t: TileType) -> bool:
    """The target has ``instruction`` for ``t``'s dtype, and a tile of ``t``'s shape fits what its
    implementation counts in 8-bit fields (``max_repeats``)."""
    rule = target.vector_rule(instruction)
    if rule is None or not rule.takes(t.dtype):
        return False
    rows, cols = _rows_cols(t.shape)
    if rule.max_repeats is not None and rows > 1:
        blocks = -(-cols * itemsize(t.dtype) // target.ub_block_bytes)
        return rows <= rule.max_repeats and blocks <= rule.max_repeats
    return True


class _Fuser:
    def __init__(self, func: Func, target: Target, multiply_add: bool):
        self.func = func
        self.target = target
        self.multiply_add = multiply_add
        self.counts = _counts(func)
        self.rename: dict[str, Value] = {}
        self.changed = False

    def run(self) -> bool:
        self.func.body = self.region(self.func.body)
        if self.rename:
            for op in self.func.walk():
                op.operands = [self._renamed(v) for v in op.operands]
        return self.changed

    def _renamed(self, v: Value) -> Value:
        while v.name in self.rename:
            v = self.rename[v.name]
        return v

    def region(self, ops: list[Op]) -> list[Op]:
        for op in ops:
            op.regions = [self.region(r) for r in op.regions]
        ops = self.casts_first(ops)
        ops = self.broadcasts(ops)
        ops = self.expdifs(ops)
        return self.multiply_adds(ops) if self.multiply_add else ops

    # ------------------------------------------------------------------ 0. a broadcast's cast first
    def casts_first(self, ops: list[Op]) -> list[Op]:
        """``expand(e, p); cast(c, e)`` with ``e`` read only there converts each value once before
        spreading it (``cast(p2, p); expand(c, p2)``): the same values, a small cast instead of a
        whole tile's, and the broadcast next to the op that reads it, where it fuses."""
        out: list[Op] = []
        pending: dict[str, int] = {}  # expanded tile -> its expand's index in out
        for op in ops:
            if op.name == "tile.expand" and self.counts.writes.get(op.operands[0].name) == 1 \
                    and self.counts.reads.get(op.operands[0].name) == 1:
                pending[op.operands[0].name] = len(out)
            elif op.name == "tile.cast" and op.operands[1].name in pending:
                k = pending.pop(op.operands[1].name)
                c, e = op.operands
                p = out[k].operands[1]
                if c.type.valid == e.type.valid and not any(
                        w.name == p.name for o in out[k + 1:] for x in o.walk() if x.name.startswith("tile.")
                        for w in reads_writes(x)[1]):
                    p2 = Value(self._fresh(), TileType(p.type.space, c.type.dtype, p.type.shape, p.type.valid))
                    out[k] = Op("tile.alloc", [], {}, [p2], span=out[k].span)
                    out.append(Op("tile.cast", [p2, p], dict(op.attrs), span=op.span))
                    op = Op("tile.expand", [c, p2], {}, span=out[k].span)
                    self.counts.writes[p2.name] = self.counts.reads[p2.name] = 1
                    self.changed = True
            out.append(op)
        return out

    def _fresh(self) -> str:
        if not hasattr(self, "_names"):
            self._names = {v.name for op in self.func.walk() for v in [*op.operands, *op.results]}
            self._next = 0
        while f"_c{self._next}" in self._names:
            self._next += 1
        self._names.add(f"_c{self._next}")
        return f"_c{self._next}"

    # ------------------------------------------------------------------ 1. broadcasts into binary ops
    def broadcasts(self, ops: list[Op]) -> list[Op]:
        drop: set[int] = set()
        replace: dict[int, Op] = {}
        for i, op in enumerate(ops):
            if op.name != "tile.expand":
                continue
            e, p = op.operands
            kind = _spread_kind(e.type, p.type)
            if kind is None or self.counts.writes.get(e.name) != 1:
                continue
            readers = [(j, o) for j, o in enumerate(ops[i + 1:], i + 1) if any(v.name == e.name for v in o.operands)]
            if len(readers) != self.counts.reads.get(e.name, 0) or not readers:
                continue  # read outside this region, or not at all
            if any(j in replace for j, _ in readers):
                continue  # a reader already takes another broadcast (x[:, :1] * y[:1, :]): one per instruction
            if self._written_between(ops, i, readers[-1][0], p):
                continue
            fused = [self._fuse_reader(o, e, p, kind) for _, o in readers]
            if any(f is None for f in fused):
                continue
            drop.add(i)
            for (j, _), f in zip(readers, fused):
                replace[j] = f
            self.counts.reads[p.name] = self.counts.reads.get(p.name, 0) + len(readers) - 1
            self.changed = True
        return [replace.get(j, o) for j, o in enumerate(ops) if j not in drop]

    def _fuse_reader(self, o: Op, e: Value, p: Value, kind: str) -> Op | None:
        name = o.name.removeprefix("tile.")
        if name not in BINARY or "scalar" in o.attrs or len(o.operands) != 3:
            return None
        d, x, y = o.operands
        first = x.name == e.name
        if d.name == e.name or first == (y.name == e.name):
            return None
        full = y if first else x
        if full.type != d.type or e.type != d.type:
            return None  # the instructions find their full operand by its valid shape: it is dst's
        fused = f"tile.{kind}expand_{name}"
        if not _takes(self.target, FUSED[fused].instruction, d.type):
            return None
        if kind == "row" and (first or _rows_cols(d.type.shape)[0] != 1) and \
                not _takes(self.target, "TROWEXPAND", d.type):
            return None  # the per-row operand goes in blocks, which a TROWEXPAND fills
        return Op(fused, [d, p, y] if first else [d, x, p], {}, span=o.span)

    @staticmethod
    def _written_between(ops: list[Op], i: int, j: int, v: Value) -> bool:
        return any(w.name == v.name for o in ops[i + 1:j] for x in o.walk() if x.name.startswith("tile.")
                   for w in reads_writes(x)[1])

    # ------------------------------------------------------------------ 2. exp of a broadcast difference
    def expdifs(self, ops: list[Op]) -> list[Op]:
        producer: dict[str, int] = {}
        drop: set[int] = set()
        out = list(ops)
        for j, op in enumerate(ops):
            if op.name in ("tile.rowexpand_sub", "tile.colexpand_sub"):
                producer[op.operands[0].name] = j
                continue
            if op.name != "tile.exp":
                continue
            d, s = op.operands
            i = producer.get(s.name)
            if i is None or self.counts.reads.get(s.name) != 1 or self.counts.writes.get(s.name) != 1:
                continue
            sub = ops[i]
            fused = sub.name.replace("_sub", "_expdif")
            _, x, y = sub.operands
            if d.type != s.type or not _takes(self.target, FUSED[fused].instruction, d.type) or \
                    self._written_between(ops, i, j, x) or self._written_between(ops, i, j, y):
                continue
            out[j] = Op(fused, [d, x, y], {}, span=op.span)
            drop.add(i)
            self.changed = True
        return [o for j, o in enumerate(out) if j not in drop]

    # ------------------------------------------------------------------ 3. multiply-adds
    def multiply_adds(self, ops: list[Op]) -> list[Op]:
        product: dict[str, int] = {}
        defined = {o.result.name for o in ops if o.name == "tile.alloc"}
        drop: set[int] = set()
        out = list(ops)
        for j, op in enumerate(ops):
            if op.name == "tile.mul" and "scalar" not in op.attrs:
                product[op.operands[0].name] = j
                continue
            if op.name != "tile.add" or "scalar" in op.attrs:
                continue
            d, u, v = op.operands
            for t, c in ((u, v), (v, u)):
                i = product.get(t.name)
                if i is None or i in drop or t.name == c.name:
                    continue
                fused = self._multiply_add(ops, i, j, d, t, c, defined)
                if fused is not None:
                    out[j] = fused
                    drop.add(i)
                    self.changed = True
                    break
        return [o for j, o in enumerate(out) if j not in drop]

    def _multiply_add(self, ops: list[Op], i: int, j: int, d: Value, t: Value, c: Value,
                      defined: set[str]) -> Op | None:
        _, a, b = ops[i].operands
        if self.counts.reads.get(t.name) != 1 or self.counts.writes.get(t.name) != 1 or \
                t.name in (a.name, b.name, d.name):
            return None
        if not all(x.type == d.type for x in (t, a, b, c)) or a.name == b.name:
            return None
        if any(self._written_between(ops, i, j, x) for x in (a, b)):
            return None

        def dies_here(x: Value, reads: int) -> bool:
            # read only by the fused ops, written once, and a tile of this region (not carried
            # into the next iteration of a loop around it)
            return (x.name in defined and self.counts.reads.get(x.name) == reads
                    and self.counts.writes.get(x.name) == 1 and x.name != d.name)

        if c.name == d.name:  # d = a * b + d: an accumulation in place
            if _takes(self.target, "TMULADDDST", d.type):
                return Op("tile.muladddst", [d, a, b], {}, span=ops[j].span)
            return None
        if self.counts.writes.get(d.name) != 1:
            return None
        if dies_here(c, 1) and _takes(self.target, "TMULADDDST", d.type):
            self.rename[d.name] = c
            return Op("tile.muladddst", [c, a, b], {}, span=ops[j].span)
        for acc, other in ((a, b), (b, a)):
            if dies_here(acc, 1) and _takes(self.target, "TFUSEDMULADD", d.type):
                self.rename[d.name] = acc
                return Op("tile.fusedmuladd", [acc, other, c], {}, span=ops[j].span)
        return None


def _sweep_allocs(func: Func) -> None:
    """Tiles nobody names any more (a broadcast's, a product's, a renamed sum's) lose their alloc."""
    used = {v.name for op in func.walk() for v in op.operands}

    def region(ops: list[Op]) -> list[Op]:
        out = []
        for op in ops:
            if op.name == "tile.alloc" and op.result.name not in used:
                continue
            op.regions = [region(r) for r in op.regions]
            out.append(op)
        return out

    func.body = region(func.body)


def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()  # passes never mutate their input
    options = {**PASS_OPTION_DEFAULTS, **schedule_of(module).pass_options}
    if not options["fused_ops"]:
        return fresh
    for f in fresh.funcs:
        if _Fuser(f, ctx.target, bool(options["multiply_add"])).run():
            _sweep_allocs(f)
    return fresh


PASS = Pass("fusedops", "tile", "tile", run, frozenset({"fused"}), frozenset({"fused-ops"}))
