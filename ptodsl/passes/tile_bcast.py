"""Broadcast forwarding, done by tiling before it tiles a function (Tensor IR -> Tensor IR).

An ``expand`` (``broadcast``) or ``clone`` whose result an elementwise op reads is a tensor of its
own: tiled as it stands, it is written to a GM workspace whole and read back whole, so a bias
spread over ``[B, S, H]`` moves the full tensor twice more than the op needs. Elementwise tiling
already takes an operand of a narrower shape (it loads the operand's tile and expands it on chip,
``_Tiler.load_operand``), and that is exactly how the broadcast itself is tiled; so an elementwise
op may read the broadcast's source instead, and a broadcast nobody reads any more is dropped.

Only where nothing can have changed the source in between: the consumer follows the broadcast in
the same region, and no op between them has a region (a loop or branch) or writes a destination
operand (an ``assemble``, ``fill``, scatter, ...). Everything else keeps its workspace.
"""

from __future__ import annotations

from collections import Counter

from ..ir import Func, Op
from ..ir.opdefs import IR_OPS

# the tensor-level families ``_Tiler.elementwise`` tiles, each loading operands with broadcasting
ELEMENTWISE = frozenset({"unary", "binary", "cast", "compare", "select"})
FORWARDED = frozenset({"broadcast", "clone"})


def _writes(op: Op) -> bool:
    d = IR_OPS.get(op.name)
    return bool(op.regions) or d is None or any(a.role in ("dst", "acc") for a in d.args)


def _region(ops: list[Op]) -> None:
    live: dict[str, Op] = {}  # broadcast results whose source nothing has written since
    for op in ops:
        for region in op.regions:
            _region(region)
        d = IR_OPS.get(op.name)
        if d is not None and d.family in ELEMENTWISE:
            op.operands = [live[v.name].operands[0] if v.name in live else v for v in op.operands]
        if _writes(op):
            live.clear()
        elif op.name in FORWARDED and op.results:
            live[op.results[0].name] = op


def _drop_unused(ops: list[Op], uses: Counter) -> None:
    ops[:] = [op for op in ops if not (op.name in FORWARDED and uses[op.results[0].name] == 0)]
    for op in ops:
        for region in op.regions:
            _drop_unused(region, uses)


def forward_broadcasts(func: Func) -> None:
    """Rewrite ``func`` in place: elementwise ops read a broadcast's (or clone's) source where
    that is safe (module docstring), and broadcasts left unread are removed."""
    _region(func.body)
    uses = Counter(v.name for op in func.walk() for v in op.operands)
    _drop_unused(func.body, uses)


__all__ = ["forward_broadcasts"]
