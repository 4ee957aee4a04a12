"""Data flow through tensors: outputs never written, reads of uninitialised memory, dependency cycles.

One walk over a kernel that type-checked cleanly, in program order, using the typer's annotations:

* E0401 — an ``out`` parameter that no statement writes, or that some path leaves partly or
  wholly unwritten (only one arm of a runtime ``if`` writes it, static writes miss rows). PyPTO
  runs the kernel and the caller reads whatever the buffer held.
* E0402 — a local ``tensor(...)`` (uninitialised) or an ``out`` parameter read where some path has
  not written it (nothing on that path, or static regions that miss part of the read).
* W0404 — the same two questions when the answer is not proven either way: a loop that writes
  may run zero times, or the symbolic regions cannot be followed.

Coverage is path- and region-aware (``coverage.py``): each walk keeps, per tensor, the rectangles
written on every path; an ``if`` keeps what both arms wrote (a static condition, its taken arm);
a loop adds the union of its iterations' rectangles (rows ``y[b, :]`` of ``loop(B)`` are
``y[0:B, :]``); the then-branch of ``if is_loop_begin(i):`` counts in the else-branch, and the
then-branches of ``is_loop_begin``/``is_loop_end`` at the top of a loop body count after the loop.
Two walks run: a strict one (a loop may run zero times) proves coverage, a lenient one (every loop
runs) proves gaps; what lies between is W0404.
* E0403 — one loop body reads a region of a tensor and writes a different region of the same
  tensor that may overlap it. PyPTO builds one
  dataflow graph per body and such a pair is a cycle in it. Writing exactly the region that is
  read (``y[b, :] = y[b, :] + 1``) is fine, and so is a pair of regions that are provably
  disjoint, and a read that the body's earlier writes cover, with those writes: it reads only
  what they stored (a local assembled block by block, ``kj[0:32, :] = ...; kj[32:64, :] = ...``,
  then read whole).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import sym
from ..diagnostics import Diagnostics, Label, Span
from ..frontend import ast
from ..frontend.spec import Spec
from ..targets import Target
from .coverage import COVERED, GAP, NONE, Cov, State, join, over_loop, verdict
from .paths import loop_conditions
from .types import Binding, CallInfo, CheckedKernel, LoopInfo, TensorTy

E_OUT_UNWRITTEN = "E0401"
E_UNINIT_READ = "E0402"
E_CYCLE = "E0403"
W_NOT_PROVEN = "W0404"

Region = tuple[tuple[sym.Expr, ...], tuple[sym.Expr, ...]]  # (offsets, shape)
Branch = tuple[tuple[int, int], ...]  # (id of an If, 0 for its body or 1 for its orelse), outermost first


@dataclass(frozen=True)
class _Decl:
    """A tensor that starts uninitialised: a local ``tensor(...)`` or an ``out`` parameter."""

    name: str  # as written
    span: Span  # where it is declared
    loops: tuple[str, ...]  # names of the loops around the declaration
    is_param: bool


def _narrowed(shape: tuple[sym.Expr, ...], valid: tuple[sym.Expr, ...] | None) -> tuple[sym.Expr, ...]:
    """The part of a region that holds data: a static valid extent narrows a dim (a write of a
    value of 12 valid rows into 32 initialises 12); a symbolic one leaves it whole, since a
    length read from data cannot be compared with the one a later read declares, and taking
    it as partial would flag every block-by-block local of the attention kernels."""
    if valid is None or len(valid) != len(shape):
        return shape
    return tuple(v if isinstance(v, int) and isinstance(s, int) and v < s else s for s, v in zip(shape, valid))


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
    loop: str | None = None  # the loop's name; None at the top level
    accesses: list[_Access] = field(default_factory=list)


def run(ck: CheckedKernel, spec: Spec, target: Target, diags: Diagnostics) -> None:
    """Report the data-flow errors of one checked kernel variant."""
    del spec, target  # data flow depends on neither
    never = _check_outputs_written(ck, diags)
    strict, lenient = _Flow(ck, lenient=False), _Flow(ck, lenient=True)
    strict.run()
    lenient.run()
    _report_reads(strict, lenient, diags)
    for body in strict.done:
        strict.check_cycles(body, diags)
    _report_outputs(ck, strict, lenient, never, diags)


# ------------------------------------------------------------------ E0401


def _check_outputs_written(ck: CheckedKernel, diags: Diagnostics) -> set[str]:
    """Outputs that no statement writes (or that a statement failed to write), which the
    coverage analysis leaves alone."""
    written = {w.target for w in ck.typing.write.values()}
    written |= {c.attrs["target"] for c in ck.typing.call.values() if c.op == "scatter_update"}
    # A statement that names the output as its target but failed to type, or a rebinding that
    # E0400 already reports, must not produce a second error about the same parameter.
    named = _syntactic_targets(ck.kernel.body)
    skip = {p.name for p in ck.kernel.params if p.name not in written}
    for p in ck.kernel.params:
        if p.mode != "out" or not p.is_tensor or p.name in written or p.name in named:
            continue
        diags.error(E_OUT_UNWRITTEN, f"output `{p.name}` is never written", p.span,
                    f"no statement of kernel `{ck.kernel.name}` writes `{p.name}`",
                    help=f"write it, e.g. `{p.name}[:] = ...` or `{p.name}.move(...)`; "
                    "if the kernel only reads it, drop `out`")
    return skip


def _report_reads(strict: _Flow, lenient: _Flow, diags: Diagnostics) -> None:
    """A read is fine when the strict walk covers it, an error when the lenient walk proves a gap,
    and a warning otherwise. Both walks see the same reads in the same order."""
    reported: set[str] = set()
    for s_read, l_read in zip(strict.reads, lenient.reads):
        base = s_read.base
        if s_read.verdict == COVERED or base in reported:
            continue
        reported.add(base)
        decl = strict.decls[base]
        through = f" (through the view `{s_read.via}`)" if s_read.via else ""
        what = "output" if decl.is_param else "local"
        declared = Label(decl.span, "declared `out` here: its contents are undefined until written" if decl.is_param
                         else "declared here without a value")
        fix = (f"write `{decl.name}` first, or declare it `inout` if the caller's data is meant to be read"
               if decl.is_param else f"write it first (`{decl.name}[:] = ...`), or declare it with a value: "
               "`zeros(...)`, `ones(...)` or `full(value, ...)`")
        if l_read.verdict == NONE:
            diags.error(E_UNINIT_READ, f"{what} `{decl.name}` is read{through} before anything writes it", s_read.span,
                        "reads memory the kernel has not written yet" if decl.is_param else "reads uninitialised memory",
                        secondary=[declared, *_write_labels(strict, base)], help=fix)
        elif l_read.verdict == GAP:
            diags.error(E_UNINIT_READ, f"{what} `{decl.name}` is read{through} where it is only partly written",
                        s_read.span, "part of this region is not written on some path",
                        secondary=[declared, *_write_labels(strict, base)], help=fix)
        else:
            reason = ("a loop before it may run zero times" if l_read.verdict == COVERED else
                      "the regions written could not be proven to cover it")
            diags.warning(W_NOT_PROVEN, f"{what} `{decl.name}` may be read{through} before it is written",
                          s_read.span, f"not proven written: {reason}",
                          secondary=[declared, *_write_labels(strict, base)],
                          help=f"{fix}; `ptodsl explain {W_NOT_PROVEN}` says what the analysis can prove")


def _report_outputs(ck: CheckedKernel, strict: _Flow, lenient: _Flow, never: set[str],
                    diags: Diagnostics) -> None:
    for p in ck.kernel.params:
        b = ck.params.get(p.name)
        if p.mode != "out" or p.name in never or b is None or not isinstance(b.ty, TensorTy):
            continue
        whole: Region = (tuple(0 for _ in b.ty.shape), b.ty.shape)
        if verdict(strict.final, b.ir_name, whole, strict.ranges) == COVERED:
            continue
        v = verdict(lenient.final, b.ir_name, whole, lenient.ranges)
        shape = "[" + ", ".join(sym.to_text(d) for d in b.ty.shape) + "]"
        labels = _write_labels(strict, b.ir_name)
        if v in (NONE, GAP):
            what = "on every path" if v == NONE else "in all of its region"
            diags.error(E_OUT_UNWRITTEN, f"output `{p.name}` is not written {what}", p.span,
                        f"`{p.name}{shape}` is left partly or wholly unwritten on some path",
                        secondary=labels,
                        help=f"write all of `{p.name}` on every path: add the missing branch or region, "
                        "or write a default first")
        else:
            reason = ("a loop that writes it may run zero times" if v == COVERED else
                      "the regions written could not be proven to cover it")
            diags.warning(W_NOT_PROVEN, f"output `{p.name}` may not be written in full", p.span,
                          f"`{p.name}{shape}` is not proven written: {reason}", secondary=labels,
                          help=f"write `{p.name}` with regions the compiler can follow (rows `{p.name}[i, :]` of "
                          f"a loop over its rows, or whole), or write a default first; `ptodsl explain "
                          f"{W_NOT_PROVEN}` says what the analysis can prove")


def _write_labels(flow: _Flow, base: str) -> list[Label]:
    return [Label(sp, "written here") for sp in dict.fromkeys(flow.writes.get(base, []))][:3]


def sym_region(region: Region, env: dict[str, sym.Expr]) -> Region:
    return tuple(sym.substitute(o, env) for o in region[0]), tuple(sym.substitute(d, env) for d in region[1])


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


@dataclass
class _Read:
    base: str
    span: Span
    via: str | None
    verdict: str


@dataclass
class _LoopAt:
    info: LoopInfo
    trips: sym.Expr
    first: sym.Expr
    last: sym.Expr


class _Flow:
    """One walk in program order. ``lenient`` assumes every loop runs at least once; the strict
    walk does not. A region covered in the strict walk is proven written; a gap in the lenient walk
    is proven (it does not depend on a loop running zero times); anything between is unknown."""

    def __init__(self, ck: CheckedKernel, lenient: bool):
        self.ck = ck
        self.t = ck.typing
        self.lenient = lenient
        self.decls: dict[str, _Decl] = {}
        self.loops: list[str] = []
        self.at: list[_LoopAt] = []
        self.extras: list[list[tuple[str, Region]]] = []  # per loop: first/last-iteration writes
        self.branch: Branch = ()
        self.bodies: list[_Body] = []
        self.done: list[_Body] = []
        self.ranges = _ranges(ck)
        self.reads: list[_Read] = []
        self.writes: dict[str, list[Span]] = {}
        self.final = State()
        self.not_last: set[str] = set()  # loops whose is_loop_end is assumed false (not_last_walk)

    def run(self) -> None:
        for p in self.ck.kernel.params:
            b = self.ck.params.get(p.name)
            if p.mode == "out" and b is not None and isinstance(b.ty, TensorTy):
                self.decls[b.ir_name] = _Decl(p.name, p.span, (), True)
        self.bodies.append(_Body(f"the top level of kernel `{self.ck.kernel.name}`"))
        self.final = self.block(self.ck.kernel.body, State())
        self.done.append(self.bodies.pop())

    # -------------------------------------------------------------- statements
    def block(self, stmts: Sequence[ast.Stmt], init: State) -> State:
        for s in stmts:
            init = self.stmt(s, init)
        return init

    def stmt(self, s: ast.Stmt, init: State) -> State:
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
            elif isinstance(e, ast.Call) and e.func_name == "scatter_update":
                self.scatter(s, e, init)
            else:
                self.expr(e, s, init)
        elif isinstance(s, ast.Unpack):
            self.expr(s.value, s, init)
        elif isinstance(s, ast.For):
            return self.for_stmt(s, init)
        elif isinstance(s, ast.If):
            return self.if_stmt(s, init)
        return init

    def bind(self, s: ast.Assign, init: State) -> None:
        b = self.t.defines.get(id(s))
        if b is not None and b.kind == "view" and id(s.value) in self.t.view:
            # Making a view reads nothing yet; its uses do (see `name`).
            self.view_operands(s.value, s, init)
            return
        self.expr(s.value, s, init)
        call = self.t.call.get(id(s.value))
        if b is not None and b.kind == "local" and call is not None and call.op == "tensor":
            self.decls[b.ir_name] = _Decl(b.name, s.value.span, tuple(self.loops), False)
            init.pop(b.ir_name, None)  # a declaration in a loop body is a fresh tensor each iteration

    def write(self, s: ast.Stmt, span: Span, init: State) -> None:
        w = self.t.write.get(id(s))
        if w is None:
            return
        init.add(w.target, (w.offsets, _narrowed(w.shape, w.stored)))
        self.writes.setdefault(w.target, []).append(span)
        self.bodies[-1].accesses.append(_Access(True, w.target, (w.offsets, w.shape), span, s, self.branch))

    def scatter(self, s: ast.ExprStmt, e: ast.Call, init: State) -> None:
        """``scatter_update(dst, dim, index, src)`` reads index and src and writes rows of dst that
        only the data knows: dst counts as written, but no region of it as covered."""
        for a in e.args[2:]:
            self.expr(a, s, init)
        call = self.t.call.get(id(e))
        if call is None:
            return
        base = call.attrs["target"]
        init.setdefault(base, Cov()).opaque = True
        self.writes.setdefault(base, []).append(e.span)
        dst = self.t.binding[id(e.args[0])].ty
        region = (tuple(0 for _ in dst.shape), tuple(dst.shape))
        self.bodies[-1].accesses.append(_Access(True, base, region, e.span, s, self.branch))

    def for_stmt(self, s: ast.For, init: State) -> State:
        if isinstance(s.iter, ast.Call):
            for a in s.iter.args:
                self.expr(a, s, init)
        info = self.t.loop.get(id(s))
        if info is None:
            return init
        trips, first, last, _, _ = loop_conditions(info.index, info.start, info.stop, info.step)
        saved_ranges = dict(self.ranges)
        self.ranges[info.index] = (first, last)  # inside the body the loop runs, so the range is not empty
        self.loops.append(info.name)
        self.at.append(_LoopAt(info, trips, first, last))
        self.extras.append([])
        self.bodies.append(_Body(f"loop `{info.name}`", info.name))
        saved, self.branch = self.branch, ()
        body_out = self.block(s.body, init.copy())
        self.branch = saved
        self.done.append(self.bodies.pop())
        extras = self.extras.pop()
        self.at.pop()
        self.loops.pop()
        self.ranges = saved_ranges
        runs = self.lenient or sym.prove_le(1, trips, self.ranges)
        out = init.copy()
        for base, cov in body_out.items():
            before = init.get(base)
            for r in cov.rects:
                if before is not None and r in before.rects:
                    continue
                union = over_loop(r, info.index, first, info.step, trips, self.ranges)
                # a moving region is empty at 0 trips, and so is one with an extent of at most the trips
                empty_at_zero = union is not r or any(sym.prove_le(e, trips, self.ranges) for e in r[1])
                if union is not None and (runs or empty_at_zero):
                    out.add(base, union)
                elif union is None and runs:
                    out.setdefault(base, Cov()).opaque = True
            if cov.opaque and runs:
                out.setdefault(base, Cov()).opaque = True
        if runs:
            for base, r in extras:
                out.add(base, r)
        return out

    def if_stmt(self, s: ast.If, init: State) -> State:
        self.expr(s.cond, s, init)
        saved = self.branch
        self.branch = (*saved, (id(s), 0))
        then_out = self.block(s.body, init.copy())
        else_in = init.copy()
        call = self.t.call.get(id(s.cond))
        at = self._loop_of(call)
        if at is not None:
            index = at.info.index
            begin = call.op == "is_loop_begin"
            at_value = at.first if begin else at.last

            def fresh_in(out: State) -> list[tuple[str, Region]]:
                return [(base, sym_region(r, {index: at_value})) for base, cov in out.items()
                        for r in cov.rects if base not in init or r not in init[base].rects
                        if base not in self.decls or at.info.name not in self.decls[base].loops]

            fresh = fresh_in(then_out)
            if begin:
                # The else-branch runs only after the first iteration, which took the then-branch
                # and was not the last: an `if is_loop_end(i):` inside it took its else-arm (PyPTO's
                # varlen attention writes its accumulators only there), so that arm's writes count.
                carried = fresh_in(self.not_last_walk(s.body, init, at)) if _mentions_end(s.body, self.t, at) \
                    else fresh
                for base, r in carried:
                    else_in.add(base, r)
            if saved == () and self.at and self.at[-1] is at:
                self.extras[-1] += fresh  # the first (last) iteration runs whenever the loop does
        self.branch = (*saved, (id(s), 1))
        else_out = self.block(s.orelse, else_in)
        self.branch = saved
        static = self.t.scalar.get(id(s.cond))
        if at is not None and call.op == "is_loop_end" and at.info.name in self.not_last:
            static = False
        if isinstance(static, bool):
            return then_out if static else else_out
        return join(then_out, else_out, self.ranges)

    def not_last_walk(self, body: Sequence[ast.Stmt], init: State, at: _LoopAt) -> State:
        """The state after ``body`` (the first iteration's arm) when ``is_loop_end`` of ``at``'s loop
        is false, walked without recording anything: the normal walk has recorded it already."""
        reads, writes = len(self.reads), {k: len(v) for k, v in self.writes.items()}
        accesses = [len(b.accesses) for b in self.bodies]
        done, extras = len(self.done), [len(e) for e in self.extras]
        self.not_last.add(at.info.name)
        try:
            return self.block(body, init.copy())
        finally:
            self.not_last.discard(at.info.name)
            del self.reads[reads:], self.done[done:]
            self.writes = {k: v[:writes[k]] for k, v in self.writes.items() if k in writes}
            for b, n in zip(self.bodies, accesses):
                del b.accesses[n:]
            for e, n in zip(self.extras, extras):
                del e[n:]

    def _loop_of(self, call: CallInfo | None) -> _LoopAt | None:
        if call is None or call.op not in ("is_loop_begin", "is_loop_end"):
            return None
        return next((a for a in reversed(self.at) if a.info.name == call.attrs.get("loop")), None)

    # -------------------------------------------------------------- expressions
    def expr(self, e: ast.Expr | None, stmt: ast.Stmt, init: set[str]) -> None:
        if e is None:
            return
        view = self.t.view.get(id(e))
        read = self.t.read.get(id(e))
        if isinstance(e, ast.Name):
            self.name(e, stmt, init)
        elif isinstance(e, (ast.Subscript, ast.Call)) and (view is not None or read is not None):
            valid: Region | None = None
            if view is not None:
                region: Region = (view.offsets, view.shape)
                valid = (view.offsets, _narrowed(view.shape, view.valid))
                base = view.base
            else:
                base, idx, _ = read
                region = (idx, tuple(1 for _ in idx))
            self.read(base, region, e.span, stmt, init, valid=valid)
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
            valid = (b.view.offsets, _narrowed(b.view.shape, b.view.valid))
            self.read(b.view.base, (b.view.offsets, b.view.shape), e.span, stmt, init, via=b.name, valid=valid)
        elif b.kind in ("param", "local") and isinstance(b.ty, TensorTy):
            self.read(b.ir_name, (tuple(0 for _ in b.ty.shape), b.ty.shape), e.span, stmt, init)

    def read(self, base: str, region: Region, span: Span, stmt: ast.Stmt, init: State,
             via: str | None = None, valid: Region | None = None) -> None:
        """``region`` is what the read touches (for cycles); ``valid`` what it reads of it (for
        whether it was written), where a view narrows it."""
        self.bodies[-1].accesses.append(_Access(False, base, region, span, stmt, self.branch))
        if base not in self.decls:
            return
        region = valid or region
        v = verdict(init, base, region, self.ranges)
        if v != COVERED:
            # What the enclosing loops read in all their iterations is a superset; if that is
            # covered, so is this iteration's read (`t[j, :]` after `t` was filled row by row).
            wide: Region | None = region
            for at in reversed(self.at):
                wide = over_loop(wide, at.info.index, at.first, at.info.step, at.trips, self.ranges)
                if wide is None:
                    break
                if verdict(init, base, wide, self.ranges) == COVERED:
                    v = COVERED
                    break
        self.reads.append(_Read(base, span, via, v))

    # -------------------------------------------------------------- E0403
    def check_cycles(self, body: _Body, diags: Diagnostics) -> None:
        order = {id(a): k for k, a in enumerate(body.accesses)}
        writes = [a for a in body.accesses if a.write]
        reads = [a for a in body.accesses if not a.write]
        own = {id(r) for r in reads if self._own(body, r)}
        flagged: set[str] = set()
        for w in writes:
            if w.base in flagged:
                continue
            for r in reads:
                if r.base != w.base or _exclusive(r.branch, w.branch):
                    continue
                if id(r) in own and order[id(w)] < order[id(r)]:
                    continue  # it reads what this write (with the others before it) stored
                if r.region == w.region or _disjoint(r.region, w.region, self.ranges):
                    continue
                flagged.add(w.base)
                self.report_cycle(body, w, r, diags)
                break

    def _own(self, body: _Body, r: _Access) -> bool:
        """Whether the writes before ``r`` in the body, on its path, cover what it reads: it then
        reads only what the body stored (a local assembled block by block, then read whole), so
        with those writes it is an edge of the body's graph, not a cycle. A read that also sees
        data from before the body (``h[0:2, :] = ...`` then ``h[b, :]``) stays a cycle with those
        writes, and any read with an overlapping write after it."""
        state = State()
        for a in body.accesses:
            if a is r:
                break
            if a.write and a.base == r.base and a.stmt is not r.stmt and _on_path(a.branch, r.branch):
                state.add(a.base, a.region)
        return r.base in state and verdict(state, r.base, r.region, self.ranges) == COVERED

    def report_cycle(self, body: _Body, w: _Access, r: _Access, diags: Diagnostics) -> None:
        name = _display_name(self.ck, w.base)
        same = r.stmt is w.stmt
        diags.error(
            E_CYCLE, f"{body.name} reads and writes `{name}` in regions that may overlap", w.span,
            f"writes `{name}{_fmt_region(w.region)}`",
            secondary=[Label(r.span, f"reads `{name}{_fmt_region(r.region)}`"
                             + (" in the same statement" if same else " in the same body"))],
            notes=["a loop body becomes one dataflow graph; a tensor that is both its input and its "
                   "output in overlapping regions makes a cycle in it"],
            help=f"write exactly the region that is read, read regions that cannot overlap the written one, "
            f"or copy what is read into a local before the loop and read `{name}` from that copy")


def _mentions_end(body: Sequence[ast.Stmt], t, at: _LoopAt) -> bool:
    """Whether ``body`` branches on ``is_loop_end`` of ``at``'s loop."""
    for st in body:
        for node in ast.walk(st):
            call = t.call.get(id(node))
            if call is not None and call.op == "is_loop_end" and call.attrs.get("loop") == at.info.name:
                return True
    return False


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


def _on_path(write: Branch, read: Branch) -> bool:
    """Whether a write in branch ``write`` runs whenever a later read in branch ``read`` does: it
    sits in the same arms as the read, or in arms around them."""
    return read[:len(write)] == write


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
    """What is known of the symbols in offsets: dims are at least 1, loop indices start at start.

    A kernel never runs with a zero dim: a call with one either has only empty outputs, and returns
    them without running anything, or is refused before any kernel runs (E0710). So a loop over a
    dim (`loop(B)`, `loop(cdiv(L, BL))`) runs at least once whenever it runs at all."""
    r: dict[str, sym.Bounds] = {}
    for name, info in ck.symbols.items():
        r[name] = (info.value, info.value) if info.value is not None else (1, None)
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
