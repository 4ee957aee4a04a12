"""One-pass versions of row loops whose rows fit on chip (used by ``passes/tile.py``).

A loop that reduces each row over a runtime dim ``D`` and then applies the row's statistic back
to the row (rmsnorm, layernorm, softmax, log-softmax; or the implicit loop of a kernel's top-level
statements, matrix products among them: mha_sdpa's softmax between its products) reads the row
twice or more when it spans several vector tiles: the statistic is complete only after the last tile. When the whole row
fits the UB, one pass is enough: the row is loaded once, reduced and used from UB.

So tiling compiles such a loop twice, behind ``if (D >= lo && D <= cap)``: the fit version, a
copy of the loop (attribute ``fit = D``) tiled with a tile of ``cap`` columns along ``D``, in
which the tiler knows ``1 <= D <= cap`` (no grid loop along ``D``; every tail is ``D`` itself),
and the loop as scheduled for the rest (``lo`` is 1, or for top-level statements one more than
the scheduled tile's width: rows one tile wide are one pass already, and double buffered there).
The choice is made at call time, in the control program, and visible in the IR. Fusion then forwards the row's second load from the first and hoists the
loads of loop-invariant read-only operands (gamma, beta) out of the fit loop
(:func:`hoist_invariant`), so each block loads them once.

``cap`` is the largest multiple of ``GRANULE`` columns for which the memory plan of the fit
version (tiled and fused; before the fused instructions, which only take tiles away) fits the
target's UB; it is estimated from the plans at two widths (the peak is affine in the width) and
checked at the width chosen. A loop whose cap would not exceed its scheduled tile width is left alone.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import sym
from ..ir import Func, Op, TensorType
from ..ir.opdefs import IR_OPS
from ..ops import OPS
from .paths import _defined, _suffix
from .unroll import _Cloner

# Columns of the fit version's tile are a multiple of this: every dtype's row stays 32-byte
# aligned (a bool tile's 32 elements) with room to spare.
GRANULE = 256
FIT_ATTR = "fit"


def _runtime_dim(e: sym.Expr, dims: set[str]) -> str | None:
    return e.name if isinstance(e, sym.Sym) and e.name in dims else None


def call_dims(func: Func) -> set[str]:
    """The symbols of the function's tensor dims that are bound at call time."""
    out: set[str] = set()
    for p in func.params:
        t = getattr(p, "type", None)
        if isinstance(t, TensorType):
            out.update(s.name for s in t.shape if isinstance(s, sym.Sym))
    return out


_ROW_FAMILIES = frozenset({"unary", "binary", "ternary", "cast", "compare", "select", "reduce"})
_STRUCTURE = frozenset({"view", "alloc", "assemble", "fill", "broadcast"})


def row_dim(loop: Op, dims: set[str]) -> str | None:
    """The runtime dim ``D`` a user loop's body reduces its rows over and then applies the result
    back over (a binary op of a ``[.., D]`` and a ``[.., 1]`` operand), when its body is only
    elementwise work, reductions and views (and matrix products, in the implicit top-level loop,
    whose tiles are the cube's, not the fit width's); else None."""
    if loop.name != "loop" or loop.attrs.get("kind") not in (None, "implicit"):
        return None
    reduced: set[str] = set()
    spread: set[str] = set()
    for op in loop.regions[0]:
        for o in op.walk():
            if o.name in ("loop", "if"):
                return None  # nested control: the simple one-pass shape only
            od = OPS.get(o.name)
            if od is None:
                if o.name not in _STRUCTURE:
                    return None
                continue
            if od.kind not in _ROW_FAMILIES and not (od.kind == "matmul" and loop.attrs.get("kind") == "implicit"):
                return None
            if od.kind == "reduce":
                st: TensorType = o.operands[0].type
                axis = o.attrs["axis"] % st.rank
                d = _runtime_dim(st.shape[axis], dims) if axis == st.rank - 1 else None
                if d is not None:
                    reduced.add(d)
            elif od.kind == "binary" and len(o.operands) == 2:
                lasts = [v.type.shape[-1] for v in o.operands if isinstance(v.type, TensorType) and v.type.rank]
                if len(lasts) == 2 and 1 in lasts:
                    d = next((_runtime_dim(x, dims) for x in lasts if x != 1), None)
                    if d is not None:
                        spread.add(d)
    both = sorted(reduced & spread)
    return both[0] if len(both) == 1 else None


def _last_dim(v, dims: set[str]) -> str | None:
    t = getattr(v, "type", None)
    return _runtime_dim(t.shape[-1], dims) if isinstance(t, TensorType) and t.rank >= 1 else None


def rewrite_of(ops: list[Op]) -> tuple[Op, list[Op], Op, Op] | None:
    """``(clone, views, concat, assemble)`` when ``ops`` rewrite a tensor from a copy of itself:
    ``old = clone(x)``, views of ``old`` joined by one ``concat`` along the last dim, and that
    assembled whole into ``x``, one after another with nothing else using ``old`` (swap_halves:
    the rows' halves exchanged in place), else None."""
    for k, op in enumerate(ops):
        if op.name != "clone":
            continue
        x, old = op.operands[0], op.result
        users = [o for o in ops if any(v.name == old.name for v in o.operands)]
        views = [o for o in users if o.name == "view"]
        if len(views) != len(users) or not views or any(r.name == old.name for o in ops for r in o.results if o is not op):
            continue
        j = k + 1 + len(views)
        if ops[k + 1:j] != views or j + 1 >= len(ops):
            continue
        concat, assemble = ops[j], ops[j + 1]
        rt = concat.result.type if concat.name == "concat" else None
        if (rt is None or concat.attrs.get("axis") != rt.rank - 1
                or [v.name for v in concat.operands] != [v.result.name for v in views]
                or assemble.name != "assemble" or assemble.operands[0].name != x.name
                or assemble.operands[1].name != concat.result.name
                or any(not sym.is_const(o) or o != 0 for o in assemble.attrs.get("offsets", ()))
                or tuple(rt.shape) != tuple(x.type.shape)):
            continue
        if any(any(not sym.is_const(o) or o != 0 for o in w.attrs.get("offsets", ())[:-1])
               or tuple(w.result.type.shape[:-1]) != tuple(x.type.shape[:-1]) for w in views):
            continue  # a part of other rows: a row block would read another's rows
        uses = [o for o in ops for v in o.operands if v.name in {concat.result.name, *(w.result.name for w in views)}]
        if len(uses) != len(views) + 1:
            continue  # a view or the joined value is used again elsewhere
        return op, views, concat, assemble
    return None


def inplace_dim(loop: Op, dims: set[str]) -> str | None:
    """The runtime dim ``D`` (the rewritten tensor's last) of the loop whose body rewrites a tensor
    from a copy of itself (:func:`rewrite_of`): where a whole row fits one tile, each row block is
    read before it is written, so the copy is not needed."""
    if loop.name != "loop" or loop.attrs.get("kind") not in (None, "implicit"):
        return None
    found = rewrite_of(loop.regions[0])
    return None if found is None else _last_dim(found[0].operands[0], dims)


def without_copy(ops: list[Op], found: tuple[Op, list[Op], Op, Op]) -> list[Op]:
    """``ops`` with the rewrite ``found`` in them (:func:`rewrite_of`) reading the tensor itself
    instead of its copy (the views taken of ``x``; the clone dropped). Right only where the concat
    leaves as one tile per row block, loaded whole before it is stored (the caller checks)."""
    clone, views, _, _ = found
    x = clone.operands[0]
    out = []
    for op in ops:
        if op is clone:
            continue
        if any(op is v for v in views):
            op = Op("view", [x], dict(op.attrs), list(op.results), [], op.span)
        out.append(op)
    return out


def least_dim(parts: list[sym.Expr], dim: str, cap: int) -> int | None:
    """The least value of ``dim`` from 1 up for which every part width is provably at least 1
    (a part of no column is a tile pto-isa refuses), or None."""
    for lo in range(1, min(cap, 8) + 1):
        if all(sym.prove_le(1, w, {dim: (lo, cap)}) for w in parts):
            return lo
    return None


def fit_copy(loop: Op, dim: str, cap: int, inner: frozenset[str] = frozenset()) -> Op:
    """A copy of ``loop`` (values and index renamed) marked as the fit version for ``dim``; so are
    the loops in it with an index in ``inner`` (the row loop of a split reduction's share, whose
    fit version is the whole nest around it: :func:`hoist_invariant` then hoists to it)."""
    a = loop.attrs
    names = _defined(loop.regions[0]) | {a["index"]}
    suffix = _suffix(names, "fit")  # no copy's name may be a name of the loop as scheduled
    index = f"{a['index']}{suffix}"
    cloner = _Cloner({a["index"]: sym.Sym(index)}, suffix, {})
    body = [cloner.op(x) for x in loop.regions[0]]
    for x in body:
        for o in x.walk():
            if o.name == "loop" and o.attrs["index"] in inner:
                o.attrs[FIT_ATTR] = dim
    return Op("loop", [], dict(a) | {"index": index, FIT_ATTR: dim}, [], [body], loop.span)


def condition(dim: str, cap: int, lo: int = 1) -> sym.Expr:
    d = sym.Sym(dim)
    return sym.logical("and", sym.compare(">=", d, lo), sym.compare("<=", d, cap))


def fit_bytes(func: Func, dim: str, ctx) -> int | None:
    """The UB bytes the fit loop for ``dim`` in ``func`` needs together with the tile work hoisted
    to just before it: the memory plan's peak (tiles reused as their lives end) plus, above it, the
    largest scratch an instruction takes (the C++ emitter's row-reduction tmp and the like: at
    most a tile as large as its largest operand per scratch tile); None when there is no loop."""
    from .memplan import plan, scratch_bytes

    def find(ops: list[Op]) -> list[Op] | None:
        for k, op in enumerate(ops):
            if op.name == "loop" and op.attrs.get(FIT_ATTR) == dim:
                j = k
                while j > 0 and ops[j - 1].name.startswith("tile."):
                    j -= 1
                return ops[j:k + 1]
            for region in op.regions:
                got = find(region)
                if got is not None:
                    return got
        return None

    part = find(func.body)
    if part is None:
        return None
    block = ctx.target.ub_block_bytes
    scratch = scratch_bytes(part, block)
    peak = plan(Func(func.name, func.params, part, "vector", {}, func.span), ctx).get("ub", 0)
    return peak + scratch + _carried_bytes(part, block)


def _carried_bytes(ops: list[Op], block: int) -> int:
    """The bytes of the tiles a row loop in ``ops`` stores at offsets it does not move (a split
    reduction's partial row): promotion (``passes/promote.py``) holds each in UB across the loop,
    above what the loop's own plan needs."""
    from .memplan import tile_bytes

    out = 0
    for loop in (o for op in ops for o in op.walk() if o.name == "loop" and FIT_ATTR in o.attrs):
        moved = {o.attrs["index"] for o in loop.walk() if o.name == "loop"}
        for o in loop.regions[0]:
            if o.name == "tile.store" and not any(sym.free_symbols(x) & moved for x in o.attrs["offsets"]
                                                  if not sym.is_const(x)):
                out += tile_bytes(o.operands[1].type, block)
    return out


def choose_cap(measure: Callable[[int], int | None], width: int, ub_bytes: int) -> int | None:
    """The largest multiple of GRANULE above ``width`` whose measured tile bytes fit ``ub_bytes``;
    ``measure(cap)`` gives the fit version's bytes at that width (None: it cannot be compiled)."""
    lo = max(GRANULE, -(-width // GRANULE) * GRANULE)
    b1, b2 = measure(lo), measure(2 * lo)
    if b1 is None or b2 is None or b2 <= b1:
        return None
    per_col = (b2 - b1) / lo
    fixed = b1 - per_col * lo
    cap = int((ub_bytes - fixed) // per_col) // GRANULE * GRANULE
    while cap > width:
        got = measure(cap)
        if got is not None and got <= ub_bytes:
            return cap
        cap -= GRANULE
    return None


def _hoistable_load(o: Op, inside: set[str], written: set[str], index: str) -> bool:
    if o.name != "tile.load":
        return False
    dst, src = o.operands
    return (src.name not in written and src.name not in inside
            and not any(index in sym.free_symbols(x) for x in o.attrs["offsets"] if not sym.is_const(x))
            and not any(index in sym.free_symbols(x) for x in dst.type.valid if not sym.is_const(x)))


def hoist_invariant(ops: list[Op], written: set[str]) -> list[Op]:
    """Move the loads of read-only GM tensors at offsets the loop does not change, and the vector
    ops computing only from such tiles, out of each fit loop (to just before it)."""
    out: list[Op] = []
    for op in ops:
        op.regions = [hoist_invariant(r, written) for r in op.regions]
        if op.name != "loop" or FIT_ATTR not in op.attrs:
            out.append(op)
            continue
        body = op.regions[0]
        inside = {r.name for x in body for o in x.walk() for r in o.results}
        index = op.attrs["index"]
        tile_writes: dict[str, int] = {}
        for x in body:
            for o in x.walk():
                for k, v in enumerate(o.operands):
                    if _is_dst(o, k):
                        tile_writes[v.name] = tile_writes.get(v.name, 0) + 1
        moved: set[str] = set()
        allocs = {x.results[0].name: x for x in body if x.name == "tile.alloc"}
        hoisted: list[Op] = []
        keep: list[Op] = []
        for x in body:
            if x.name == "tile.alloc":
                keep.append(x)
                continue
            dst = x.operands[0] if x.operands else None
            if dst is None or dst.name not in allocs or tile_writes.get(dst.name) != 1 or x.regions:
                keep.append(x)
                continue
            if _hoistable_load(x, inside - set(allocs), written, index):
                ok = True
            else:
                od = OPS.get(x.name.removeprefix("tile."))
                ok = (x.name.startswith("tile.") and od is not None and od.kind in ("unary", "cast", "binary")
                      and all(v.name in moved for v in x.operands[1:])
                      and not any(isinstance(v, sym.Expr) and index in _free(v) for v in x.attrs.values()))
            if ok:
                hoisted += [allocs[dst.name], x]
                moved.add(dst.name)
            else:
                keep.append(x)
        if moved:
            op.regions = [[x for x in keep if not (x.name == "tile.alloc" and x.results[0].name in moved)]]
            out.extend(hoisted)
        out.append(op)
    return out


def _free(v: object) -> set[str]:
    try:
        return sym.free_symbols(v)
    except (TypeError, AttributeError):
        return set()


def _is_dst(op: Op, k: int) -> bool:
    d = IR_OPS.get(op.name)
    return d is not None and k in d.reads_writes(len(op.operands))[1]


__all__ = ["FIT_ATTR", "GRANULE", "call_dims", "choose_cap", "condition", "fit_copy", "hoist_invariant",
           "fit_bytes", "inplace_dim", "least_dim", "rewrite_of", "row_dim", "without_copy"]
