"""What the checker knows about each expression, for the lowering that follows it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import sym
from ..diagnostics import Span
from ..frontend import ast
from ..frontend.spec import variant_name


@dataclass(frozen=True)
class TensorTy:
    dtype: str
    shape: tuple[sym.Expr, ...]
    valid: tuple[sym.Expr, ...] | None = None  # None: the whole shape is valid

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def valid_shape(self) -> tuple[sym.Expr, ...]:
        return self.shape if self.valid is None else self.valid


@dataclass(frozen=True)
class ScalarTy:
    dtype: str
    weak: bool = False  # a literal or an index: takes the dtype of the tensor it meets
    # ``/`` of integers is true division (a float), but where an integer is needed (a loop bound, a
    # shape) such a value stands for the integer it equals; see :func:`ptodsl.sym.as_integer`.
    ratio: bool = False


INDEX = "i64"  # the dtype of dims, loop indices and integer literals


@dataclass(frozen=True)
class DtypeTy:
    """A dtype used as a value, as in ``cast(x, f32)``."""

    dtype: str


Ty = TensorTy | ScalarTy | DtypeTy


@dataclass
class Binding:
    """What a name refers to at one point of the kernel."""

    name: str
    kind: str  # param | local | value | view | index | scalar | symbol
    ty: Ty
    span: Span
    param: ast.Param | None = None
    ir_name: str = ""  # unique name in the IR (locals may be rebound)
    view: ViewInfo | None = None
    # a scalar local's value (`off = maximum(blk, 0)`): its uses stand for the expression, since
    # the IR has no scalar definitions besides element reads
    value: sym.Expr | None = None

    @property
    def writable(self) -> bool:
        if self.kind == "param":
            return self.param is not None and self.param.mode in ("out", "inout")
        return self.kind == "local"


@dataclass(frozen=True)
class ViewInfo:
    """A region of a tensor: ``base`` is the binding viewed (never itself a view)."""

    base: str  # ir_name of the underlying tensor binding
    offsets: tuple[sym.Expr, ...]
    shape: tuple[sym.Expr, ...]
    valid: tuple[sym.Expr, ...] | None
    # the valid shape as the spec gave it (inline or in the YAML), before clamping: a length read
    # from a tensor is checked against the view's dims in this form at call time (E0711)
    given: tuple[sym.Expr, ...] | None = None


@dataclass(frozen=True)
class AccessGuard:
    """One bound of a read (a view or an element read) the checker cannot prove inside its tensor:
    ``[offset, offset + extent)`` must lie in ``[0, dim)`` on ``axis`` of ``tensor`` at run time."""

    tensor: str  # ir_name of the tensor read (never a view)
    axis: int
    offset: sym.Expr
    extent: sym.Expr
    dim: sym.Expr


@dataclass(frozen=True)
class CallInfo:
    op: str  # an op table name, or a structure builtin
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WriteInfo:
    target: str  # ir_name of the tensor written
    offsets: tuple[sym.Expr, ...]
    shape: tuple[sym.Expr, ...]
    value: ast.Expr
    # (axis, offset, extent, dim) of each region bound that only the run can check
    guards: tuple[tuple[int, sym.Expr, sym.Expr, sym.Expr], ...] = ()
    # what the write stores of its region (the value's valid extents): only that is initialised
    stored: tuple[sym.Expr, ...] | None = None


@dataclass(frozen=True)
class LoopInfo:
    name: str
    index: str
    start: sym.Expr
    stop: sym.Expr
    step: sym.Expr
    unrolled: str | None  # the `k` of loop_unroll
    span: Span
    depth: int
    parent: str | None


@dataclass
class Typing:
    """Annotations keyed by ``id()`` of AST nodes (frozen nodes compare by value, so ids it is)."""

    ty: dict[int, Ty] = field(default_factory=dict)
    scalar: dict[int, sym.Expr] = field(default_factory=dict)
    view: dict[int, ViewInfo] = field(default_factory=dict)
    call: dict[int, CallInfo] = field(default_factory=dict)
    binding: dict[int, Binding] = field(default_factory=dict)
    defines: dict[int, Binding] = field(default_factory=dict)  # Assign to a name -> the new binding
    write: dict[int, WriteInfo] = field(default_factory=dict)
    loop: dict[int, LoopInfo] = field(default_factory=dict)
    read: dict[int, tuple[str, tuple[sym.Expr, ...], str]] = field(default_factory=dict)  # base, idx, sym
    access: dict[int, tuple[AccessGuard, ...]] = field(default_factory=dict)  # a view or read -> its guards
    # a `for` whose trip count depends on data -> (trip count, the call's largest dim), checked before it
    trips: dict[int, tuple[sym.Expr, sym.Expr]] = field(default_factory=dict)
    requires: list[Requirement] = field(default_factory=list)  # checked at call time, before any kernel


@dataclass(frozen=True)
class Requirement:
    """A division in an integer position whose validity depends on runtime dims: ``den`` must be
    non-zero and, for ``kind == "exact"`` (a ``/``), divide ``num``; or, for ``kind == "equal"``,
    the two element counts a reshape equates (``num == den``); ``kind == "whole"``: an extent a
    layout op needs whole, its valid extent clamped at 0 equal to it (``max(num, 0) == den``)."""

    kind: str  # exact | nonzero | equal | whole
    num: sym.Expr
    den: sym.Expr
    span: Span
    what: str  # "a loop bound", "an entry of the view's shape", ...


@dataclass(frozen=True)
class SymbolInfo:
    """A dim symbol: bound at runtime from a parameter's shape, or fixed by the YAML."""

    name: str
    value: int | None  # fixed by `symbols:`
    source: tuple[str, int] | None  # (param, axis) it is read from at call time
    span: Span


@dataclass
class CheckedKernel:
    kernel: ast.Kernel
    variant: dict[str, str]  # dtype variable -> dtype
    params: dict[str, Binding]
    symbols: dict[str, SymbolInfo]
    typing: Typing
    loops: list[LoopInfo]

    @property
    def variant_name(self) -> str:
        return variant_name(self.variant)
