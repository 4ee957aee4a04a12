"""The ``backward:`` key of a spec: the backward kernel's signature against the forward's.

A forward spec may name the spec computing its gradients (docs/LANGUAGE.md §2.1). The backward
kernel's parameters are matched by name: a tensor input is a forward tensor the forward `saves`
or ``d<OUT>``, the gradient of a forward output; a tensor output is ``d<IN>``, the gradient of a
forward input; a scalar is the forward scalar of the same name. :func:`match_backward` is that
rule as a pure function of the two signatures (the torch registration of generated packages reads
its :class:`BackwardMap`); :func:`check_backward` loads the backward spec's YAML and parses its
``.pto`` (the backward spec is checked on its own, as any spec) and reports every broken rule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..diagnostics import CompileError, Diagnostics, Label, Span
from ..frontend import ast
from ..frontend.parser import parse_module
from ..frontend.spec import Spec, load_spec
from .calls import did_you_mean

E_BACKWARD_SPEC = "E0236"  # the backward spec cannot be read, loaded or parsed, or names no kernel
E_SAVES = "E0237"  # a `saves` entry that is no forward tensor, or that the backward never reads
E_BACKWARD_PARAM = "E0238"  # a backward parameter that fits no rule
E_BACKWARD_AGREE = "E0239"  # dtypes, fixed symbols or a double backward that do not agree

__all__ = ["BackwardMap", "Problem", "check_backward", "match_backward"]


@dataclass(frozen=True)
class BackwardMap:
    """How a backward kernel's parameters relate to its forward kernel's, by name.

    ``inputs`` maps each backward tensor input to ``("saved", forward_name)`` (a forward input or
    output kept from the forward call) or ``("grad", forward_output)`` (the incoming gradient of
    that output); ``outputs`` maps each backward output to the forward input it is the gradient
    of; ``scalars`` maps each backward scalar to the forward scalar passed through. Forward inputs
    that no output names get no gradient.
    """

    inputs: dict[str, tuple[str, str]] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    scalars: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Problem:
    """One broken rule: the code, where (a backward parameter, a `saves` entry or None for the
    whole backward spec), the message, the caret's label, notes and the help line."""

    code: str
    message: str
    label: str
    help: str
    param: str | None = None  # the backward parameter at fault
    save: int | None = None  # the index of the `saves` entry at fault
    notes: tuple[str, ...] = ()


def _dims(param: ast.Param, symbols: Mapping[str, int]) -> tuple[int | str, ...]:
    """A tensor's dims with the spec's fixed symbols put in, so `N` fixed to 1024 equals `1024`."""
    return tuple(symbols.get(d.value, d.value) if isinstance(d.value, str) else d.value for d in param.dims or ())


def _type(param: ast.Param) -> str:
    dims = ", ".join(str(d.value) for d in param.dims or ())
    return f"{param.dtype}[{dims}]" if param.is_tensor else param.dtype


def _symbol_disagreements(fwd: Spec, fwd_kernel: ast.Kernel, bwd: Spec, bwd_kernel: ast.Kernel) -> dict[str, str]:
    """Symbols both kernels use that the two specs do not fix alike, with why."""
    def used(kernel: ast.Kernel) -> set[str]:
        return {d.value for p in kernel.params for d in p.dims or () if isinstance(d.value, str)}

    out: dict[str, str] = {}
    for name in sorted(used(fwd_kernel) & used(bwd_kernel)):
        a, b = fwd.symbols.get(name), bwd.symbols.get(name)
        if a == b:
            continue
        if a is None:
            out[name] = f"the backward spec fixes `{name}: {b}`, the forward leaves it free"
        elif b is None:
            out[name] = f"the forward spec fixes `{name}: {a}`, the backward leaves it free"
        else:
            out[name] = f"the forward spec fixes `{name}: {a}`, the backward `{name}: {b}`"
    return out


def match_backward(fwd: Spec, fwd_kernel: ast.Kernel, bwd: Spec,
                   bwd_kernel: ast.Kernel) -> tuple[BackwardMap, list[Problem]]:
    """The backward kernel's parameters matched to the forward's, and every rule they break.

    Pure: reads the two specs and signatures only. The map holds each parameter that fits a rule;
    a spec whose problem list is empty has a complete map.
    """
    assert fwd.backward is not None
    saves = fwd.backward.saves
    problems: list[Problem] = []
    fwd_params = {p.name: p for p in fwd_kernel.params}
    fwd_in = [p.name for p in fwd_kernel.params if p.is_tensor and p.mode == "in"]
    fwd_out = [p.name for p in fwd_kernel.params if p.is_tensor and p.mode != "in"]
    fwd_scalars = [p.name for p in fwd_kernel.params if not p.is_tensor]
    bwd_names = {p.name for p in bwd_kernel.params}

    for i, name in enumerate(saves):
        p = fwd_params.get(name)
        if p is None or not p.is_tensor:
            what = "a scalar parameter" if p is not None else "not a parameter"
            problems.append(Problem(
                E_SAVES, f"`saves` names `{name}`, which is not a tensor of the forward kernel `{fwd_kernel.name}`",
                f"{what} of `{fwd_kernel.name}`", save=i,
                help=did_you_mean(name, fwd_in + fwd_out) or
                f"save forward inputs or outputs: {', '.join(fwd_in + fwd_out)}"))
        elif name not in bwd_names:
            problems.append(Problem(
                E_SAVES, f"`saves` names `{name}`, which the backward kernel `{bwd_kernel.name}` does not take",
                "saved but never read", save=i,
                help=f"add `{name}: {_type(p)}` to the parameters of `{bwd_kernel.name}`, or remove it from `saves`"))

    disagree = _symbol_disagreements(fwd, fwd_kernel, bwd, bwd_kernel)
    # A symbol the two specs fix differently is reported once, as such; dims compare it by name.
    fixed_fwd = {k: v for k, v in fwd.symbols.items() if k not in disagree}
    fixed_bwd = {k: v for k, v in bwd.symbols.items() if k not in disagree}

    def same_type(bp: ast.Param, fp: ast.Param, role: str) -> Problem | None:
        """``bp`` must have ``fp``'s declared dtype and dims (``role`` says which rule asked)."""
        if bp.dtype != fp.dtype:
            return Problem(E_BACKWARD_PARAM, f"`{bp.name}` is {role}, so its dtype must be `{fp.dtype}`, "
                           f"as `{fp.name}: {_type(fp)}` declares", f"dtype `{bp.dtype}`, expected `{fp.dtype}`",
                           param=bp.name, help=f"declare `{bp.name}: {_type(fp)}`")
        fdims, bdims = _dims(fp, fixed_fwd), _dims(bp, fixed_bwd)
        if fdims != bdims:
            return Problem(E_BACKWARD_PARAM, f"`{bp.name}` is {role}, so its dims must be those of "
                           f"`{fp.name}: {_type(fp)}`", f"dims [{', '.join(str(d) for d in bdims)}], expected "
                           f"[{', '.join(str(d) for d in fdims)}]", param=bp.name,
                           help=f"declare `{bp.name}: {_type(fp)}` (the same symbols, in the same order)")
        return None

    mapping = BackwardMap()
    grads_of_outputs = {f"d{o}": o for o in fwd_out}
    grads_of_inputs = {f"d{i}": i for i in fwd_in}
    rules = (f"a backward input is a saved forward tensor (`saves: [{', '.join(saves)}]`) or the gradient "
             f"`d<OUT>` of a forward output ({', '.join(grads_of_outputs) or 'none'})")
    for bp in bwd_kernel.params:
        if not bp.is_tensor:
            fp = fwd_params.get(bp.name)
            if fp is None or fp.is_tensor:
                problems.append(Problem(
                    E_BACKWARD_PARAM, f"scalar `{bp.name}` is not a scalar of the forward kernel `{fwd_kernel.name}`",
                    "no forward scalar of this name", param=bp.name,
                    notes=("a backward scalar is the forward call's scalar of the same name, passed through",),
                    help=did_you_mean(bp.name, fwd_scalars) or
                    (f"forward scalars: {', '.join(fwd_scalars)}" if fwd_scalars else
                     f"`{fwd_kernel.name}` has no scalars: remove `{bp.name}`")))
            elif fp.dtype != bp.dtype:
                problems.append(Problem(
                    E_BACKWARD_PARAM, f"scalar `{bp.name}` is `{bp.dtype}` here but `{fp.dtype}` in the forward kernel",
                    f"expected `{fp.dtype}`", param=bp.name,
                    notes=("a backward scalar is the forward call's scalar of the same name, passed through",),
                    help=f"declare `{bp.name}: {fp.dtype}`"))
            else:
                mapping.scalars[bp.name] = bp.name
            continue
        if bp.mode == "out":
            fwd_name = grads_of_inputs.get(bp.name)
            if fwd_name is None:
                problems.append(Problem(
                    E_BACKWARD_PARAM, f"output `{bp.name}` is not the gradient of a forward input",
                    "fits no rule for a backward output", param=bp.name,
                    notes=("a backward output is `d<IN>`, the gradient of a forward input `IN` "
                           f"({', '.join(fwd_in) or 'none'})",),
                    help=did_you_mean(bp.name, list(grads_of_inputs)) or
                    f"name it after the input whose gradient it holds: {', '.join(grads_of_inputs)}"))
                continue
            problem = same_type(bp, fwd_params[fwd_name], f"the gradient of the forward input `{fwd_name}`")
            if problem is None:
                mapping.outputs[bp.name] = fwd_name
            else:
                problems.append(problem)
            continue
        if bp.mode == "inout":
            problems.append(Problem(
                E_BACKWARD_PARAM, f"`{bp.name}` is `inout`; a backward kernel's tensors are inputs or `out`puts",
                "fits no rule", param=bp.name, notes=(rules,),
                help="make it an input (a saved tensor or an output's gradient) or an `out` gradient"))
            continue
        if bp.name in saves and bp.name in fwd_params and fwd_params[bp.name].is_tensor:
            role, fwd_name = "saved", bp.name
            why = "saved from the forward call"
        elif bp.name in grads_of_outputs:
            role, fwd_name = "grad", grads_of_outputs[bp.name]
            why = f"the gradient of the forward output `{fwd_name}`"
        else:
            if bp.name in fwd_params and fwd_params[bp.name].is_tensor:
                hint = f"add `{bp.name}` to `saves` to keep it from the forward call"
            else:
                hint = did_you_mean(bp.name, list(saves) + list(grads_of_outputs)) or \
                    "rename it, or save the forward tensor it stands for"
            problems.append(Problem(
                E_BACKWARD_PARAM, f"input `{bp.name}` is neither saved from the forward call nor the gradient of "
                f"a forward output", "fits no rule for a backward input", param=bp.name, notes=(rules,), help=hint))
            continue
        problem = same_type(bp, fwd_params[fwd_name], why)
        if problem is None:
            mapping.inputs[bp.name] = (role, fwd_name)
        else:
            problems.append(problem)
    if not any(bp.is_tensor and bp.mode == "out" for bp in bwd_kernel.params):
        problems.append(Problem(
            E_BACKWARD_PARAM, f"the backward kernel `{bwd_kernel.name}` computes no gradient", "no `out` tensor",
            help=f"add an output `d<IN>` for each forward input that gets a gradient: {', '.join(grads_of_inputs)}"))

    if set(fwd.dtypes) != set(bwd.dtypes) or any(set(fwd.dtypes[k]) != set(bwd.dtypes[k]) for k in fwd.dtypes):
        def show(s: Spec) -> str:
            return "{" + ", ".join(f"{k}: [{', '.join(v)}]" for k, v in s.dtypes.items()) + "}"
        problems.append(Problem(
            E_BACKWARD_AGREE, f"the backward spec's `dtypes: {show(bwd)}` differ from the forward's `{show(fwd)}`",
            "dtype variants differ", notes=("each forward variant runs the backward variant of the same dtypes",),
            help=f"declare `dtypes: {show(fwd)}` in the backward spec"))
    for name, why in disagree.items():
        problems.append(Problem(
            E_BACKWARD_AGREE, f"the two specs fix symbol `{name}` differently: {why}", f"`{name}` differs",
            notes=("the backward runs on the forward call's shapes, so a fixed symbol must be fixed alike",),
            help=f"give both specs the same `symbols: {{{name}: ...}}`, or fix it in neither"))
    if bwd.backward is not None:
        problems.append(Problem(
            E_BACKWARD_AGREE, f"the backward spec `{bwd.path}` has a `backward:` of its own",
            "a backward of a backward", help=f"remove `backward:` from `{bwd.path}`: double backward is not supported"))
    return mapping, problems


def _read(path: str, sources: Mapping[str, str]) -> tuple[str | None, str]:
    if path in sources:
        return sources[path], ""
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read(), ""
    except (OSError, UnicodeDecodeError) as exc:
        return None, getattr(exc, "strerror", None) or type(exc).__name__


def load_backward(spec: Spec, diags: Diagnostics,
                  sources: Mapping[str, str] | None = None) -> tuple[Spec, ast.Kernel] | None:
    """The backward spec of ``spec`` and its kernel's signature; E0236 (at `backward.spec`) and
    None when it cannot be loaded or parsed. Its own mistakes stay for `ptodsl check` of that spec."""
    assert spec.backward_path is not None
    path = spec.backward_path
    sources = sources or {}
    at = spec.spans.at(("backward", "spec"))

    def fail(why: str, label: str, help: str, note: str | None = None) -> None:
        diags.error(E_BACKWARD_SPEC, f"cannot use the backward spec `{path}`: {why}", at, label,
                    notes=[note] if note else [], help=help)

    if path not in sources and not os.path.isfile(path):
        fail("no such file", "no such file", help=f"write the backward spec at `{path}`, or fix the path (relative "
             "to this file)")
        return None
    own = Diagnostics()
    try:
        bwd = load_spec(path, own, sources)
    except CompileError as exc:
        first = next((d for d in exc.diagnostics if d.is_error), None)
        where = f" at {first.span}" if first is not None and first.span is not None else ""
        fail("it has errors", "this spec does not load", note=None if first is None else
             f"the first is {first.code}{where}: {first.message}", help=f"`ptodsl check {path}` shows them all")
        return None
    text, why = _read(bwd.source, sources)
    module = parse_module(text, bwd.source, own) if text is not None else None
    if module is None:
        fail(f"its algorithm `{bwd.source}` " + (f"cannot be read: {why}" if text is None else "does not parse"),
             "the backward's .pto", help=f"`ptodsl check {path}` shows why")
        return None
    kernel = module.kernel(bwd.op)
    if kernel is None:
        fail(f"`{bwd.source}` has no kernel `{bwd.op}`", "names no kernel", help=f"`ptodsl check {path}` shows why")
        return None
    return bwd, kernel


def check_backward(spec: Spec, kernel: ast.Kernel, diags: Diagnostics,
                   sources: Mapping[str, str] | None = None) -> BackwardMap | None:
    """Report every rule of docs/LANGUAGE.md §2.1 the spec's `backward:` breaks; the map when none."""
    if spec.backward is None:
        return None
    loaded = load_backward(spec, diags, sources)
    if loaded is None:
        return None
    bwd, bwd_kernel = loaded
    mapping, problems = match_backward(spec, kernel, bwd, bwd_kernel)
    saves_at = ("backward", "saves")
    bwd_at = spec.spans.at(("backward", "spec"))
    for pr in problems:
        secondary: list[Label] = []
        if pr.save is not None:
            span: Span = spec.spans.at((*saves_at, pr.save))
        elif pr.param is not None:
            param = bwd_kernel.param(pr.param)
            assert param is not None
            span = param.span
            secondary.append(Label(bwd_at, "the backward spec named here"))
        elif pr.code == E_BACKWARD_AGREE and "dtypes" in pr.message:
            span = bwd.spans.at(("dtypes",))
            secondary.append(Label(spec.spans.at(("dtypes",)), "the forward's dtypes"))
        elif pr.code == E_BACKWARD_AGREE and "backward:" in pr.message:
            span = bwd.spans.key(("backward",)) or bwd.spans.at(("backward",))
            secondary.append(Label(bwd_at, "named as a backward here"))
        elif pr.code == E_BACKWARD_AGREE:
            span = bwd.spans.at(("symbols",)) if ("symbols",) in bwd.spans else bwd_at
            if ("symbols",) in spec.spans:
                secondary.append(Label(spec.spans.at(("symbols",)), "the forward's symbols"))
        else:
            span = bwd_kernel.name_span or bwd_kernel.span
            secondary.append(Label(bwd_at, "the backward spec named here"))
        diags.error(pr.code, pr.message, span, pr.label, secondary=secondary, notes=list(pr.notes), help=pr.help)
    return None if problems else mapping
