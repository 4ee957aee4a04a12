"""Loop distribution for blocks (part of ``passes/blocks.py``'s kernel fission).

Fusion merges grid nests that share their outer loop: a reduction's last step over P rows and
another reduction's P x R x C nest end up in one loop over P. Shared out as blocks, that loop
gives at most P blocks, however much work the inner nest holds (16 of 48 cores for reduce_axes'
``mean(w, dim=[-1, 1, 2])`` beside ``sum(w, dim=[0, 1])``). Distributed, one loop over P per
part, each part becomes a kernel of its own (``blocks.split_nests``), and a part that is one grid
loop inside the outer one has its blocks split that loop too (``blocks.share_out_nest``).

Legal when the outer loop's iterations are independent (the parallel pass's proof: no iteration
reads what another writes), no tile made by one part is read by a later one, and no GM workspace
is allocated inside the loop: then running every iteration's first part before any second part
reads and writes the same values in GM.
"""

from __future__ import annotations

from .. import sym
from ..ir import Func, Op
from .parallel import independent, origins_of

PURE = frozenset({"view", "reshape"})  # moves no data: stays beside the loop


def _tiles(ops: list[Op]) -> tuple[set[str], set[str]]:
    """(tiles defined, values used) anywhere in ``ops``."""
    defined, used = set(), set()
    for op in ops:
        for o in op.walk():
            if o.name == "tile.alloc":
                defined.add(o.result.name)
            used.update(v.name for v in o.operands)
    return defined, used


def _parts(body: list[Op]) -> list[list[Op]]:
    """``body`` cut where no tile made before the cut is used after it, each part holding a loop."""
    parts: list[list[Op]] = []
    start = 0
    for cut in range(1, len(body)):
        head, rest = body[start:cut], body[cut:]
        if not any(o.name == "loop" for o in head) or not any(o.name == "loop" for o in rest):
            continue
        made, _ = _tiles(body[:cut])
        _, used = _tiles(rest)
        if made & used:
            continue
        parts.append(head)
        start = cut
    parts.append(body[start:])
    return parts


def _outer(kernel: Func) -> tuple[list[Op], Op] | None:
    """The region holding the kernel's one top-level grid loop (inside the one-trip loop around
    its work), and that loop."""
    body = kernel.body
    while len(body) == 1 and body[0].name == "loop" and body[0].attrs.get("kind") in ("implicit", "peeled") \
            and sym.sub(body[0].attrs["hi"], body[0].attrs["lo"]) == 1:
        body = body[0].regions[0]
    loops = [op for op in body if op.name not in PURE]
    if len(loops) != 1 or loops[0].name != "loop" or loops[0].attrs.get("kind") != "grid":
        return None
    return body, loops[0]


def distribute(kernel: Func) -> bool:
    """Distribute, in place, the kernel's one grid loop over the parts of its body (module
    docstring) when one part is a lone grid loop, whose blocks could then split it; returns
    whether it did."""
    found = _outer(kernel)
    if found is None or any(o.name in ("guard", "print", "alloc") for o in kernel.walk()):
        return False
    region, loop = found
    parts = _parts(loop.regions[0])
    origins = origins_of(kernel)
    if len(parts) < 2 or origins is None or not independent(loop, origins):
        return False
    index = loop.attrs["index"]
    # the part whose loop blocks could split: a grid loop of independent iterations (not a
    # reduction's loop over its axis) whose bounds do not move with the outer index
    if not any(len(p) == 1 and p[0].name == "loop" and p[0].attrs.get("kind") == "grid"
               and p[0].attrs.get("step") == 1 and loop.attrs.get("step") == 1
               and index not in sym.free_symbols(p[0].attrs["lo"]) | sym.free_symbols(p[0].attrs["hi"])
               and independent(p[0], origins) for p in parts):
        return False
    at = region.index(loop)
    region[at:at + 1] = [Op("loop", [], dict(loop.attrs), [], [part], loop.span) for part in parts]
    return True


__all__ = ["distribute"]
