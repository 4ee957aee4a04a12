"""Twin accumulations (part of fusion, ``fuse.py`` step 6c): one matmul computed once where a
region computes it twice.

``c[:] = matmul(a, b)`` and ``d[:] = matmul(a, b, out_dtype=T)`` (bmm's two outputs) tile into
one grid nest holding two accumulations of the same product, each a ``tile.matmul`` into its own
L0C tile and a K loop of ``tile.matmul_acc`` loading the same tiles of ``a`` and ``b`` again, then a
store of each accumulator (the second rounded to ``T`` by the fixpipe on its way out). The plain
common-subexpression step cannot see they are equal: an accumulator is written more than once.
Here the second accumulation is dropped and its stores take the first's tile: the loads, moves
and cube work of one product go, and its accumulator leaves L0C twice, as the fixpipe can do.

The second is dropped only when it is the first again: the same ops with the same attributes
(the K loops' indices identified), reading the same values from outside, in tiles of the same
types, accumulating into one L0C tile each; between the two, nothing writes a tensor or tile the
second reads (a store of the first's accumulator to another tensor, or an allocation, may stand
there); and the first's accumulator is written nowhere else, so it holds the product wherever the
second's was read.
"""

from __future__ import annotations

from .. import sym
from ..ir import Func, Op, TileType
from .merge import reads_writes, rename_values, tile_write_counts
from .unroll import _subst_attr, _subst_type

ACCUMULATE = "tile.matmul_acc"
START = frozenset({"tile.matmul", "tile.matmul_bias"})


def twin_accumulations(func: Func, base: dict[str, str]) -> bool:
    """Drop, in every region of ``func``, each accumulation that repeats an earlier one
    (module docstring); whether any went. ``base``: each GM value's root tensor."""
    writes = tile_write_counts(func)
    uses = _use_counts(func.body)
    changed = False

    def region(ops: list[Op]) -> None:
        nonlocal changed
        for op in ops:
            for r in op.regions:
                region(r)
        i = -1
        while (i := i + 1) < len(ops):
            group = _group(ops, i)
            if group is None or writes.get(ops[i].operands[0].name) != _writes_in(ops[i:i + group]):
                continue
            j = i + group
            while j < len(ops):
                if _group(ops, j) == group and _same(ops[i:i + group], ops[j:j + group]) and \
                        _untouched(ops[i + group:j], ops[j:j + group], base):
                    twin, first = ops[j].operands[0], ops[i].operands[0]
                    rest = ops[j + group:]
                    if _use_counts(rest).get(twin.name, 0) + _use_counts(ops[j:j + group])[twin.name] \
                            != uses.get(twin.name):
                        break  # read beyond this region too: keep it
                    del ops[j:j + group]
                    rename_values(rest, {twin.name: first})
                    changed = True
                    continue
                j += 1

    region(func.body)
    return changed


def _group(ops: list[Op], i: int) -> int | None:
    """The length of the accumulation starting at ``ops[i]``: a matmul into an L0C tile, and the
    K loop after it accumulating into that tile, if there is one."""
    op = ops[i]
    if op.name not in START or not isinstance(op.operands[0].type, TileType):
        return None
    acc = op.operands[0].name
    if i + 1 < len(ops) and ops[i + 1].name == "loop" and any(
            o.name == ACCUMULATE and o.operands[0].name == acc for o in ops[i + 1].walk()):
        return 2
    return 1


def _writes_in(ops: list[Op]) -> int:
    acc = ops[0].operands[0].name
    return sum(1 for top in ops for o in top.walk() if _writes_tile(o, acc))


def _writes_tile(op: Op, name: str) -> bool:
    return op.name.startswith("tile.") and any(v.name == name for v in reads_writes(op)[1])


def _same(a: list[Op], b: list[Op]) -> bool:
    """Whether ops ``b`` compute what ops ``a`` do, values defined inside each paired in order
    and loop indices identified; ``b``'s accumulator stands for ``a``'s."""
    if a[0].operands[0].type != b[0].operands[0].type:
        return False  # accumulators of other shapes or valid extents: the stores would differ
    values = {b[0].operands[0].name: a[0].operands[0].name}
    env: dict[str, sym.Expr] = {}
    return all(_same_op(x, y, values, env) for x, y in zip(a, b, strict=True))


def _same_op(x: Op, y: Op, values: dict[str, str], env: dict[str, sym.Expr]) -> bool:
    if x.name != y.name or len(x.operands) != len(y.operands) or len(x.regions) != len(y.regions):
        return False
    if x.name == "loop":
        env[y.attrs["index"]] = sym.Sym(x.attrs["index"])
        skip = {"index", "name"}
        if _subst_attr({k: v for k, v in x.attrs.items() if k not in skip}, {}) != \
                _subst_attr({k: v for k, v in y.attrs.items() if k not in skip}, env):
            return False
    elif _subst_attr(x.attrs, {}) != _subst_attr(y.attrs, env):
        return False
    for u, v in zip(x.operands, y.operands):
        if values.get(v.name, v.name) != u.name:
            return False
    if len(x.results) != len(y.results):
        return False
    for u, v in zip(x.results, y.results):
        if u.type != _subst_type(v.type, env):
            return False
        values[v.name] = u.name
    return all(len(r) == len(s) and all(_same_op(p, q, values, env) for p, q in zip(r, s))
               for r, s in zip(x.regions, y.regions))


def _untouched(between: list[Op], twin: list[Op], base: dict[str, str]) -> bool:
    """Whether the ops between the two accumulations leave what the second reads as it was: they
    only allocate tiles, or store tiles to tensors the second does not load."""
    loaded = {base.get(o.operands[1].name, o.operands[1].name)
              for top in twin for o in top.walk() if o.name == "tile.load"}
    outside = {v.name for top in twin for o in top.walk() for v in o.operands} - {
        v.name for top in twin for o in top.walk() for v in o.results}
    for top in between:
        for o in top.walk():
            if o.name == "tile.alloc":
                continue
            if o.name != "tile.store" or base.get(o.operands[0].name, o.operands[0].name) in loaded:
                return False
            if any(v.name in outside for v in reads_writes(o)[1]):
                return False
    return True


def _use_counts(ops: list[Op]) -> dict[str, int]:
    out: dict[str, int] = {}
    for top in ops:
        for o in top.walk():
            for v in o.operands:
                out[v.name] = out.get(v.name, 0) + 1
    return out
