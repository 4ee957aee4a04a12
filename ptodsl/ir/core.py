"""The PTO IR: one generic op structure shared by the three levels (tensor, tile, block).

Like MLIR, every op has the same shape — results, operands, attributes, regions, a source span — and
the levels differ only in which ops they allow (see ``levels.py``). That keeps one printer, one
parser and one verifier for all of them. Scalars (dims, loop indices, scalar parameters, runtime
scalar reads) are symbols inside :mod:`ptodsl.sym` expressions, not SSA values; SSA values are
tensors (GM) and tiles (on-chip buffers).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..diagnostics import Span
from ..sym import Expr

SPACES = ("gm", "ub", "l1", "l0a", "l0b", "l0c", "bt")  # bt: the bias table a TMATMUL_BIAS reads


@dataclass(frozen=True)
class TensorType:
    """A GM tensor with a symbolic shape; ``valid`` is None when the whole shape is valid."""

    dtype: str
    shape: tuple[Expr, ...]
    valid: tuple[Expr, ...] | None = None

    @property
    def valid_shape(self) -> tuple[Expr, ...]:
        return self.shape if self.valid is None else self.valid

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class TileType:
    """An on-chip tile: static shape, symbolic valid shape, memory space."""

    space: str
    dtype: str
    shape: tuple[int, ...]
    valid: tuple[Expr, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


Type = TensorType | TileType


@dataclass(eq=False)
class Value:
    name: str
    type: Type

    def __repr__(self) -> str:
        return f"%{self.name}"


@dataclass(eq=False)
class Op:
    """``results = name(operands) {attrs} : result types region {...}* loc(...)``.

    Destination-passing ops (most tile ops) take their destination as the first operand and have
    no results, as pto-isa's instructions do.
    """

    name: str
    operands: list[Value] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    results: list[Value] = field(default_factory=list)
    regions: list[list[Op]] = field(default_factory=list)
    span: Span | None = None

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, self.name
        return self.results[0]

    def walk(self) -> Iterator[Op]:
        yield self
        for region in self.regions:
            for op in region:
                yield from op.walk()


@dataclass(eq=False)
class Param:
    """A kernel parameter: a tensor (SSA value) or a scalar (a symbol)."""

    name: str
    type: Type | None  # None for scalar parameters
    dtype: str
    mode: str = "in"  # in | out | inout (tensors); scalars are always in
    value: Value | None = None

    @property
    def is_tensor(self) -> bool:
        return self.type is not None


@dataclass(eq=False)
class Func:
    """A kernel (tensor/tile level), or a compute kernel / control program (block level)."""

    name: str
    params: list[Param]
    body: list[Op]
    kind: str = "kernel"  # kernel | vector | cube | control
    attrs: dict[str, Any] = field(default_factory=dict)
    span: Span | None = None

    def walk(self) -> Iterator[Op]:
        for op in self.body:
            yield from op.walk()

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


@dataclass(eq=False)
class Module:
    name: str
    level: str  # tensor | tile | block
    funcs: list[Func]
    attrs: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        from .printer import print_module

        return print_module(self)

    def clone(self) -> Module:
        """A deep copy sharing nothing mutable: passes never mutate their input. Types, spans and
        symbolic expressions are immutable and shared; values are copied once, so every use in
        the copy points at the copy's definition."""
        values: dict[int, Value] = {}

        def value(v: Value) -> Value:
            new = values.get(id(v))
            if new is None:
                new = values[id(v)] = Value(v.name, v.type)
            return new

        def op(o: Op) -> Op:
            attrs = {k: dict(a) if isinstance(a, dict) else list(a) if isinstance(a, list) else a
                     for k, a in o.attrs.items()}
            return Op(o.name, [value(x) for x in o.operands], attrs, [value(r) for r in o.results],
                      [[op(x) for x in region] for region in o.regions], o.span)

        def func(f: Func) -> Func:
            params = [Param(p.name, p.type, p.dtype, p.mode, None if p.value is None else value(p.value))
                      for p in f.params]
            return Func(f.name, params, [op(x) for x in f.body], f.kind, dict(f.attrs), f.span)

        return Module(self.name, self.level, [func(f) for f in self.funcs], dict(self.attrs))

    def func(self, name: str) -> Func | None:
        return next((f for f in self.funcs if f.name == name), None)

    def walk(self) -> Iterator[Op]:
        for f in self.funcs:
            yield from f.walk()
