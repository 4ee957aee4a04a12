"""The simulator's meaning of the fused vector instructions (``ir/opdefs.py``, ``FUSED``).

Each computes what the unfused tile ops it replaced computed, rounding every intermediate to the
destination's dtype: the broadcast forms are the binary op over the spread operand's values
(EXPDIF: the difference rounded, then its exp), the multiply-adds the product rounded, then the sum.
"""

from __future__ import annotations

import numpy as np

from ...ir import Op
from ...ir.opdefs import FUSED, spread_operand
from ...ops import OPS
from . import SIM, Machine, _f32, _round_to, _tiles, _timed, spread


@SIM.on("expand_binary")
@_timed
def _expand_binary(m: Machine, op: Op) -> None:
    dst, (x, y) = _tiles(m, op)
    reg, dtype = dst.region(), op.operands[0].type.dtype
    k = spread_operand(op)
    a, b = (_f32(spread(t, dst) if i == k else t.data[reg]) for i, t in ((1, x), (2, y)))
    dst.data[reg] = expand_binary_values(FUSED[op.name].op, a, b, dtype)


def expand_binary_values(name: str, a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """A broadcast instruction's result from its operands' values, the spread one already spread
    (the element-wise and the batched simulator share it)."""
    with np.errstate(all="ignore"):
        if name == "expdif":
            out = np.exp(_f32(_round_to(np.asarray(a - b), dtype)))
        else:
            out = OPS[name].sim(a, b)
    return _round_to(np.asarray(out), dtype)


@SIM.on("muladd")
@_timed
def _muladd(m: Machine, op: Op) -> None:
    dst, (x, y) = _tiles(m, op)
    reg, dtype = dst.region(), op.operands[0].type.dtype
    d, a, b = (_f32(t.data[reg]) for t in (dst, x, y))
    with np.errstate(all="ignore"):
        if FUSED[op.name].op == "muladddst":  # dst = x * y + dst
            out = _f32(_round_to(a * b, dtype)) + d
        else:  # fusedmuladd: dst = x * dst + y
            out = _f32(_round_to(a * d, dtype)) + b
    dst.data[reg] = _round_to(np.asarray(out), dtype)
