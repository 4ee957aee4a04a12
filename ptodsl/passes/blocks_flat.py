"""Blocks over the tiles of a cube kernel's grid nest, for the blocks pass (``passes/blocks.py``).

A matmul's output tiles form a nest: columns outside, rows inside. Shared out as a grid of blocks
(``blocks.share_out_nest``), 32 columns over 24 cube cores run on 16 blocks of two columns each:
every block does twice the average work while 8 cores idle. Here the ``t0 * t1`` tiles are taken
in column order (tile ``f``: column ``f // t1``, row ``f % t1``) and block ``b`` of ``n`` runs the
contiguous share ``[b * c, b * c + min(c, t0 * t1 - b * c))``, ``c = cdiv(t0 * t1, n)``, as
any parallel loop would: 512 tiles are 22 per block on 24 cores, a third less time than 32.

The share stays a nest: the outer loop runs the columns the share touches, and the inner loop of
column ``j`` the rows ``[max(first - j * t1, 0), min(end - j * t1, t1))`` of it. So the outer
body's work (the first B tile of the column) still runs once per column, every bound is monotone
in the block index and in the column (the dry run samples alike blocks and rows, cost/alike.py),
and a block walking down a column re-reads the B panel its last tile read.

Vector kernels keep the grid of blocks: their nests (a broadcast row outside, row tiles inside)
mostly have fewer columns than cores, where the grid already fills the cores.
"""

from __future__ import annotations

from .. import sym
from ..ir import Func, Op


def tileable(kernel: Func) -> bool:
    """Whether the grid nest of ``kernel`` (``blocks._inner_grid`` holds) is shared out by tiles."""
    return kernel.kind == "cube"


def share_out_tiles(kernel: Func, outer: Op, inner: Op, index: str, count: str) -> sym.Expr:
    """Give block ``index`` of ``count`` its share of the tiles of the nest ``outer`` around
    ``inner`` (both of step 1), in place; returns the number of tiles."""
    o, i = outer.attrs, inner.attrs
    t0, t1 = sym.sub(o["hi"], o["lo"]), sym.sub(i["hi"], i["lo"])
    total = sym.mul(t0, t1)
    per = sym.max_(t1, 1)  # (no inner trip: no tile; the max only keeps the divisions defined)
    chunk = sym.ceildiv(total, sym.Sym(count))
    first = sym.mul(sym.Sym(index), chunk)
    end = sym.add(first, sym.min_(chunk, sym.sub(total, first)))
    lo0, lo1 = o["lo"], i["lo"]
    o["lo"] = sym.add(lo0, sym.floordiv(first, per))
    o["hi"] = sym.add(lo0, sym.ceildiv(end, per))
    column = sym.mul(sym.sub(sym.Sym(o["index"]), lo0), per)  # the tiles before this column
    i["lo"] = sym.add(lo1, sym.max_(sym.sub(first, column), 0))
    i["hi"] = sym.add(lo1, sym.min_(sym.sub(end, column), t1))
    o["parallel"] = i["parallel"] = 1
    # what a block's cost depends on (its ops' extents): its length, how many of its tiles lie
    # in the first column it touches and whether they reach that column's last row (the M tail:
    # the rest of the share is whole columns and a head of the last), and how much of the last
    # column (the one with the N tail) it takes; blocks alike in these are modelled once each
    # (cost/dryrun.py): a batch of matmuls shared out one entry per block is one or two shapes
    last = sym.mul(sym.sub(t0, 1), per)
    length, start = sym.sub(end, first), sym.mod(first, per)
    kernel.attrs["block_key"] = [length, sym.min_(sym.sub(per, start), length),
                                 sym.compare(">=", sym.add(start, length), per),
                                 sym.min_(sym.max_(sym.sub(end, last), 0), length)]
    return total
