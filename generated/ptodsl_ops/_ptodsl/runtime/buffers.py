"""The buffers a call allocates and the copies it makes, for the runtime's argument checks.

Every call copies an input that shares memory with an output before the kernels run (numpy's
meaning of overlapping operands: the input is read as it was), and allocates its outputs,
contiguous copies and GM workspaces only after checking that they fit in memory together
(E0718); an allocation that fails anyway is E0718 too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import inputs, sym
from ..backends.memory import AllocationError, allocation_failure
from ..diagnostics import Span
from .program import Program


def allocate(make: Any, buffer: tuple[str, int, Span | None]) -> np.ndarray:
    """``make()``, or E0718 naming the buffer, (what, bytes, span), when the machine cannot give it
    (numpy raises MemoryError, or ValueError for a size past what an address can hold)."""
    try:
        return make()
    except (MemoryError, ValueError) as exc:
        what, nbytes, span = buffer
        raise allocation_failure(what, nbytes, span, "declared here" if span is not None else "",
                                 (f"numpy: {type(exc).__name__}: {exc}",)) from None


def workspaces(program: Program, index: int, symbols: Mapping[str, int]) -> list[tuple[str, int, Span | None]]:
    """The GM workspaces (local tensors) of a variant's control program, each once, as buffers of a
    call: (what, bytes, where it is declared)."""
    control = program.block_module(index).func(program.control(index))
    out = []
    for op in control.walk():
        if op.name != "alloc":
            continue
        t = op.result.type
        try:
            shape = [int(sym.evaluate(d, symbols)) for d in t.shape]
        except (KeyError, ValueError, TypeError, ZeroDivisionError, OverflowError):
            continue
        out.append((f"the workspace of local `{op.result.name}` ({shape} {t.dtype})", inputs.buffer_bytes(shape, t.dtype),
                    op.span))
    return out


def tensor_modes(program: Program) -> dict[str, str]:
    return {p.name: p.mode for p in program.params if p.is_tensor}


def separate(program: Program, index: int, arrays: dict[str, np.ndarray],
             symbols: Mapping[str, int]) -> dict[str, np.ndarray]:
    """``arrays`` with a copy of every input that shares memory with an output (numpy's meaning of
    overlapping operands: inputs are read as they were before the call), after checking that the
    copies and the variant's GM workspaces fit in memory (E0718). The outputs stay the caller's."""
    spans = param_spans(program)
    copies, _ = inputs.check_aliasing(tensor_modes(program), arrays, spans)
    plan = [(f"a copy of input `{name}`, which shares memory with output `{out}`",
             int(arrays[name].size) * arrays[name].itemsize, spans.get(name)) for name, out in copies]
    problem = inputs.check_memory(plan + workspaces(program, index, symbols), inputs.memory_limit())
    if problem is not None:
        raise AllocationError(problem)
    if not copies:
        return arrays
    arrays = dict(arrays)
    for (name, _out), buffer in zip(copies, plan):
        arrays[name] = allocate(arrays[name].copy, buffer)
    return arrays


def param_spans(program: Program) -> dict[str, Any]:
    return {p.name: p.span for p in program.params}


__all__ = ["allocate", "param_spans", "separate", "tensor_modes", "workspaces"]
