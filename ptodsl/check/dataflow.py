"""Data flow through tensors: outputs never written, reads of uninitialised memory, dependency cycles.

One walk over a kernel that type-checked cleanly, in program order, using the typer's annotations:

* E0401 — an ``out`` parameter that no statement writes. PyPTO runs the kernel and the caller reads
  whatever the buffer held.
* E0402 — a local ``tensor(...)`` (uninitialised) or an ``out`` parameter read before any statement
  writes it. The analysis is path-aware in a simple, conservative way: a write inside an ``if``
  counts after it only when both branches write; a write in a loop body counts for later reads in
  that body and after the loop (loops run at least once). ``if is_loop_begin(i):`` is special: its
  then-branch runs on the first iteration, so its writes to tensors that outlive the loop body
  count in the else-branch, which only runs on later iterations.
* E0403 — one loop body reads a region of a tensor and writes a different region of the same
  tensor that may overlap it. PyPTO builds one dataflow graph per body and such a pair is a cycle
  in it. Writing exactly the region that is read (``y[b, :] = y[b, :] + 1``) is fine, and so is a
  pair of regions that are provably disjoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import sym
from ..diagnostics import Diagnostics, Label, Span
from ..frontend import ast
from ..frontend.spec import Spec
from ..targets import Target
from .types import Binding, CheckedKernel, TensorTy

E_OUT_UNWRITTEN = "E0401"
E_UNINIT_READ = "E0402"
E_CYCLE = "E0403"

Region = tuple[tuple[sym.Expr, ...], tuple[sym.Expr, ...]]  # (offsets, shape)
Branch = tuple[tuple[int, int], ...]  # (id of an If, 0 for its body or 1 for its orelse), outermost first


@dataclass(frozen=True)
class _Decl:
    """A tensor that starts uninitialised: a local ``tensor(...)`` or an ``out`` parameter."""

    name: str  # as written
    span: Span  # where it is declared
    loops: tuple[str, ...]  # names of the loops around the declaration
    is_param: bool


@dataclass(frozen=True)
class _Access:
    write: bool
    base: str  # ir_name of the tensor
    region: Region
    span: Span  # the expression read, or the region written
    stmt: ast.Stmt
    branch: Branch


@dataclass
class _Body:
    """The accesses of one loop body (nested loops are bodies of their own)."""

    name: str
    accesses: list[_Access] = field(default_factory=list)


def run(ck: CheckedKernel, spec: Spec, target: Target, diags: Diagnostics) -> None:
    """Report the data-flow errors of one checked kernel variant."""
    del spec, target  # data flow depends on neither
    _check_outputs_written(ck, diags)
    _Flow(ck, diags).run()


# ------------------------------------------------------------------ E0401


def _check_outputs_written(ck: CheckedKernel, diags: Diagnostics) -> None:
    written = {w.target for w in ck.typing.write.values()}
    # A statement that names the output as its target but failed to type, or a rebinding that
    # E0400 already reports, must not produce a second error about the same parameter.
    named = _syntactic_targets(ck.kernel.body)
    for p in ck.kernel.params:
        if p.mode != "out" or not p.is_tensor or p.name in written or p.name in named:
            continue
        diags.error(E_OUT_UNWRITTEN, f"output `{p.name}` is never written", p.span,
                    f"no statement of kernel `{ck.kernel.name}` writes `{p.name}`",
                    help=f"write it, e.g. `{p.name}[:] = ...` or `{p.name}.move(...)`; "
                    "if the kernel only reads it, drop `out`")


def _syntactic_targets(stmts: Sequence[ast.Stmt]) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        for node in ast.walk(s):
            if isinstance(node, ast.Assign):
                t = node.target
                if isinstance(t, ast.Name):
                    names.add(t.id)
                elif isinstance(t.value, ast.Name):
                    names.add(t.value.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("move", "assemble") and isinstance(node.func.value, ast.Name):
                names.add(node.func.value.id)
    return names


# ------------------------------------------------------------------ E0402 and E0403


class _Flow:
    def __init__(self, ck: CheckedKernel, diags: Diagnostics):
        self.ck = ck
        self.t = ck.typing
        self.diags = diags
        self.decls: dict[str, _Decl] = {}
        self.reported: set[str] = set()
        self.loops: list[str] = []
        self.branch: Branch = ()
        self.bodies: list[_Body] = []
        self.ranges = _ranges(ck)

    def run(self) -> None:
        init: set[str] = set()
        for p in self.ck.kernel.params:
            b = self.ck.params.get(p.name)
            if p.mode == "out" and b is not None and isinstance(b.ty, TensorTy):
                self.decls[b.ir_name] = _Decl(p.name, p.span, (), True)
        self.bodies.append(_Body(f"the top level of kernel `{self.ck.kernel.name}`"))
        self.block(self.ck.kernel.body, init)
        self.check_cycles(self.bodies.pop())

    # -------------------------------------------------------------- statements
    def block(self, stmts: Sequence[ast.Stmt], init: set[str]) -> set[str]:
        for s in stmts:
            init = self.stmt(s, init)
        return init

    def stmt(self, s: ast.Stmt, init: set[str]) -> set[str]:
        if isinstance(s, ast.Assign):
            if isinstance(s.target, ast.Name):
                self.bind(s, init)
            else:
                self.expr(s.value, s, init)
                for ix in s.target.indices:
                    self.index(ix, s, init)
                self.write(s, s.target.span, init)
        elif isinstance(s, ast.ExprStmt):
            e = s.expr
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
                for a in e.args:
                    self.expr(a, s, init)
                self.write(s, e.span, init)
            elif isinstance(e, ast.Call) and e.func_name == "print":
                for a in e.args[1:]:
                    self.expr(a, s, init)
            else:
                self.expr(e, s, init)
        elif isinstance(s, ast.For):
            return self.for_stmt(s, init)
        elif isinstance(s, ast.If):
            return self.if_stmt(s, init)
        return init

    def bind(self, s: ast.Assign, init: set[str]) -> None:
        b = self.t.defines.get(id(s))
        if b is not None and b.kind == "view" and id(s.value) in self.t.view:
            # Making a view reads nothing yet; its uses do (see `name`).
            self.view_operands(s.value, s, init)
            return
        self.expr(s.value, s, init)
        call = self.t.call.get(id(s.value))
        if b is not None and b.kind == "local" and call is not None and call.op == "tensor":
            self.decls[b.ir_name] = _Decl(b.name, s.value.span, tuple(self.loops), False)

    def write(self, s: ast.Stmt, span: Span, init: set[str]) -> None:
        w = self.t.write.get(id(s))
        if w is None:
            return
        # Any write counts as initialising: a kernel that fills a local row by row is common, and
        # telling a complete fill from a partial one would need the loop trip counts.
        init.add(w.target)
        self.bodies[-1].accesses.append(_Access(True, w.target, (w.offsets, w.shape), span, s, self.branch))

    def for_stmt(self, s: ast.For, init: set[str]) -> set[str]:
        if isinstance(s.iter, ast.Call):
            for a in s.iter.args:
                self.expr(a, s, init)
        info = self.t.loop.get(id(s))
        if info is None:
            return init
        self.loops.append(info.name)
        self.bodies.append(_Body(f"loop `{info.name}`"))
        saved, self.branch = self.branch, ()
        init = self.block(s.body, set(init))
        self.branch = saved
        self.check_cycles(self.bodies.pop())
        self.loops.pop()
        return init

    def if_stmt(self, s: ast.If, init: set[str]) -> set[str]:
        self.expr(s.cond, s, init)
        saved = self.branch
        self.branch = (*saved, (id(s), 0))
        then_out = self.block(s.body, set(init))
        else_in = set(init)
        call = self.t.call.get(id(s.cond))
        if call is not None and call.op == "is_loop_begin":
            # The else-branch runs only after the first iteration, which took the then-branch.
            loop = call.attrs.get("loop")
            else_in |= {n for n in then_out if n in self.decls and loop not in self.decls[n].loops}
        self.branch = (*saved, (id(s), 1))
        else_out = self.block(s.orelse, else_in)
        self.branch = saved
        return then_out & else_out

    # -------------------------------------------------------------- expressions
    def expr(self, e: ast.Expr | None, stmt: ast.Stmt, init: set[str]) -> None:
        if e is None:
            return
        view = self.t.view.get(id(e))
        read = self.t.read.get(id(e))
        if isinstance(e, ast.Name):
            self.name(e, stmt, init)
        elif isinstance(e, (ast.Subscript, ast.Call)) and (view is not None or read is not None):
            if view is not None:
                region: Region = (view.offsets, view.shape)
                base = view.base
            else:
                base, idx, _ = read
                region = (idx, tuple(1 for _ in idx))
            self.read(base, region, e.span, stmt, init)
            self.view_operands(e, stmt, init)
        else:
            for child in _children(e):
                self.expr(child, stmt, init)

    def view_operands(self, e: ast.Expr, stmt: ast.Stmt, init: set[str]) -> None:
        """The scalar operands of a view or element read (indices, shape, offsets), not its base."""
        if isinstance(e, ast.Subscript):
            for ix in e.indices:
                self.index(ix, stmt, init)
        elif isinstance(e, ast.Call):
            for a in e.args[1:]:
                self.expr(a, stmt, init)
            for kw in e.keywords:
                self.expr(kw.value, stmt, init)

    def index(self, ix: ast.Index, stmt: ast.Stmt, init: set[str]) -> None:
        if isinstance(ix, ast.Slice):
            for part in (ix.lo, ix.hi, ix.step):
                self.expr(part, stmt, init)
        else:
            self.expr(ix, stmt, init)

    def name(self, e: ast.Name, stmt: ast.Stmt, init: set[str]) -> None:
        b: Binding | None = self.t.binding.get(id(e))
        if b is None:
            return
        if b.view is not None:
            self.read(b.view.base, (b.view.offsets, b.view.shape), e.span, stmt, init, via=b.name)
        elif b.kind in ("param", "local") and isinstance(b.ty, TensorTy):
            self.read(b.ir_name, (tuple(0 for _ in b.ty.shape), b.ty.shape), e.span, stmt, init)

    def read(self, base: str, region: Region, span: Span, stmt: ast.Stmt, init: set[str],
             via: str | None = None) -> None:
        self.bodies[-1].accesses.append(_Access(False, base, region, span, stmt, self.branch))
        decl = self.decls.get(base)
        if decl is None or base in init or base in self.reported:
            return
        self.reported.add(base)
        through = f" (through the view `{via}`)" if via else ""
        if decl.is_param:
            self.diags.error(
                E_UNINIT_READ, f"output `{decl.name}` is read{through} before anything writes it", span,
                "reads memory the kernel has not written yet",
                secondary=[Label(decl.span, "declared `out` here: its contents are undefined until written")],
                help=f"write `{decl.name}` first, or declare it `inout` if the caller's data is meant to be read")
        else:
            self.diags.error(
                E_UNINIT_READ, f"local `{decl.name}` is read{through} before anything writes it", span,
                "reads uninitialised memory",
                secondary=[Label(decl.span, "declared here without a value")],
                help=f"write it first (`{decl.name}[:] = ...`), or declare it with a value: "
                "`zeros(...)`, `ones(...)` or `full(value, ...)`")

    # -------------------------------------------------------------- E0403
    def check_cycles(self, body: _Body) -> None:
        writes = [a for a in body.accesses if a.write]
        reads = [a for a in body.accesses if not a.write]
        flagged: set[str] = set()
        for w in writes:
            if w.base in flagged:
                continue
            for r in reads:
                if r.base != w.base or _exclusive(r.branch, w.branch):
                    continue
                if r.region == w.region or _disjoint(r.region, w.region, self.ranges):
                    continue
                flagged.add(w.base)
                self.report_cycle(body, w, r)
                break

    def report_cycle(self, body: _Body, w: _Access, r: _Access) -> None:
        name = _display_name(self.ck, w.base)
        same = r.stmt is w.stmt
        self.diags.error(
            E_CYCLE, f"{body.name} reads and writes `{name}` in regions that may overlap", w.span,
            f"writes `{name}{_fmt_region(w.region)}`",
            secondary=[Label(r.span, f"reads `{name}{_fmt_region(r.region)}`"
                             + (" in the same statement" if same else " in the same body"))],
            notes=["a loop body becomes one dataflow graph; a tensor that is both its input and its "
                   "output in overlapping regions makes a cycle in it"],
            help=f"write exactly the region that is read, read regions that cannot overlap the written one, "
            f"or copy what is read into a local before the loop and read `{name}` from that copy")


def _children(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.BinOp | ast.Compare | ast.BoolOp):
        return [e.left, e.right]
    if isinstance(e, ast.UnaryOp):
        return [e.operand]
    if isinstance(e, ast.Call):
        return [*e.args, *(kw.value for kw in e.keywords)]
    if isinstance(e, ast.ListExpr):
        return list(e.items)
    if isinstance(e, ast.Subscript):
        out = [e.value]
        for ix in e.indices:
            out.extend(p for p in ((ix.lo, ix.hi, ix.step) if isinstance(ix, ast.Slice) else (ix,)) if p is not None)
        return out
    if isinstance(e, ast.Attribute):
        return [e.value]
    return []


def _exclusive(a: Branch, b: Branch) -> bool:
    """Whether two accesses sit in different branches of one `if`, so never run together."""
    sides = dict(a)
    return any(k in sides and sides[k] != side for k, side in b)


def _disjoint(a: Region, b: Region, ranges: dict[str, sym.Bounds]) -> bool:
    """True when some axis provably separates the two regions."""
    (ao, ash), (bo, bsh) = a, b
    if len(ao) != len(bo):
        return False
    for o1, s1, o2, s2 in zip(ao, ash, bo, bsh):
        if sym.prove_le(sym.add(o1, s1), o2, ranges) or sym.prove_le(sym.add(o2, s2), o1, ranges):
            return True
    return False


def _ranges(ck: CheckedKernel) -> dict[str, sym.Bounds]:
    """What is known of the symbols in offsets: dims are non-negative, loop indices start at start."""
    r: dict[str, sym.Bounds] = {}
    for name, info in ck.symbols.items():
        r[name] = (info.value, info.value) if info.value is not None else (0, None)
    for lp in ck.loops:
        lo, _ = sym.bounds(lp.start, r)
        r[lp.index] = (lo, None)
        if lp.unrolled:
            r[lp.unrolled] = (1, None)
    return r


def _display_name(ck: CheckedKernel, ir_name: str) -> str:
    for b in ck.typing.defines.values():
        if b.ir_name == ir_name:
            return b.name
    return ir_name


def _fmt_region(region: Region) -> str:
    parts = []
    for o, s in zip(*region):
        if s == 1:
            parts.append(sym.to_text(o))
        else:
            parts.append(f"{sym.to_text(o)}:{sym.to_text(sym.add(o, s))}")
    return "[" + ", ".join(parts) + "]"
