"""Where the GM tensors of a control program live (:mod:`ptodsl.ir.gm`), for the emitters: the
same analysis, with what it cannot place reported as the emitter's E0800.

A compute kernel sees each tensor parameter through its type's shape only; a parameter whose
launch passes a root with other strides than that shape's dense ones takes its strides as extra
``int64_t`` arguments (:func:`explicit_strides`).
"""

from __future__ import annotations

from ...ir import Func, Module
from ...ir import gm as _gm
from ...ir.gm import (
    Origin,
    dense_strides,
    guard_ops,
    kernel_env,
    launches,
    linear_offset,
    tensor_args,
    walk_ops,
)
from .cxx import unsupported


def trace_origins(control: Func) -> dict[str, Origin]:
    """The origin of every GM value of a control program, by value name."""
    try:
        return _gm.trace_origins(control)
    except _gm.GmLayoutError as exc:
        raise unsupported(exc.what, exc.op.span, exc.hint) from None


def explicit_strides(module: Module, controls: list[Func]) -> dict[str, set[str]]:
    """Kernel name -> the tensor parameters that take their strides as arguments."""
    try:
        return _gm.explicit_strides(module, controls)
    except _gm.GmLayoutError as exc:
        raise unsupported(exc.what, exc.op.span, exc.hint) from None


__all__ = ["Origin", "dense_strides", "explicit_strides", "guard_ops", "kernel_env", "launches", "linear_offset",
           "tensor_args", "trace_origins", "walk_ops"]
