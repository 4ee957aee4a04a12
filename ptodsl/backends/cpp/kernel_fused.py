"""The C++ of the fused vector instructions (``ir/opdefs.py``, ``FUSED``).

A row broadcast's per-row operand is a per-row tile of the memory plan: one value at the start of
each row's 32-byte block. pto-isa takes it either as a column-major column of contiguous values
(the tmp form: A2/A3 broadcasts it into the tmp tile with vbrcb) or as a row-major block per row
whose values it reads at column ``c % (32 / sizeof(T))``. A per-row tile of one row is such a
column already: a column-major view over its block reads it in place, and the instruction is the
only one. Otherwise (more rows, or the per-row operand first; ``spread_in_blocks``) a TROWEXPAND
fills a scratch tile of one block per row first. A column broadcast's operand is a row as it is.
"""

from __future__ import annotations

from ...ir import Op
from ...ir.opdefs import FUSED, spread_in_blocks, spread_operand
from .cxx import cxx_type, unsupported
from .kernel import KERNEL, ROW_EXPAND, KernelEmitter, Operand, _itemsize


@KERNEL.on("expand_binary")
def _expand_binary(em: KernelEmitter, op: Op, depth: int) -> None:
    dst, x, y = em._operands(op)
    f = FUSED[op.name]
    args = [dst.var, x.var, y.var]
    if f.spread == "row":
        k = spread_operand(op)
        spread = (x, y)[k - 1]
        block = em.target.ub_block_bytes // _itemsize(dst.dtype)
        if spread.cols != block:
            raise unsupported(f"a per-row operand stored {spread.rows}x{spread.cols} (one {block}-element block "
                              "per row expected)", op.span)
        if spread_in_blocks(op):
            blocks = em._scratch_tile(dst.dtype, dst.rows, block, op, depth, (dst.valid()[0], block))
            em._emit(depth, ROW_EXPAND, [blocks, spread.var], op)
            em._line(depth, "pipe_barrier(PIPE_V);", op.span)
            args[k] = blocks
        else:
            args[k] = _column_view(em, spread.dtype, spread.offset, block, op, depth)
            args.append(em._scratch_tile(dst.dtype, 1, em.target.vector_repeat_bytes // _itemsize(dst.dtype),
                                         op, depth))
    em._emit(depth, f.instruction, args, op)


def _column_view(em: KernelEmitter, dtype: str, offset: int, block: int, op: Op, depth: int) -> str:
    """The value at ``offset`` as a column-major column of one valid value (its block's worth of
    rows, as a column-major tile's rows must fill whole blocks)."""
    ctype = f"Tile<TileType::Vec, {cxx_type(dtype)}, {block}, 1, BLayout::ColMajor, 1, 1>"
    alias, var = em._scratch_names(ctype, "TileView", "view")
    em.operands[var] = Operand(dtype, "col1", "Vec")
    em._line(depth, f"{alias} {var};", op.span)
    em._line(depth, f"TASSIGN({var}, {offset});", op.span)
    return var


@KERNEL.on("muladd")
def _muladd(em: KernelEmitter, op: Op, depth: int) -> None:
    dst, x, y = em._operands(op)
    em._emit(depth, FUSED[op.name].instruction, [dst.var, x.var, y.var], op)
