"""Where a local is defined: a name bound in a loop body or in an arm of an `if` stays there.

A local names one value (a tensor, a view, a scalar, an element read from a tensor); the IR
has no loop-carried or merged values. So a name bound inside a loop body is one value per
iteration and is not defined after the loop (which iteration's would it be, and what if the
loop ran zero times, as a loop over a length read from a tensor may?), a name bound in an arm of
an `if` is not defined after the `if` (which arm ran is known only at run time), and a loop body
may not rebind a name it read earlier in the body (the next iteration would have to read the new
value). Each is error E0871 at the use or the rebinding, where the compiler used to pick one of
the bindings silently (a wrong answer) or fail with an internal error.

Mixed into the checker's Typer, which calls ``open_frame``/``close_frame`` around loop bodies and
arms, ``note_use`` from its name lookup and ``check_rebind`` before it binds a name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import sym
from ..diagnostics import Label, Span
from .types import Binding, TensorTy

E_SCOPE = "E0871"


@dataclass
class Frame:
    """A loop body or an `if` (both arms) being typed."""

    kind: str  # "loop" or "if"
    name: str  # the loop's name; "" for an `if`
    span: Span  # the `for` or `if` statement
    entry: set[int]  # ids of the bindings in scope when the body began
    reads: dict  # the element reads known when the body began (see ``shared_read``)
    used: dict[int, Span] = field(default_factory=dict)  # id of a binding from outside -> first use


@dataclass
class Gone:
    """Why a name is not defined after a statement: where it was bound, and in what."""

    binding: Binding
    frame: Frame
    reported: bool = False


class ScopeRules:
    """Needs from the Typer: ``err``, ``scope`` (name -> Binding)."""

    def scope_init(self) -> None:
        self.frames: list[Frame] = []
        self.gone: dict[int, Gone] = {}  # id of a placeholder binding -> why its name is gone
        # (input tensor, index) -> the symbol of an element read that every later point of the
        # current body sees (it was read in this body or one enclosing it)
        self.read_cache: dict[tuple[str, tuple], str] = {}

    def open_frame(self, kind: str, name: str, span: Span) -> Frame:
        frame = Frame(kind, name, span, {id(b) for b in self.scope.values()}, dict(self.read_cache))
        self.frames.append(frame)
        return frame

    def next_arm(self, frame: Frame) -> None:
        """The else-arm of an `if` does not see what its then-arm read."""
        self.read_cache = dict(frame.reads)

    def shared_read(self, base: str, index: tuple, name: str) -> str:
        """The symbol of an element read of an input tensor: one read of the same element earlier in
        this body or an enclosing one (`lens[b]` in a loop bound and again in a view offset, or in an
        inner loop's bound) is the same value, since an input does not change during the call, and
        that read's symbol is defined wherever this one is used. So `y[cu[b] + q:cu[b] + q + 8, :]`
        is a region of 8 rows. Returns ``name`` for a read seen first here."""
        return self.read_cache.setdefault((base, index), name)

    def note_use(self, b: Binding, span: Span) -> None:
        for frame in self.frames:
            if id(b) in frame.entry:
                frame.used.setdefault(id(b), span)

    def check_rebind(self, name: str, old: Binding | None, span: Span) -> None:
        """A loop body rebinding a name from outside the loop that the body has read already."""
        if old is None:
            return
        for frame in self.frames:
            if frame.kind != "loop" or id(old) not in frame.entry or id(old) not in frame.used:
                continue
            self.err(E_SCOPE, f"`{name}` is rebound in loop `{frame.name}` after the loop body read it", span,
                     "rebound here", secondary=[Label(frame.used[id(old)], "read here: the next iteration would "
                                                                             "read the new value")],
                     notes=["a name is bound once per iteration of a loop body: there are no loop-carried locals"],
                     help="bind the new value to another name" + (
                         f"; to carry a tensor across iterations, allocate it before the loop (`{name} = "
                         f"tensor([...], {old.ty.dtype})`) and write it in the loop (`{name}[...] = ...`)"
                         if isinstance(old.ty, TensorTy) else ""))
            return

    def close_frame(self, frame: Frame, saved: dict[str, Binding], branches: list[dict[str, Binding]]) -> None:
        """The scope after a loop body or an `if`: what was bound before it, and every name bound
        (or rebound) inside it made a placeholder that reports E0871 where it is used."""
        assert self.frames and self.frames[-1] is frame
        self.frames.pop()
        self.read_cache = frame.reads  # a read inside is not defined after the body
        merged = dict(saved)
        for scope in branches:
            for name, b in scope.items():
                if saved.get(name) is b or b.kind == "index" and name not in saved:
                    continue
                if b.kind == "gone":
                    merged[name] = b
                    continue
                placeholder = Binding(name, "gone", b.ty, b.span, ir_name=b.ir_name)
                self.gone[id(placeholder)] = Gone(b, frame)
                merged[name] = placeholder
        self.scope = merged

    def gone_use(self, b: Binding, span: Span) -> None:
        why = self.gone.get(id(b))
        if why is None or why.reported:
            return
        why.reported = True  # once per binding: its other uses say nothing new
        frame = why.frame
        if frame.kind == "loop":
            where = f"inside loop `{frame.name}`"
            note = ("a name bound in a loop body is one value per iteration: after the loop it would be the last "
                    "iteration's, or none at all when the loop ran zero times (a trip count read from a tensor "
                    "may be 0)")
        else:
            where = "in an arm of an `if`"
            note = "which arm of the `if` ran is known only at run time"
        self.err(E_SCOPE, f"`{b.name}` was bound {where} and is not defined after it", span,
                 f"used here, after the {'loop' if frame.kind == 'loop' else '`if`'}",
                 secondary=[Label(b.span, f"bound here, {where}")], notes=[note],
                 help=self.keep_help(b, "before", "inside"))

    @staticmethod
    def keep_help(b: Binding, before: str, inside: str) -> str:
        if isinstance(b.ty, TensorTy):
            return (f"use `{b.name}` {inside}, or allocate a local tensor {before} "
                    f"(`{b.name} = tensor([...], {b.ty.dtype})`) and write it {inside} (`{b.name}[...] = ...`)")
        return (f"use `{b.name}` {inside}, or bind it {before}; an element read from a tensor can be read again "
                "where it is needed, and `min`/`max` combine scalars")


def largest_dim(params: dict[str, Binding]) -> sym.Expr:
    """The largest dim of the call's tensors, as an expression of their dims."""
    dims: list[sym.Expr] = []
    for b in params.values():
        if isinstance(b.ty, TensorTy):
            dims += [d for d in b.ty.shape if d not in dims]
    out: sym.Expr = dims[0] if dims else 1
    for d in dims[1:]:
        out = sym.max_(out, d)
    return out


def trip_guard(start: sym.Expr, stop: sym.Expr, step: sym.Expr, reads: set[str], params: dict[str, Binding],
               ranges: dict[str, sym.Bounds]) -> tuple[sym.Expr, sym.Expr] | None:
    """(trip count, bound) of a loop whose bounds depend on values read from tensors (the symbols
    ``reads``), when the checker cannot prove the count within the call's largest dim; else None.

    A loop driven by data walks some dim of a tensor in blocks, so no sensible count passes every
    dim. A corrupt length (2**31-1) would otherwise run for hours on the simulator; past the bound
    the call stops before the loop (E0870). A negative count is an empty loop, as in Python.
    """
    if not (sym.free_symbols(start) | sym.free_symbols(stop)) & reads:
        return None
    trips = sym.ceildiv(sym.sub(stop, start), step)
    dims = {d for b in params.values() if isinstance(b.ty, TensorTy) for d in b.ty.shape}
    if any(_at_most(trips, d, ranges) for d in dims):
        return None
    return trips, largest_dim(params)


def _at_most(e: sym.Expr, dim: sym.Expr, ranges: dict[str, sym.Bounds]) -> bool:
    """``e <= dim`` for a dim of at least 1, looking through the min/max and the divisions by a
    positive constant that clamp and block a length (`cdiv(min(lens[b], N), 64) <= N`)."""
    if isinstance(e, sym.CallExpr) and e.fn in ("min", "max"):
        parts = [_at_most(a, dim, ranges) for a in e.args]
        return any(parts) if e.fn == "min" else all(parts)
    division = (e.args if isinstance(e, sym.CallExpr) and e.fn == "cdiv" else
                (e.left, e.right) if isinstance(e, sym.BinExpr) and e.op == "//" else None)
    if division is not None and sym.is_const(division[1]) and division[1] >= 1:
        return _at_most(division[0], dim, ranges)  # a <= dim, dim >= 1: a // c and cdiv(a, c) are too
    return sym.prove_le(e, dim, ranges)
