"""The IR verifier: structural invariants every pass must keep, checked after each pass in tests.

It checks that values are defined before use and not redefined, that each op belongs to the
module's level and fits its declaration in ``opdefs.py`` (operand count and kinds, results,
attributes, regions and the declared type rules), that tile shapes are static and positive with one
valid extent per dim, and that every symbol an expression uses is bound: a dim of a parameter, a
scalar parameter, an enclosing loop index, or a scalar read earlier.
"""

from __future__ import annotations

from .. import sym
from .core import Func, Module, Op, TileType
from .opdefs import FUNC_ATTRS, IR_OPS, LEVEL_OPS, NAME_KINDS, launched_params


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
        _check_func_attrs(f)
        _Verifier(f, allowed, module.level).run()
    kernels = {f.name: f for f in module.funcs if f.kind in ("vector", "cube", "mixed")}
    for f in module.funcs:
        for op in f.walk():
            if op.name == "launch":
                _check_launch(f, op, kernels)


def _check_func_attrs(func: Func) -> None:
    """Declared function attributes (``opdefs.FUNC_ATTRS``) sit on the kinds of function they are
    declared for, and those naming a parameter name a distinct scalar parameter of the function."""
    named: dict[str, str] = {}
    for key, value in func.attrs.items():
        decl = FUNC_ATTRS.get(key)
        if decl is None:
            continue
        where = f" in @{func.name}"
        if func.kind not in decl.kinds:
            raise VerifyError(f"attribute {key} on a {func.kind} function; it belongs on {' or '.join(decl.kinds)} "
                              "functions" + where, func.span)
        if decl.param:
            p = func.param(value) if isinstance(value, str) else None
            if p is None or p.is_tensor:
                raise VerifyError(f"attribute {key} = {value!r} names no scalar parameter" + where, func.span)
            if value in named:
                raise VerifyError(f"attributes {named[value]} and {key} name the same parameter {value}" + where,
                                  func.span)
            named[value] = key


def _check_launch(func: Func, op: Op, kernels: dict[str, Func]) -> None:
    """A launch passes each tensor and scalar parameter of the kernel it starts, in order."""
    kernel = kernels.get(op.attrs["kernel"])
    where = f" in @{func.name} at launch" + (f" ({op.span})" if op.span else "")
    if kernel is None:
        raise VerifyError(f"launch of @{op.attrs['kernel']}, which is no compute kernel of the module" + where, op.span)
    tensors = [p for p in kernel.params if p.is_tensor]
    scalars = launched_params(kernel)
    if len(tensors) != len(op.operands) or len(scalars) != len(op.attrs["scalars"]):
        raise VerifyError(f"launch of @{kernel.name} passes {len(op.operands)} tensors and {len(op.attrs['scalars'])} "
                          f"scalars for {len(tensors)} and {len(scalars)}" + where, op.span)
    for p, v in zip(tensors, op.operands):
        if p.type.dtype != v.type.dtype or p.type.rank != v.type.rank:
            raise VerifyError(f"launch of @{kernel.name} passes %{v.name} ({v.type.dtype}, rank {v.type.rank}) "
                              f"for {p.name} ({p.type.dtype}, rank {p.type.rank})" + where, op.span)


class _Verifier:
    def __init__(self, func: Func, allowed: frozenset[str], level: str):
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
        used = sym.symbols_in(value)
        if not used <= self.symbols:
            self.fail(op, f"unbound symbol {', '.join(sorted(used - self.symbols))}")

    def block(self, ops: list[Op]) -> None:
        for op in ops:
            self.op(op)

    def op(self, op: Op) -> None:
        if op.name not in self.allowed:
            self.fail(op, f"op {op.name} is not part of the {self.level} level")
        d = IR_OPS[op.name]
        problem = d.check(op)
        if problem is not None:
            self.fail(op, f"{op.name} {problem}")
        for v in op.operands:
            if v.name not in self.defined:
                self.fail(op, f"%{v.name} is used before it is defined")
        for key, value in op.attrs.items():
            if d.attr(key).kind not in NAME_KINDS:
                self.exprs(op, value)
        for r in op.results:
            if r.name in self.defined:
                self.fail(op, f"%{r.name} is defined twice")
            self.defined.add(r.name)
            t = r.type
            for dim in t.shape:
                self.exprs(op, dim)
            if isinstance(t, TileType):
                if any(not isinstance(dim, int) or dim <= 0 for dim in t.shape):
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
            self.block(op.regions[0])
            self.symbols = saved
        else:
            for region in op.regions:
                self.block(region)
