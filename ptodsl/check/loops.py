"""Loops and paths: loop names, the YAML's per-loop schedules, unroll lists and compiled path counts.

The loops are read from the syntax tree rather than from the typer's ``LoopInfo`` list, so a loop
whose header failed to type still has a name here and the YAML is not blamed for naming it.

* E0501 — two loops share a name, so `schedule: loops:` could not tell them apart.
* E0503 — `schedule: loops:` names a loop the kernel does not have; PyPTO silently ignores it.
* E0504, E0505, E0510, N0507, E0508 — unroll lists: factors must be positive, distinct and at most
  ``MAX_UNROLL_FACTOR``, 1 is always there (added with a note when missing), and only the
  innermost loop may be unrolled.
* E0509 — the compiled paths of one loop body, counted by the model in ``paths.py`` on the
  source's skeleton after the loops, paths and unroll transformations, the count ``ptodsl ir
  --stats`` reads off the compiled IR. One error per source loop (or the top level) whose worst
  compiled body passes ``max_paths``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..diagnostics import Diagnostics, Label, Span
from ..frontend import ast
from ..frontend.spec import Spec
from ..schedule import MAX_UNROLL_FACTOR
from . import paths
from .paths import unroll_factors
from .typer import did_you_mean
from .types import CheckedKernel, TensorTy

E_DUPLICATE_NAME = "E0501"
E_UNKNOWN_LOOP = "E0503"
E_FACTOR = "E0504"
E_REPEATED_FACTOR = "E0505"
N_ADDED_ONE = "N0507"
E_NOT_INNERMOST = "E0508"
E_PATHS = "E0509"
E_FACTOR_TOO_LARGE = "E0510"

DEFAULT_MAX_PATHS = 64


@dataclass
class LoopSite:
    """A ``for`` statement of the kernel, as written."""

    node: ast.For
    name: str
    explicit: bool  # named with name="..." (otherwise the default `<index>_loop`)
    name_span: Span  # the name string, or the index when the name is implicit
    header: Span  # `for ... in loop(...)`
    index: str | None
    parent: LoopSite | None
    children: list[LoopSite] = field(default_factory=list)


def loop_sites(kernel: ast.Kernel) -> list[LoopSite]:
    """Every loop of the kernel in source order, with its nesting."""
    out: list[LoopSite] = []

    def walk(stmts: Sequence[ast.Stmt], parent: LoopSite | None) -> None:
        for s in stmts:
            if isinstance(s, ast.If):
                walk(s.body, parent)
                walk(s.orelse, parent)
            elif isinstance(s, ast.For):
                site = _site(s, parent)
                if site is None:
                    walk(s.body, parent)
                    continue
                out.append(site)
                if parent is not None:
                    parent.children.append(site)
                walk(s.body, site)

    walk(kernel.body, None)
    return out


def _site(s: ast.For, parent: LoopSite | None) -> LoopSite | None:
    it = s.iter
    if not (isinstance(it, ast.Call) and it.func_name in ("loop", "loop_unroll")) or not s.targets:
        return None
    index = s.targets[0].id
    header = Span(s.span.file, s.span.line, s.span.col, it.span.end_line, it.span.end_col)
    kw = it.keyword("name")
    if kw is not None and isinstance(kw.value, ast.Str):
        return LoopSite(s, kw.value.value, True, kw.value.span, header, index, parent)
    return LoopSite(s, f"{index}_loop", False, s.targets[0].span, header, index, parent)


def run(checked: Sequence[CheckedKernel], spec: Spec, diags: Diagnostics) -> None:
    """Loop rules depend on no dtype, so they run once per spec (the first variant's annotations)."""
    if not checked:
        return
    ck = checked[0]
    sites = loop_sites(ck.kernel)
    _check_names(sites, spec, diags)
    errors = len(diags.errors)
    _check_schedules(ck, sites, spec, diags)
    if len(diags.errors) == errors:  # counting paths unrolls by the factors: only by ones that passed
        _check_paths(ck, sites, spec, diags)


# ------------------------------------------------------------------ names


def _check_names(sites: list[LoopSite], spec: Spec, diags: Diagnostics) -> None:
    first: dict[str, LoopSite] = {}
    for site in sites:
        prev = first.setdefault(site.name, site)
        if prev is site:
            continue
        # Default names (`i_loop`) may repeat harmlessly until the YAML needs to address one.
        if not (site.explicit and prev.explicit) and site.name not in spec.schedule.loops:
            continue
        implicit = "" if site.explicit else f" (the default name of a loop over `{site.index}`)"
        diags.error(E_DUPLICATE_NAME, f"two loops are named `{site.name}`{implicit}", site.name_span,
                    "second loop with this name",
                    secondary=[Label(prev.name_span, "first loop with this name")],
                    help=f"rename one of them, e.g. `name=\"{site.name}_2\"`: the YAML's `schedule: loops:` "
                    "addresses loops by name")


def _check_schedules(ck: CheckedKernel, sites: list[LoopSite], spec: Spec, diags: Diagnostics) -> None:
    by_name = {}
    for site in sites:
        by_name.setdefault(site.name, site)
    for name, sched in spec.schedule.loops.items():
        path = ("schedule", "loops", name)
        site = by_name.get(name)
        if site is None:
            names = list(by_name)
            listing = (f"the loops of kernel `{ck.kernel.name}` are: {', '.join(f'`{n}`' for n in names)}"
                       if names else f"kernel `{ck.kernel.name}` has no loops")
            diags.error(E_UNKNOWN_LOOP, f"`schedule: loops:` names `{name}`, which is not a loop of the kernel",
                        spec.spans.key(path) or spec.spans.at(path), "no loop has this name",
                        help=did_you_mean(name, names) or listing)
        if sched.unroll is not None:
            _check_unroll(name, sched.unroll, site, spec, diags)


def _check_unroll(name: str, factors: Sequence[int], site: LoopSite | None, spec: Spec,
                  diags: Diagnostics) -> None:
    path = ("schedule", "loops", name, "unroll")
    seen: dict[int, int] = {}
    ok = True
    for i, f in enumerate(factors):
        item = spec.spans.at((*path, i))
        if f <= 0:
            ok = False
            diags.error(E_FACTOR, f"unroll factor {f} of loop `{name}` is not positive", item,
                        "factors are the numbers of iterations one compiled copy handles",
                        help="use factors of 1 or more, largest first, e.g. `unroll: [4, 2, 1]`")
            continue
        if f > MAX_UNROLL_FACTOR:
            ok = False
            diags.error(E_FACTOR_TOO_LARGE, f"unroll factor {f} of loop `{name}` is larger than {MAX_UNROLL_FACTOR}",
                        item, f"{f} copies of the body would be compiled",
                        help=f"use factors of at most {MAX_UNROLL_FACTOR}; a factor of 4 to 16 already hides "
                        "the loop overhead")
            continue
        if f in seen:
            ok = False
            diags.error(E_REPEATED_FACTOR, f"unroll factor {f} of loop `{name}` is repeated", item,
                        "repeated here",
                        secondary=[Label(spec.spans.at((*path, seen[f])), "first given here")],
                        help=f"list each factor once: `unroll: {unroll_factors(factors)}`")
            continue
        seen[f] = i
    if ok and 1 not in seen:
        diags.note(N_ADDED_ONE, f"unroll factor 1 added to loop `{name}`: it compiles as "
                   f"{unroll_factors(factors)}", spec.spans.at(path),
                   "the remainder iterations need a copy of factor 1",
                   help=f"write `unroll: {unroll_factors(factors)}` to say so")
    if site is not None and site.children:
        inner = _innermost(site)
        diags.error(E_NOT_INNERMOST, f"loop `{name}` is unrolled, but it is not an innermost loop",
                    spec.spans.key(path) or spec.spans.at(path), f"`{name}` contains other loops",
                    secondary=[Label(site.header, f"`{name}` is here"),
                               Label(inner.header, f"`{inner.name}` is nested inside it")],
                    help=f"unroll the innermost loop instead: move `unroll:` under `loops: {inner.name}:`")


def _innermost(site: LoopSite) -> LoopSite:
    while site.children:
        site = site.children[0]
    return site


# ------------------------------------------------------------------ paths


def skeleton(stmts: Sequence[ast.Stmt], ck: CheckedKernel, sites: dict[int, LoopSite]) -> list[paths.Node]:
    """The control flow of ``stmts`` as the model's skeleton, with the conditions the Tensor IR gets."""
    t = ck.typing
    out: list[paths.Node] = []
    for s in stmts:
        if isinstance(s, ast.If):
            cond = t.scalar.get(id(s.cond), ("untyped", id(s)))  # stays a runtime branch
            out.append(paths.Branch(cond, (skeleton(s.body, ck, sites), skeleton(s.orelse, ck, sites)), s.cond.span))
        elif isinstance(s, ast.For):
            lp = t.loop.get(id(s))
            if lp is None:
                out.append(paths.Work())
                continue
            out.append(paths.Loop(lp.index, lp.start, lp.stop, lp.step, lp.name, skeleton(s.body, ck, sites),
                                  unroll_var=lp.unrolled, source=sites.get(id(s))))
        else:
            op = _top_op(s, ck)
            if op is not None:
                out.append(paths.Work(op))
    return out


def _top_op(s: ast.Stmt, ck: CheckedKernel) -> str | None:
    """The kind of the first IR op a statement becomes, as far as the loops pass cares (None: none)."""
    t = ck.typing
    if not (isinstance(s, ast.Assign) and isinstance(s.target, ast.Name)):
        return "op"
    v = s.value
    if isinstance(t.ty.get(id(v)), TensorTy):
        if id(v) in t.view:
            return "view"
        if isinstance(v, ast.Name) and id(v) in t.binding:
            return None  # an alias emits nothing
        call = t.call.get(id(v))
        if call is not None and call.op in ("tensor", "zeros", "ones", "full"):
            return "alloc"
        if call is not None and call.op == "reshape":
            return "reshape"
        return "op"
    return "read" if id(v) in t.read else None  # scalar arithmetic is symbolic; a read is an op


def compiled_skeleton(ck: CheckedKernel, spec: Spec, sites: Sequence[LoopSite] | None = None) -> list[paths.Node]:
    """The kernel's control flow as the passes compile it."""
    by_node = {id(site.node): site for site in (sites if sites is not None else loop_sites(ck.kernel))}
    sched = spec.schedule.loops

    def factors_of(name: str) -> Sequence[int] | None:
        ls = sched.get(name)
        return ls.unroll if ls is not None and ls.unroll else None

    return paths.compile_skeleton(skeleton(ck.kernel.body, ck, by_node), sched.get, factors_of)


def compiled_paths(ck: CheckedKernel, spec: Spec) -> int:
    """The compiled paths of a checked kernel: what `ptodsl ir --stats` reports after compiling it."""
    return paths.max_body_paths(compiled_skeleton(ck, spec))


@dataclass
class _Worst:
    paths: int
    body: list[paths.Node]
    loop: paths.Loop | None


def _check_paths(ck: CheckedKernel, sites: list[LoopSite], spec: Spec, diags: Diagnostics) -> None:
    limit = int(spec.schedule.pass_options.get("max_paths", DEFAULT_MAX_PATHS))
    limit_span = spec.spans.value(("schedule", "pass_options", "max_paths"))
    worst: dict[int | None, _Worst] = {}  # id of the source loop (None: the top level) -> its worst body
    for loop, body in paths.bodies(compiled_skeleton(ck, spec, sites)):
        site = loop.source if loop is not None else None
        key = id(site) if site is not None else None
        n = paths.paths(body)
        if n > limit and (key not in worst or n > worst[key].paths):
            worst[key] = _Worst(n, body, loop)
    by_id = {id(s): s for s in sites}
    for key, w in worst.items():
        site = by_id.get(key) if key is not None else None
        _report_paths(ck, site, w, limit, limit_span, spec, diags)


def _report_paths(ck: CheckedKernel, site: LoopSite | None, w: _Worst, limit: int, limit_span: Span | None,
                  spec: Spec, diags: Diagnostics) -> None:
    what = f"loop `{site.name}`" if site is not None else f"the top level of kernel `{ck.kernel.name}`"
    span = site.header if site is not None else (ck.kernel.name_span or ck.kernel.span)
    seen: set = set()
    secondary: list[Label] = []
    for b in paths.branches(w.body):
        if isinstance(b.span, Span) and b.span not in seen and len(secondary) < 3:
            seen.add(b.span)
            secondary.append(Label(b.span, "a runtime branch: one path per branch"))
    loop = w.loop
    factor = loop.factor if loop is not None else None
    copies = loop.copy_paths if loop is not None else ()
    if factor is not None and len(copies) > 1:
        per = copies[0]
        formula = (f"{len(copies)} unrolled copies of a body with {per} paths: {per}^{len(copies)} = {w.paths}"
                   if all(c == per for c in copies) else
                   f"{len(copies)} unrolled copies: {' × '.join(map(str, copies))} = {w.paths}")
        secondary.append(Label(spec.spans.at(("schedule", "loops", loop.name, "unroll")),
                               f"the sub-loop of factor {factor} holds {factor} copies of the body"))
    else:
        formula = f"{w.paths} paths through one body"
    if limit_span is not None:
        secondary.append(Label(limit_span, "the limit is set here"))
    index = site.index if site is not None else None
    hint = f"`is_loop_begin({index})`/`is_loop_end({index})`" if index else "`is_loop_begin`/`is_loop_end`"
    diags.error(E_PATHS, f"{what} compiles into {w.paths} paths, more than the limit of {limit}", span,
                formula, secondary=secondary,
                help=f"branch on {hint} where the branch only singles out the first or last iteration "
                "(those are specialised, not compiled into every path), move branches out of the body, "
                "unroll with smaller factors (a body of p paths unrolled by f has p^f), "
                "or raise `schedule: pass_options: max_paths:`")
