"""Blocks (Block IR -> Block IR): a compute kernel that is one loop of independent iterations runs
as blocks on all the cores of its kind.

Requires: a ``level block`` module from partitioning, whose independent user loops carry
``parallel = 1`` (``passes/parallel.py``) and run inside their kernels (``passes/persistent.py``).
Produces: for each compute kernel whose whole body is one ``parallel`` loop, launched once, the
launch gets ``block_dim = cdiv(trips, cdiv(trips, cores))`` (at least 1; ``cores``: the target's
``chip:`` count of the kernel's kind), which is ``min(trips, cores)`` unless that would leave
blocks without work, and the kernel two scalar parameters, ``block_index`` and ``block_count``
(``ir/opdefs.py``, the Block IR contract); block ``b`` of ``n`` runs the contiguous share of
``c = cdiv(trips, n)`` iterations from iteration ``b * c`` (the last block the rest). The shared
loop carries ``parallel = 1``, a grid loop too (the simulator evaluates the blocks as one batch of
the loop's iterations, ``backends/sim/batch.py``). Softmax over
B rows is one launch of ``min(B, cores)`` blocks (B <= cores or a multiple of it), not B launches.

A kernel launched once per call whose body is two or more loops run in turn, each of which could
run as blocks, is first split into one kernel per loop, launched one after another
(:func:`split_nests`): argmax's and mean's grid nests into a workspace, then the copy out. A
kernel whose one grid loop runs such loops in turn is distributed first (``passes/distribute.py``).

Contiguous shares keep the first failing bounds guard the one a sequential run stops at: the
blocks before it run the iterations before it. A kernel the loop of which writes a GM workspace
of the call (an ``alloc`` of the control program: hoisted by partitioning, one per launch) is
left on one block, since all blocks would share that workspace, unless the launch runs once per
call and the loop's proof holds with the workspace shared (each iteration writes its own part):
``passes/parallel.py``'s, or for a row block loop ``passes/rowgrid.py``'s (``rows_interchanged``),
whose iterations touch only their own rows of every tensor written, workspaces included; a
workspace rowgrid gave one row block's rows (``alloc {row_block}``) gets a copy
per block (:func:`row_private`, :func:`privatize`). A
``mixed`` kernel's blocks go to the cube cores (one AIC and the AIVs beside it per block).

Otherwise a kernel launched once per call whose body is a nest of loops of the user's down to a
``parallel`` one (:func:`nested_parallel`: the loops around hold only element reads, views and
guards besides the next loop, and bind nothing the parallel loop's bounds name) runs as blocks
sharing out that loop when every workspace it writes was allocated inside it (``alloc {within}``,
recorded by partitioning and rowgrid) and its iterations are independent with those workspaces their
own and the indices of the loops around free to differ (:func:`private_share`): each block runs the
loops around in full and its share of the parallel loop in each of their iterations, and gets a copy
of each such workspace (:func:`privatize`: the control program allocates ``block_dim`` copies along
the first dim, the kernel views the one at its block index). Varlen attention's heads loop inside
its batch loop runs so. Where that loop holds one more parallel loop whose share the blocks can
take too (:func:`inner_private`, its trip count possibly read inside the kernel), each block
takes a share of both (:func:`share_out_nest`): varlen attention's query tiles of each sequence,
proved apart across sequences by the row bands of its ``nondecreasing:`` cu_seqlens
(``passes/ordered.py``), run on every cube core, not on as many as heads. A parallel loop whose
trip count the one loop around it reads (a segment's row tiles) is shared out so too where that
loop's iterations keep to their row bands (:func:`_banded_share`): the launch then has as many
blocks as cores, since only the kernel knows the trips (:func:`data_trips`), and each block takes
its share of every segment's tiles. When several guards of such a kernel fail, the
call stops at the first of the lowest block that stopped, on every backend; that may come after
another failing one in program order (a later iteration of the loops around, in a lower block).
"""

from __future__ import annotations

import itertools

from .. import sym
from ..dtypes import DTYPES
from ..ir import Func, Module, Op, Param, TensorType, Value
from ..ir.gm import Origin, launches, walk_ops
from ..ir.opdefs import block_params, indexed_gm
from .blocks_flat import share_out_tiles, share_tiles, tileable
from .context import Pass, PassContext
from .distribute import distribute
from .ordered import bounds_above, ordered_params, within_bands
from .parallel import _access, independent, origins_of
from .persistent import bound_within


def blockable(kernel: Func) -> list[Op] | None:
    """The kernel's ``parallel`` loops when its body is one such loop, or the parts the unroll pass
    made of one (a loop by the factor and its remainder, whose iterations are all independent of
    each other) with no bounds guard among them; else None."""
    if block_params(kernel) or not kernel.body:
        return None
    grid = _grid(kernel)
    if grid is not None:
        return [grid]
    loops = kernel.body[_preamble(kernel):]
    if not loops:
        return None
    for loop in loops:
        step = loop.attrs.get("step")
        if loop.name != "loop" or loop.attrs.get("parallel") != 1 or not isinstance(step, int) or step < 1:
            return None
    if len(loops) > 1:
        # block b runs its share of each part in turn: the first guard a block stops at need not
        # be the first in loop order any more, so parts holding guards stay on one block
        names = {loop.attrs.get("name") for loop in loops}
        if len(names) != 1 or any("unrolled" not in loop.attrs for loop in loops) or \
                any(o.name == "guard" for o in kernel.walk()):
            return None
    return loops


def _preamble(kernel: Func) -> int:
    """How many leading ops of the kernel only fill tiles from tensors it does not write (the
    loads a one-pass row loop hoisted, ``passes/tile_fit.py``): every block runs them again, for
    the same tiles, before its share of the loop."""
    written = {v.name for o in kernel.walk() if o.name == "tile.store" for v in o.operands[:1]}
    written |= {v.name for o in kernel.walk() for v in indexed_gm(o)[1]}
    n = 0
    for op in kernel.body:
        if op.name == "tile.load" and op.operands[1].name not in written:
            n += 1
        elif op.name.startswith("tile.") and op.name != "tile.store" and not op.regions and \
                not any(isinstance(v.type, TensorType) for v in op.operands):
            n += 1
        else:
            break
    return n


# The tiler's loops whose iterations may be blocks: a grid's output tiles, a split-K's partial
# products (passes/cube.py: each into its own slice of the workspace).
SHARED = frozenset({"grid", "split"})


def _grid(kernel: Func) -> Op | None:
    """The outermost grid loop of a kernel that is one grid nest (inside the one-trip loops around
    top-level work), when its iterations are independent (the parallel pass's proof: each writes
    its own tiles, reads nothing written, carries no accumulator): an elementwise op's rows of
    tiles, a matmul's columns of output tiles."""
    body = kernel.body
    while len(body) == 1 and body[0].name == "loop" and body[0].attrs.get("kind") in ("implicit", "peeled") \
            and sym.sub(body[0].attrs["hi"], body[0].attrs["lo"]) == 1:
        body = body[0].regions[0]
    loops = [op for op in body if op.name not in PURE]  # views beside the nest move no data
    if len(loops) != 1 or loops[0].name != "loop" or loops[0].attrs.get("kind") not in SHARED:
        return None
    loop = loops[0]
    step = loop.attrs["step"]
    if not isinstance(step, int) or step < 1:
        return None
    origins = origins_of(kernel)
    return loop if origins is not None and independent(loop, origins) else None


def _fresh(kernel: Func, stem: str) -> str:
    taken = {p.name for p in kernel.params} | bound_within_all(kernel)
    name, k = stem, 1
    while name in taken:
        name, k = f"{stem}{k}", k + 1
    return name


def bound_within_all(kernel: Func) -> set[str]:
    out: set[str] = set()
    for op in kernel.body:
        out |= bound_within(op)
    return out


def _workspaces(control: Func) -> set[str]:
    """The GM values of ``control`` that are workspaces it allocates."""
    return {op.result.name for op in walk_ops(control.body) if op.name == "alloc"}


def _writes_workspace(kernel: Func, launch: Op, workspaces: set[str]) -> bool:
    params = [p for p in kernel.params if p.is_tensor]
    bound = {p.name for p, v in zip(params, launch.operands) if v.name in workspaces}
    return bool(bound & _written_params(kernel))


def banded(kernel: Func, loops: list[Op], private: list[str]) -> bool:
    """Whether each row block loop of ``loops`` reaches every tensor the kernel writes (but the
    ``private`` ones, a copy per block) only by tile loads and stores at rows its index names:
    the shape of ``passes/rowgrid.py``'s bands, checked again here because blocks run them at
    once. A pass between that left a band's rows fixed (one row block's buffer shared by all)
    would otherwise make the blocks race; it keeps the kernel on one block instead."""
    origins = origins_of(kernel)
    if origins is None:
        return False
    written = _written_params(kernel) - set(private)

    def region(loop: Op, ops: list[Op], inside: tuple[Op, ...]) -> bool:
        for op in ops:
            if op.name in ("tile.load", "tile.store"):
                gm, tile = (op.operands[1], op.operands[0]) if op.name == "tile.load" else op.operands
                if origins[gm.name].root not in written:
                    continue
                offsets = _access(origins[gm.name], op, tile).offsets
                if offsets is None or (loop.attrs["index"] not in sym.free_symbols(offsets[0]) and
                                       not _in_row_block(loop, inside, offsets[0], tile.type.valid[0])):
                    return False
            elif any(origins[v.name].root in written for vs in indexed_gm(op) for v in vs):
                return False
            for r in op.regions:
                if not region(loop, r, (*inside, op) if op.name == "loop" else inside):
                    return False
        return True

    return all(region(loop, loop.regions[0], ()) for loop in loops)


def _in_row_block(loop: Op, inside: tuple[Op, ...], first: sym.Expr, rows: sym.Expr) -> bool:
    """Whether an access at row ``first`` of ``rows`` valid rows, inside the loops ``inside`` of row
    block loop ``loop`` (over ``cdiv(S, R)``), lies in the block's rows ``[i * R, i * R + R)``: a
    row grid the row block narrowed (``lo = i * R``) names its own index, not the block's."""
    hi = loop.attrs["hi"]
    if not (isinstance(hi, sym.CallExpr) and hi.fn == "cdiv" and isinstance(hi.args[1], int) and hi.args[1] >= 1) \
            or any(lp.attrs["step"] != 1 for lp in inside):
        return False
    block = sym.mul(sym.Sym(loop.attrs["index"]), hi.args[1])
    # a loop's end as one argument of each min in it, a bound the linear prover can use (the
    # narrowed grid's `min(i * R + R, S)`)
    ends = [bounds_above(lp.attrs["hi"])[:_END_CHOICES] for lp in inside]
    for choice in itertools.islice(itertools.product(*ends), _END_CHOICES):
        ranges: dict[str, tuple] = {loop.attrs["index"]: (0, None)}
        for lp, end in zip(inside, choice):
            ranges[lp.attrs["index"]] = (lp.attrs["lo"], sym.sub(end, 1))
        if sym.prove_le(block, first, ranges) and any(
                sym.prove_le(sym.add(first, n), sym.add(block, hi.args[1]), ranges) for n in bounds_above(rows)):
            return True
    return False


_END_CHOICES = 16  # combinations of loop ends tried per access


def _shares_disjointly(kernel: Func, loops: list[Op], private: list[str]) -> bool:
    """Whether the loops' iterations stay independent with the call's workspaces shared by every
    block: in the kernel a workspace is a parameter, not an allocation of the iteration, so the
    proof (``parallel.independent``) needs each iteration's writes to it disjoint (a grid nest
    filling its rows of a reduction's result), not a workspace per iteration."""
    if all(loop.attrs.get("rows_interchanged") == 1 for loop in loops):
        # passes/rowgrid.py's proof: each iteration touches its own rows of everything written,
        # a workspace of one row block's rows (``row_private``) once each block has its own
        return banded(kernel, loops, private)
    origins = origins_of(kernel)
    return origins is not None and all(independent(loop, origins) for loop in loops)


def _nest(kernel: Func, outer: Op) -> list[Op]:
    """``outer`` and the grid loops nested in it that can be shared out with it as one
    (``_inner_grid``, each inner loop's bounds free of every index around it)."""
    nest = [outer]
    while (inner := _inner_grid(kernel, nest[-1])) is not None:
        bound = sym.free_symbols(inner.attrs["lo"]) | sym.free_symbols(inner.attrs["hi"])
        if bound & {loop.attrs["index"] for loop in nest}:
            break
        nest.append(inner)
    return nest


def _grid_depth(loop: Op) -> int:
    """How many grid loops deep the nest at ``loop`` is, by its shape alone (each loop's body
    holding exactly one loop, a grid loop): a cheap bound on ``len(_nest(...))``, whose proofs
    of independence cost far more."""
    depth = 1
    while len(inner := [o for o in loop.regions[0] if o.name == "loop"]) == 1 and inner[0].attrs.get("kind") == "grid":
        loop, depth = inner[0], depth + 1
    return depth


def _inner_grid(kernel: Func, outer: Op) -> Op | None:
    """The grid loop directly inside ``outer`` (a grid loop shared out as blocks), when the two
    can be shared out as one: both of step 1, the inner one's bounds free of the outer index, its
    iterations independent too, and nothing else in the outer body writing GM (the outer body's
    other work, a broadcast row's load, then runs once per outer iteration a block touches).
    Blocks then divide the trips of both: a column-block loop of 8 trips outside 1024 row blocks
    (a row-broadcast operand loaded once per column block) fills 48 cores, not 8."""
    loops = [o for o in outer.regions[0] if o.name == "loop"]
    if len(loops) != 1 or loops[0].attrs.get("kind") != "grid" or outer.attrs["step"] != 1 \
            or loops[0].attrs["step"] != 1:
        return None
    inner = loops[0]
    if outer.attrs["index"] in sym.free_symbols(inner.attrs["lo"]) | sym.free_symbols(inner.attrs["hi"]):
        return None
    for op in outer.regions[0]:
        if op is not inner and any(o.name == "tile.store" or indexed_gm(o)[1] for o in op.walk()):
            return None
    origins = origins_of(kernel)
    return inner if origins is not None and independent(inner, origins) else None


def share_out_nest(kernel: Func, outer: Op, inner: Op, launch: Op, cores: int, host_inner: bool = True) -> None:
    """Run ``kernel`` (one grid nest, ``outer`` around ``inner``) as blocks, in place, on a grid of
    ``n0 x n1`` blocks: ``n1`` splits of the inner loop where the outer one has fewer trips than
    there are cores (else 1, and the outer loop is shared out as by ``share_out``), ``n0`` of the
    outer loop. Block ``b`` runs the contiguous share ``b // n1`` of the outer trips and, in each,
    the share ``b % n1`` of the inner ones: every iteration's bounds are those of its block, so
    the dry run still samples the loops (cost/alike.py). ``host_inner`` false: the inner trips are
    known only inside the kernel (they name values it reads), so ``n1`` is ``cores // t0`` (at
    least 1) whatever they are, and a block's inner share may be empty."""
    index, count = _block_params(kernel)
    o, i = outer.attrs, inner.attrs
    t0 = sym.sub(o["hi"], o["lo"])
    t1 = sym.sub(i["hi"], i["lo"])
    n1 = _inner_splits(t0, t1, cores) if host_inner else sym.max_(sym.floordiv(cores, sym.max_(t0, 1)), 1)
    n0 = sym.floordiv(sym.Sym(count), n1)
    b0, b1 = sym.floordiv(sym.Sym(index), n1), sym.mod(sym.Sym(index), n1)
    for a, trips, parts, b in ((o, t0, n0, b0), (i, t1, n1, b1)):
        chunk = sym.ceildiv(trips, parts)
        first = sym.mul(b, chunk)
        lo = a["lo"]
        a["lo"] = sym.add(lo, first)
        left = sym.sub(trips, first)
        a["hi"] = sym.add(a["lo"], sym.min_(chunk, left if host_inner or a is o else sym.max_(left, 0)))
        a["parallel"] = 1
    env = _launch_env(kernel, launch, index, count)
    t0c, n1c = sym.substitute(t0, env), sym.substitute(n1, env)
    per0 = sym.max_(sym.ceildiv(t0c, sym.max_(sym.floordiv(cores, n1c), 1)), 1)
    launch.attrs["block_dim"] = sym.mul(sym.max_(sym.ceildiv(t0c, per0), 1), n1c)


def _inner_splits(t0: sym.Expr, t1: sym.Expr, cores: int) -> sym.Expr:
    """How many shares of the inner loop fill the cores the outer loop's ``t0`` trips leave idle:
    ``cores // t0`` (at least 1, at most ``t1``), rounded so that each share has work."""
    raw = sym.max_(sym.min_(sym.floordiv(cores, sym.max_(t0, 1)), t1), 1)
    # (an inner loop of no trips, a concat part of no column, has one share: no division by 0)
    return sym.max_(sym.ceildiv(t1, sym.max_(sym.ceildiv(t1, raw), 1)), 1)


def _launch_env(kernel: Func, launch: Op, index: str, count: str) -> dict[str, sym.Expr]:
    return {p.name: e for p, e in zip([p for p in kernel.params if not p.is_tensor and p.name not in (index, count)],
                                      launch.attrs["scalars"])}


def _block_params(kernel: Func) -> tuple[str, str]:
    index = _fresh(kernel, "block_index")
    kernel.params.append(Param(index, None, "i64"))
    count = _fresh(kernel, "block_count")
    kernel.params.append(Param(count, None, "i64"))
    kernel.attrs["block_index"], kernel.attrs["block_count"] = index, count
    return index, count


def share_out(kernel: Func, loops: list[Op], launch: Op, cores: int) -> None:
    """Run ``kernel`` (whose body is ``loops``) as blocks, in place: each loop takes the block's
    share and ``launch`` gets the block count: ``cores`` where a trip count is known only inside
    the kernel (:func:`data_trips`), each block's share then possibly empty."""
    blind = any(data_trips(kernel, loop) for loop in loops)
    index, count = _block_params(kernel)
    dims = {d.name for p in kernel.params if p.is_tensor for d in p.type.shape if isinstance(d, sym.Sym)}
    ranges = {d: (0, None) for d in dims}
    total: sym.Expr = 0
    for loop in loops:
        a = loop.attrs
        lo, step = a["lo"], a["step"]
        trips = sym.ceildiv(sym.sub(a["hi"], lo), step)
        # a part of an unrolled loop may run no iteration: it adds none to the blocks' work
        total = sym.add(total, trips if len(loops) == 1 else sym.max_(trips, 0, ranges))
        # block b runs iterations [b * c, b * c + min(c, trips - b * c)) of the loop: written so
        # that the trip count is monotone in b, which lets the dry run sample alike blocks
        # (cost/alike.py)
        chunk = sym.ceildiv(trips, sym.Sym(count))
        first = sym.mul(sym.Sym(index), chunk)
        a["lo"] = sym.add(lo, sym.mul(first, step))
        left = sym.sub(trips, first)
        a["hi"] = sym.add(a["lo"], sym.mul(sym.min_(chunk, sym.max_(left, 0) if blind else left), step))
        a["parallel"] = 1  # a grid loop too: its iterations were proved independent (_grid)
    if blind:
        launch.attrs["block_dim"] = cores
        return
    env = _launch_env(kernel, launch, index, count)
    outer = sym.substitute(total, env)
    # the fewest blocks of at most cdiv(trips, cores) iterations: every block has work, all but
    # the last as much as the first (a block count of min(trips, cores) could leave blocks idle)
    per = sym.max_(sym.ceildiv(outer, cores), 1)
    launch.attrs["block_dim"] = sym.max_(sym.ceildiv(outer, per), 1)


# Top-level ops of a kernel that move no data: each part of a split kernel keeps a copy of them.
PURE = frozenset({"view", "reshape"})
# What the bodies of the loops around a nested parallel loop may hold besides it: every block runs
# them (``nested_parallel``).
SKELETON = frozenset({"read", "view", "guard"})


def nested_parallel(kernel: Func, reads_ok: bool = False) -> tuple[list[Op], Op] | None:
    """``(loops around, loop)`` when the kernel's body is a loop of the user's (its only op besides
    element reads, views and guards), nested so down to a ``parallel`` loop of the user's whose
    bounds name nothing the loops around bind (``reads_ok``: but values the body around it reads,
    which every block reads too): every block may run the loops around in full and, in each of their
    iterations, its share of the parallel loop's. The parallel loop may be the body's own (no
    loops around)."""
    if block_params(kernel):
        return None
    path: list[Op] = []
    bound: set[str] = set()
    body = kernel.body
    while True:
        loops = [o for o in body if o.name == "loop"]
        if len(loops) != 1 or any(o.name not in SKELETON for o in body if o is not loops[0]):
            return None
        loop = loops[0]
        step = loop.attrs["step"]
        if loop.attrs.get("kind") is not None or not isinstance(step, int) or step < 1:
            return None
        read = {o.attrs["sym"] for o in body if o.name == "read"}
        bound |= read
        if loop.attrs.get("parallel") == 1:
            free = sym.free_symbols(loop.attrs["lo"]) | sym.free_symbols(loop.attrs["hi"])
            return (path, loop) if not free & (bound - read if reads_ok else bound) else None
        path.append(loop)
        bound.add(loop.attrs["index"])
        body = loop.regions[0]


def _written_params(kernel: Func) -> set[str]:
    """The tensor parameters a kernel writes (through a view of one too)."""
    derived = {p.name: p.name for p in kernel.params if p.is_tensor}
    for op in kernel.walk():
        if op.name == "view" and op.operands[0].name in derived:
            derived[op.result.name] = derived[op.operands[0].name]
    out: set[str] = set()
    for op in kernel.walk():
        written = [op.operands[0]] if op.name == "tile.store" else list(indexed_gm(op)[1])
        out |= {derived[v.name] for v in written if v.name in derived}
    return out


def private_share(kernel: Func, launch: Op, allocs: dict[str, Op],
                  ordered: frozenset[str] = frozenset()) -> tuple[Op, list[str]] | None:
    """``(loop, workspaces)`` when ``kernel`` may run as blocks sharing out ``loop``
    (``nested_parallel``) with a copy of each of ``workspaces`` per block: every workspace of the
    call it writes (``allocs``: the control program's, by name) was allocated inside ``loop``
    before partitioning hoisted it (``alloc {within}``), so each iteration had its own, and the
    iterations are independent with those workspaces private to them and with the indices of the
    loops around free to differ (each block runs those loops in full). A loop whose trip count
    the loop around reads (a segment's row tiles, ``loops around`` one loop) qualifies where the
    iterations around touch what is written only inside their row bands of a ``nondecreasing:``
    tensor (``ordered``, ``passes/ordered.py``) and its own are independent with those around
    fixed; its trip count is then known only inside the kernel (:func:`data_trips`)."""
    nest = nested_parallel(kernel)
    if nest is None:
        nest = nested_parallel(kernel, reads_ok=True)
        if nest is None or len(nest[0]) != 1 or not ordered:
            return None
        return _banded_share(kernel, nest[0][0], nest[1], launch, allocs, ordered)
    path, loop = nest
    private = _private_workspaces(kernel, launch, allocs, loop)
    if private is None:
        return None
    origins = origins_of(kernel)
    outer: set[str] = set()
    for around in path:
        outer |= bound_within(around) - bound_within(loop)
    if origins is None or not independent(loop, origins, frozenset(outer), frozenset(private)):
        return None
    return loop, private


def _private_workspaces(kernel: Func, launch: Op, allocs: dict[str, Op], loop: Op) -> list[str] | None:
    """The tensor parameters ``kernel`` writes that ``launch`` fills with workspaces of the call
    (``allocs``: the control program's, by name), when each was allocated inside ``loop`` (``alloc
    {within}``: every iteration had its own); None when one was not. The tensors of the call it
    writes are left to the proofs."""
    launched = {p.name: v.name for p, v in zip([p for p in kernel.params if p.is_tensor], launch.operands)}
    private: list[str] = []
    for name in sorted(_written_params(kernel)):
        alloc = allocs.get(launched.get(name, ""))
        if alloc is None:
            continue
        if loop.attrs["index"] not in alloc.attrs.get("within", ()) or not alloc.result.type.shape:
            return None
        private.append(name)
    return private


def _written_roots(kernel: Func, origins: dict, private: list[str]) -> set[str]:
    """The GM roots ``kernel`` writes, but its ``private`` workspaces."""
    return {origins[p.name].root for p in kernel.params if p.name in _written_params(kernel)} - set(private)


def _banded_share(kernel: Func, around: Op, loop: Op, launch: Op, allocs: dict[str, Op],
                  ordered: frozenset[str]) -> tuple[Op, list[str]] | None:
    """:func:`private_share` of ``loop`` inside ``around``, whose body reads ``loop``'s bounds: the
    iterations of ``loop`` independent for one iteration of ``around``, whose iterations keep to
    their row bands."""
    private = _private_workspaces(kernel, launch, allocs, loop)
    origins = origins_of(kernel)
    if private is None or origins is None:
        return None
    if not within_bands(around, _written_roots(kernel, origins, private), origins, ordered) or \
            not independent(loop, origins, frozenset(), frozenset(private)):
        return None
    return loop, private


def data_trips(kernel: Func, loop: Op) -> bool:
    """Whether ``loop``'s trip count names values only the kernel knows (what it reads), not only
    its parameters: the control program cannot size the launch by it."""
    trips = sym.sub(loop.attrs["hi"], loop.attrs["lo"])
    return bool(sym.free_symbols(trips) - {p.name for p in kernel.params})


def inner_private(kernel: Func, loop: Op, launch: Op, allocs: dict[str, Op], private: list[str],
                  ordered: frozenset[str]) -> Op | None:
    """The loop of the user's that ``loop`` (shared out by :func:`private_share`) holds, when the
    blocks may share out its iterations too; else None. Its body is that loop besides element
    reads, views and guards; the loop is ``parallel`` and of step 1; each workspace private to a
    block was allocated inside it too (``within``); and its iterations are independent with the
    indices around free to differ, or with those of the loops around ``loop`` fixed where each
    iteration of those touches the tensors written only in its row band (``passes/ordered.py``,
    ``ordered``: the kernel's parameters the spec declares ``nondecreasing:``): varlen attention's
    query tiles, whose count the kernel reads per sequence, each sequence's rows its own. Each
    block works out its share in every iteration of the loops around; a share may be empty."""
    loops = [o for o in loop.regions[0] if o.name == "loop"]
    if len(loops) != 1 or any(o.name not in SKELETON for o in loop.regions[0] if o is not loops[0]):
        return None
    inner = loops[0]
    a = inner.attrs
    if a.get("kind") is not None or a.get("parallel") != 1 or a["step"] != 1:
        return None
    origins = origins_of(kernel)
    if _private_workspaces(kernel, launch, allocs, inner) != private or origins is None:
        return None
    mine = bound_within(loop) - bound_within(inner)  # another block may run another share of `loop`
    around = bound_within_all(kernel) - bound_within(loop)
    if independent(inner, origins, frozenset(mine | around), frozenset(private)):
        return inner
    path, _ = nested_parallel(kernel) or ([], None)
    if len(path) != 1 or not within_bands(path[0], _written_roots(kernel, origins, private), origins, ordered):
        return None
    return inner if independent(inner, origins, frozenset(mine), frozenset(private)) else None


def row_private(kernel: Func, loops: list[Op], launch: Op, allocs: dict[str, Op]) -> list[str]:
    """The workspaces (parameters of ``kernel``) a row block loop of ``loops`` writes that belong
    to one of its row blocks (``alloc {row_block}`` naming the loop: ``passes/rowgrid.py`` gives
    a statement run's intermediates one row block's rows): the proof that row blocks are disjoint
    holds for them only with a copy per block."""
    indices = {loop.attrs["index"] for loop in loops if loop.attrs.get("rows_interchanged") == 1}
    launched = {p.name: v.name for p, v in zip([p for p in kernel.params if p.is_tensor], launch.operands)}
    return [name for name in sorted(_written_params(kernel))
            if (alloc := allocs.get(launched.get(name, ""))) is not None
            and alloc.attrs.get("row_block") in indices]


def privatize(kernel: Func, launch: Op, control: Func, names: list[str]) -> None:
    """Give each block its own copy of the workspaces ``names`` (parameters of ``kernel``, run as
    blocks by ``launch``, in place): the control program allocates ``block_dim`` copies one after
    another along the first dim, and the kernel works on the copy at its block index."""
    index, count = kernel.attrs["block_index"], kernel.attrs["block_count"]
    launched = {p.name: v.name for p, v in zip([p for p in kernel.params if p.is_tensor], launch.operands)}
    taken = {v.name for o in kernel.walk() for v in (*o.operands, *o.results)} | {p.name for p in kernel.params}
    views: list[Op] = []
    renamed: dict[str, Value] = {}
    for p in kernel.params:
        if p.name not in names:
            continue
        t: TensorType = p.type
        rows = t.shape[0]
        own = _free(f"{p.name}_own", taken)
        taken.add(own)
        renamed[p.name] = Value(own, t)
        p.type = TensorType(t.dtype, (sym.mul(rows, sym.Sym(count)), *t.shape[1:]), None)
        p.value = Value(p.name, p.type)
        offsets = (sym.mul(sym.Sym(index), rows), *(0,) * (len(t.shape) - 1))
        views.append(Op("view", [p.value], {"offsets": offsets}, [renamed[p.name]], span=kernel.span))
        whole = TensorType(t.dtype, (sym.mul(rows, launch.attrs["block_dim"]), *t.shape[1:]), None)
        for op in control.walk():
            for v in (*op.operands, *op.results):
                if v.name == launched[p.name]:
                    v.type = whole
    for op in kernel.walk():
        op.operands = [renamed.get(v.name, v) for v in op.operands]
    kernel.body[:0] = views


def _nests(kernel: Func) -> tuple[Op | None, list[Op]] | None:
    """The one-trip loop around a kernel's top-level work (or None) and that work, when it is two or
    more loops run one after another and views of tensors (``PURE``); else None."""
    wrap, body = None, kernel.body
    if len(body) == 1 and body[0].name == "loop" and body[0].attrs.get("kind") in ("implicit", "peeled") \
            and sym.sub(body[0].attrs["hi"], body[0].attrs["lo"]) == 1:
        wrap, body = body[0], body[0].regions[0]
    if sum(op.name == "loop" for op in body) < 2 or any(op.name not in PURE | {"loop"} for op in body):
        return None
    return wrap, body


def _loose_nests(kernel: Func) -> tuple[Op | None, list[Op]] | None:
    """``_nests`` of a kernel not yet run as blocks whose loops may part: none prints or guards (a
    guard's failure must stop the loops after it)."""
    nests = _nests(kernel)
    if nests is None or block_params(kernel) or any(op.name in ("guard", "print") for op in kernel.walk()):
        return None
    return nests


def _part(kernel: Func, keep: int, name: str) -> Func:
    """A copy of ``kernel`` named ``name`` that runs only its ``keep``-th top-level loop (inside the
    same one-trip loop), with values of its own."""
    part = Module("part", "block", [kernel]).clone().funcs[0]
    part.name = name
    wrap, body = _nests(part)
    loops = [op for op in body if op.name == "loop"]
    body[:] = [op for op in body if op.name != "loop" or op is loops[keep]]  # every part keeps the views
    return part


def split_nests(kernel: Func, taken: set[str]) -> list[Func] | None:
    """A kernel that runs two or more loops one after another, at least one of which could run as
    blocks on its own, as one kernel per loop (launched in turn, so the stream orders what one loop
    writes before the next reads it: the loops already hand data over through GM); else None.
    Parts that print or guard stay together: a guard's failure must stop the loops after it."""
    nests = _loose_nests(kernel)
    if nests is None:
        return None
    if blockable(kernel) is not None:
        return None  # the parts of an unrolled loop already run as blocks of one kernel
    parts = []
    for i in range(sum(op.name == "loop" for op in nests[1])):
        name = kernel.name if i == 0 else _free(f"{kernel.name}p{i}", taken)
        taken.add(name)
        parts.append(_part(kernel, i, name))
    # a part left on one block would only add a launch
    return parts if all(blockable(p) is not None for p in parts) else None


def control_roots(origins: dict[str, Origin] | None, launch: Op, kernel: Func) -> dict[str, str] | None:
    """The control program's tensor (``origins``: its ``origins_of``) each of ``kernel``'s tensor
    parameters is a view of, as ``launch`` passes them (two parameters may be views of one tensor:
    a reduction's workspace and its reshape); None when some launched value cannot be placed."""
    if origins is None:
        return None
    params = [p for p in kernel.params if p.is_tensor]
    try:
        return {p.name: origins[v.name].root for p, v in zip(params, launch.operands)}
    except KeyError:
        return None


def independent_nests(kernel: Func, roots: dict[str, str] | None) -> list[Op] | None:
    """The loops of a kernel that runs two or more loops in turn (``_nests``) when they can share
    one launch's blocks: each a grid nest (or split loop) of step 1 whose iterations are
    independent, and none touching a tensor another one writes (``roots``: the control program's
    tensor behind each parameter, ``control_roots``), so no loop waits for another's results and
    each block runs its share of each in turn. Else None."""
    nests = _loose_nests(kernel)
    if roots is None or nests is None:
        return None
    origins = origins_of(kernel)
    if origins is None:
        return None
    loops = [op for op in nests[1] if op.name == "loop"]
    touched = []
    for loop in loops:
        if loop.attrs.get("kind") not in SHARED or loop.attrs["step"] != 1 or not independent(loop, origins):
            return None
        found = _touched(loop, origins)
        if found is None or not all(r in roots for r in found[0] | found[1]):
            return None
        touched.append(({roots[r] for r in found[0]}, {roots[r] for r in found[1]}))
    for i, (_, writes) in enumerate(touched):
        for j, (reads, other) in enumerate(touched):
            if i != j and writes & (reads | other):
                return None
    return loops


def _aliased(kernel: Func, roots: dict[str, str] | None) -> bool:
    """Whether ``kernel`` writes a tensor of the call through one parameter and touches it through
    another (``roots``: ``control_roots``), or that is not known: the parallel proof, which sees
    parameters as tensors of their own, would miss one iteration reading what another writes."""
    origins = origins_of(kernel)
    if roots is None or origins is None:
        return True
    found = _touched(kernel, origins)
    if found is None or not all(r in roots for r in found[0] | found[1]):
        return True
    reads, writes = found
    return any(roots[w] == roots[p] for w in writes for p in reads | writes if p != w)


def _touched(where: Op | Func, origins: dict[str, Origin]) -> tuple[set[str], set[str]] | None:
    """The GM roots (the kernel's parameters) ``where`` reads and writes; None when some op's
    access is not known."""
    reads: set[str] = set()
    writes: set[str] = set()
    for op in where.walk():
        read, written = indexed_gm(op)
        if read or written:
            reads |= {origins[v.name].root for v in read}
            writes |= {origins[v.name].root for v in written}
        elif op.name == "tile.load" or op.name == "read":
            reads.add(origins[op.operands[1 if op.name == "tile.load" else 0].name].root)
        elif op.name == "tile.store":
            writes.add(origins[op.operands[0].name].root)
        elif op.name not in PURE and any(isinstance(v.type, TensorType) for v in op.operands):
            return None
    return reads, writes


def _share_nests(kernel: Func, loops: list[Op], launch: Op, cores: int) -> None:
    """Run ``kernel``'s independent nests (``independent_nests``) as blocks of one launch, in place:
    each nest is shared out by its tiles over the same blocks, the launch's block count that of the
    nest with the most."""
    index, count = _block_params(kernel)
    env = _launch_env(kernel, launch, index, count)
    keys: list[sym.Expr] = []
    dims: list[sym.Expr] = []
    for loop in loops:
        total, key = share_tiles(_nest(kernel, loop), index, count)
        keys += key
        tiles = sym.substitute(total, env)
        dims.append(sym.max_(sym.ceildiv(tiles, sym.max_(sym.ceildiv(tiles, cores), 1)), 1))
    kernel.attrs["block_key"] = keys
    dim = dims[0]
    for d in dims[1:]:
        dim = sym.max_(dim, d)
    launch.attrs["block_dim"] = dim


def _free(stem: str, taken: set[str]) -> str:
    name, k = stem, 1
    while name in taken:
        name, k = f"{stem}_{k}", k + 1
    return name


def _replace(body: list[Op], launch: Op, new: list[Op]) -> bool:
    for i, op in enumerate(body):
        if op is launch:
            body[i:i + 1] = new
            return True
        if any(_replace(region, launch, new) for region in op.regions):
            return True
    return False


def _outer_launches(body: list[Op]) -> list[Op]:
    """The launches of a control program that run once per call (no loop of more than one trip
    around them): splitting a launch inside a loop would add launches to every iteration."""
    out: list[Op] = []
    for op in body:
        if op.name == "launch":
            out.append(op)
        elif op.name != "loop" or sym.sub(op.attrs["hi"], op.attrs["lo"]) == 1:
            for region in op.regions:
                out.extend(_outer_launches(region))
    return out


def _distributed(parts: list[Func], taken: set[str]) -> list[Func]:
    """``parts`` with each whose one grid loop runs loops in turn distributed over them and split
    into a kernel per loop (``passes/distribute.py``) where every piece could run as blocks."""
    out: list[Func] = []
    for part in parts:
        trial = Module("part", "block", [part]).clone().funcs[0]
        pieces = split_nests(trial, taken) if distribute(trial) else None
        out.extend(pieces or [part])
    return out


def _fission(module: Module) -> None:
    """Split, in place, each kernel launched once whose loops run one after another (``split_nests``)."""
    taken = {f.name for f in module.funcs}
    funcs = {f.name: f for f in module.funcs}
    for control in [f for f in module.funcs if f.kind == "control"]:
        counts: dict[str, int] = {}
        for op in launches(control):
            counts[op.attrs["kernel"]] = counts.get(op.attrs["kernel"], 0) + 1
        origins = origins_of(control)
        for op in _outer_launches(control.body):
            kernel = funcs.get(op.attrs["kernel"])
            if kernel is None or counts[kernel.name] != 1 or "block_dim" in op.attrs or \
                    independent_nests(kernel, control_roots(origins, op, kernel)) is not None:
                continue
            parts = _distributed(split_nests(kernel, taken) or [kernel], taken)
            if parts == [kernel]:
                continue
            new = [Op("launch", list(op.operands), {**{k: list(a) if isinstance(a, list) else a for k, a in op.attrs.items()}, "kernel": p.name}, [], [], op.span) for p in parts]
            _replace(control.body, op, new)
            at = module.funcs.index(kernel)
            module.funcs[at:at + 1] = parts
            funcs.update((p.name, p) for p in parts)


def _bytes(t: TensorType) -> sym.Expr:
    n: sym.Expr = DTYPES[t.dtype].itemsize
    for d in t.shape:
        n = sym.mul(n, d)
    return n


def _shared_footprints(control: Func) -> None:
    """A launch passing two views of one tensor (a tensor and its reshape) gets ``footprint``: the
    bytes of the distinct tensors it touches, each tensor's views summed but at most the tensor
    (the L2 term of ``cost/chip.py``; without it each view counts as a tensor of its own)."""
    origins = origins_of(control)
    if origins is None:
        return
    types = {p.name: p.type for p in control.params if p.is_tensor}
    types |= {op.result.name: op.result.type for op in walk_ops(control.body) if op.name == "alloc"}
    for op in launches(control):
        groups: dict[str, dict[str, TensorType]] = {}
        for v in op.operands:
            if isinstance(v.type, TensorType):
                if v.name not in origins:
                    break
                groups.setdefault(origins[v.name].root, {})[v.name] = v.type
        else:
            if all(len(views) == 1 for views in groups.values()):
                continue
            total: sym.Expr = 0
            for root, views in groups.items():
                b: sym.Expr = 0
                for t in views.values():
                    b = sym.add(b, _bytes(t))
                if len(views) > 1 and root in types:
                    b = sym.min_(b, _bytes(types[root]))
                total = sym.add(total, b)
            op.attrs["footprint"] = total


def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()
    _fission(fresh)
    funcs = {f.name: f for f in fresh.funcs}
    for control in (f for f in fresh.funcs if f.kind == "control"):
        counts: dict[str, int] = {}
        for op in launches(control):
            counts[op.attrs["kernel"]] = counts.get(op.attrs["kernel"], 0) + 1
        workspaces = _workspaces(control)
        outer = {id(op) for op in _outer_launches(control.body)}
        origins = origins_of(control)
        allocs = {o.result.name: o for o in walk_ops(control.body) if o.name == "alloc"}
        for op in launches(control):
            kernel = funcs[op.attrs["kernel"]]
            loops = blockable(kernel)
            roots = control_roots(origins, op, kernel)
            nests = independent_nests(kernel, roots) if loops is None and id(op) in outer else None
            if counts[kernel.name] != 1 or "block_dim" in op.attrs or _aliased(kernel, roots):
                continue
            if nests is not None:  # each proved independent with the call's workspaces shared
                _share_nests(kernel, nests, op, ctx.target.chip.cores(kernel.kind))
                continue
            private = row_private(kernel, loops, op, allocs) if loops is not None else []
            if loops is None or _writes_workspace(kernel, op, workspaces) and \
                    not (id(op) in outer and _shares_disjointly(kernel, loops, private)):
                # else blocks would share a workspace every iteration writes anew: one copy each
                ordered = ordered_params(fresh, kernel)
                plan = private_share(kernel, op, allocs, ordered) if id(op) in outer else None
                if plan is not None:
                    cores = ctx.target.chip.cores(kernel.kind)
                    inner = inner_private(kernel, plan[0], op, allocs, plan[1], ordered)
                    if inner is not None:
                        share_out_nest(kernel, plan[0], inner, op, cores, host_inner=not data_trips(kernel, inner))
                    else:
                        share_out(kernel, [plan[0]], op, cores)
                    privatize(kernel, op, control, plan[1])
                continue
            # (a launch in a loop of the control program keeps the old rule: the dry run samples
            # such loops by their alike iterations, which blocks whose count varies break)
            cores = ctx.target.chip.cores(kernel.kind)
            inner = _inner_grid(kernel, loops[0]) if len(loops) == 1 and loops[0].attrs.get("kind") in SHARED else None
            if inner is not None and (kernel.kind == "cube" or _grid_depth(loops[0]) >= 3) \
                    and tileable(kernel, _nest(kernel, loops[0])):
                index, count = _block_params(kernel)
                total = share_out_tiles(kernel, _nest(kernel, loops[0]), index, count)
                tiles = sym.substitute(total, _launch_env(kernel, op, index, count))
                op.attrs["block_dim"] = sym.max_(sym.ceildiv(tiles, sym.max_(sym.ceildiv(tiles, cores), 1)), 1)
            elif inner is not None:
                share_out_nest(kernel, loops[0], inner, op, cores)
            else:
                share_out(kernel, loops, op, cores)
            if private:
                privatize(kernel, op, control, private)
        _shared_footprints(control)
    return fresh


PASS = Pass("blocks", "block", "block", run, frozenset({"partitioned", "independent-marked"}), frozenset({"blocked"}))

__all__ = ["PASS", "blockable", "row_private", "run", "share_out", "split_nests"]
