"""The C++ of the layout ops' tile families inside a compute kernel: TTRANS (with the scratch
tile pto-isa's A2/A3 implementation writes through) and TCONCAT."""

from __future__ import annotations

from ...dtypes import itemsize
from ...ir import Op
from .kernel import KERNEL, KernelEmitter, Operand, _align
from .tiles import logical_2d, scratch_type

TRANS, CONCAT = "TTRANS", "TCONCAT"
# pto-isa's A2/A3 TTRANS stages the transpose in its tmp tile in rows of the source's valid rows
# rounded up to 16 elements (32 for 1-byte ones), one such row per source column rounded up to
# a UB block: the largest of those roundings is what the scratch must hold.
TRANS_ROW_QUANTUM = 32


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
    block = em.target.ub_block_bytes // itemsize(src.dtype)
    rows, cols = logical_2d(src.tile_type.shape)
    tmp_rows = -(-cols // block) * block
    tmp_cols = -(-rows // TRANS_ROW_QUANTUM) * TRANS_ROW_QUANTUM
    tmp = _scratch_2d(em, src.dtype, tmp_rows, tmp_cols, op, depth)
    em._emit(depth, TRANS, [dst.var, src.var, tmp], op)


@KERNEL.on("concat_tile")
def _concat(em: KernelEmitter, op: Op, depth: int) -> None:
    em._emit(depth, CONCAT, [t.var for t in em._operands(op)], op)
