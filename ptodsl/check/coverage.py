"""Which regions of a tensor are written on every path: the region algebra behind E0401/E0402/W0404.

A ``State`` maps a tensor to the rectangles (offsets, shape) that every path up to a program point
has written, plus an ``opaque`` flag: every path wrote something whose region could not be kept
(so a gap cannot be proven). ``verdict`` then says whether a region is covered (proven), has a gap
(proven: nothing written on some path, or static rectangles that miss part of it) or is unknown.

Symbolic rectangles are compared with ``sym.prove_le`` under the known ranges (loop indices range
over ``[lo, last]``); rectangles equal on every axis but one and adjacent on it are merged first.
Static rectangles are decided exactly on the grid of their edges.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .. import sym

Region = tuple[tuple[sym.Expr, ...], tuple[sym.Expr, ...]]  # (offsets, shape)
MAX_CELLS = 4096  # grid cells of an exact static check; beyond it the answer is "unknown"

COVERED, GAP, UNKNOWN, NONE = "covered", "gap", "unknown", "none"


@dataclass
class Cov:
    rects: list[Region] = field(default_factory=list)
    opaque: bool = False

    @property
    def any(self) -> bool:
        return bool(self.rects) or self.opaque


class State(dict[str, Cov]):
    def copy(self) -> State:  # type: ignore[override]
        return State({k: Cov(list(v.rects), v.opaque) for k, v in self.items()})

    def add(self, base: str, region: Region) -> None:
        cov = self.setdefault(base, Cov())
        if region not in cov.rects:
            cov.rects.append(region)


def join(a: State, b: State, ranges: Mapping[str, sym.Bounds]) -> State:
    """What both paths wrote: rectangles of one side contained in a rectangle of the other."""
    out = State()
    for base in a.keys() & b.keys():
        ca, cb = a[base], b[base]
        if not (ca.any and cb.any):
            continue
        in_b = [r for r in ca.rects if any(contains(o, r, ranges) for o in cb.rects)]
        in_a = [r for r in cb.rects if any(contains(o, r, ranges) for o in ca.rects)]
        keep = in_b + [r for r in in_a if r not in in_b]
        # when every rectangle of one side lies in the other, that side's union is the intersection
        exact = (len(in_b) == len(ca.rects) and not ca.opaque) or (len(in_a) == len(cb.rects) and not cb.opaque)
        out[base] = Cov(keep, ca.opaque or cb.opaque or not exact)
    return out


def contains(outer: Region, inner: Region, ranges: Mapping[str, sym.Bounds]) -> bool:
    (oo, os_), (io, is_) = outer, inner
    if len(oo) != len(io):
        return False
    return all(sym.prove_le(a, b, ranges) and sym.prove_le(sym.add(b, s), sym.add(a, t), ranges)
               for a, t, b, s in zip(oo, os_, io, is_))


def empty(region: Region, ranges: Mapping[str, sym.Bounds]) -> bool:
    return any(sym.prove_le(s, 0, ranges) for s in region[1])


def _merge(rects: Sequence[Region], ranges: Mapping[str, sym.Bounds]) -> list[Region]:
    """Merge rectangles that are equal on every axis but one and adjacent on it, until none are."""
    out = list(rects)
    changed = True
    while changed:
        changed = False
        for (i, a), (j, b) in itertools.permutations(enumerate(out), 2):
            m = _adjacent(a, b, ranges)
            if m is not None:
                out = [r for k, r in enumerate(out) if k not in (i, j)] + [m]
                changed = True
                break
    return out


def _adjacent(a: Region, b: Region, ranges: Mapping[str, sym.Bounds]) -> Region | None:
    (ao, ash), (bo, bsh) = a, b
    if len(ao) != len(bo):
        return None
    diff = [k for k in range(len(ao)) if (ao[k], ash[k]) != (bo[k], bsh[k])]
    if len(diff) != 1:
        return None
    k = diff[0]
    end = sym.add(ao[k], ash[k])
    if not (sym.prove_le(end, bo[k], ranges) and sym.prove_le(bo[k], end, ranges)):
        return None
    offs = ao
    shape = (*ash[:k], sym.add(ash[k], bsh[k]), *ash[k + 1:])
    return offs, shape


def _static(regions: Sequence[Region]) -> bool:
    return all(sym.is_const(x) for r in regions for part in r for x in part)


def _static_covered(region: Region, rects: Sequence[Region]) -> bool | None:
    """Exact answer for static rectangles; None when the grid is too large."""
    rank = len(region[0])
    rects = [r for r in rects if len(r[0]) == rank]
    cuts = []
    for k in range(rank):
        lo, hi = region[0][k], region[0][k] + region[1][k]
        edges = {lo, hi}
        for o, s in rects:
            edges |= {e for e in (o[k], o[k] + s[k]) if lo < e < hi}
        cuts.append(sorted(edges))
    if any(len(c) < 2 for c in cuts):
        return True
    if sym_cells(cuts) > MAX_CELLS:
        return None
    for cell in itertools.product(*(zip(c, c[1:]) for c in cuts)):
        if not any(all(o[k] <= a and b <= o[k] + s[k] for k, (a, b) in enumerate(cell)) for o, s in rects):
            return False
    return True


def sym_cells(cuts: Sequence[Sequence[int]]) -> int:
    n = 1
    for c in cuts:
        n *= max(len(c) - 1, 1)
    return n


def verdict(state: State, base: str, region: Region, ranges: Mapping[str, sym.Bounds]) -> str:
    if empty(region, ranges):
        return COVERED
    cov = state.get(base)
    if cov is None or not cov.any:
        return NONE
    if _static([region, *cov.rects]) and cov.rects:
        exact = _static_covered(region, cov.rects)
        if exact is not None:
            return COVERED if exact else (UNKNOWN if cov.opaque else GAP)
    if any(contains(r, region, ranges) for r in cov.rects):
        return COVERED
    if any(contains(r, region, ranges) for r in _merge(cov.rects, ranges)):
        return COVERED
    if not cov.opaque and _static_gap(region, cov.rects):
        return GAP
    return UNKNOWN


def _static_gap(region: Region, rects: Sequence[Region]) -> bool:
    """A gap on the static axes, when every rectangle spans the region on the symbolic ones
    (rows 0 to 6 of `y[8, N]`, every column)."""
    rank = len(region[0])
    static = [k for k in range(rank) if sym.is_const(region[0][k]) and sym.is_const(region[1][k])]
    if not static or any(len(r[0]) != rank for r in rects):
        return False
    for o, sh in rects:
        for k in range(rank):
            if k in static:
                if not (sym.is_const(o[k]) and sym.is_const(sh[k])):
                    return False
            elif (o[k], sh[k]) != (region[0][k], region[1][k]):
                return False
    pick = lambda r: (tuple(r[0][k] for k in static), tuple(r[1][k] for k in static))  # noqa: E731
    return _static_covered(pick(region), [pick(r) for r in rects]) is False


def over_loop(region: Region, index: str, lo: sym.Expr, step: sym.Expr, trips: sym.Expr,
              ranges: Mapping[str, sym.Bounds]) -> Region | None:
    """The union of ``region`` over the iterations of a loop, when it is one rectangle: the region
    moves along one axis by exactly its extent per iteration (rows ``b`` of ``loop(B)``, chunks
    ``4 * i`` of extent 4). None when it is not."""
    offs, shape = region
    if any(index in sym.free_symbols(s) for s in shape):
        return None
    moving = [k for k, o in enumerate(offs) if index in sym.free_symbols(o)]
    if not moving:
        return region
    if len(moving) != 1:
        return None
    k = moving[0]
    form = sym.linear(offs[k])
    if form is None or not sym.is_const(step):
        return None
    a = form[0].get(index, 0)
    if not sym.is_const(a) or a * step != shape[k] or a <= 0:
        return None
    start = sym.substitute(offs[k], {index: lo})
    new_offs = (*offs[:k], start, *offs[k + 1:])
    new_shape = (*shape[:k], sym.mul(shape[k], sym.max_(trips, 0, ranges)), *shape[k + 1:])
    return new_offs, new_shape
