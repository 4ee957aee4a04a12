"""Tiling of issue 23's op families: three-operand elementwise ops (``clip``).

A three-operand op is always a composite (``ptodsl.ops``): its tensor op becomes one grid of
output tiles, like any elementwise op, whose operands are loaded (and broadcast) per tile and whose
template is evaluated over primitive tile ops; scalar operands stay scalars of those ops.
"""

from __future__ import annotations

from .tile import COMPUTE, TILING, _Tiler

TILING.on("ternary")(_Tiler.computation)
COMPUTE.on("ternary")(_Tiler.elementwise)
