"""The C++ of the layout ops of a control program: a ``permute`` is a pointer to the same GM
memory (its strides reach the kernels through ``gm.explicit_strides``)."""

from __future__ import annotations

from ...ir import Op
from .control import CONTROL, ControlEmitter
from .cxx import cxx_type


@CONTROL.on("permute")
def _permute(em: ControlEmitter, op: Op, depth: int) -> None:
    parent = em._pointer(op.operands[0].name, op)
    var = em.vars[op.result.name] = em.names.claim(op.result.name)
    em._line(depth, f"{cxx_type(op.result.type.dtype)}* {var} = {parent};", op)
