"""Row bands of a nondecreasing tensor: what the spec's ``nondecreasing:`` lets passes prove.

A spec may declare integer inputs of rank 1 whose elements never decrease (``nondecreasing:``,
cumulative lengths such as varlen attention's ``cu_seqlens``); every call checks it before any
kernel runs (E0732, ``runtime/operator.py``). A loop whose body reads such a tensor ``t`` at
``e`` and ``e + 1``, ``e = a * i + c`` with ``a >= 1`` of its index ``i`` (step >= 1), then has
a band per iteration: rows ``[t[e], t[e + 1])``. Bands of different iterations never meet, since
``t[e(i) + 1] <= t[e(j)]`` for ``i < j``. An iteration that touches a tensor only inside its band
(each row of every access at least ``t[e]`` and below ``t[e + 1]``, proved from the access's
offset and valid extent) touches no row another iteration touches: varlen attention's output rows
of one sequence. ``passes/blocks.py`` then shares out the query tiles of every sequence over all
the cores, and ``passes/aivsplit.py`` lets both vector cores write their halves of those rows.
"""

from __future__ import annotations

from .. import sym
from ..ir import Func, Module, Op
from ..ir.gm import Origin, walk_ops
from ..ir.opdefs import indexed_gm
from ..ir.schedule import schedule_of

Band = tuple[sym.Expr, sym.Expr]  # (first row, the row after the last), symbols read in the loop


def ordered_params(module: Module, kernel: Func) -> frozenset[str]:
    """The tensor parameters of ``kernel`` that every launch of it fills with a whole input the
    spec declares ``nondecreasing:``."""
    names = set(schedule_of(module).nondecreasing)
    if not names:
        return frozenset()
    tensors = [p.name for p in kernel.params if p.is_tensor]
    found = [(c, op) for c in module.funcs if c.kind == "control" for op in walk_ops(c.body)
             if op.name == "launch" and op.attrs["kernel"] == kernel.name]
    if not found:
        return frozenset()
    out: set[str] = set()
    for k, name in enumerate(tensors):
        if all(k < len(op.operands) and op.operands[k].name in names
               and any(q.is_tensor and q.value is op.operands[k] for q in c.params) for c, op in found):
            out.add(name)
    return frozenset(out)


def bands(loop: Op, ordered: frozenset[str]) -> list[Band]:
    """The row bands of ``loop``'s iterations (module docstring): pairs of symbols its body reads,
    at its top level, from one nondecreasing tensor at ``e`` and ``e + 1``."""
    step = loop.attrs["step"]
    if not ordered or not isinstance(step, int) or step < 1:
        return []
    index = loop.attrs["index"]
    reads: dict[tuple[str, sym.Expr], str] = {}
    for op in loop.regions[0]:
        if op.name == "read" and op.operands[0].name in ordered and len(op.attrs["index"]) == 1:
            reads[(op.operands[0].name, op.attrs["index"][0])] = op.attrs["sym"]
    out: list[Band] = []
    for (tensor, e), first in reads.items():
        form = sym.linear(e)
        if form is None:
            continue
        coeffs, _ = form
        a = coeffs.get(index)
        if set(coeffs) != {index} or not isinstance(a, int) or a < 1:
            continue
        after = next((s for (t, e2), s in reads.items() if t == tensor and sym.sub(e2, e) == 1), None)
        if after is not None:
            out.append((sym.Sym(first), sym.Sym(after)))
    return out


def within_bands(loop: Op, roots: set[str], origins: dict[str, Origin], ordered: frozenset[str]) -> bool:
    """Whether each iteration of ``loop`` touches the GM tensors ``roots`` (by root name) only in
    its row band: every tile load or store of one, anywhere inside, within one band of ``loop``;
    no other access to them (an element read, a gather or scatter)."""
    found = bands(loop, ordered)
    if not found:
        return False
    # every access to one tensor in the same band: rows of one tensor in the bands of two different
    # nondecreasing tensors could meet across iterations
    common: dict[str, set[int]] = {}
    for op, inside, root in _touching(loop, roots, origins):
        held = holding(op, inside, found, origins)
        common[root] = common.get(root, held) & held
    return all(common.values())


def _touching(loop: Op, roots: set[str], origins: dict[str, Origin]):
    """Each op inside ``loop`` touching one of ``roots``, with the loops between (outermost
    first; None for an op touching them other than by a tile load or store) and the root."""
    def walk(ops: list[Op], inside: tuple[Op, ...]):
        for op in ops:
            gm = [origins[v.name].root for vs in indexed_gm(op) for v in vs]
            if op.name == "read":
                gm.append(origins[op.operands[0].name].root)
            if op.name in ("tile.load", "tile.store"):
                root = origins[op.operands[1 if op.name == "tile.load" else 0].name].root
                if root in roots:
                    yield op, inside, root
            for root in sorted(set(gm) & roots):
                yield op, None, root
            for region in op.regions:
                yield from walk(region, (*inside, op) if op.name == "loop" else inside)
    yield from walk(loop.regions[0], ())


def block_ranges(kernel: Func) -> dict[str, tuple]:
    """The ranges of a kernel's block index and count (``passes/blocks.py``), which the bounds of
    a block's share of a loop name."""
    a = kernel.attrs
    return {a["block_index"]: (0, None), a["block_count"]: (1, None)} if "block_index" in a else {}


def holding(op: Op, inside: tuple[Op, ...] | None, found: list[Band], origins: dict[str, Origin],
            known: dict[str, tuple] | None = None) -> set[int]:
    """The positions in ``found`` (the bands of a loop) of the bands that tile load or store ``op``
    stays inside (``inside``: the loops between; None: an access of another kind, held by none);
    ``known``: ranges of symbols besides the loop indices (:func:`block_ranges`)."""
    if inside is None or not found:
        return set()
    gm, tile = (op.operands[1], op.operands[0]) if op.name == "tile.load" else op.operands[:2]
    origin = origins[gm.name]
    if origin.offsets is None or len(tile.type.valid) != len(origin.offsets):
        return set()
    if any(lp.attrs["step"] != 1 for lp in inside):
        return set()
    first = sym.add(origin.offsets[0], op.attrs["offsets"][0])
    rows = _bounds(tile.type.valid[0], True)
    out: set[int] = set()
    for k, (lo, hi) in enumerate(found):
        # the band's end as its start plus a length that the promise makes non-negative: loop
        # bounds inside (a block's share of the band's tiles) are then non-negative too
        length = sym.Sym(_LENGTH)
        at = {hi.name: sym.add(lo, length)}
        ranges: dict[str, tuple] = {**(known or {}), _LENGTH: (0, None)}
        for lp in inside:
            a = lp.attrs
            ranges[a["index"]] = (sym.substitute(a["lo"], at), sym.substitute(sym.sub(a["hi"], 1), at))
        start = sym.substitute(first, at)
        if sym.prove_le(lo, start, ranges) and \
                any(sym.prove_le(sym.add(start, sym.substitute(n, at)), sym.add(lo, length), ranges) for n in rows):
            out.add(k)
    return out


_LENGTH = "\x00band"  # the length of a band, t[e + 1] - t[e]: a symbol no program names


_CHOICES = 64  # bounds tried per extent: a valid extent nests a min per clamp that made it


def _bounds(e: sym.Expr, upper: bool) -> list[sym.Expr]:
    """Expressions at least ``e`` (``upper``) or at most it, each with every ``min`` (``max``) on
    that side replaced by one of its arguments: a valid extent ``min(min(L - j * T, T), ...)``
    is at most ``L - j * T``, which a linear proof can use where the prover's one split per
    proof cannot reach through the nesting. At most ``_CHOICES``."""
    if isinstance(e, sym.CallExpr) and e.fn == ("min" if upper else "max"):
        out: list[sym.Expr] = []
        for a in e.args:
            out += _bounds(a, upper)
        return list(dict.fromkeys(out))[:_CHOICES]
    if isinstance(e, sym.BinExpr) and e.op in ("+", "-"):
        left = _bounds(e.left, upper)
        right = _bounds(e.right, upper if e.op == "+" else not upper)
        join = sym.add if e.op == "+" else sym.sub
        return list(dict.fromkeys(join(a, b) for a in left for b in right))[:_CHOICES]
    return [e]


def bounds_above(e: sym.Expr) -> list[sym.Expr]:
    """Expressions at least ``e``, each a choice of one argument per ``min`` (:func:`_bounds`)."""
    return _bounds(e, True)


__all__ = ["bands", "block_ranges", "bounds_above", "holding", "ordered_params", "within_bands"]
