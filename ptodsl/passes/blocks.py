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

Contiguous shares keep the first failing bounds guard the one a sequential run stops at: the
blocks before it run the iterations before it. A kernel the loop of which writes a GM workspace
of the call (an ``alloc`` of the control program: hoisted by partitioning, one per launch) is
left on one block, since all blocks would share that workspace.
"""

from __future__ import annotations

from .. import sym
from ..ir import Func, Module, Op, Param
from ..ir.gm import launches, walk_ops
from ..ir.opdefs import block_params, indexed_gm
from .context import Pass, PassContext
from .parallel import independent, origins_of
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
    loops = kernel.body
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


def _grid(kernel: Func) -> Op | None:
    """The outermost grid loop of a kernel that is one grid nest (inside the one-trip loops around
    top-level work), when its iterations are independent (the parallel pass's proof: each writes
    its own tiles, reads nothing written, carries no accumulator): an elementwise op's rows of
    tiles, a matmul's columns of output tiles."""
    body = kernel.body
    while len(body) == 1 and body[0].name == "loop" and body[0].attrs.get("kind") in ("implicit", "peeled") \
            and sym.sub(body[0].attrs["hi"], body[0].attrs["lo"]) == 1:
        body = body[0].regions[0]
    if len(body) != 1 or body[0].name != "loop" or body[0].attrs.get("kind") != "grid":
        return None
    loop = body[0]
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
    if not bound:
        return False
    derived = set(bound)
    for op in kernel.walk():  # views of a workspace are the workspace
        if op.name == "view" and op.operands[0].name in derived:
            derived.add(op.result.name)
    return any((op.name == "tile.store" and op.operands[0].name in derived)
               or any(v.name in derived for v in indexed_gm(op)[1]) for op in kernel.walk())


def share_out(kernel: Func, loops: list[Op], launch: Op, cores: int) -> None:
    """Run ``kernel`` (whose body is ``loops``) as blocks, in place: each loop takes the block's
    share and ``launch`` gets the block count."""
    index = _fresh(kernel, "block_index")
    kernel.params.append(Param(index, None, "i64"))
    count = _fresh(kernel, "block_count")
    kernel.params.append(Param(count, None, "i64"))
    kernel.attrs["block_index"], kernel.attrs["block_count"] = index, count
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
        a["hi"] = sym.add(a["lo"], sym.mul(sym.min_(chunk, sym.sub(trips, first)), step))
        a["parallel"] = 1  # a grid loop too: its iterations were proved independent (_grid)
    env = {p.name: e for p, e in zip([p for p in kernel.params if not p.is_tensor and p.name not in (index, count)],
                                      launch.attrs["scalars"])}
    outer = sym.substitute(total, env)
    # the fewest blocks of at most cdiv(trips, cores) iterations: every block has work, all but
    # the last as much as the first (a block count of min(trips, cores) could leave blocks idle)
    per = sym.max_(sym.ceildiv(outer, cores), 1)
    launch.attrs["block_dim"] = sym.max_(sym.ceildiv(outer, per), 1)

def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()
    funcs = {f.name: f for f in fresh.funcs}
    for control in (f for f in fresh.funcs if f.kind == "control"):
        counts: dict[str, int] = {}
        for op in launches(control):
            counts[op.attrs["kernel"]] = counts.get(op.attrs["kernel"], 0) + 1
        workspaces = _workspaces(control)
        for op in launches(control):
            kernel = funcs[op.attrs["kernel"]]
            loops = blockable(kernel)
            if counts[kernel.name] != 1 or "block_dim" in op.attrs or loops is None:
                continue
            if _writes_workspace(kernel, op, workspaces):
                continue
            share_out(kernel, loops, op, ctx.target.chip.cores(kernel.kind))
    return fresh


PASS = Pass("blocks", "block", "block", run, frozenset({"partitioned", "independent-marked"}), frozenset({"blocked"}))

__all__ = ["PASS", "blockable", "run", "share_out"]
