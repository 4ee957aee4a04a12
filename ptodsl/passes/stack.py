"""The scalar stack frame of each compute kernel, estimated from the Block IR (W0613, E0613).

bisheng, the NPU compiler, refuses a kernel whose stack frame passes a limit (the target file's
``stack.limit_bytes``, 32 KiB: "stack frame size (...) exceeds limit (...)", one of the traps
PyPTO's FAQ names). What fills the frame of a ptodsl kernel is the objects its C++ declares
(``backends/cpp/kernel.py``), one per IR construct:

- a pto-isa ``Tile`` per ``tile.alloc``, and the scratch tiles and tile views some instructions
  take (a row reduction's tmp, a compare's mask view, a select's views, fills and tmp, the row a
  scalar is spread over before a broadcast down the columns, a transpose's tmp);
- a ``GlobalTensor`` per ``tile.load``/``tile.store``, with a ``Stride`` temporary when one of its
  strides is known only at run time (a symbolic dim, or strides passed to the kernel) and a
  ``Shape`` temporary then or when one of its extents is (a tail tile);
- a pointer per tensor parameter and per view a kernel takes of one, a scalar per scalar parameter,
  per stride argument (:func:`ptodsl.ir.gm.explicit_strides`) and per value the kernel reads from
  a tensor, the status buffer's pointer of a kernel holding bounds guards, and an index and bound
  per ``for`` loop.

Each object is counted once, wherever it is declared: a loop body's objects take their slots once,
not per iteration, and no two objects are assumed to share a slot (the compiler may reuse the slot
of an object whose scope has ended; this estimate does not count on it). The sizes per object come
from the target file (``stack:``, read from pto-isa's headers). It is an estimate of the frame, not
bisheng's own number: register spills, saved registers and what inlined pto-isa instructions keep
on the stack are left out, which is why the warning (``warn_bytes``) starts well below the limit.
``tests/passes/test_stack.py`` counts the objects the emitter actually declares for library
kernels and compares them with :func:`estimate`, so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Label, Span
from ..ir import Func, Module, Op, TensorType, TileType, gm
from ..ir.opdefs import FUSED, indexed_gm, spread_in_blocks
from ..ir.queues import core_of
from ..ops import OPS
from ..targets import StackModel, Target
from .context import PassContext
from .persistent import cycles
from .tile_index import SCRATCH_TILES, index_table

# The kinds of object a kernel's frame holds, each with the target field giving its size.
KINDS = {"tile": "tile_bytes", "global_tensor": "global_tensor_bytes", "shape": "shape_bytes",
         "stride": "stride_bytes", "pointer": "pointer_bytes", "scalar": "scalar_bytes", "loop": "loop_bytes"}
SHOWN_PLACES = 4  # source places labelled in a stack diagnostic


@dataclass
class StackEstimate:
    """The estimated stack frame of one compute kernel."""

    kernel: str
    counts: dict[str, int]  # KINDS -> objects the kernel declares
    bytes: int
    places: dict[Span, int] = field(default_factory=dict)  # source place -> bytes of the objects it declares


def _count(counts: dict[str, int], places: dict[Span, int], span: Span | None, model: StackModel,
           kind: str, n: int = 1) -> None:
    if n <= 0:
        return
    counts[kind] += n
    if span is not None:
        places[span] = places.get(span, 0) + n * getattr(model, KINDS[kind])


def _logical_2d(shape: tuple[int, ...]) -> tuple[int, int]:
    rows = 1
    for d in shape[:-1]:
        rows *= d
    return rows, shape[-1]


def scratch_ub_tiles(op: Op) -> int:
    """The tiles of :func:`scratch_tiles` that take UB of their own, above the memory plan: not the
    views over operands' memory (a compare's mask, a select's views of its operands, a spread
    row's column view)."""
    name = op.name[len("tile."):]
    if name == "cmp":
        return 0
    if name == "where":
        return sum(k in op.attrs for k in ("scalar", "scalar2")) + 1  # the fills and the tmp
    if op.name in FUSED and FUSED[op.name].spread == "row":
        return 1  # the blocks' scratch, or the tmp beside a column view
    return scratch_tiles(op)


def scratch_tiles(op: Op) -> int:
    """The tiles the emitter declares for one tile instruction besides its operands: scratch tiles
    and views over its operands' memory (``KernelEmitter._reduce``, ``_compare``, ``_select``,
    ``_expand``, ``kernel_elem._pow``, ``kernel_layout._trans``, ``kernel_fused._expand_binary``)."""
    if op.name in SCRATCH_TILES:
        return SCRATCH_TILES[op.name]
    name = op.name[len("tile."):]
    if name == "cmp":
        return 1  # the mask view
    if name == "where":
        # a fill per scalar operand, views of the destination and both sources, the mask view, a tmp
        return sum(k in op.attrs for k in ("scalar", "scalar2")) + 3 + 1 + 1
    if name == "pow":
        return 2 if op.attrs.get("side") == "left" else 1  # TPOW's scratch, and the tile of a scalar base
    if name in OPS and OPS[name].kind == "reduce":
        src: TileType = op.operands[1].type
        return 1 if int(op.attrs["axis"]) % src.rank == src.rank - 1 else 0  # a row reduction's tmp
    if name == "expand":
        (rd, cd), (rs, cs) = _logical_2d(op.operands[0].type.shape), _logical_2d(op.operands[1].type.shape)
        return 1 if rs == cs == 1 and cd != 1 and rd != 1 else 0  # the row a single value is spread over
    if name == "trans":
        return 1  # TTRANS's tmp (kernel_layout._trans)
    if op.name in FUSED and FUSED[op.name].spread == "row":
        return 1 if spread_in_blocks(op) else 2  # the blocks' scratch, or a column view and the tmp
    return 0


def _dynamic(values) -> bool:
    return any(not isinstance(v, int) for v in values)


def _gm_extents(t: TileType) -> list:
    """What a transfer of tile ``t`` covers per dim (a dim of static size 1 holds one index)."""
    if t.rank == 1:
        return [t.valid[0]]
    return [1 if d == 1 else v for d, v in zip(t.shape[:-1], t.valid[:-1])] + [t.valid[-1]]


def estimate(func: Func, target: Target, strided: set[str] | frozenset[str] = frozenset()) -> StackEstimate:
    """The stack frame of compute kernel ``func``; ``strided`` names the tensor parameters that take
    their strides as arguments (:func:`strided_params`). ``counts`` are the objects of the CPU
    build (of a mixed kernel, both cores' in one body); ``bytes`` is the larger NPU part's frame
    for a mixed kernel, whose cube and vector parts are compiled apart, each declaring the
    skeleton (parameters, loops, views, reads) and its own core's objects."""
    counts = dict.fromkeys(KINDS, 0)
    places: dict[Span, int] = {}
    cores: dict[str | None, dict[str, int]] = {None: counts, "cube": dict.fromkeys(KINDS, 0),
                                                "vec": dict.fromkeys(KINDS, 0)}
    _objects(func, target, strided, counts, places, cores)
    model = target.stack

    def size(c: dict[str, int]) -> int:
        return sum(n * getattr(model, KINDS[k]) for k, n in c.items())

    total = size(counts)
    if func.kind == "mixed":
        skeleton = total - size(cores["cube"]) - size(cores["vec"])
        total = skeleton + max(size(cores["cube"]), size(cores["vec"]))
    return StackEstimate(func.name, counts, total, places)


def _objects(func: Func, target: Target, strided: set[str] | frozenset[str], counts: dict[str, int],
             all_places: dict[Span, int], cores: dict[str | None, dict[str, int]]) -> None:
    model = target.stack
    strides: dict[str, tuple] = {}
    places = all_places
    core: str | None = None  # the core the op being counted runs on, in a mixed kernel

    def _place(counts: dict[str, int], places: dict[Span, int], span: Span | None, model: StackModel,
               kind: str, n: int = 1) -> None:
        _count(counts, places, span, model, kind, n)
        if core is not None and n > 0:
            cores[core][kind] += n

    for p in func.params:
        if p.is_tensor:
            t: TensorType = p.type
            _place(counts, places, None, model, "pointer")
            if p.name in strided:
                _place(counts, places, None, model, "scalar", t.rank - 1)
                strides[p.name] = (None,) * (t.rank - 1) + (1,)
            else:
                strides[p.name] = gm.dense_strides(t.shape)
        else:
            _place(counts, places, None, model, "scalar")
    if any(op.name == "guard" for op in func.walk()):
        _place(counts, places, None, model, "pointer")  # the status buffer a failed guard writes
    for op in func.walk():
        core = core_of(op) if func.kind == "mixed" else None
        if op.name == "loop":
            _place(counts, places, op.span, model, "loop")
        elif op.name == "view":  # a pointer into its parent, with the parent's strides
            _place(counts, places, op.span, model, "pointer")
            strides[op.result.name] = strides.get(op.operands[0].name, (None,))
        elif op.name == "read":  # the value, held by the kernel's scalar unit
            _place(counts, places, op.span, model, "scalar")
        elif op.name == "tile.alloc":
            _place(counts, places, op.span, model, "tile")
        elif op.name in ("tile.load", "tile.store"):
            tile, tensor = (op.operands[0], op.operands[1]) if op.name == "tile.load" else (op.operands[1], op.operands[0])
            dynamic_stride = _dynamic(strides.get(tensor.name, (None,)))
            _place(counts, places, op.span, model, "global_tensor")
            # the emitter constructs a Shape (default or not) whenever it passes either
            _place(counts, places, op.span, model, "shape", int(dynamic_stride or _dynamic(_gm_extents(tile.type))))
            _place(counts, places, op.span, model, "stride", int(dynamic_stride))
        elif any(indexed_gm(op)):
            # a gather's or scatter's table: one GlobalTensor, with Shape and Stride temporaries as
            # for a transfer (tile_index.index_table gives what the emitter declares)
            read, written = indexed_gm(op)
            tensor = (read + written)[0]
            extents, table_strides = index_table(op, tensor.type.shape, strides.get(tensor.name, (None,)))
            dynamic_stride = _dynamic(table_strides)
            _place(counts, places, op.span, model, "global_tensor")
            _place(counts, places, op.span, model, "shape", int(dynamic_stride or _dynamic(extents)))
            _place(counts, places, op.span, model, "stride", int(dynamic_stride))
        elif op.name.startswith("tile."):
            _place(counts, places, op.span, model, "tile", scratch_tiles(op))


def strided_params(module: Module) -> dict[str, set[str]] | None:
    """Kernel name -> its tensor parameters that take strides; None when the control programs'
    GM values cannot be placed (the emitter refuses those kernels: every one is taken as strided)."""
    controls = [f for f in module.funcs if f.kind == "control"]
    try:
        return gm.explicit_strides(module, controls)
    except gm.GmLayoutError:
        return None


def every_tensor(func: Func) -> set[str]:
    return {p.name for p in func.params if p.is_tensor}


def estimates(module: Module, target: Target) -> list[StackEstimate]:
    """The estimate of every compute kernel of a Block IR module, in module order."""
    strided = strided_params(module)
    return [estimate(f, target, every_tensor(f) if strided is None else strided.get(f.name, set()))
            for f in module.funcs if f.kind in ("vector", "cube", "mixed")]


def _extent(func: Func) -> Span | None:
    """The source lines a kernel's ops come from, in the file of its first op."""
    spans = [o.span for o in func.walk() if o.span is not None]
    if func.span is not None:
        spans = [s for s in spans if s.file == func.span.file]
    if not spans:
        return func.span
    first = min(spans, key=lambda s: (s.line, s.col))
    last = max(spans, key=lambda s: (s.end_line, s.end_col))
    return first.to(last)


def _described(e: StackEstimate, model: StackModel) -> str:
    c = e.counts
    parts = [f"{c['tile']} tile objects ({c['tile'] * model.tile_bytes} B)",
             f"{c['global_tensor']} GlobalTensor views ({c['global_tensor'] * model.global_tensor_bytes} B) "
             f"with {c['shape']} Shape and {c['stride']} Stride temporaries "
             f"({c['shape'] * model.shape_bytes + c['stride'] * model.stride_bytes} B)",
             f"{c['pointer']} pointers and {c['scalar']} scalars "
             f"({c['pointer'] * model.pointer_bytes + c['scalar'] * model.scalar_bytes} B)",
             f"{c['loop']} loops ({c['loop'] * model.loop_bytes} B)"]
    return "counted: " + ", ".join(parts)


def cut_points(body: list[Op]) -> tuple[int, Op | None]:
    """Where partitioning could cut a kernel's body (between top-level ops, with no value defined
    before the cut and used after it), and, when nowhere, the op defining the value live the
    longest: what holds the body together."""
    body = [op for op in body if not op.name.startswith("sync.")]  # flags are no work to cut between
    first: dict[str, tuple[int, Op]] = {}
    last: dict[str, int] = {}
    for i, top in enumerate(body):
        for o in top.walk():
            for v in o.operands:
                last[v.name] = i
            for r in o.results:
                first.setdefault(r.name, (i, o))
    blocked = [0] * (len(body) + 1)  # +1 at the first cut a value blocks, -1 past the last
    longest: tuple[int, Op] | None = None
    for name, (d, op) in first.items():
        u = last.get(name, d)
        if u > d:
            blocked[d + 1] += 1
            blocked[u + 1] -= 1
            if longest is None or u - d > longest[0]:
                longest = (u - d, op)
    free, live = 0, 0
    for i in range(1, len(body)):
        live += blocked[i]
        free += live == 0
    return free, (longest[1] if not free and longest is not None else None)


def unrolled_loops(module: Module) -> dict[str, tuple[str, int]]:
    """Kernel name -> (loop name, factor) of the unrolled copy of a user loop that launches it or
    runs inside it."""
    out: dict[str, tuple[str, int]] = {}

    def walk(ops: list[Op], around: tuple[str, int] | None) -> None:
        for op in ops:
            if op.name == "launch" and around is not None:
                out.setdefault(op.attrs["kernel"], around)
            here = around
            if op.name == "loop" and int(op.attrs.get("unrolled", 1)) > 1:
                here = (str(op.attrs.get("name")), int(op.attrs["unrolled"]))
            for r in op.regions:
                walk(r, here)

    for f in module.funcs:
        if f.kind == "control":
            walk(f.body, None)
    for f in module.funcs:  # a loop of the user's running inside its kernel holds the copies itself
        if f.kind != "control" and f.name not in out:
            inside = next((o for o in f.walk() if o.name == "loop" and int(o.attrs.get("unrolled", 1)) > 1), None)
            if inside is not None:
                out[f.name] = (str(inside.attrs.get("name")), int(inside.attrs["unrolled"]))
    return out


def check_kernel(func: Func, ctx: PassContext, strided: set[str] | frozenset[str],
                 unrolled: tuple[str, int] | None = None) -> StackEstimate:
    """Estimate ``func``'s frame and report it to ``ctx`` when it is near (W0613) or over (E0613)
    the target's limit; ``unrolled`` is the unrolled loop whose copies it holds."""
    model = ctx.target.stack
    e = estimate(func, ctx.target, strided)
    if e.bytes <= model.warn_bytes:
        return e
    over = e.bytes > model.limit_bytes
    places = sorted(e.places.items(), key=lambda kv: (-kv[1], kv[0]))
    secondary = [Label(span, f"{n} bytes of the frame") for span, n in places[:SHOWN_PLACES]]
    notes = [_described(e, model),
             "an estimate from the objects the emitted kernel declares, each counted once and none sharing a "
             "slot; spills and saved registers come on top, so the NPU compiler's own number differs"]
    if len(places) > SHOWN_PLACES:
        notes.append(f"{len(places) - SHOWN_PLACES} more source places declare objects of this kernel")
    remedies = ["use larger tiles (fewer tile objects)", "split the reduction (K) axis over several kernels"]
    work = sum(cycles(op, ctx.target) for op in func.body)
    free, blocker = cut_points(func.body)
    if free:
        remedies.append(f"set `cycle_upper_bound` below {work}, the kernel's estimated cycles, to cut it into "
                        "more kernels")
        secondary += ctx.labels(("schedule", "pass_options", "cycle_upper_bound"), "the cycle budget it fits in")
    else:
        notes.append("a lower `cycle_upper_bound` would not help: no point of the kernel is free of live tiles "
                     "to cut it at")
        if blocker is not None and blocker.span is not None:
            secondary.append(Label(blocker.span, "a tile made here stays live across the points the kernel "
                                   "could be cut at"))
    if unrolled is not None:
        loop, factor = unrolled
        remedies.append(f"unroll loop `{loop}` less ({factor} copies of its body are in this kernel)")
        secondary += ctx.labels(("schedule", "loops", loop, "unroll"), f"{factor} copies of the body in one kernel")
    what = (f"compute kernel `{func.name}` needs an estimated {e.bytes} bytes of stack, "
            f"{'over' if over else 'near'} the {model.limit_bytes} the NPU compiler allows")
    extent = _extent(func)
    label = "the kernel compiled from " + (f"lines {extent.line} to {extent.end_line}"
                                           if extent is not None and extent.end_line > extent.line else "here")
    help = "to shrink it: " + "; ".join(remedies)
    if over:
        ctx.diags.error("E0613", what, extent, label, secondary=secondary, notes=notes, help=help)
    else:
        ctx.diags.warning("W0613", what, extent, label, secondary=secondary, notes=notes, help=help)
    return e


def check(module: Module, ctx: PassContext) -> None:
    """W0613/E0613 for every compute kernel of a Block IR module near or over the stack limit."""
    strided = strided_params(module)
    unrolled = unrolled_loops(module)
    for f in module.funcs:
        if f.kind in ("vector", "cube", "mixed"):
            check_kernel(f, ctx, every_tensor(f) if strided is None else strided.get(f.name, set()),
                         unrolled.get(f.name))


__all__ = ["KINDS", "StackEstimate", "check", "check_kernel", "cut_points", "estimate", "estimates",
           "scratch_tiles", "strided_params", "unrolled_loops"]
