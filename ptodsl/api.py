"""The Python API: ``ptodsl.load(yaml)`` gives a callable operator.

The compiler's side of a call is only :func:`program_of`: it turns a compiled spec into the
:class:`~ptodsl.runtime.program.Program` that the runtime calls (:mod:`ptodsl.runtime.operator`),
the same code a generated package runs from its shipped files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from .driver import Compiled, compile_spec
from .ir import Func, Module
from .runtime import operator as _rt
from .runtime.operator import (
    BACKENDS,
    ArgumentError,
    ArgumentTypeError,
    ArgumentValueError,
    dim_spans,
    to_numpy,
    to_torch,
)
from .runtime.program import Backward, Division, ParamInfo, Program, Variant


def literal_value(e: Any) -> Any:
    """The Python value of a scalar default written in the .pto (a number, a bool, or minus one)."""
    from .frontend import ast

    if isinstance(e, ast.UnaryOp):
        return -literal_value(e.operand)
    return e.value


def _backward_of(compiled: Compiled) -> Backward | None:
    """How the spec's ``backward:`` op takes the forward's values (the check has accepted it)."""
    spec = compiled.spec
    if spec.backward is None:
        return None
    from .check.backward import load_backward, match_backward
    from .diagnostics import Diagnostics

    kernel = compiled.module.kernel(spec.op)
    loaded = load_backward(spec, Diagnostics())
    if loaded is None:
        return None
    bwd, bwd_kernel = loaded
    mapping, problems = match_backward(spec, kernel, bwd, bwd_kernel)
    if problems:
        return None
    params = bwd_kernel.params
    return Backward(
        bwd.op,
        tuple((p.name, *mapping.inputs[p.name]) for p in params if p.is_tensor and p.mode == "in"),
        tuple((p.name, mapping.outputs[p.name]) for p in params if p.is_tensor and p.mode != "in"),
        tuple(mapping.scalars[p.name] for p in params if not p.is_tensor))


def program_of(compiled: Compiled) -> Program:
    """The runtime's view of a compiled spec, built once per compiled spec."""
    found = compiled.__dict__.get("_program")
    if found is not None:
        return found
    from .backends.cpp.run import emitted

    spec = compiled.spec
    kernel = compiled.module.kernel(spec.op)
    params = tuple(ParamInfo(p.name, p.dtype, tuple(d.value for d in p.dims) if p.dims is not None else None,
                             p.mode, literal_value(p.default) if p.default is not None else None, p.span,
                             tuple(d.span for d in p.dims or ())) for p in kernel.params)
    variants = tuple(Variant(dict(ck.variant), ck.variant_name or "",
                             tuple(Division(r.kind, r.num, r.den, r.span, r.what) for r in ck.typing.requires))
                     for ck in compiled.checked)
    sched = spec.schedule
    tiles = [ls.vec_tile for ls in sched.loops.values() if ls.vec_tile] + ([sched.vec_tile] if sched.vec_tile else [])
    reference = None
    if spec.reference is not None:
        reference = (os.path.normpath(os.path.join(spec.folder, spec.reference.file)), spec.reference.function)
    program = Program(
        backward=_backward_of(compiled),
        op=spec.op, doc=spec.doc, dtypes=dict(spec.dtypes), symbols=dict(spec.symbols), params=params,
        span=kernel.span, variants=variants,
        ir_source=lambda index: (compiled.stages["tensor"].funcs[index], compiled.stages["block"]),
        target=compiled.target, cpu_source=lambda index: emitted(compiled, index), tile=compiled.stages.get("tile"),
        cases=tuple(spec.tests), reference=reference, torch_equivalent=spec.torch,
        tile_hint=tuple(tiles[0]) if tiles else None, data_dir=spec.folder,
        defined=dict(spec.defined), max_dims=dict(spec.schedule.max_dims),
        nondecreasing=tuple(spec.schedule.nondecreasing))
    compiled.__dict__["_program"] = program
    return program


class Operator(_rt.Operator):
    """A compiled operator; call it like a function. ``.compiled`` and ``.spec`` are the compiler's."""

    def __init__(self, compiled: Compiled):
        super().__init__(program_of(compiled))
        self.compiled = compiled
        self.spec = compiled.spec
        self.kernel = compiled.module.kernel(self.spec.op)

    def ir(self, stage: str = "tile") -> str:
        return str(self.compiled.stages[stage])

    def backward_operator(self) -> Operator | None:
        """The operator of the spec's ``backward:``, compiled at its first use (by autograd)."""
        if self.program.backward is None or self.spec.backward_path is None:
            return None
        found = self.__dict__.get("_backward")
        if found is None:
            found = self.__dict__["_backward"] = load(self.spec.backward_path)
        return found


def kernel_func(compiled: Compiled, index: int, level: str = "tile") -> Func:
    module: Module = compiled.stages[level]
    return module.funcs[index]


def check_run(compiled: Compiled, index: int, arrays: Mapping[str, np.ndarray], scalars: dict[str, Any],
              symbols: Mapping[str, int], lengths: bool = True) -> bool:
    """:func:`ptodsl.runtime.operator.check_run` for a compiled spec."""
    return _rt.check_run(program_of(compiled), index, arrays, scalars, symbols, lengths)


def run_kernel(compiled: Compiled, index: int, arrays: dict[str, np.ndarray], scalars: Mapping[str, Any],
               symbols: dict[str, int], backend: str, poison: bool = False, level: str = "block") -> Any:
    """:func:`ptodsl.runtime.operator.run_kernel` for a compiled spec."""
    return _rt.run_kernel(program_of(compiled), index, arrays, scalars, symbols, backend, poison, level)


def load(yaml_path: str) -> Operator:
    """Parse, check and lower a spec; raises ``ptodsl.CompileError`` with its diagnostics."""
    return Operator(compile_spec(str(yaml_path)))


__all__ = ["BACKENDS", "ArgumentError", "ArgumentTypeError", "ArgumentValueError", "Operator", "check_run",
           "dim_spans", "kernel_func", "literal_value", "load", "program_of", "run_kernel", "to_numpy", "to_torch"]
