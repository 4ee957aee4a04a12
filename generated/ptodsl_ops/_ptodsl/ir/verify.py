"""The IR verifier: structural invariants every pass must keep, checked after each pass in tests.

It checks that values are defined before use and not redefined, that each op belongs to the
module's level and has the operand kinds and attributes it needs, that tile shapes are static and
positive with one valid extent per dim, and that every symbol an expression uses is bound: a dim
of a parameter, a scalar parameter, an enclosing loop index, or a scalar read earlier.
"""

from __future__ import annotations

from .. import sym
from .core import Func, Module, Op, TensorType, TileType
from .opdefs import IR_OPS, LEVEL_OPS, NAME_ATTRS, TENSOR, TILE


class VerifyError(AssertionError):
    """A broken IR invariant; ``span`` is the source the offending op was compiled from, if known."""

    def __init__(self, message: str, span=None):
        super().__init__(message)
        self.span = span


def verify(module: Module) -> None:
    """Raise VerifyError describing the first broken invariant."""
    allowed = LEVEL_OPS.get(module.level)
    if allowed is None:
        raise VerifyError(f"unknown level {module.level!r}")
    names = set()
    for f in module.funcs:
        if f.name in names:
            raise VerifyError(f"function @{f.name} is defined twice")
        names.add(f.name)
        _Verifier(f, allowed, module.level).run()


class _Verifier:
    def __init__(self, func: Func, allowed: set[str], level: str):
        self.func = func
        self.allowed = allowed
        self.level = level
        self.defined: set[str] = set()
        self.symbols: set[str] = set()

    def fail(self, op: Op | None, msg: str) -> None:
        where = f" in @{self.func.name}"
        if op is not None:
            where += f" at {op.name}" + (f" ({op.span})" if op.span else "")
        raise VerifyError(msg + where, op.span if op is not None else None)

    def run(self) -> None:
        for p in self.func.params:
            if p.is_tensor:
                self.defined.add(p.name)
                for d in p.type.shape:
                    self.symbols |= sym.free_symbols(d)
            else:
                self.symbols.add(p.name)
        self.block(self.func.body)

    def exprs(self, op: Op, value) -> None:
        if isinstance(value, (tuple, list)):
            for v in value:
                self.exprs(op, v)
            return
        if isinstance(value, str):
            return
        missing = sym.free_symbols(value) - self.symbols
        if missing:
            self.fail(op, f"unbound symbol {', '.join(sorted(missing))}")

    def block(self, ops: list[Op]) -> None:
        for op in ops:
            self.op(op)

    def op(self, op: Op) -> None:
        if op.name not in self.allowed:
            self.fail(op, f"op {op.name} is not part of the {self.level} level")
        for attr in IR_OPS[op.name].required:
            if attr not in op.attrs:
                self.fail(op, f"missing attribute {attr!r}")
        for v in op.operands:
            if v.name not in self.defined:
                self.fail(op, f"%{v.name} is used before it is defined")
        for key, value in op.attrs.items():
            if key not in NAME_ATTRS:
                self.exprs(op, value)
        self.kinds(op)
        for r in op.results:
            if r.name in self.defined:
                self.fail(op, f"%{r.name} is defined twice")
            self.defined.add(r.name)
            t = r.type
            shape = t.shape
            for d in shape:
                self.exprs(op, d)
            if isinstance(t, TileType):
                if any(not isinstance(d, int) or d <= 0 for d in t.shape):
                    self.fail(op, f"tile %{r.name} needs a static positive shape, has {list(t.shape)}")
                if len(t.valid) != len(t.shape):
                    self.fail(op, f"tile %{r.name} has {len(t.valid)} valid extents for {len(t.shape)} dims")
                self.exprs(op, t.valid)
            elif t.valid is not None:
                if len(t.valid) != len(t.shape):
                    self.fail(op, f"tensor %{r.name} has {len(t.valid)} valid extents for {len(t.shape)} dims")
                self.exprs(op, t.valid)
        if op.name == "read":
            self.symbols.add(op.attrs["sym"])
        if op.name == "loop":
            saved = set(self.symbols)
            self.symbols.add(op.attrs["index"])
            if "unroll_var" in op.attrs:
                self.symbols.add(op.attrs["unroll_var"])
            if len(op.regions) != 1:
                self.fail(op, "a loop has one region")
            self.block(op.regions[0])
            self.symbols = saved
        elif op.name == "if":
            if len(op.regions) != 2:
                self.fail(op, "an if has a then and an else region")
            for region in op.regions:
                self.block(region)
        elif op.regions:
            self.fail(op, "only loop and if have regions")
        if len(op.regions) != IR_OPS[op.name].regions:
            self.fail(op, f"{op.name} has {IR_OPS[op.name].regions} regions, not {len(op.regions)}")

    def kinds(self, op: Op) -> None:
        """Operand kinds as the op's definition states them: tile ops take tiles (destination first),
        loads and stores pair a tile with a tensor, everything else takes tensors."""
        d = IR_OPS[op.name]
        want = d.operands if d.operands is not None else (d.rest,) * len(op.operands)
        kind = {TENSOR: TensorType, TILE: TileType}
        if len(want) != len(op.operands) or (d.dest is not None and not op.operands) or \
                any(not isinstance(v.type, kind[k]) for v, k in zip(op.operands, want)):
            got = ", ".join("tile" if isinstance(v.type, TileType) else "tensor" for v in op.operands)
            self.fail(op, f"wrong operand kinds ({got or 'none'})")
        if op.name == "tile.alloc":
            if len(op.results) != 1 or not isinstance(op.result.type, TileType):
                self.fail(op, "tile.alloc defines one tile")
            return
        if op.name in ("tile.load", "tile.store"):
            gm = op.operands[1] if op.name == "tile.load" else op.operands[0]
            if len(op.attrs["offsets"]) != gm.type.rank:
                self.fail(op, f"{len(op.attrs['offsets'])} offsets for a tensor of rank {gm.type.rank}")
