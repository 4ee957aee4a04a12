"""The C++ of issue 23's elementwise instructions whose operands are more than tiles and a
scalar: the rounding ops (TCVT to the tile's own dtype, under their RoundMode) and ``pow``
(TPOW / TPOWS, which take a scratch tile).

pto-isa's A2/A3 TPOW checks at run time that its base, exponent and scratch tiles have the
destination's valid rows and columns, so the scratch (and the tile a scalar base is spread over)
are declared with the destination's valid extents.
"""

from __future__ import annotations

from ...ir import Op
from ...ops import OPS
from .kernel import ARITH_FORMS, FILL, ROUND_MODES, KernelEmitter


def _round(em: KernelEmitter, op: Op, depth: int) -> None:
    dst, src = em._operands(op)
    od = OPS[op.name[len("tile."):]]
    em._emit(depth, od.pto, [dst.var, src.var, f"RoundMode::{ROUND_MODES[od.round_mode]}"], op)


def _pow(em: KernelEmitter, op: Op, depth: int) -> None:
    tiles = em._operands(op)
    od = OPS["pow"]
    dst = tiles[0]
    if "scalar" not in op.attrs:
        tmp = em._scratch(dst, op, depth, valid=True)
        em._emit(depth, od.pto, [dst.var, tiles[1].var, tiles[2].var, tmp], op)
        return
    s = em._scalar(op.attrs["scalar"], tiles[1].dtype)
    if op.attrs.get("side") != "left":
        tmp = em._scratch(dst, op, depth, valid=True)
        em._emit(depth, od.pto_scalar, [dst.var, tiles[1].var, s, tmp], op)
        return
    # s ** x: TPOWS takes the exponent as its scalar, so the base is spread over a tile first
    base = em._scratch(dst, op, depth, valid=True)
    em._emit(depth, FILL, [base, s], op)
    em._line(depth, "pipe_barrier(PIPE_V);", op.span)
    tmp = em._scratch(dst, op, depth, valid=True)
    em._emit(depth, od.pto, [dst.var, base, tiles[1].var, tmp], op)


ARITH_FORMS.update({name: _round for name, od in OPS.items() if od.round_mode is not None})
ARITH_FORMS["pow"] = _pow

__all__ = ["ARITH_FORMS"]
