"""The ``inputs:`` of the test cases against the kernel's signature (docs/LANGUAGE.md §2).

Each entry must name a tensor the kernel reads, and make an array of the shape that parameter has
in the case (its dims bound by the case's ``shapes`` and the fixed symbols) whose values the dtype
of the case's variant holds. The arrays are made exactly as the golden harness makes them
(:func:`ptodsl.cases.build_input`), so a case that checks clean cannot fail on its inputs.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import sym
from ..cases import InputError, build_input, case_seed
from ..diagnostics import Diagnostics, Label
from ..dtypes import DTYPES
from ..frontend import ast
from ..frontend.spec import Spec
from .typer import did_you_mean

E_INPUT_NAME = "E0860"


def check_case_inputs(kernel: ast.Kernel, spec: Spec, diags: Diagnostics) -> None:
    """Report every ``inputs:`` entry that names no input tensor or cannot make its array."""
    params = {p.name: p for p in kernel.params}
    for case in spec.tests:
        env = case_dims(spec, case.shapes)
        variant = spec.variant_of(case)
        for name, entry in case.inputs.items():
            where = ("tests", case.index, "inputs", name)
            p = params.get(name)
            if p is None or not p.is_tensor or p.mode == "out":
                _name_error(spec, kernel, name, p, where, diags)
                continue
            assert p.dims is not None
            try:
                shape = tuple(int(env[d.value]) if isinstance(d.value, str) else d.value for d in p.dims)
            except KeyError:
                continue  # the case misses a dim: E0233 when it runs, with the case's other problems
            dtype = variant.get(p.dtype, p.dtype)
            if dtype not in DTYPES:
                continue  # a dtype variable the spec does not bind: E0305 from the typer
            try:
                build_input(name, entry, shape, dtype, case_seed(spec.op, case), env, spec.folder)
            except InputError as exc:
                diags.error(exc.code, f"test {case.index}, input `{name}`: {exc.message}",
                            spec.spans.at((*where, *exc.where)), exc.label,
                            secondary=[Label(p.span, f"`{name}: {p.dtype}[{', '.join(str(d.value) for d in p.dims)}]`"
                                                     f" is {dtype}{list(shape)} in this case")],
                            help=exc.help)


def case_dims(spec: Spec, shapes: Mapping[str, int]) -> dict[str, int]:
    """The dims a case binds: the fixed symbols, its shapes, and the dims defined by them
    (a case that breaks a definition is E0866, reported by ``check_relations``)."""
    env: dict[str, sym.Number] = dict(spec.symbols) | dict(shapes)
    sym.bind_defined(spec.defined, env)
    return {k: int(v) for k, v in env.items()}


def _name_error(spec: Spec, kernel: ast.Kernel, name: str, p: ast.Param | None, where: tuple,
                diags: Diagnostics) -> None:
    inputs = [q.name for q in kernel.params if q.is_tensor and q.mode != "out"]
    span = spec.spans.key(where) or spec.spans.at(where)
    if p is None:
        diags.error(E_INPUT_NAME, f"`inputs:` names `{name}`, which is no parameter of `{kernel.name}`", span,
                    "no such parameter", help=did_you_mean(name, inputs)
                    or f"the tensors the kernel reads: {', '.join(inputs) or 'none'}")
    elif not p.is_tensor:
        diags.error(E_INPUT_NAME, f"`inputs:` names the scalar parameter `{name}`", span, "a scalar",
                    secondary=[Label(p.span, "declared here")], help=f"give its value under `scalars: {{{name}: ...}}`")
    else:
        diags.error(E_INPUT_NAME, f"`inputs:` names `{name}`, an `out` tensor the kernel writes without reading",
                    span, "an output", secondary=[Label(p.span, "declared `out` here")],
                    help="give values to the tensors the kernel reads (inputs, and `inout` tensors)")


__all__ = ["case_dims", "check_case_inputs"]
