"""Emit the C++ of a compiled spec: per dtype variant, one pto-isa translation unit per compute
kernel the variant launches (:mod:`.kernel`) and one for its control program (:mod:`.control`).

The output is a pure function of the Block IR and the target: emitting twice gives the same
bytes, which is also what keeps the build cache (keyed on the sources' text) effective.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ... import sym
from ...driver import Compiled
from ...ir import Func
from ...ir.opdefs import block_params, launched_params
from .control import EntryParam, emit_control, openmp_loops
from .cxx import unsupported
from .gm import explicit_strides, guard_ops, kernel_env, launches, tensor_args, trace_origins, walk_ops
from .kernel import InstructionUse, KernelPlan, KernelSource, emit_kernel


@dataclass
class EmittedVariant:
    """The sources of one dtype variant and how to call its entry."""

    entry: str  # the exported function (and the control program's name), e.g. softmax_f32
    variant: str  # e.g. "T=f32"
    sources: dict[str, str]  # file name -> C++ text, kernels first, then the control program
    params: list[EntryParam]
    parallel: list[str] = field(default_factory=list)  # loops run on several cores
    kernels: list[str] = field(default_factory=list)
    uses: dict[str, list[InstructionUse]] = field(default_factory=dict)  # kernel -> its instructions
    kinds: dict[str, str] = field(default_factory=dict)  # kernel -> vector | cube

    @property
    def library(self) -> str:
        return self.entry


def control_of(compiled: Compiled, index: int) -> Func:
    block = compiled.stages["block"]
    name = compiled.stages["tensor"].funcs[index].name
    control = block.func(name)
    if control is None or control.kind != "control":
        raise unsupported(f"a variant without a control program (`{name}`)")
    return control


def launched_kernels(compiled: Compiled, control: Func) -> list[Func]:
    """The compute kernels a control program launches, in order of their first launch."""
    block = compiled.stages["block"]
    seen: dict[str, Func] = {}
    for op in launches(control):
        name = op.attrs["kernel"]
        if name not in seen:
            kernel = block.func(name)
            if kernel is None or kernel.kind not in ("vector", "cube", "mixed"):
                raise unsupported(f"a launch of `{name}`, which is not a compute kernel", op.span)
            seen[name] = kernel
    return list(seen.values())


def _nonneg_scalars(compiled: Compiled, control: Func, kernel: Func) -> frozenset[str]:
    """Kernel scalars that every launch passes a provably non-negative value for."""
    from .control import symbols_of

    known = set(symbols_of(control))
    for op in walk_ops(control.body):
        if op.name == "loop" and sym.prove_nonneg(op.attrs["lo"], {n: (0, None) for n in known}):
            known.add(op.attrs["index"])
    ranges = {n: (0, None) for n in known}
    scalars = {p.name for p in launched_params(kernel)}
    for op in launches(control):
        if op.attrs["kernel"] != kernel.name:
            continue
        env = kernel_env(kernel, op)
        scalars = {s for s in scalars if sym.prove_nonneg(env[s], ranges)}
    return frozenset(scalars) | frozenset(block_params(kernel))  # a block's index and the count: >= 0


def _workspace_params(control: Func, kernel: Func) -> frozenset[str]:
    """Kernel tensor parameters that every launch binds to a workspace of the control program."""
    origins = trace_origins(control)
    params = {p.name for p in kernel.params if p.is_tensor}
    for op in launches(control):
        if op.attrs["kernel"] == kernel.name:
            params &= {name for name, value in tensor_args(kernel, op) if origins[value.name].workspace}
    return frozenset(params)


def kernel_plans(compiled: Compiled, control: Func) -> dict[str, KernelPlan]:
    """What the variant-level analyses tell the emitter about each kernel ``control`` launches."""
    block = compiled.stages["block"]
    strided = explicit_strides(block, [control])
    guards = guard_ops(block, control)
    plans: dict[str, KernelPlan] = {}
    for kernel in launched_kernels(compiled, control):
        first = next((k for k, g in enumerate(guards) if any(g is o for o in kernel.walk())), 0)
        plans[kernel.name] = KernelPlan(strided.get(kernel.name, set()), _nonneg_scalars(compiled, control, kernel),
                                        _workspace_params(control, kernel), first + 1)
    return plans


def emit_variant(compiled: Compiled, index: int) -> EmittedVariant:
    """The C++ sources of one dtype variant; raises CompileError (E0800) for what the emitter
    cannot express."""
    block = compiled.stages["block"]
    control = control_of(compiled, index)
    spec = compiled.spec
    checked = compiled.checked[index]
    variant = checked.variant_name or ""
    origin = f"{spec.op} ({os.path.basename(spec.source)})" + (f", variant {variant}" if variant else "")
    kernels = launched_kernels(compiled, control)
    plans = kernel_plans(compiled, control)
    sources: dict[str, KernelSource] = {}
    for kernel in kernels:
        sources[kernel.name] = emit_kernel(kernel, compiled.target, plans[kernel.name], origin)
    loops = openmp_loops(control, {k.name: k for k in kernels})
    program = emit_control(block, control, sources, loops, origin)
    files = {s.filename: s.text for s in sources.values()}
    files[program.filename] = program.text
    return EmittedVariant(program.name, variant, files, program.params, program.parallel, list(sources),
                          {k: s.uses for k, s in sources.items()}, {k.name: k.kind for k in kernels})


@dataclass
class NpuVariant:
    """The NPU build of one dtype variant: a translation unit per compute kernel (its code and its
    ``<kernel>_launch`` host function), compiled for the kernel's own core type, and the host
    program that runs the control flow and launches them on a stream."""

    entry: str  # the host program's exported function: (stream, then the CPU entry's parameters)
    variant: str
    kernels: dict[str, tuple[str, str]]  # kernel name -> (vector | cube | mixed, C++ text)
    host: str  # C++ text of the host program
    params: list[EntryParam]


def emit_npu_variant(compiled: Compiled, index: int) -> NpuVariant:
    """The NPU sources of one dtype variant; raises CompileError (E0800) like :func:`emit_variant`."""
    block = compiled.stages["block"]
    control = control_of(compiled, index)
    spec = compiled.spec
    variant = compiled.checked[index].variant_name or ""
    origin = f"{spec.op} ({os.path.basename(spec.source)})" + (f", variant {variant}" if variant else "")
    plans = kernel_plans(compiled, control)
    sources: dict[str, KernelSource] = {}
    kinds: dict[str, str] = {}
    for kernel in launched_kernels(compiled, control):
        sources[kernel.name] = emit_kernel(kernel, compiled.target, plans[kernel.name], origin)
        kinds[kernel.name] = kernel.kind
    program = emit_control(block, control, sources, [], origin, host="npu")
    units = {k: (kinds[k], f"{s.text}\n{s.launcher}") for k, s in sources.items()}
    return NpuVariant(program.name, variant, units, program.text, program.params)


def emit_spec(compiled: Compiled) -> list[EmittedVariant]:
    """Every dtype variant of a compiled spec."""
    return [emit_variant(compiled, i) for i in range(len(compiled.checked))]


__all__ = ["EmittedVariant", "NpuVariant", "control_of", "emit_npu_variant", "emit_spec", "emit_variant",
           "launched_kernels"]
