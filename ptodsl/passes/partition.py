"""Partitioning (Tile IR -> Block IR): a control program plus compute kernels.

Requires: a verified, fused ``level tile`` module whose independent loops are marked (``parallel``).
Produces: a ``level block`` module. For each kernel variant, a ``control`` function keeps the
branches, scalar reads, views and GM workspaces of the top level and the loops that must stay there
(the AICPU side), and every maximal run of work that can run on one kind of core becomes a compute
kernel, ``vector`` (AIV: UB tiles) or ``cube`` (AIC: L1/L0 tiles), launched with
``launch(tensors) {kernel, scalars}``. Tile work and grid loops always run in a kernel; a loop of
the user's runs inside its kernel too when its whole body can (``passes/persistent.py``), so a
loop over rows is one launch, not one per row, as long as the kernel holding it still plans its
memory and synchronises (tried on a copy first: ``passes/trial.py``); a loop of the user's that
needs both kinds of core becomes one ``mixed`` kernel (run as blocks when it is a row block loop of
``passes/rowgrid.py``), and consecutive such loops share one. First, a branch on integers inside a
loop of the user's becomes a loop of 0 or 1 trips (``passes/branches.py``). A run is cut where
no tile is live, when its estimated cycles pass ``pass_options.cycle_upper_bound``; a run that
cannot be cut small enough is reported as a warning with its estimate.
"""

from __future__ import annotations

import itertools

from .. import sym
from ..ir import Func, Module, Op, Param, TensorType, TileType, Value
from ..ir.opdefs import IR_OPS, in_kernel_loop, indexed_gm
from ..ir.schedule import schedule_of
from ..schedule import PASS_OPTION_DEFAULTS
from . import aivsplit, branches, trial
from .context import Pass, PassContext
from .loops import merge_implicit
from .persistent import (
    MIXED,
    Placement,
    bound_within,
    cycles,
    hoist_workspaces,
    kind_of,
    kinds_in,
    mixed_loop,
)
from .remat import view_bases


def _quiet(run: list[Op]) -> bool:
    """Work that neither stops the call (a guard) nor prints."""
    return not any(o.name in ("guard", "print") for op in run for o in op.walk())


def _tiles_of(op: Op) -> set[str]:
    return {v.name for o in op.walk() for v in (*o.operands, *o.results) if isinstance(v.type, TileType)}


def _writes(op: Op) -> set[str]:
    """The tiles ``op`` (anything inside it) allocates or writes."""
    out: set[str] = set()
    for o in op.walk():
        if o.name == "tile.alloc":
            out.add(o.result.name)
        elif o.name in IR_OPS and o.name.startswith("tile."):
            out |= {o.operands[i].name for i in IR_OPS[o.name].reads_writes(len(o.operands))[1]
                    if i < len(o.operands) and isinstance(o.operands[i].type, TileType)}
    return out


def _makers(before: list[Op], needed: set[str], written: set[str]) -> list[Op] | None:
    """The ops of ``before`` that make the tiles ``needed`` (and the tiles those read), in order, or
    None when one of them cannot be made again elsewhere: work with a region, or a load of a tensor
    the chunk writes (the hoisted loads this is for read inputs)."""
    needed = set(needed)
    out: list[Op] = []
    for op in reversed(before):
        if not (_writes(op) & needed):
            continue  # (a store or a loop reading such a tile makes none)
        if op.regions or not op.name.startswith("tile.") or (op.name == "tile.load" and op.operands[1].name in written):
            return None
        out.insert(0, op)
        needed |= _tiles_of(op)
    return out


def _copies(ops: list[Op]) -> list[Op]:
    return Module("sunk", "block", [Func("sunk", [], ops)]).clone().funcs[0].body


def _sink_into(chunk: list[Op], loops: list[Op]) -> list[Op] | None:
    """``chunk`` with the tile work before each of ``loops`` that the loop reads (the loads a one-pass
    row loop had hoisted out of it, ``passes/tile_fit.py``) made again at the start of its body,
    and the work making a tile that work after the loop reads made again right after it: a loop
    kept in the control program launches a kernel per iteration, and a tile does not live from one
    kernel to the next. Work nothing else reads any more is dropped. None when some such tile cannot
    be made again: the loop writes it (state carried in a tile: made again, it would lose what the
    loop wrote), or it is made by work :func:`_makers` cannot copy; the loops must then stay inside
    the chunk's kernel, and are left as they were."""
    chunk = list(chunk)
    # only loads of tensors nothing here writes may run later (the hoisted loads read inputs)
    written = {v.name for op in chunk for o in op.walk()
               for v in ([o.operands[0]] if o.name == "tile.store" else indexed_gm(o)[1])}
    bodies = [(loop, loop.regions[0]) for loop in loops]  # as they were, should a later loop fail
    for loop in loops:
        at = chunk.index(loop)
        before, after = chunk[:at], chunk[at + 1:]
        made = set().union(*(_writes(op) for op in before)) if before else set()
        inside = {v.name for o in loop.walk() if o.name == "tile.alloc" for v in o.results}
        into = (_tiles_of(loop) - inside) & made
        later = set().union(*(_tiles_of(op) for op in after)) & made if after else set()
        for_loop = _makers(before, into, written)
        for_after = _makers(before, later, written)
        if (into | later) & _writes(loop) or for_loop is None or for_after is None:
            for done, body in bodies:
                done.regions[0] = body
            return None
        if not for_loop and not for_after:
            continue
        loop.regions[0] = _copies(for_loop) + loop.regions[0]
        moved = [*for_loop, *(op for op in for_after if all(op is not m for m in for_loop))]
        rest = [op for op in before if all(op is not m for m in moved)]
        elsewhere = set().union(*(_tiles_of(op) for op in rest)) if rest else set()
        kept = [op for op in before if all(op is not m for m in moved) or _tiles_of(op) & elsewhere]
        chunk = [*kept, loop, *_copies(for_after), *after]
    return chunk


class _Partitioner:
    def __init__(self, func: Func, ctx: PassContext, bound: int, split: bool = False):
        """``split``: mixed kernels will have their vector work shared by both vector cores
        (``passes/aivsplit.py``, ``pass_options.aiv_split``)."""
        self.func = func
        self.ctx = ctx
        self.split_vector = split
        self.kernels: list[Func] = []
        self.counter = itertools.count()
        self.bound = bound
        # scalar dtypes the kernels' parameters take: scalar params and runtime reads; dims are i64
        self.scalar_dtypes = {p.name: p.dtype for p in func.params if not p.is_tensor}
        self.scalar_dtypes |= {o.attrs["sym"]: o.attrs["dtype"] for o in func.walk() if o.name == "read"}
        self.place = Placement(func, lambda body: self.cost(body) <= bound)
        # value -> the ops using it, to find the views a kernel defines that ops outside it use
        self.users: dict[str, set[int]] = {}
        for o in func.walk():
            for v in o.operands:
                self.users.setdefault(v.name, set()).add(id(o))

    def run(self) -> tuple[Func, list[Func]]:
        body = self.region(branches.as_loops(self.func.body, self.scalar_dtypes, [0]), set())
        control = Func(self.func.name, self.func.params, body, "control", dict(self.func.attrs), self.func.span)
        return control, self.kernels

    def region(self, ops: list[Op], bound_syms: set[str]) -> list[Op]:
        out: list[Op] = []
        run: list[Op] = []
        mixed: list[Op] = []  # loops run one after another in one mixed kernel
        last_use = _last_uses(ops)
        for at, op in enumerate(ops):
            if op.name == "guard" and op.operands and run and not _quiet(run):
                self.flush(run, out)  # a check of an index's repeats stays in the control program
                run = []
            if mixed and op.name in ("alloc", "view"):
                out.append(op)  # a workspace or a view, hoisted above the kernel as above a run
                continue
            kinds = self.place.kinds(op)
            if kinds is not None and mixed_loop(op, kinds) and op.attrs.get("rows_interchanged") != 1 \
                    and not self.compiles([op], MIXED):
                # launched per iteration, its body in kernels of one kind each (a row block loop
                # has no such fallback: its blocks' rows are the point of the interchange)
                self.place.refuse(op)
                kinds = None
            if kinds is not None and mixed_loop(op, kinds):
                self.flush(run, out)
                run = []
                if mixed and (any(x.attrs.get("parallel") == 1 for x in (mixed[-1], op)) or
                              not self.compiles([*mixed, op], MIXED)):
                    # a loop whose iterations may run as blocks gets a kernel of its own
                    out.extend(self.kernel(mixed, MIXED))
                    mixed = []
                self.over_budget(op)
                mixed.append(op)
                continue
            if mixed:
                out.extend(self.kernel(mixed, MIXED))
                mixed = []
            if (op.name in ("alloc", "view", "reshape", "permute", "guard") and run) or \
                    (op.name == "guard" and op.operands) or (run and self.checks_inputs(op) and _quiet(run)):
                # GM allocations, views and bounds guards depend on no tile work: hoist them above
                # the open run instead of cutting it (a cut there would split tiles still live); a
                # guard on an input index's repeats reads the whole index, in the control program,
                # and so does a loop checking an input's values (an index's range), which no kernel
                # writes: the work on both sides of it stays one kernel. (Not above work that may
                # stop the call or print: the first check to fail in program order still stops it.)
                out.append(op)
                continue
            if kinds is None or len(kinds) > 1:
                if op.name == "loop" and run:  # the loop's kernels cannot read the run's tiles
                    run = (_sink_into([*run, op], [op]) or [*run, op])[:-1]
                self.flush(run, out)
                run = []
                if op.name == "loop":
                    inner = bound_syms | {op.attrs["index"]}
                    op.regions = [self.region(op.regions[0], inner)]
                elif op.name == "if":
                    op.regions = [self.region(r, bound_syms) for r in op.regions]
                out.append(op)
            else:
                if run and kind_of(run[-1]) != kind_of(op) and not _live_from(run, at, last_use):
                    self.flush(run, out)
                    run = []
                run.append(op)
        self.flush(run, out)
        if mixed:
            out.extend(self.kernel(mixed, MIXED))
        return out

    def checks_inputs(self, op: Op) -> bool:
        """A loop of element reads and guards over the call's inputs only (nothing writes them)."""
        if op.name != "loop":
            return False
        inputs = {p.value.name for p in self.func.params if p.is_tensor and p.mode == "in" and p.value is not None}
        inner = [o for o in op.walk() if o is not op]
        return bool(inner) and all(o.name in ("loop", "read", "guard") for o in inner) and \
            all(o.operands[0].name in inputs for o in inner if o.name == "read" or o.operands)

    @staticmethod
    def live_across(run: list[Op], cut: int) -> bool:
        defined = {r.name for op in run[:cut] for o in op.walk() for r in o.results}
        used_after = {v.name for op in run[cut:] for o in op.walk() for v in o.operands}
        return bool(defined & used_after)

    def flush(self, run: list[Op], out: list[Op]) -> None:
        if not run:
            return
        for chunk in self.split(run):
            refused = self.refused(chunk)
            sunk = _sink_into(chunk, refused) if refused else None
            if sunk is not None:
                for loop in refused:
                    self.place.refuse(loop)
                out.extend(self.region(sunk, set()))  # the refused loops now launch per iteration
            else:
                # (also where launching them per iteration would strand a tile between kernels:
                # the kernel then reports what does not fit)
                out.extend(self.kernel(chunk, _kind(chunk)))

    def refused(self, chunk: list[Op]) -> list[Op]:
        """The loops of the user's in ``chunk`` to keep in the control program after all, because
        the kernel holding them would not compile (on-chip memory, stack frame, event ids) though
        each iteration may on its own: the loops that fail on their own, else, when only together
        they fail, all of them. Launching a kernel per iteration compiled before loops ran inside
        kernels, and still does; a kernel without such a loop is left to report its own error."""
        loops = [op for op in chunk if op.name == "loop" and not in_kernel_loop(op)]
        if not loops or self.compiles(chunk, _kind(chunk)):
            return []
        alone = [loop for loop in loops if len(loops) > 1 and not self.compiles([loop], _kind([loop]))]
        return alone or loops

    def over_budget(self, loop: Op) -> None:
        """Warn of a row block loop whose body passes the cycle budget: it runs as one kernel all
        the same, since its row blocks, its kernel's blocks, are the point of the interchange and a
        kernel per iteration would launch one per row block (``passes/persistent.py``)."""
        if loop.attrs.get("rows_interchanged") == 1:
            self.warn_over_budget(loop.regions[0], loop.span, "runs its row blocks as one kernel all the same")

    def compiles(self, ops: list[Op], kind: str | None = None) -> bool:
        """Whether the kernel made of (a copy of) ``ops`` plans and synchronises. The stack frame
        is estimated with no strided parameter: what strides the kernel takes is known only once
        the whole control program is (a frame over the limit even so is over it in any case)."""
        kind = kind or kind_of(ops[0])
        func = Func("trial", [], ops, kind)
        copy = Module("trial", "block", [func]).clone().funcs[0]
        kernel = self.build(copy.body, copy.name, kind)[0]
        if trial.compiles(kernel, self.ctx, frozenset()):
            return True
        # a mixed kernel whose vector work both vector cores share (a later pass) needs each core's
        # UB for its half only: it fits if the split does (views of one tensor passed twice are
        # not known yet; the split refuses them later, and the kernel then reports what does not fit)
        return kind == MIXED and self.split_vector and aivsplit.split_kernel(kernel, self.ctx, frozenset(), {}) is not kernel

    def split(self, run: list[Op]) -> list[list[Op]]:
        """Cut at points with no live tile, between kinds, and when the estimate passes the bound."""
        chunks: list[list[Op]] = []
        current: list[Op] = []
        cost = 0
        target = self.ctx.target
        for op in run:
            c = cycles(op, target)
            kind_change = current and kind_of(current[-1]) != kind_of(op)
            if current and (kind_change or cost + c > self.bound) and not self.live_across(run[len(sum(chunks, [])):], len(current)):
                chunks.append(current)
                current, cost = [], 0
            current.append(op)
            cost += c
        if current:
            chunks.append(current)
        for chunk in chunks:
            self.warn_over_budget(chunk, chunk[0].span, "has no point where it can be cut")
        return chunks

    def cost(self, ops: list[Op]) -> int:
        """The cycle estimate ``cycle_upper_bound`` bounds (``persistent.cycles``)."""
        return sum(cycles(o, self.ctx.target) for o in ops)

    def warn_over_budget(self, ops: list[Op], span, how: str) -> None:
        """W0610 where the kernel running ``ops`` is over the cycle budget and is kept whole (``how``)."""
        total = self.cost(ops)
        if total > self.bound:
            self.ctx.diags.warning(
                "W0610", f"a compute kernel is estimated at {total} cycles, over cycle_upper_bound "
                f"{self.bound}, and {how}", span,
                help="raise `pass_options: {cycle_upper_bound: ...}` or use smaller tiles")

    def kernel(self, ops: list[Op], kind: str | None = None) -> list[Op]:
        """The compute kernel running ``ops`` (of ``kind``, by default their one kind); returns what
        the control program does in their place: allocate the kernel's workspaces, then launch it."""
        kind = kind or kind_of(ops[0])
        # statements whose implicit loops the checks hoisted above them used to part (``region``)
        ops = merge_implicit(ops)
        name = f"{self.func.name}_k{next(self.counter)}"
        views = self.escaping_views(ops)
        func, allocs, tensors, free = self.build(ops, name, kind)
        self.kernels.append(func)
        return [*allocs, *views, Op("launch", tensors, {"kernel": name, "scalars": tuple(sym.Sym(s) for s in free)},
                                    span=ops[0].span)]

    def escaping_views(self, ops: list[Op]) -> list[Op]:
        """Take out of ``ops`` (in place) the views that ops outside them use, for the control
        program to define before the launch: top-level work merged into an implicit loop with the
        statement before it (`bv = view(b, ...)` after `y[:] = ...`) would otherwise be defined
        inside that statement's kernel only, and a later launch would pass an undefined view. A
        view naming what the kernel binds, or a tensor it defines, stays (nothing outside sees it)."""
        inside = {id(o) for top in ops for o in top.walk()}
        bound = set().union(*(bound_within(top) for top in ops))
        defined: set[str] = set()
        taken: list[Op] = []

        def region(r: list[Op]) -> None:
            kept = []
            for op in r:
                if op.name == "view" and op.operands[0].name not in defined and \
                        not (self.users.get(op.result.name, set()) <= inside) and \
                        not _free([*op.attrs.values(), *op.result.type.shape, *op.result.type.valid_shape]) & bound:
                    taken.append(op)
                    continue
                defined.update(x.name for o in op.walk() for x in o.results if o.name != "alloc")
                for sub in op.regions:
                    region(sub)
                kept.append(op)
            r[:] = kept

        region(ops)
        return taken

    def build(self, ops: list[Op], name: str, kind: str | None = None) -> tuple[Func, list[Op], list[Value],
                                                                            list[str]]:
        """The compute kernel ``name`` running ``ops`` (which it takes over: its workspaces' allocs
        move out of them, its tensors become its parameters), the workspaces' allocs, the tensors it
        is launched with and the symbols it takes as scalars."""
        kind = kind or kind_of(ops[0])
        allocs = hoist_workspaces(ops)
        tensors: list[Value] = []
        defined: set[str] = set()
        bound: set[str] = set()
        free: list[str] = []
        for top in ops:
            for o in top.walk():
                for v in o.operands:
                    if isinstance(v.type, TensorType) and v.name not in defined and v not in tensors:
                        tensors.append(v)
                for r in o.results:
                    defined.add(r.name)
                bound |= bound_within(o)
                exprs = [v for k, v in o.attrs.items() if k not in ("index", "name", "kind", "sym")]
                for r in o.results:
                    exprs.extend(r.type.valid if isinstance(r.type, TileType) else r.type.shape)
                for v in o.operands:
                    if isinstance(v.type, TensorType):
                        exprs.extend(v.type.shape)
                for e in exprs:
                    for s in sorted(_free(e)):
                        if s not in bound and s not in free:
                            free.append(s)
        stored = {o.operands[0].name for top in ops for o in top.walk() if o.name == "tile.store"}
        loaded = {o.operands[1].name for top in ops for o in top.walk() if o.name == "tile.load"}
        for o in (o for top in ops for o in top.walk()):
            read, written = indexed_gm(o)
            loaded.update(v.name for v in read)
            stored.update(v.name for v in written)
        # what is loaded or stored through a view of a tensor (swap_halves' halves) is its too
        root = view_bases(o for top in ops for o in top.walk())
        loaded |= {root[n] for n in loaded if n in root}
        stored |= {root[n] for n in stored if n in root}
        params = [Param(v.name, v.type, v.type.dtype,
                        ("inout" if v.name in loaded else "out") if v.name in stored else "in",
                        Value(v.name, v.type)) for v in tensors]
        remap = {v.name: p.value for v, p in zip(tensors, params)}
        for top in ops:
            for o in top.walk():
                o.operands = [remap.get(v.name, v) if isinstance(v.type, TensorType) else v for v in o.operands]
        params += [Param(s, None, self.scalar_dtypes.get(s, "i64")) for s in free]
        return Func(name, params, ops, kind, {}, ops[0].span), allocs, tensors, free


def _last_uses(ops: list[Op]) -> dict[str, int]:
    """Value name -> the index of the last op of ``ops`` (a region) that uses it."""
    out: dict[str, int] = {}
    for at, op in enumerate(ops):
        for o in op.walk():
            for v in o.operands:
                out[v.name] = at
    return out


def _live_from(run: list[Op], at: int, last_use: dict[str, int]) -> bool:
    """Whether a tile ``run`` defines is used by op ``at`` of its region or a later one: a cut
    before ``at`` would leave it in another kernel than its use. (Fusion forwards a vector tile
    across the cube work of one straight-line region, ``passes/fuse.py``, which is right where
    the region is one mixed kernel and not where it is cut by kind.)"""
    return any(last_use.get(r.name, -1) >= at for op in run for o in op.walk() for r in o.results
               if isinstance(r.type, TileType))


def _kind(ops: list[Op]) -> str:
    """The kind of kernel running ``ops``: mixed where their tile work needs both kinds of core
    (a run that cannot be cut where the kind changes, a tile living across the cut)."""
    kinds = {kind_of(op) for op in ops if kinds_in(op)}
    return MIXED if len(kinds) > 1 else kind_of(ops[0])


def _free(e) -> set[str]:
    if isinstance(e, str):
        return set()
    if isinstance(e, (tuple, list)):
        out: set[str] = set()
        for x in e:
            out |= _free(x)
        return out
    return sym.free_symbols(e)


def run(module: Module, ctx: PassContext) -> Module:

    fresh = module.clone()
    options = schedule_of(module).pass_options
    bound = options["cycle_upper_bound"]
    split = bool(options.get("aiv_split", PASS_OPTION_DEFAULTS["aiv_split"]))
    funcs: list[Func] = []
    for f in fresh.funcs:
        control, kernels = _Partitioner(f, ctx, bound, split).run()
        funcs.extend(kernels)
        funcs.append(control)
    return Module(fresh.name, "block", funcs, dict(fresh.attrs))


PASS = Pass("partition", "tile", "block", run, frozenset({"tiled"}), frozenset({"partitioned"}))
