"""The cost model's cycles for the indexing tile ops (``ir/opdefs.py``, the ``_indexing`` block):
gathers and scatters move their tile's bytes between GM and UB; TCI, TTRI and the row
arg-reductions cost like vector instructions over their tile."""

from __future__ import annotations

from math import prod

from ..dtypes import DTYPES
from ..ir import Op
from .timeline import COST, Timeline, nbytes


@COST.on("gather_rows", "gather_elem")
def _gather(tl: Timeline, op: Op, types: list, valid: list) -> float:
    return tl.target.timing.transfer_cycles("gm_to_ub", nbytes(types[0].dtype, valid[0]))


@COST.on("scatter_rows")
def _scatter(tl: Timeline, op: Op, types: list, valid: list) -> float:
    return tl.target.timing.transfer_cycles("ub_to_gm", nbytes(types[1].dtype, valid[1]))


@COST.on("ci", "tri_tile")
def _generate(tl: Timeline, op: Op, types: list, valid: list) -> float:
    ins = "TCI" if op.name == "tile.ci" else "TTRI"
    return tl.target.timing.vector_cycles(ins, DTYPES[types[0].dtype].itemsize, prod(valid[0]))


@COST.on("argreduce_tile")
def _argreduce(tl: Timeline, op: Op, types: list, valid: list) -> float:
    ins = "TROWARGMAX" if op.name == "tile.argmax" else "TROWARGMIN"
    return tl.target.timing.vector_cycles(ins, DTYPES[types[1].dtype].itemsize, prod(valid[1]))
