"""The C++ of the layout ops' tile families inside a compute kernel: TTRANS (with the scratch
tile pto-isa's A2/A3 implementation writes through) and TCONCAT."""

from __future__ import annotations

from ...dtypes import itemsize
from ...ir import Op
from ...passes.memplan import trans_scratch
from .kernel import KERNEL, KernelEmitter, Operand, _align
from .tiles import scratch_type

TRANS, CONCAT = "TTRANS", "TCONCAT"


def _scratch_2d(em: KernelEmitter, dtype: str, rows: int, cols: int, op: Op, depth: int) -> str:
    """A row-major scratch tile of ``rows`` x ``cols`` above the planned peak (like the emitter's
    own scratch, of a shape of its own)."""
    ctype = scratch_type(dtype, rows, cols)
    alias, var = em._scratch_names(ctype, "TileTmp", "tmp")
    em.operands[var] = Operand(dtype, "row", "Vec")
    offset = em.scratch_cursor
    em.scratch_cursor = _align(offset + rows * cols * itemsize(dtype), em.target.ub_block_bytes)
    if em.scratch_cursor > em.scratch_peak:
        em.scratch_peak = em.scratch_cursor
        em.scratch_span = op.span
    em._line(depth, f"{alias} {var};", op.span)
    em._line(depth, f"TASSIGN({var}, {offset});", op.span)
    em.scratch_offsets[var] = offset
    return var


@KERNEL.on("trans")
def _trans(em: KernelEmitter, op: Op, depth: int) -> None:
    dst, src = em._operands(op)
    tmp_rows, tmp_cols = trans_scratch(src.tile_type, em.target.ub_block_bytes)
    tmp = _scratch_2d(em, src.dtype, tmp_rows, tmp_cols, op, depth)
    em._emit(depth, TRANS, [dst.var, src.var, tmp], op)


@KERNEL.on("concat_tile")
def _concat(em: KernelEmitter, op: Op, depth: int) -> None:
    em._emit(depth, CONCAT, [t.var for t in em._operands(op)], op)
