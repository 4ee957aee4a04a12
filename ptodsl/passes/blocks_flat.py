"""Blocks over the tiles of a cube kernel's grid nest, for the blocks pass (``passes/blocks.py``).

A matmul's output tiles form a nest: columns outside, rows inside. Shared out as a grid of blocks
(``blocks.share_out_nest``), 32 columns over 24 cube cores run on 16 blocks of two columns each:
every block does twice the average work while 8 cores idle. Here the ``t0 * t1`` tiles are taken
in column order (tile ``f``: column ``f // t1``, row ``f % t1``) and block ``b`` of ``n`` runs the
contiguous share ``[b * c, b * c + min(c, t0 * t1 - b * c))``, ``c = cdiv(t0 * t1, n)``, as
any parallel loop would: 512 tiles are 22 per block on 24 cores, a third less time than 32.

The share stays a nest: the outer loop runs the columns the share touches, and the inner loop of
column ``j`` the rows ``[max(first - j * t1, 0), min(end - j * t1, t1))`` of it. Batch loops
around the columns join the same flattened order (a batch of 32 small products is 32 * t0 * t1
tiles, not 32 entries over 24 cores). So the outer
body's work (the first B tile of the column) still runs once per column, every bound is monotone
in the block index and in the column (the dry run samples alike blocks and rows, cost/alike.py),
and a block walking down a column re-reads the B panel its last tile read.

Vector kernels keep the grid of blocks where their nest is two loops deep (a broadcast row
outside, row tiles inside): such nests mostly have fewer columns than cores, where the grid already
fills the cores. A deeper one (batch dims around the row blocks) is shared out by tiles.
"""

from __future__ import annotations

from .. import sym
from ..ir import Func, Op


def tileable(kernel: Func, nest: list[Op]) -> bool:
    """Whether the grid nest of ``kernel`` (``blocks._inner_grid`` holds) is shared out by tiles:
    a cube kernel's, or a vector kernel's nest of three loops or more (batch dims around row
    blocks: a grid of blocks splits only the outer two, so the 2 x 12 heads of mha_sdpa's
    softmax would take 24 of 48 vector cores)."""
    return kernel.kind == "cube" or (kernel.kind == "vector" and len(nest) >= 3)


def share_out_tiles(kernel: Func, nest: list[Op], index: str, count: str) -> sym.Expr:
    """:func:`share_tiles`, with the kernel's ``block_key`` set to the share's key."""
    total, key = share_tiles(nest, index, count)
    kernel.attrs["block_key"] = key
    return total


def share_tiles(nest: list[Op], index: str, count: str) -> tuple[sym.Expr, list[sym.Expr]]:
    """Give block ``index`` of ``count`` its share of the tiles of ``nest`` (loops of step 1, each
    directly inside the one before, with bounds free of their indices), in place; returns the
    number of tiles and what a share's cost depends on (the dry run's block key). A nest of more
    than two loops (a batch of matmuls: batch loops around the columns and rows) is flattened the
    same way: loop ``k`` runs the indices whose prefix of the flattened order meets the share. A
    block past the last tile gets an empty share."""
    trips = [sym.sub(loop.attrs["hi"], loop.attrs["lo"]) for loop in nest]
    total: sym.Expr = 1
    for t in trips:
        total = sym.mul(total, t)
    # strides[k]: the tiles one step of loop k passes over (no inner trip: no tile; the max only
    # keeps the divisions defined)
    strides: list[sym.Expr] = []
    acc: sym.Expr = 1
    for t in reversed(trips[1:]):
        acc = sym.mul(acc, t)
        strides.append(acc)
    strides = [sym.max_(x, 1) for x in reversed(strides)] + [1]
    chunk = sym.ceildiv(total, sym.Sym(count))
    first = sym.mul(sym.Sym(index), chunk)
    end = sym.add(first, sym.min_(chunk, sym.sub(total, first)))
    before: sym.Expr = 0  # the tiles before the current iteration of the loops outside loop k
    for k, (loop, t, stride) in enumerate(zip(nest, trips, strides)):
        a = loop.attrs
        lo = a["lo"]
        if k == 0:
            a["lo"] = sym.add(lo, sym.floordiv(first, stride))
            a["hi"] = sym.add(lo, sym.ceildiv(end, stride))
        else:
            a["lo"] = sym.add(lo, sym.max_(sym.floordiv(sym.sub(first, before), stride), 0))
            a["hi"] = sym.add(lo, sym.min_(sym.ceildiv(sym.sub(end, before), stride), t))
        a["parallel"] = 1
        before = sym.add(before, sym.mul(sym.sub(sym.Sym(a["index"]), lo), stride))
    length = sym.sub(end, first)
    if len(nest) == 1:
        # a share of one loop: its length, and whether it takes the last (tail) iteration
        return total, [length, sym.compare(">=", end, total)]
    if len(nest) == 2:
        # what a block's cost depends on (its ops' extents): its length, how many of its tiles lie
        # in the first column it touches and whether they reach that column's last row (the M
        # tail: the rest of the share is whole columns and a head of the last), and how much of
        # the last column (the one with the N tail) it takes; blocks alike in these are modelled
        # once each (cost/dryrun.py): a batch of matmuls shared out one entry per block is one
        # or two shapes
        per, t0 = strides[0], trips[0]
        last = sym.mul(sym.sub(t0, 1), per)
        start = sym.mod(first, per)
        return total, [length, sym.min_(sym.sub(per, start), length),
                       sym.compare(">=", sym.add(start, length), per),
                       sym.min_(sym.max_(sym.sub(end, last), 0), length)]
    if all(_only_the_next_loop(loop) for loop in nest[:-2]):
        # batch loops that run nothing but the next loop: entering a batch entry is entering a
        # column, and the share is fixed by its length, where it starts in a column (the M tail
        # and the columns it enters) and how many of its tiles lie in a last column (the N tail)
        per, plane = strides[-2], strides[-3]
        edge = sym.sub(plane, per)  # the tiles of a matrix before its last column

        def in_last_columns(x: sym.Expr) -> sym.Expr:
            return sym.add(sym.mul(sym.floordiv(x, plane), per), sym.max_(sym.sub(sym.mod(x, plane), edge), 0))

        return total, [length, sym.mod(first, per), sym.sub(in_last_columns(end), in_last_columns(first))]
    # the outermost loop's entries are alike: a share is fixed by its length and where it starts
    # in one
    return total, [length, sym.mod(first, strides[0])]


def _only_the_next_loop(loop: Op) -> bool:
    """Whether ``loop``'s body is one loop and views (work that moves no data)."""
    body = loop.regions[0]
    return sum(o.name == "loop" for o in body) == 1 and all(o.name in ("loop", "view", "reshape") for o in body)
