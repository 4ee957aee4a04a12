"""Dims defined by other dims (``symbols: {D: 2*H}``) against the kernel and the test cases.

The definitions were parsed and made acyclic by :mod:`ptodsl.frontend.relations`. Here every dim
a definition uses must be one a call can bind: a dim of some parameter, or the one dim of a
definition whose defined dim a parameter has (``x: f32[B, D]`` binds D, so ``D: 2*H`` gives H);
and each test case's dims must satisfy the definitions (E0866), as every call's must.
"""

from __future__ import annotations

from .. import sym
from ..cases import TestCase
from ..diagnostics import Diagnostics, Label
from ..frontend import ast
from ..frontend.relations import E_DEFINITION
from ..frontend.spec import Spec

E_UNSATISFIED = "E0866"
E_ABOVE_MAX = "E0867"
E_MAX_UNBOUND = "E0868"
E_NONDECREASING = "E0869"


def check_relations(kernel: ast.Kernel, spec: Spec, diags: Diagnostics) -> bool:
    """Report definitions no call could bind, and cases whose dims break one; False on an error
    of the definitions themselves (the kernel is not typed with them then)."""
    dims = {d.value for p in kernel.params for d in p.dims or () if isinstance(d.value, str)}
    ok = True
    for name, e in spec.defined.items():
        unbound = sorted(sym.free_symbols(e) - dims)
        if not unbound or (len(unbound) == 1 and name in dims):
            continue
        ok = False
        what = ", ".join(f"`{u}`" for u in unbound)
        why = (f"and `{name}` is no parameter's dim to solve it from" if len(unbound) == 1
               else f"and only one dim can be solved from `{name}`")
        diags.error(E_DEFINITION, f"`{name} = {sym.to_text(e)}` uses {what}, which no parameter's shape binds, {why}",
                    spec.spans.at(("symbols", name)), "a call could not bind this",
                    help=f"use dims of `{kernel.name}`'s parameters, or give `{name}` to a parameter so that "
                         f"{what} is solved from it")
    if not ok:
        return False
    for case in spec.tests:
        values = {k: v for k, v in (dict(spec.symbols) | dict(case.shapes)).items()}
        problem = sym.bind_defined(spec.defined, values)
        if problem is None:
            continue
        key = ("tests", case.index, "shapes", problem.dim)
        diags.error(E_UNSATISFIED, f"test {case.index}: {problem.message()}", spec.spans.at(key),
                    "breaks the definition", help=f"give dims with `{problem.dim} = {sym.to_text(problem.definition)}`"
                    f", or give only the dims it is defined by")
    return True


def check_max_dims(kernel: ast.Kernel, spec: Spec, diags: Diagnostics) -> None:
    """Report ``max_dims:`` entries no call binds (E0868) and cases whose dims leave the bounds
    (E0867), as every call's are."""
    dims = {d.value for p in kernel.params for d in p.dims or () if isinstance(d.value, str)}
    bounds = spec.schedule.max_dims
    for name in bounds:
        if name in spec.symbols:
            why, label = f"`symbols:` fixes `{name}` to {spec.symbols[name]}", "fixed when compiling"
        elif name not in dims and name not in spec.defined:
            why, label = f"no parameter of `{kernel.name}` has a dim `{name}`", "no call binds this"
        else:
            continue
        diags.error(E_MAX_UNBOUND, f"`max_dims:` bounds `{name}`, but {why}", spec.spans.key(("max_dims", name)),
                    label, help=f"bound a dim of the parameters' shapes ({', '.join(sorted(dims - set(spec.symbols))) or 'none'}), "
                    "or remove the entry")
    for where, cases in (("tests", spec.tests), ("bench", spec.bench)):
        for case in cases:
            _check_case_bounds(spec, where, case, diags)


def check_nondecreasing(kernel: ast.Kernel, spec: Spec, diags: Diagnostics) -> None:
    """E0869 for a ``nondecreasing:`` entry that names no integer input tensor of rank 1: the
    promise is about the elements of such a tensor (cumulative lengths), checked at every call."""
    params = {p.name: p for p in kernel.params}
    for k, name in enumerate(spec.schedule.nondecreasing):
        p = params.get(name)
        if p is None:
            why, label = f"`{kernel.name}` has no parameter `{name}`", "no such parameter"
        elif not p.is_tensor or p.mode != "in":
            why, label = f"`{name}` is {'a scalar' if not p.is_tensor else f'an `{p.mode}` tensor'}", "not an input tensor"
        elif len(p.dims or ()) != 1 or not p.dtype.startswith(("i", "u")):
            why, label = f"`{name}` is {p.dtype}[{', '.join(str(d.value) for d in p.dims or ())}]", \
                "not an integer tensor of rank 1"
        else:
            continue
        tensors = [q.name for q in kernel.params if q.is_tensor and q.mode == "in" and len(q.dims or ()) == 1
                   and q.dtype.startswith(("i", "u"))]
        diags.error(E_NONDECREASING, f"`nondecreasing:` names `{name}`, but {why}",
                    spec.spans.value(("nondecreasing", k)), label,
                    help="name integer input tensors of rank 1 whose elements never decrease"
                    + (f" ({', '.join(tensors)})" if tensors else "; this kernel has none"))


def _check_case_bounds(spec: Spec, where: str, case: TestCase, diags: Diagnostics) -> None:
    """E0867 for a test or bench case whose dims leave ``max_dims:`` (a bench case the operator
    would refuse is no call to model either)."""
    values = dict(spec.symbols) | dict(case.shapes)
    if sym.bind_defined(spec.defined, values) is not None:
        return  # (reported as E0866)
    what = "test" if where == "tests" else "bench case"
    for name, top in spec.schedule.max_dims.items():
        v = values.get(name)
        if isinstance(v, int) and not 1 <= v <= top:
            key = (where, case.index, "shapes", name)
            diags.error(E_ABOVE_MAX, f"{what} {case.index}: `{name}` is {v}, outside the 1 to {top} that "
                        f"`max_dims:` allows", spec.spans.value(key) if key in spec.spans else
                        spec.spans.at((where, case.index)), "outside the bound",
                        secondary=[Label(spec.spans.value(("max_dims", name)), "bounded here")],
                        help=f"give `{name}` a value from 1 to {top}, or raise the bound")


def fixed_and_defined(spec: Spec) -> dict[str, sym.Expr]:
    """What the checker substitutes for dims: the fixed values and the definitions."""
    return {**spec.symbols, **spec.defined}


__all__ = ["check_max_dims", "check_relations", "fixed_and_defined"]
