"""Which loops of the user's run inside a compute kernel (persistent kernels), and the GM workspaces
such a kernel needs from the control program.

Partitioning (``passes/partition.py``) asks :meth:`Placement.kinds` about each op of a region: tile
work and grid loops always run in a kernel; a user loop (also an implicit or peeled one-trip loop)
runs inside one when everything in its body can, which is tile work, grid loops, views, guards,
nested such loops, element reads of tensors that nothing in the call writes (the kernel reads them
with its scalar unit; on the NPU a tensor the call never writes needs no cache maintenance, while
one a kernel writes would, so such a read keeps its loop in the control program) and GM workspaces
whose shape does not depend on anything the loop binds (a valid shape that does widens to the
whole, :func:`hoist_workspaces`), and when one iteration fits the cycle budget of a kernel
(``pass_options.cycle_upper_bound``: a larger body is cut into several kernels). A print, a
branch, a reshape or permute, or a read of a written tensor keeps the loop in the control
program, which then launches a kernel per iteration as before; a branch on integers inside a loop
of the user's (the peeled first and last iterations' ``n >= 1``) is a loop of 0 or 1 trips by
then (``passes/branches.py``). So does a kernel holding the loop
that would not compile (partitioning tries it, :meth:`Placement.refuse`): the iterations of a loop
inside a kernel share its workspaces, so a dependency from one iteration to the next is carried
across the loop and takes an event id of its own for the whole loop, where kernels launched per
iteration need none (more than the target's ids is E0612).

The kind rule: a loop whose tile work needs one kind of core runs in a kernel of that kind. One
needing both (a matmul and vector work) runs as one ``mixed`` kernel (:func:`mixed_loop`). A row
block loop of ``passes/rowgrid.py`` runs as blocks on every cube core (one AIC and the AIVs beside
it per block): its proof makes every iteration touch only its own rows of each tensor written, so
the cube's results reach the vector work of the same block through GM workspaces no other block
touches. Any other loop of the user's runs in one launch, its iterations in order (paged and varlen
attention's loop nests, whose trip counts and offsets come from data), where it would otherwise
launch kernels per iteration; consecutive such loops share one kernel while it compiles. Such a
kernel runs on one block, unless a parallel loop in it may be shared out with a copy of its
workspaces per block (``passes/blocks.py``: varlen's heads). The simulator and the cpu backend run such a kernel's
ops in program order; on the NPU its cube part and vector part run on their own cores, ordered by
cross-core flags (``passes/sync.py``, ``backends/cpp/kernel_mixed.py``). A mixed loop whose kernel
would not compile (stack frame, event ids, on-chip memory: :meth:`Placement.refuse`) stays in the
control program.

A kernel's workspaces are allocated by the control program (:func:`hoist_workspaces`): each
``alloc`` inside the kernel moves to just before its launch, so one workspace serves every
iteration. A kernel writing one does not run as blocks (``passes/blocks.py``): they would share it.
"""

from __future__ import annotations

from collections.abc import Iterator
from math import prod

from .. import sym
from ..dtypes import itemsize
from ..ir import Func, Op, TensorType, TileType, Value
from ..ir.gm import walk_ops
from ..ir.opdefs import IR_OPS, in_kernel_loop, indexed_gm
from ..ir.queues import CUBE_SPACES
from .parallel import origins_of

# A kernel running cube and vector work of one loop: a block is one AIC and the AIVs beside it.
MIXED = "mixed"
KERNEL_KINDS = ("vector", "cube", MIXED)
# Ops that keep the loop holding them in the control program.
CONTROL_ONLY = frozenset({"print", "if", "reshape", "permute", "launch"})


def cycles(op: Op, target) -> int:
    """A rough cost: vector repeats of each tile op, times static grid trip counts. A loop of the
    user's inside a kernel counts one iteration: the budget bounds what one kernel's code holds."""
    if op.name == "loop":
        hi, lo = op.attrs["hi"], op.attrs["lo"]
        trips = hi - lo if sym.is_const(hi) and sym.is_const(lo) and in_kernel_loop(op) else 1
        return max(1, trips) * sum(cycles(x, target) for x in op.regions[0])
    if not op.name.startswith("tile.") or op.name == "tile.alloc" or not op.operands:
        return 0
    t = op.operands[0].type if isinstance(op.operands[0].type, TileType) else op.operands[1].type
    return max(1, -(-prod(t.shape) * itemsize(t.dtype) // target.vector_repeat_bytes))


def kind_of(op: Op) -> str:
    """cube when the op (or anything in its regions) touches L1/L0 tiles, else vector."""
    for o in op.walk():
        for v in list(o.operands) + list(o.results):
            if isinstance(v.type, TileType) and v.type.space in CUBE_SPACES:
                return "cube"
    return "vector"


def kinds_in(op: Op) -> frozenset[str]:
    """The kinds of core the tile work inside ``op`` needs."""
    out: set[str] = set()
    for o in op.walk():
        if o.name.startswith("tile."):
            out.add("cube" if any(isinstance(v.type, TileType) and v.type.space in CUBE_SPACES
                                  for v in list(o.operands) + list(o.results)) else "vector")
    return frozenset(out)


def mixed_loop(op: Op, kinds: frozenset[str]) -> bool:
    """Whether a loop that may run in a kernel but needs both kinds of core runs as one mixed
    kernel: the row block loop of ``passes/rowgrid.py``, whose proof makes every block touch its
    own rows of each tensor written, workspaces included (the cube's results reach the vector work
    of the same block through them), and any other loop of the user's, in place of a launch per
    iteration (on one block unless ``passes/blocks.py`` gives each block its own workspaces). The one-trip loop around top-level work gains nothing from it: its tile work runs
    in kernels of one kind each, and those run as blocks on every core of their kind."""
    if op.name != "loop" or len(kinds) < 2:
        return False
    return op.attrs.get("rows_interchanged") == 1 or op.attrs.get("kind") is None


def bound_within(op: Op) -> set[str]:
    """The symbols ``op`` and the ops inside it bind: loop indices and values read."""
    out: set[str] = set()
    for o in op.walk():
        if o.name == "loop":
            out.add(o.attrs["index"])
            if "unroll_var" in o.attrs:
                out.add(o.attrs["unroll_var"])
        elif o.name == "read":
            out.add(o.attrs["sym"])
    return out


class Placement:
    """Where the ops of one Tile IR function run: in a compute kernel or in the control program."""

    def __init__(self, func: Func, fits=lambda body: True):
        """``fits(body)``: whether one iteration of a loop body is small enough for one kernel (the
        cycle budget that cuts runs of tile work, ``pass_options.cycle_upper_bound``)."""
        self.fits = fits
        origins = origins_of(func)
        self.origins = origins
        # roots some tile op stores to: a kernel may not read their elements with its scalar unit
        self.written: set[str] | None = None if origins is None else {
            origins[o.operands[0].name].root for o in func.walk() if o.name == "tile.store"} | {
            origins[v.name].root for o in func.walk() for v in indexed_gm(o)[1]}
        self._memo: dict[int, frozenset[str] | None] = {}

    def kinds(self, op: Op) -> frozenset[str] | None:
        """The kinds of core (``vector``, ``cube``) the op's work needs when it may run inside a
        compute kernel, or None when it belongs to the control program."""
        if not IR_OPS[op.name].control or in_kernel_loop(op):
            return frozenset({kind_of(op)})
        if op.name != "loop":
            return None
        key = id(op)
        if key not in self._memo:
            self._memo[key] = self._loop(op)
        return self._memo[key]

    def refuse(self, loop: Op) -> None:
        """Keep ``loop`` in the control program (the kernel holding it would not compile)."""
        self._memo[id(loop)] = None

    def _loop(self, loop: Op) -> frozenset[str] | None:
        bound = bound_within(loop)
        for o in walk_ops([loop]):
            if o.name in CONTROL_ONLY:
                return None
            if o.name == "loop" and (not isinstance(o.attrs["step"], int) or o.attrs["step"] == 0):
                return None  # the kernel emitter's loops take a constant step
            if o.name == "read" and (self.written is None or self._root(o.operands[0]) in self.written):
                return None
            if o.name == "alloc" and ("fill" in o.attrs or any(sym.free_symbols(d) & bound for d in
                                                               o.result.type.shape)):
                return None  # its size names what the loop binds: it cannot move before the launch
        if not self.fits(loop.regions[0]) and loop.attrs.get("rows_interchanged") != 1:
            # its body is cut into several kernels, launched per iteration; not a row block loop's,
            # whose iterations would each be a launch (partitioning warns of it, W0610)
            return None
        kinds = kinds_in(loop)
        return kinds or None  # a loop with no tile work (reads, guards) has nothing to launch

    def _root(self, v: Value) -> str:
        assert self.origins is not None
        return self.origins[v.name].root


def _regions(ops: list[Op], within: tuple[str, ...]) -> Iterator[tuple[list[Op], tuple[str, ...]]]:
    """Every region of ``ops``, with the indices of the loops around it."""
    yield ops, within
    for op in ops:
        inner = (*within, op.attrs["index"]) if op.name == "loop" else within
        for r in op.regions:
            yield from _regions(r, inner)


def hoist_workspaces(ops: list[Op]) -> list[Op]:
    """Take every ``alloc`` out of ``ops`` (a kernel's body, in place) and return them, for the
    control program to run before the launch: the kernel receives each workspace as a tensor
    parameter, and ops after the launch that use it still see it defined. One workspace then
    serves every iteration of a loop inside the kernel (its size is bound outside the loop).

    A valid shape naming what the kernel binds (the last KV block's columns) widens to the whole
    shape, as ``passes/rowgrid.py`` does: every tile op touching the workspace takes its extent
    from its own tile, and an iteration reads only what it wrote (a workspace is a temporary the
    iteration fills before reading it), so one allocation serves every iteration."""
    bound: set[str] = set()
    for op in ops:
        bound |= bound_within(op)
    allocs: list[Op] = []
    widened: dict[str, Value] = {}
    for region, within in list(_regions(ops, ())):
        kept = [op for op in region if op.name != "alloc"]
        for op in region:
            if op.name != "alloc":
                continue
            t = op.result.type
            attrs = dict(op.attrs) | ({"within": within} if within else {})
            if any(sym.free_symbols(d) & bound for d in t.valid_shape):
                wide = Value(op.result.name, TensorType(t.dtype, t.shape, None))
                widened[wide.name] = wide
                op = Op("alloc", [], attrs, [wide], span=op.span)
            else:
                op.attrs = attrs
            allocs.append(op)
        region[:] = kept
    if widened:
        for top in ops:
            for o in top.walk():
                o.operands = [widened.get(v.name, v) if isinstance(v.type, TensorType) else v for v in o.operands]
    return allocs


__all__ = ["CUBE_SPACES", "KERNEL_KINDS", "MIXED", "Placement", "bound_within", "cycles", "hoist_workspaces",
           "kind_of", "kinds_in", "mixed_loop"]
