"""The cost model's cycles for the layout ops' tile families: one vector instruction over the
destination's valid elements (TTRANS, TCONCAT), as for the other structural ops."""

from __future__ import annotations

from math import prod

from ..dtypes import DTYPES
from ..ir import Op
from .timeline import COST, Timeline

INSTRUCTIONS = {"tile.trans": "TTRANS", "tile.concat": "TCONCAT"}


@COST.on("trans", "concat_tile")
def _layout(tl: Timeline, op: Op, types: list, valid: list) -> float:
    return tl.target.timing.vector_cycles(INSTRUCTIONS[op.name], DTYPES[types[0].dtype].itemsize, prod(valid[0]))
