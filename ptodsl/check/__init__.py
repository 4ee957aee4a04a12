"""The checker: names, dtypes, symbolic shapes and the language's rules, per dtype variant."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping

from ..diagnostics import CompileError, Diagnostic, Diagnostics, Label
from ..frontend import ast
from ..frontend.spec import Spec
from ..targets import load_target
from . import dataflow, loops, schedule
from .backward import check_backward
from .cases import check_case_inputs
from .relations import check_max_dims, check_nondecreasing, check_relations, fixed_and_defined
from .typer import Typer, did_you_mean
from .types import CheckedKernel

__all__ = ["CheckedKernel", "check", "variants"]


def variants(spec: Spec) -> list[dict[str, str]]:
    """One binding per element of the product of the YAML's dtype lists, in declaration order."""
    names = list(spec.dtypes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(spec.dtypes[n] for n in names))] or [{}]


def check(module: ast.Module, spec: Spec, diags: Diagnostics,
          sources: Mapping[str, str] | None = None) -> list[CheckedKernel]:
    """Type-check the spec's kernel under every dtype variant, and its `backward:` against its
    signature; errors go to diags. ``sources`` stand in for files (an editor's unsaved buffers)."""
    kernel = module.kernel(spec.op)
    if kernel is None:
        names = [k.name for k in module.kernels]
        diags.error("E0312", f"no kernel `{spec.op}` in {spec.source}", spec.spans.at(("op",)),
                    "the YAML names this kernel", help=did_you_mean(spec.op, names)
                    or f"the .pto defines: {', '.join(names) or 'no kernels'}",
                    secondary=[Label(k.name_span or k.span, "a kernel is defined here") for k in module.kernels[:1]])
        return []
    _check_dtype_vars(kernel, spec, diags)
    check_backward(spec, kernel, diags, sources)
    if not check_relations(kernel, spec, diags):
        return []
    check_max_dims(kernel, spec, diags)
    check_nondecreasing(kernel, spec, diags)
    check_case_inputs(kernel, spec, diags)
    valid_shapes = {name: (dims, spec.spans.at(("schedule", "valid_shapes", name)))
                    for name, dims in spec.schedule.valid_shapes.items()}
    out: list[CheckedKernel] = []
    clean: list[CheckedKernel] = []  # variants that typed without errors
    first = len(diags.items)
    for variant in variants(spec):
        before = len(diags.errors)
        typer = Typer(kernel, variant, fixed_and_defined(spec), valid_shapes, diags)
        ck = typer.run()
        out.append(ck)
        if len(diags.errors) == before:
            clean.append(ck)
    _merge_variant_copies(diags, first)
    if out:
        _check_valid_shape_names(out[0], spec, diags)
    _check_rules(out, clean, spec, diags)
    return out


VARIANT_NOTE = "in the dtype variant "


def _merge_variant_copies(diags: Diagnostics, first: int) -> None:
    """A mistake that does not depend on the dtype is found once per variant; report it once,
    naming every variant it was found in (``in the dtype variants T=f32; T=f16``)."""
    merged: dict[tuple, Diagnostic] = {}
    kept: list[Diagnostic] = []
    for d in diags.items[first:]:
        note = next((n for n in d.notes if n.startswith(VARIANT_NOTE)), None)
        if note is None:
            kept.append(d)
            continue
        key = (d.code, d.message, d.span, d.label, tuple(n for n in d.notes if n is not note))
        if key in merged:
            have = merged[key]
            variants = next(n for n in have.notes if n.startswith(VARIANT_NOTE.rstrip()))
            merged[key] = dataclasses.replace(have, notes=tuple(
                f"{variants.replace('variant ', 'variants ', 1)}; {note.removeprefix(VARIANT_NOTE)}"
                if n is variants else n for n in have.notes))
            kept[kept.index(have)] = merged[key]
        else:
            merged[key] = d
            kept.append(d)
    diags.items[first:] = kept


def _check_rules(checked: list[CheckedKernel], clean: list[CheckedKernel], spec: Spec, diags: Diagnostics) -> None:
    """The language's rules beyond typing (docs/LANGUAGE.md §4).

    Loop rules read the syntax and the YAML, so they run on every kernel. Data flow and the
    schedule's dtype-dependent rules need complete annotations, so they only see the variants that
    typed cleanly: after a type error the expression has no type, and guessing would add noise.
    """
    loops.run(checked, spec, diags)
    try:
        target = load_target(spec.target)
    except CompileError as exc:  # a broken target file: its own diagnostics say why
        diags.extend(exc.diagnostics)
        return
    for ck in clean:
        dataflow.run(ck, spec, target, diags)
    schedule.run(clean, spec, target, diags, kernel=checked[0].kernel if checked else None)


def _check_dtype_vars(kernel: ast.Kernel, spec: Spec, diags: Diagnostics) -> None:
    used = {p.dtype for p in kernel.params}
    for var in spec.dtypes:
        if var not in used and not any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(kernel)):
            diags.warning("W0330", f"dtype variable `{var}` is never used by kernel `{kernel.name}`",
                          spec.spans.key(("dtypes", var)) or spec.spans.at(("dtypes",)),
                          help="remove it, or use it as a parameter's dtype")


def _check_valid_shape_names(ck: CheckedKernel, spec: Spec, diags: Diagnostics) -> None:
    views = {b.name for b in ck.typing.defines.values() if b.kind == "view"}
    for name in spec.schedule.valid_shapes:
        if name not in views:
            diags.error("E0607", f"`valid_shapes` names `{name}`, which is not a view in the kernel",
                        spec.spans.key(("schedule", "valid_shapes", name)) or spec.spans.at(("schedule",)),
                        help=did_you_mean(name, sorted(views)) or
                        "name a binding made by `view(...)` or by slicing, e.g. `row = x[b, :]`")
