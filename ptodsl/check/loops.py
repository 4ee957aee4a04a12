"""Loops and paths: loop names, the YAML's per-loop schedules, unroll lists and compiled path counts.

The loops are read from the syntax tree rather than from the typer's ``LoopInfo`` list, so a loop
whose header failed to type still has a name here and the YAML is not blamed for naming it.

* E0501 — two loops share a name, so `schedule: loops:` could not tell them apart.
* E0503 — `schedule: loops:` names a loop the kernel does not have; PyPTO silently ignores it.
* E0504, E0505, E0510, N0507, E0508 — unroll lists: factors must be positive, distinct and at most
  ``MAX_UNROLL_FACTOR``, 1 is always there (added with a note when missing), and only the
  innermost loop may be unrolled.
* E0509 — the compiled paths of one loop body. A runtime ``if`` makes one path per branch (so a
  plain ``if`` doubles the count, ``if/elif/else`` triples it); an ``if`` on ``is_loop_begin`` or
  ``is_loop_end`` of the loop's own index is specialised into the first/last iteration instead and
  adds no paths; an unrolled body is compiled once per unroll factor. Nested loops are bodies of
  their own. The top level of the kernel counts as the body of an implicit ``loop(1)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..diagnostics import Diagnostics, Label, Span
from ..frontend import ast
from ..frontend.spec import Spec
from .typer import did_you_mean
from .types import CheckedKernel

E_DUPLICATE_NAME = "E0501"
E_UNKNOWN_LOOP = "E0503"
E_FACTOR = "E0504"
E_REPEATED_FACTOR = "E0505"
N_ADDED_ONE = "N0507"
E_NOT_INNERMOST = "E0508"
E_PATHS = "E0509"
E_FACTOR_TOO_LARGE = "E0510"

DEFAULT_MAX_PATHS = 64
# The sub-loop of factor f holds f copies of the body, and every copy is compiled (and later
# scheduled and synchronised) on its own, so compile time and kernel size grow with the factor.
# Far below this, unrolling has stopped paying: the loop overhead it saves is a few scalar
# instructions per iteration.
MAX_UNROLL_FACTOR = 256
LOOP_PREDICATES = ("is_loop_begin", "is_loop_end")


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


def unroll_factors(factors: Sequence[int]) -> list[int]:
    """The sub-loops an unroll list compiles into: its distinct positive factors, and 1."""
    out = sorted({f for f in factors if f > 0}, reverse=True)
    return out if 1 in out else [*out, 1]


def run(checked: Sequence[CheckedKernel], spec: Spec, diags: Diagnostics) -> None:
    """Loop rules depend on no dtype, so they run once per spec (the first variant's annotations)."""
    if not checked:
        return
    ck = checked[0]
    sites = loop_sites(ck.kernel)
    _check_names(sites, spec, diags)
    _check_schedules(ck, sites, spec, diags)
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


@dataclass
class _Count:
    paths: int = 1
    branches: list[ast.If] = field(default_factory=list)  # the runtime ifs that add paths


def count_paths(stmts: Sequence[ast.Stmt], index: str | None, ck: CheckedKernel) -> _Count:
    """Paths through one body; nested loops are not entered (they are bodies of their own)."""
    total = _Count()
    for s in stmts:
        if not isinstance(s, ast.If):
            continue
        then, other = count_paths(s.body, index, ck), count_paths(s.orelse, index, ck)
        static = ck.typing.scalar.get(id(s.cond))
        if isinstance(static, bool):  # a condition known at compile time keeps one branch
            taken = then if static else other
            total.paths *= taken.paths
            total.branches += taken.branches
        elif _specialised(s.cond, index):
            total.paths *= max(then.paths, other.paths)
            total.branches += then.branches + other.branches
        else:
            total.paths *= then.paths + other.paths
            total.branches += [s, *then.branches, *other.branches]
    return total


def _specialised(cond: ast.Expr, index: str | None) -> bool:
    return (index is not None and isinstance(cond, ast.Call) and cond.func_name in LOOP_PREDICATES
            and len(cond.args) == 1 and isinstance(cond.args[0], ast.Name) and cond.args[0].id == index)


def _check_paths(ck: CheckedKernel, sites: list[LoopSite], spec: Spec, diags: Diagnostics) -> None:
    limit = int(spec.schedule.pass_options.get("max_paths", DEFAULT_MAX_PATHS))
    limit_span = spec.spans.value(("schedule", "pass_options", "max_paths"))
    top = (f"the top level of kernel `{ck.kernel.name}`", None, ck.kernel.name_span or ck.kernel.span,
           ck.kernel.body, None)
    bodies: list[tuple[str, str | None, Span, Sequence[ast.Stmt], str | None]] = [top]
    bodies += [(f"loop `{s.name}`", s.name, s.header, s.node.body, s.index) for s in sites]
    for what, name, span, stmts, index in bodies:
        count = count_paths(stmts, index, ck)
        copies = 1
        sched = spec.schedule.loops.get(name) if name is not None else None
        if sched is not None and sched.unroll is not None:
            copies = len(unroll_factors(sched.unroll))
        total = count.paths * copies
        if total <= limit:
            continue
        secondary = [Label(b.cond.span, "a runtime branch: one path per branch") for b in count.branches[:3]]
        if copies > 1:
            secondary.append(Label(spec.spans.at(("schedule", "loops", name, "unroll")),
                                   f"{copies} unrolled copies of the body"))
        if limit_span is not None:
            secondary.append(Label(limit_span, "the limit is set here"))
        formula = f"{count.paths} branch paths × {copies} unrolled copies" if copies > 1 else \
            f"{count.paths} branch paths"
        hint = f"`is_loop_begin({index})`/`is_loop_end({index})`" if index else "`is_loop_begin`/`is_loop_end`"
        diags.error(E_PATHS, f"{what} compiles into {total} paths, more than the limit of {limit}", span,
                    f"{formula} = {total}", secondary=secondary,
                    help=f"branch on {hint} where the branch only singles out the first or last iteration "
                    "(those are specialised, not compiled into every path), move branches out of the body, "
                    "unroll with fewer factors, or raise `schedule: pass_options: max_paths:`")
