"""The .pto abstract syntax tree: frozen dataclasses, every node carrying the span it came from."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Span


@dataclass(frozen=True)
class Node:
    span: Span = field(compare=False, repr=False, kw_only=True)


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Expr(Node):
    pass


@dataclass(frozen=True)
class Name(Expr):
    id: str


@dataclass(frozen=True)
class Num(Expr):
    value: int | float
    text: str  # as written, so that `1.0` and `1` stay distinguishable

    @property
    def is_float(self) -> bool:
        return isinstance(self.value, float)


@dataclass(frozen=True)
class Str(Expr):
    value: str


@dataclass(frozen=True)
class Bool(Expr):
    value: bool


@dataclass(frozen=True)
class ListExpr(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class BinOp(Expr):
    op: str  # + - * / // %
    left: Expr
    right: Expr


@dataclass(frozen=True)
class UnaryOp(Expr):
    op: str  # - + not
    operand: Expr


@dataclass(frozen=True)
class Compare(Expr):
    op: str  # < <= > >= == !=
    left: Expr
    right: Expr


@dataclass(frozen=True)
class BoolOp(Expr):
    op: str  # and or
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Keyword(Node):
    name: str
    value: Expr


@dataclass(frozen=True)
class Call(Expr):
    func: Expr  # Name for builtins, Attribute for methods (t.move(...))
    args: tuple[Expr, ...] = ()
    keywords: tuple[Keyword, ...] = ()

    @property
    def func_name(self) -> str | None:
        return self.func.id if isinstance(self.func, Name) else None

    def keyword(self, name: str) -> Keyword | None:
        return next((k for k in self.keywords if k.name == name), None)


@dataclass(frozen=True)
class Attribute(Expr):
    value: Expr
    attr: str


@dataclass(frozen=True)
class Slice(Node):
    """``lo:hi`` or ``lo:hi:step`` inside a subscript; missing bounds are None."""

    lo: Expr | None = None
    hi: Expr | None = None
    step: Expr | None = None


Index = Expr | Slice


@dataclass(frozen=True)
class Subscript(Expr):
    value: Expr
    indices: tuple[Index, ...]


# ---------------------------------------------------------------- statements


@dataclass(frozen=True)
class Stmt(Node):
    pass


@dataclass(frozen=True)
class Assign(Stmt):
    """``name = expr`` binds a local; ``t[idx] = expr`` writes a region of t."""

    target: Name | Subscript
    value: Expr


@dataclass(frozen=True)
class Unpack(Stmt):
    """``a, b = expr`` binds one local per result of an op with several results (``topk``)."""

    targets: tuple[Name, ...]
    value: Expr


@dataclass(frozen=True)
class ExprStmt(Stmt):
    expr: Expr


@dataclass(frozen=True)
class Pass(Stmt):
    pass


@dataclass(frozen=True)
class For(Stmt):
    """``for i in loop(...)`` or ``for i, k in loop_unroll(...)``."""

    targets: tuple[Name, ...]
    iter: Expr
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class If(Stmt):
    """``elif`` chains are nested Ifs in ``orelse``."""

    cond: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


# ---------------------------------------------------------------- kernels


@dataclass(frozen=True)
class Dim(Node):
    """A dim of a parameter type: an integer literal or a symbol name."""

    value: int | str


@dataclass(frozen=True)
class Param(Node):
    name: str
    dtype: str  # a dtype name or a dtype variable bound in the YAML
    dims: tuple[Dim, ...] | None  # None for a scalar parameter
    mode: str = "in"  # in | out | inout
    default: Expr | None = None
    dtype_span: Span | None = field(default=None, compare=False, repr=False)

    @property
    def is_tensor(self) -> bool:
        return self.dims is not None


@dataclass(frozen=True)
class Kernel(Node):
    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    name_span: Span | None = field(default=None, compare=False, repr=False)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


@dataclass(frozen=True)
class Module(Node):
    kernels: tuple[Kernel, ...]

    def kernel(self, name: str) -> Kernel | None:
        return next((k for k in self.kernels if k.name == name), None)


def walk(node: Node):
    """Yield node and every node below it, in source order."""
    yield node
    for f in node.__dataclass_fields__:
        if f == "span":
            continue
        v = getattr(node, f)
        if isinstance(v, Node):
            yield from walk(v)
        elif isinstance(v, tuple):
            for x in v:
                if isinstance(x, Node):
                    yield from walk(x)
