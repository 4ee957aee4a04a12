"""Double buffering (Block IR -> Block IR): two (or more) sets of tiles on alternate iterations of a
grid loop.

Requires: a ``level block`` module from partitioning (tiles not yet placed).
Produces: in each compute kernel, vector, cube or mixed, every innermost grid loop whose body loads
from GM and does other work runs its iterations in pairs (a cube kernel's K loop: the next A and B tiles
load while the cube multiplies this step's; or its output tiles, where each is one K step) (a
perfect nest of grid loops, each body just the next loop, is first flattened into one loop over
all its tiles, innermost index fastest): a loop of
``cdiv(trips, 2)`` iterations holding two copies of the body, copy 0 for iteration ``2u`` and copy 1
for ``2u + 1`` inside a loop of ``min(trips - 2u - 1, 1)`` trips (no trip for the odd one out).
The copies define fresh tiles; every ``tile.alloc`` of copy c ``buffer = c`` and ``buffer_of = INDEX`` (the paired loop's index), which tells the memory planner to keep the two copies' tiles apart even where their lives do not overlap. With no buffer
shared, the sync pass sees no dependency between the copies, so loading one copy's tiles overlaps
computing and storing the other's; only a true dependency (an accumulator, a GM tensor written and
read back) still orders them.

A cube kernel's step (a body with L1 tiles) is buffered deeper: ``DEEP`` copies, each with its own L1
tiles (``buffer = c``) while its L0 tiles alternate between two sets (``buffer = c % 2``: L0A holds
two steps' A tiles, not more). The loads then run up to ``DEEP`` steps ahead of the cube, which is
what keeps MTE2, the pipe that bounds a matmul, busy across the end of an output tile: the first
step of the next tile waits for the fixpipe to empty L0C, and with two sets MTE2 stopped too.
Where the flags of that many sets need more event ids than the target has, the step keeps one set
fewer at a time, down to two. A mixed kernel's cube step keeps two sets: its loads run one step
ahead (ffn's second product over a row block loads its next K step while the cube multiplies this
one and the vector cores work out the next block's activation), and the vector cores, not MTE2,
bound such a kernel, so more sets would only add copies of the body (code, compile time, frame).

The pass runs unless the schedule turns it off (``pass_options: {double_buffer: false}``): doubling
and trying each kernel on a copy make compiling the library take about 1.6 times as long. A loop stays
single buffered when it provably runs at most once, and when the doubled tiles would not fit
on chip, would take the kernel's stack frame over the limit or need more event ids than the
target has: the pass plans memory (and synchronises) a copy of the kernel with the doubled loops
and keeps them only if that succeeds (``passes/trial.py``), so doubling never causes E0611, E0612
or E0613.
"""

from __future__ import annotations

from .. import sym
from ..ir import Func, Module, Op
from ..ir.schedule import schedule_of
from ..schedule import PASS_OPTION_DEFAULTS
from ..shapes import product
from . import stack, trial
from .context import Pass, PassContext
from .memplan import BUFFER, BUFFER_OF
from .unroll import _Cloner

# A cube step's L1 tiles get DEEP sets, its L0 tiles two (L0A holds two steps' A tiles): the
# loads run that many steps ahead of the cube, so MTE2 keeps loading the next output tile's k
# steps while the fixpipe stores this one and the cube waits for L0C.
DEEP = 5
DEEP_SPACES = frozenset({"l1"})

Ranges = dict[str, tuple[int, int | None]]  # known bounds of symbols, for simplifying and proving


def _nests(ops: list[Op], out: list[tuple[list[Op], list[Op]]]) -> None:
    """(enclosing list, chain) of every grid nest ending in an innermost grid loop, in program
    order: the chain runs from the outermost loop of the perfect part of the nest (each loop's body
    is just the next grid loop) to the innermost."""
    for op in ops:
        if op.name != "loop":
            continue
        if op.attrs.get("kind") != "grid":
            _nests(op.regions[0], out)
            continue
        chain = [op]
        while len(chain[-1].regions[0]) == 1 and chain[-1].regions[0][0].name == "loop" \
                and chain[-1].regions[0][0].attrs.get("kind") == "grid":
            chain.append(chain[-1].regions[0][0])
        inner = chain[-1].regions[0]
        if any(x.name == "loop" for x in inner):
            _nests(inner, out)
        else:
            out.append((ops, chain))


def _flattenable(chain: list[Op]) -> bool:
    """A perfect nest of loops by 1 whose bounds do not use the indices of the loops around them
    runs as one loop over the product of the trip counts (from any start: a block's share of a
    nest, passes/blocks.py, starts where the share does)."""
    indices = {c.attrs["index"] for c in chain}
    return all(c.attrs["step"] == 1 and not ((sym.free_symbols(c.attrs["hi"]) | sym.free_symbols(c.attrs["lo"]))
                                             & indices) for c in chain)


def flattened(chain: list[Op], ranges: Ranges) -> Op:
    """The perfect nest ``chain`` as one grid loop whose index counts the innermost fastest."""
    trips = [_trips(c, ranges) for c in chain]
    total = product(trips)
    flat = f"{chain[-1].attrs['index']}_f"
    env: dict[str, sym.Expr] = {}
    stride: sym.Expr = 1
    for k in range(len(chain) - 1, -1, -1):
        # a zero trip count makes the product zero and the body never run; max(.., 1) keeps the
        # index expressions free of a division by zero all the same
        q = sym.floordiv(sym.Sym(flat), stride)
        env[chain[k].attrs["index"]] = sym.add(chain[k].attrs["lo"], q if k == 0 else sym.mod(q, sym.max_(trips[k], 1)))
        stride = sym.mul(stride, sym.max_(trips[k], 1))
    cloner = _Cloner(env, "", {})
    body = [cloner.op(x) for x in chain[-1].regions[0]]
    keep = {k: v for k, v in chain[-1].attrs.items() if k not in ("index", "lo", "hi", "step")}
    return Op("loop", [], {"index": flat, "lo": 0, "hi": total, "step": 1, **keep}, [], [body], chain[0].span)


def worth_doubling(loop: Op, ranges: Ranges) -> bool:
    """A body that loads from GM and does something else (computes or stores) overlaps its next
    iteration's loads with that work once doubled; a loop that provably runs at most once has no
    next iteration, and doubling it would only add code."""
    body = loop.regions[0]
    names = {o.name for o in body}
    if "tile.load" not in names or not names - {"tile.load", "tile.alloc"}:
        return False
    return not sym.prove_le(_trips(loop, ranges), 1, ranges)


def _trips(loop: Op, ranges: Ranges) -> sym.Expr:
    a = loop.attrs
    if a["lo"] == 0 and a["step"] == 1:
        return sym.max_(a["hi"], 0, ranges)
    return sym.max_(sym.ceildiv(sym.sub(a["hi"], a["lo"]), a["step"]), 0, ranges)


def _copy(loop: Op, index: sym.Expr, suffix: str, buffer: int | None, paired: str) -> list[Op]:
    """The loop body with its index replaced by ``index`` and every value renamed; its tiles are
    buffer ``buffer`` of ``paired``, in L1, and ``buffer % 2`` elsewhere (module docstring)."""
    a = loop.attrs
    env: dict[str, sym.Expr] = {a["index"]: sym.add(a["lo"], sym.mul(index, a["step"]))}
    cloner = _Cloner(env, suffix, {})
    body = [cloner.op(x) for x in loop.regions[0]]
    if buffer is not None:
        for top in body:
            for o in top.walk():
                if o.name == "tile.alloc":
                    space = o.result.type.space
                    o.attrs = dict(o.attrs) | {BUFFER: buffer if space in DEEP_SPACES else buffer % 2,
                                               BUFFER_OF: paired}
    return body


def doubled(loop: Op, ranges: Ranges, depth: int = 2) -> Op:
    """``loop`` as a loop over groups of ``depth`` iterations: copy 0 runs iteration depth*u, copy
    c iteration depth*u + c inside a loop of at most one trip (none past the last iteration). That
    inner loop costs no second body for a short last group, and the sync pass gives a loop that
    provably runs at most once no dependency carried to a next trip."""
    a = loop.attrs
    idx = a["index"]
    trips = _trips(loop, ranges)
    u, r = f"{idx}_db", f"{idx}_dr"
    keep = {k: v for k, v in a.items() if k not in ("index", "lo", "hi", "step")}
    body = _copy(loop, sym.mul(sym.Sym(u), depth), "_b0", 0, u)
    for c in range(1, depth):
        at = sym.add(sym.mul(sym.Sym(u), depth), c)
        rc = r if c == 1 else f"{r}{c}"
        body.append(Op("loop", [], {"index": rc, "lo": 0, "hi": sym.min_(sym.sub(trips, at), 1, ranges), "step": 1,
                                    **keep}, [], [_copy(loop, sym.add(at, sym.Sym(rc)), f"_b{c}", c, u)],
                       loop.span))
    return Op("loop", [], {"index": u, "lo": 0, "hi": sym.ceildiv(trips, depth), "step": 1, **keep,
                           "double_buffered": depth}, [], [body], loop.span)


def _depths(func: Func, loop: Op, ranges: Ranges) -> tuple[int, ...]:
    """The buffer counts to try for ``loop``, most first: a cube kernel's step that loads into L1
    tries ``DEEP`` sets of L1 tiles (module docstring), but no more than a known trip count (ffn's
    second product has three k steps after its first), everything else two."""
    if func.kind == "cube" and any(o.name == "tile.alloc" and o.result.type.space in DEEP_SPACES
                                   for o in loop.walk()):
        trips = _trips(loop, ranges)
        most = min(DEEP, max(int(trips), 2)) if sym.is_const(trips) else DEEP
        return tuple(range(most, 1, -1))
    return (2,)


def double(func: Func, ctx: PassContext, strided: set[str]) -> None:
    """Buffer the grid nests of ``func`` that gain from it, each only if the kernel's tiles still
    fit with it (deepest first, then one set fewer at a time); then, while the kernel's flags need
    more event ids than the target has, make the last one a set shallower, down to two, then undo
    it. A perfect nest is flattened first, so its iterations pair up across rows too (a row of one
    tile still overlaps with the next row)."""
    if func.kind not in ("vector", "cube", "mixed"):
        return
    # tensor dims are never negative; the bound lets a loop that provably runs once stay as it is
    ranges: Ranges = {
        s: (0, None) for p in func.params if p.is_tensor for d in p.type.shape for s in sym.free_symbols(d)}
    found: list[tuple[list[Op], list[Op]]] = []
    _nests(func.body, found)
    done: list[tuple[list[Op], int, Op, Op, int]] = []
    for region, chain in found:
        if len(chain) > 1 and _flattenable(chain):
            old, loop = chain[0], flattened(chain, ranges)
        else:
            region = chain[-2].regions[0] if len(chain) > 1 else region
            old, loop = chain[-1], chain[-1]
        if not worth_doubling(loop, ranges):
            continue
        at = region.index(old)
        for depth in _depths(func, loop, ranges):
            region[at] = doubled(loop, ranges, depth)
            if trial.compiles(func, ctx, strided, synchronise=False):
                done.append((region, at, old, loop, depth))
                break
            region[at] = old
    while done and not trial.compiles(func, ctx, strided):
        region, at, old, loop, depth = done.pop()
        if depth > 2:
            region[at] = doubled(loop, ranges, depth - 1)
            done.append((region, at, old, loop, depth - 1))
        else:
            region[at] = old


# (printed input, the target's limits the trials check) -> output: the trials are the costly part
_DONE: dict[tuple[str, tuple], Module] = {}
_DONE_LIMIT = 256


def run(module: Module, ctx: PassContext) -> Module:
    if not schedule_of(module).pass_options.get("double_buffer", PASS_OPTION_DEFAULTS["double_buffer"]):
        return module.clone()  # passes never mutate their input
    # the same kernels are lowered again and again (resuming from a printed module, tuning, the
    # backends): the result depends only on the module and the target's limits, so it is kept
    key = (str(module), trial.limits(ctx.target))
    if key not in _DONE:
        fresh = module.clone()
        strided = stack.strided_params(fresh)
        for f in fresh.funcs:
            double(f, ctx, stack.every_tensor(f) if strided is None else strided.get(f.name, set()))
        if len(_DONE) >= _DONE_LIMIT:
            _DONE.pop(next(iter(_DONE)))
        _DONE[key] = fresh
    return _DONE[key].clone()


PASS = Pass("dbuf", "block", "block", run, frozenset({"partitioned"}), frozenset({"double-buffered"}))
