"""The C++ of the layout ops of a control program: a ``permute`` is a pointer to the same GM
memory (its strides reach the kernels through ``gm.explicit_strides``)."""

from __future__ import annotations

from ...ir import Op
from .control import CONTROL, ControlEmitter


@CONTROL.on("permute")
def _permute(em: ControlEmitter, op: Op, depth: int) -> None:
    em._pointer_var(op, em._pointer(op.operands[0].name, op), depth)
