"""The cost model's cycles for the fused vector instructions (``ir/opdefs.py``, ``FUSED``): the
instruction over the destination's valid elements, from the target's timing table (which costs
them as the instructions their implementation runs, ``timing.composed``), and a row broadcast
whose per-row operand goes in 32-byte blocks (``spread_in_blocks``) the TROWEXPAND into its
scratch tile first: one more instruction."""

from __future__ import annotations

from math import prod

from ..dtypes import DTYPES
from ..ir import Op
from ..ir.opdefs import FUSED, spread_in_blocks
from .timeline import COST, EXTRA_INSTRUCTIONS, STRUCTURAL, Timeline


@COST.on("expand_binary", "muladd")
def _fused(tl: Timeline, op: Op, types: list, valid: list) -> float:
    timing, size = tl.target.timing, DTYPES[types[0].dtype].itemsize
    cycles = timing.vector_cycles(FUSED[op.name].instruction, size, prod(valid[0]))
    if spread_in_blocks(op):
        rows = prod(valid[0][:-1])
        cycles += timing.vector_cycles(STRUCTURAL["expand"], size, rows * (tl.target.ub_block_bytes // size))
    return cycles


EXTRA_INSTRUCTIONS["expand_binary"] = lambda op: int(spread_in_blocks(op))
