"""Skew (Block IR -> Block IR): the cube works on the next iteration of a parallel loop while the
vector cores work on this one.

Requires: a ``level block`` module whose block loops are shared out (``passes/blocks.py``), not yet
split between vector cores, buffered, placed or synchronised.
Produces: in each ``mixed`` kernel, every loop marked ``parallel = 1`` whose body is, in order,

- ``A``: ops with cube work and no vector work (a product the vector cores read),
- ``B``: ops with vector work (the vector cores' part of the iteration),
- ``C``: ops with cube work and no vector work (a product of what ``B`` wrote),

runs one more trip, each iteration ``i`` doing ``A(i)``, then ``C(i - 1)``, then ``B(i)``: ``A``
and ``B`` inside a loop of ``min(max(hi - i, 0), 1)`` trips, ``C`` inside one of
``min(max(i - lo, 0), 1)`` trips with ``i - 1`` for ``i``. The loop loses ``parallel`` and gains
``skewed = 1``. Views the body defines for more than one part are defined again in each.

Each workspace the iterations reuse (a tensor parameter written in the loop, which every launch
passes a workspace allocated for it alone, and which the kernel touches nowhere else but through
views of it before the loop: the buffers of one row block's intermediates) gets a twin: a
parameter of its own, a second workspace the control program allocates beside the first, and
views of it like those of the first. The loop then runs its iterations in pairs: the even one's
``A`` and ``B`` on the first workspaces and its ``C`` (of the odd iteration before) on the twins,
the odd one the other way round, each part in a loop of 0 or 1 trips of its own.

Why. Run as written, a block's cube core computes ``A(i)``, waits while its vector cores compute
``B(i)``, computes ``C(i)``, and the vector cores wait for ``A(i + 1)``: every iteration costs
``A + B + C``. Skewed, the cube computes ``C(i - 1)`` and ``A(i + 1)`` while the vector cores
compute ``B(i)``: an iteration costs about ``max(A + C, B)`` (FFN's activation between its two
products, a loop over row blocks). ``C(i - 1)`` comes before ``B(i)`` in the program, so the flags
the sync pass derives from program order make ``C(i - 1)`` wait for ``B(i - 1)`` (the iteration
before), not for ``B(i)``. The sync pass orders whole GM buffers: on one workspace, ``B(i)``'s
stores would wait for ``C(i - 1)``'s loads and ``A(i + 1)``'s for ``B(i)``'s, which put the three
back in a row; on alternating twins they touch different buffers. Each part of the odd iteration
has a gate of its own: a gate around the whole odd iteration would make its ``A`` wait for what
its ``C`` waits for, the sync pass placing a wait before the op that holds the consumer.

Why the order may change. The iterations of a ``parallel`` loop are independent
(``passes/parallel.py``): none reads what another writes, and their writes do not meet (a
workspace of the iteration's own, reused by every iteration, is written before it is read in
each, and the sync pass orders the accesses of iterations that share one). Each iteration still
runs ``A``, ``B``, ``C`` in that order: ``A(i)`` and ``B(i)`` in iteration ``i``, ``C(i)`` in
iteration ``i + 1``, on the same copy of each workspace. On the simulator and the cpu backend
the program runs in this order and computes what the original did.

Carried loops. A loop of the user's that carries state across its iterations (attention's KV
loop: its running max, sum and output), not ``parallel``, is pipelined by stages instead
(:func:`stages_of`): stage 2 is the first op whose cube work reads what the vector cores wrote in
the iteration (the product of the probabilities with v) and every later op that touches what
stage 2 writes or writes what it reads (the rescaled output); stage 1 is the rest (the scores,
the softmax, the probabilities handed to the cube). Iteration ``i`` runs stage 1 of ``i`` and
then stage 2 of ``i - 1``: the cube multiplies the probabilities of the step before while the
vector cores work out this step's softmax. Each stage keeps its own order of steps, so state
that only one stage touches (the max and sum in stage 1, the output in stage 2) is carried as
before; the loop is not pipelined where stage 2 writes anything stage 1 touches (the next step
would run before it), where stage 2 reads what stage 1 writes later in the body (what the step
before left), or where stage 1 hands stage 2 a tile allocated outside the body. What stage 1
hands stage 2 goes in pairs of buffers, the even steps on one and the odd steps on the other:
each GM workspace the iteration fills anew (allocated inside the loop, ``alloc {within}``) gets
a twin, without which the loop is not pipelined, and each tile (the rescale ``alpha``) is
allocated twice before the loop. Bounds guards in the body (views at a sequence's offset read
from data, varlen attention's) stay in stage 1, as they touch no tile: every guard of a step runs
before that step's stage 2 and the steps' guards run in step order, so the call stops at the
guard a run in order stops at, and no access runs before the guard that checks it. Element reads
(``read``) stay in stage 1 too, views that name them placed after them; stage 2 reads again, for
its own step, each one whose value it uses (a block of a table where the product with v views a
paged cache itself), which must not be of a tensor the kernel writes (:func:`_reread`).

Not skewed: loops whose body does not split so, or where a part uses a value another part
defines (other than a view or a handed tile), a parallel loop that binds a scalar (``read``) in
its body or guards or prints both in its part ``A`` and in its part ``C`` (which runs after the
next iteration's ``A``), a loop carrying state that prints or whose stage 2 uses a value read from a tensor the
kernel writes, and kernels that would no longer compile within the target's limits
or whose stack frame would pass the target's warning threshold from below (``passes/trial.py``).
``pass_options: {skew: false}`` turns the pass off.
"""

from __future__ import annotations

import itertools

from .. import sym
from ..ir import Func, Module, Op, Param, TileType, Value
from ..ir.gm import walk_ops
from ..ir.queues import core_of, cores_of
from ..ir.schedule import schedule_of
from . import aivsplit, stack, trial
from .context import Pass, PassContext
from .merge import reads_writes, substitute_index
from .ordered import ordered_params
from .persistent import bound_within
from .pipes import param_aliases
from .remat import view_bases
from .unroll import _Cloner, _subst_attr

Twins = dict[str, tuple[Value, Value]]  # name of a GM value the body uses -> (it, its twin)


def _defined(ops: list[Op]) -> set[int]:
    return {id(r) for op in ops for o in op.walk() for r in o.results}


def _used(ops: list[Op]) -> list[Value]:
    return [v for op in ops for o in op.walk() for v in o.operands]


def parts_of(loop: Op, counter: itertools.count) -> list[list[Op]] | None:
    """The body of ``loop`` as its parts A, B, C (module docstring), each with the views it uses
    of the body's defined again in it (the body's ops move into the parts); None, and the body
    untouched, where it does not split so."""
    a = loop.attrs
    if a.get("parallel") != 1 or a["step"] != 1 or a.get("kind") is not None:
        return None
    body = loop.regions[0]
    if any(o.name == "read" for op in body for o in op.walk()):
        return None
    cores = [cores_of([op]) for op in body]
    vec = [k for k, c in enumerate(cores) if "vec" in c]
    if not vec:
        return None
    if not any("cube" in c for c in cores[:vec[0]]) or not any("cube" in c for c in cores[vec[-1] + 1:]):
        return None
    parts = [body[:vec[0]], body[vec[0]:vec[-1] + 1], body[vec[-1] + 1:]]
    if all(any(o.name in ("guard", "print") for op in part for o in op.walk()) for part in (parts[0], parts[2])):
        # C(i - 1) runs after A(i): a failing guard of C would be reported after one of the next
        # iteration's A, not first in loop order, and prints would come out of order
        return None
    views = {id(op.results[0]): (k, op) for k, op in enumerate(body) if op.name == "view" and len(op.results) == 1}
    inside = _defined(body)
    plan = []
    for part in parts:
        ops = [op for op in part if not (op.name == "view" and id(op.results[0]) in views)]
        needed = _views_needed(ops, _defined(ops), inside, views)
        if needed is None:
            return None
        plan.append((ops, needed))
    return [_with_views(ops, needed, counter) for ops, needed in plan]


def _locations(op: Op, roots: dict[str, str]) -> dict[str | None, tuple[set[str], set[str]]]:
    """What ``op`` reads and writes, anywhere inside it, per kind of core of the ops doing it (and
    under None, by all of them): tiles by name, GM tensors by the tensor they view (``gm:`` and
    its name)."""
    out: dict[str | None, tuple[set[str], set[str]]] = {None: (set(), set())}
    for o in op.walk():
        if not o.name.startswith("tile.") or o.name == "tile.alloc":
            continue
        core = out.setdefault(core_of(o), (set(), set()))
        for k, values in enumerate(reads_writes(o)):
            for v in values:
                key = v.name if isinstance(v.type, TileType) else "gm:" + roots.get(v.name, v.name)
                out[None][k].add(key)
                core[k].add(key)
    return out


Stages = tuple[list[tuple[list[Op], list[Op]]], list[Op], list[str]]


def stages_of(loop: Op, roots: dict[str, str]) -> Stages | None:
    """The body of ``loop``, a loop of the user's that carries state (not ``parallel``), as its two
    stages (module docstring, carried loops), each as its ops and the views of the body it uses;
    the allocations of the tiles stage 1 hands to stage 2 (the caller allocates each twice,
    before the loop); and the GM tensors stage 1 hands to stage 2, each of which needs a twin.
    None where the body does not split so. The body is left as it is."""
    a = loop.attrs
    if a.get("parallel") == 1 or a["step"] != 1 or a.get("kind") is not None:
        return None
    body = loop.regions[0]
    if any(o.name == "print" for op in body for o in op.walk()):
        return None
    work = [k for k, op in enumerate(body) if op.name not in ("view", "tile.alloc")]
    rw: dict[int, tuple[set[str], set[str]]] = {}
    stage: dict[int, int] = {}
    vec_written: set[str] = set()
    s2_reads: set[str] = set()
    s2_writes: set[str] = set()
    for k in work:
        by_core = _locations(body[k], roots)
        reads, writes = rw[k] = by_core[None]
        # the cube's work reading what the vector cores made this iteration starts stage 2 (a
        # nest of both kinds, the scores' product and the row maximum after it, by its cube ops)
        cube_reads = by_core.get("cube", (set(), set()))[0]
        late = bool((reads | writes) & s2_writes or writes & s2_reads or cube_reads & vec_written)
        stage[k] = 2 if late else 1
        vec_written |= by_core.get("vec", (set(), set()))[1]
        if late:
            s2_reads |= reads
            s2_writes |= writes
    first = [k for k in work if stage[k] == 1]
    second = [k for k in work if stage[k] == 2]
    if not any("cube" in cores_of([body[k]]) for k in second) or not any("vec" in cores_of([body[k]]) for k in first):
        return None
    s1_touched = set().union(*(rw[k][0] | rw[k][1] for k in first))
    if s2_writes & s1_touched:
        return None  # stage 2 hands something back to stage 1: the iteration after would run first
    handed = set().union(*(rw[k][1] for k in first)) & s2_reads
    for loc in handed:
        # stage 2 reads what stage 1 wrote in the same iteration, not what it left the one before
        if max(k for k in first if loc in rw[k][1]) > min(k for k in second if loc in rw[k][0]):
            return None
    allocs = {op.results[0].name: k for k, op in enumerate(body) if op.name == "tile.alloc"}
    bound = bound_within(loop)
    hoisted: list[Op] = []
    for loc in sorted(x for x in handed if not x.startswith("gm:")):
        k = allocs.get(loc)
        if k is None or any(sym.free_symbols(d) & bound for d in body[k].results[0].type.valid):
            return None  # a tile from outside the loop (carried), or one whose extent the loop moves
        hoisted.append(body[k])
    for name, k in allocs.items():
        users = {stage[j] for j in work if name in rw[j][0] | rw[j][1]}
        if body[k] not in hoisted:
            if users == {1, 2}:
                return None
            stage[k] = max(users, default=1)
    for k, op in enumerate(body):
        if op.name == "view":
            stage[k] = 0
    gone = {id(op) for op in hoisted}
    inside = _defined([op for op in body if id(op) not in gone])
    views = {id(op.results[0]): (k, op) for k, op in enumerate(body) if op.name == "view" and len(op.results) == 1}
    parts = []
    for n in (1, 2):
        ops = [op for k, op in enumerate(body) if stage.get(k) == n and id(op) not in gone]
        needed = _views_needed(ops, _defined(ops) | {id(op.results[0]) for op in hoisted}, inside, views)
        if needed is None:
            return None
        parts.append((ops, needed))
    return parts, hoisted, sorted(x[3:] for x in handed if x.startswith("gm:"))


def skew_carried(loop: Op, parts: list[list[Op]], hoisted: list[Op], counter: itertools.count,
                 func: Func, twins: Twins | None = None) -> list[Op]:
    """``loop`` (in ``func``) run as stage 1 of iteration ``i`` then stage 2 of iteration ``i - 1``
    (module docstring, carried loops), preceded by the allocations of the tiles stage 1 hands to
    stage 2, two of each where iterations go in pairs."""
    a = loop.attrs
    index, lo, hi = sym.Sym(a["index"]), a["lo"], a["hi"]
    substitute_index(parts[1], a["index"], sym.sub(index, 1))
    span = loop.span
    now = _gate(parts[0], sym.min_(sym.max_(sym.sub(hi, index), 0), 1), counter, span)
    before = _gate(parts[1], sym.min_(sym.max_(sym.sub(index, lo), 0), 1), counter, span)
    keep = {k: v for k, v in a.items() if k not in ("parallel", "index", "lo", "hi", "step")} | {"skewed": 1}
    if not twins and not hoisted:
        return [Op("loop", [], {"index": a["index"], "lo": lo, "hi": sym.add(hi, 1), "step": 1, **keep}, [],
                    [[now, before]], span)]
    pre: list[Op] = []
    even_tiles: dict[str, Value] = {}
    odd_tiles: dict[str, Value] = {}
    for alloc in hoisted:
        t = alloc.results[0]
        for into, tag in ((even_tiles, "e"), (odd_tiles, "o")):
            into[t.name] = Value(_fresh(func, f"{t.name}_{tag}"), t.type)
            pre.append(Op("tile.alloc", [], dict(alloc.attrs), [into[t.name]], [], alloc.span))
    swap = {name: twin for name, (_, twin) in (twins or {}).items()} | \
        {twin.name: v for v, twin in (twins or {}).values()}
    u = f"{a['index']}_sk"
    even = sym.add(lo, sym.mul(sym.Sym(u), 2))
    odd = sym.add(even, 1)
    # the even iteration's stage 1 on the first workspaces and tiles, then stage 2 of the odd one
    # before on the twins; the odd iteration's stage 1 on the twins, then stage 2 of the even one
    # (when the odd one is not one past the last) on the first ones
    last = _gate([_clone(before, a["index"], odd, "_o", dict(even_tiles))],
                 sym.min_(sym.max_(sym.sub(sym.add(hi, 1), odd), 0), 1), counter, span)
    body = [_clone(now, a["index"], even, "_e", dict(even_tiles)),
            _clone(before, a["index"], even, "_e", swap | odd_tiles),
            _clone(now, a["index"], odd, "_o", swap | odd_tiles), last]
    trips = sym.ceildiv(sym.add(sym.sub(hi, lo), 1), 2)
    return [*pre, Op("loop", [], {"index": u, "lo": 0, "hi": trips, "step": 1, **keep}, [], [body], span)]


def skew_loop(loop: Op, parts: list[list[Op]], counter: itertools.count, twins: Twins | None = None) -> Op:
    """``loop`` skewed (module docstring) from its :func:`parts_of`. ``twins``: the GM values of
    workspaces the iterations reuse, each with its twin in a second workspace; given, iterations
    go in pairs, the second of a pair on the twins."""
    a = loop.attrs
    index, lo, hi = sym.Sym(a["index"]), a["lo"], a["hi"]
    substitute_index(parts[2], a["index"], sym.sub(index, 1))
    now = sym.min_(sym.max_(sym.sub(hi, index), 0), 1)
    before = sym.min_(sym.max_(sym.sub(index, lo), 0), 1)
    span = loop.span
    gates = [_gate(parts[0], now, counter, span), _gate(parts[2], before, counter, span),
             _gate(parts[1], now, counter, span)]
    keep = {k: v for k, v in a.items() if k not in ("parallel", "index", "lo", "hi", "step")} | {"skewed": 1}
    if not twins:
        return Op("loop", [], {"index": a["index"], "lo": lo, "hi": sym.add(hi, 1), "step": 1, **keep}, [],
                  [gates], span)
    # the even iteration's A and B work on the first workspaces, and its C (the odd iteration's
    # before) on the twins; the odd iteration the other way round
    swap = {name: twin for name, (_, twin) in twins.items()} | {twin.name: v for v, twin in twins.values()}
    u = f"{a['index']}_sk"
    even = sym.add(lo, sym.mul(sym.Sym(u), 2))
    odd = sym.add(even, 1)
    # the odd iteration may be one past the last (hi): its A and B gates say so already, its C
    # gets a gate of its own (a gate around the whole odd iteration would make its A wait for
    # what its C waits for, the sync pass placing a wait before the op holding the consumer)
    last = _gate([_clone(gates[1], a["index"], odd, "_o", {})], sym.min_(sym.max_(sym.sub(sym.add(hi, 1), odd), 0), 1),
                 counter, span)
    body = [_clone(gates[0], a["index"], even, "_e", {}), _clone(gates[1], a["index"], even, "_e", swap),
            _clone(gates[2], a["index"], even, "_e", {}),
            _clone(gates[0], a["index"], odd, "_o", swap), last, _clone(gates[2], a["index"], odd, "_o", swap)]
    trips = sym.ceildiv(sym.add(sym.sub(hi, lo), 1), 2)
    return Op("loop", [], {"index": u, "lo": 0, "hi": trips, "step": 1, **keep}, [], [body], span)


def _clone(op: Op, index: str, at: sym.Expr, suffix: str, rename: dict[str, Value]) -> Op:
    return _Cloner({index: at}, suffix, dict(rename)).op(op)


def _views_needed(ops: list[Op], own: set[int], inside: set[int],
                  views: dict[int, tuple[int, Op]]) -> list[Op] | None:
    """The body's views ``ops`` use (through other such views), in body order; None when ``ops``
    use a value another part defines that is not a view."""
    need: dict[int, tuple[int, Op]] = {}
    work = [v for v in _used(ops) if id(v) in inside and id(v) not in own]
    while work:
        v = work.pop()
        if id(v) in need:
            continue
        if id(v) not in views:
            return None
        need[id(v)] = views[id(v)]
        work += [x for x in views[id(v)][1].operands if id(x) in inside]
    return [op for _, op in sorted(need.values(), key=lambda kv: kv[0])]


def _with_views(ops: list[Op], views: list[Op], counter: itertools.count) -> list[Op]:
    """``ops`` with ``views`` (in body order) defined again under fresh names, each just before the
    first op that uses it (after the element reads its offsets name: paged attention's blocks),
    whose uses, and those of the copies, name the copies."""
    copies: dict[int, Value] = {}
    made: list[Op] = []
    for view in views:
        r = view.results[0]
        copy = Value(f"{r.name}_sk{next(counter)}", r.type)
        copies[id(r)] = copy
        made.append(Op("view", [copies.get(id(x), x) for x in view.operands], dict(view.attrs), [copy], [], view.span))
    for op in ops:
        for o in op.walk():
            o.operands = [copies.get(id(x), x) for x in o.operands]
    out: list[Op] = []
    placed: set[int] = set()
    for op in ops:
        used = {id(v) for o in op.walk() for v in o.operands}
        # a view and the views it is made of, each once, in body order
        for k in range(len(made) - 1, -1, -1):
            if id(made[k].results[0]) in used:
                used |= {id(v) for v in made[k].operands}
        out += [v for v in made if id(v.results[0]) in used and id(v) not in placed]
        placed |= {id(v) for v in made if id(v.results[0]) in used}
        out.append(op)
    return out + [v for v in made if id(v) not in placed]


def _reread(body: list[Op], stage2: list[Op], func: Func) -> list[Op] | None:
    """The element reads of ``body`` (a loop carrying state) whose values ``stage2`` uses, read again
    for it under fresh names (``stage2`` renamed in place): stage 2 of a step runs after stage 1
    of the next, which reads them anew (paged attention's block table). None when one reads a
    tensor the kernel writes (read later, it could hold another value)."""
    reads = {op.attrs["sym"]: op for op in body if op.name == "read"}
    if not reads:
        return []
    used: set[str] = set()
    for op in stage2:
        for o in op.walk():
            used |= _attr_symbols(o)
    need: list[str] = []
    work = sorted(used & set(reads))
    while work:
        name = work.pop()
        if name in need:
            continue
        need.append(name)
        work += sorted(_attr_symbols(reads[name]) & set(reads))
    if not need:
        return []
    written = {p.name for p in func.params if p.is_tensor and p.mode != "in"}
    roots = view_bases(o for o in func.walk() if o.name == "view")
    order = [s for s in reads if s in need]  # body order: a read's position may name an earlier one
    out: list[Op] = []
    env: dict[str, sym.Expr] = {}
    taken = {o.attrs["sym"] for o in func.walk() if o.name == "read"} | {o.attrs["index"] for o in func.walk() if o.name == "loop"}
    for name in order:
        read = reads[name]
        if roots.get(read.operands[0].name, read.operands[0].name) in written:
            return None
        fresh, k = f"{name}_s2", 1
        while fresh in taken:
            fresh, k = f"{name}_s2_{k}", k + 1
        taken.add(fresh)
        attrs = {key: (v if key == "sym" else _subst_attr(v, env)) for key, v in read.attrs.items()} | {"sym": fresh}
        out.append(Op("read", list(read.operands), attrs, [], [], read.span))
        env[name] = sym.Sym(fresh)
    for old, new in env.items():
        substitute_index(stage2, old, new)
    return out


def _attr_symbols(o: Op) -> set[str]:
    """The symbols ``o``'s attributes and result types name."""
    found: set[str] = set()

    def scan(v) -> None:
        if isinstance(v, str):
            return
        if isinstance(v, (tuple, list)):
            for x in v:
                scan(x)
        elif isinstance(v, dict):
            for x in v.values():
                scan(x)
        elif not isinstance(v, (bool, int, float)) and v is not None:
            found.update(sym.free_symbols(v))
    for k, v in o.attrs.items():
        if k not in ("name", "kind", "sym"):
            scan(v)
    for r in o.results:
        t = r.type
        for dims in (getattr(t, "shape", None), getattr(t, "valid", None)):
            scan(tuple(dims) if dims is not None else None)
    return found


def _gate(ops: list[Op], trips: sym.Expr, counter: itertools.count, span) -> Op:
    name = f"_sk{next(counter)}"
    return Op("loop", [], {"index": name, "lo": 0, "hi": trips, "step": 1, "name": name, "kind": "grid"},
              [], [ops], span)


class _Kernel:
    """One mixed kernel of a module, with the launches of it, whose skewed loops may get twin
    workspaces."""

    def __init__(self, module: Module, func: Func):
        self.func = func
        self.launches = [(c, op) for c in module.funcs if c.kind == "control"
                         for op in walk_ops(c.body) if op.name == "launch" and op.attrs["kernel"] == func.name]
        self.counter = itertools.count()

    def region(self, ops: list[Op]) -> list[Op]:
        out = []
        for op in ops:
            if op.name == "loop":
                parts = parts_of(op, self.counter)
                if parts is not None:
                    twins, views = self.twins(op, parts)
                    out += [*views, skew_loop(op, parts, self.counter, twins)]
                    continue
                staged = stages_of(op, self.roots())
                # each GM tensor handed from stage 1 to stage 2 needs a twin: on one buffer, the odd
                # iteration's stage 1 would overwrite what stage 2 of the even one has yet to read
                if staged is not None and all(self._twinnable(op, name) for name in staged[2]):
                    plan, hoisted, _ = staged
                    stages = [_with_views(ops, needed, self.counter) for ops, needed in plan]
                    again = _reread(op.regions[0], stages[1], self.func)
                    if again is None:
                        op.regions = [self.region(r) for r in op.regions]
                        out.append(op)
                        continue
                    stages[1] = again + stages[1]
                    twins, views = self.twins(op, stages, fresh=True)
                    out += [*views, *skew_carried(op, stages, hoisted, self.counter, self.func, twins)]
                    continue
            op.regions = [self.region(r) for r in op.regions]
            out.append(op)
        return out

    def roots(self) -> dict[str, str]:
        return view_bases(o for o in self.func.walk() if o.name == "view")

    def twins(self, loop: Op, parts: list[list[Op]], fresh: bool = False) -> tuple[Twins, list[Op]]:
        """Twins (in a second workspace, which this adds) of the GM values ``parts`` use of each
        workspace the iterations reuse: a tensor parameter that every launch passes a workspace of
        its own (allocated in the control program for that launch alone), written in the loop
        and touched elsewhere in the kernel only by the views of it before the loop; ``fresh``
        (a loop carrying state): also allocated inside the loop (``alloc {within}``), a workspace
        each iteration fills anew, not one that carries state across iterations. Returns them
        and the views defining the twins of those views, for the caller to put before the loop."""
        f = self.func
        tensors = [p for p in f.params if p.is_tensor]
        top_views = {op.results[0].name: op for op in f.body if op.name == "view"}
        roots = view_bases(top_views.values())  # view -> the tensor it views
        written = {roots.get(o.operands[0].name, o.operands[0].name) for part in parts for o in walk_ops(part)
                   if o.name == "tile.store"}
        twins: Twins = {}
        views: list[Op] = []
        for k, p in enumerate(tensors):
            if p.name not in written or not self._twin_ok(loop, k, roots, fresh):
                continue
            twin = self._add_twin(p, k)
            twins[p.name] = (p.value, twin)
            for name, view in top_views.items():
                if roots.get(name) == p.name:
                    copy = Value(_fresh(f, f"{name}_twin"), view.results[0].type)
                    views.append(Op("view", [twins[view.operands[0].name][1]], dict(view.attrs), [copy], [],
                                    view.span))
                    twins[name] = (view.results[0], copy)
        return twins, views

    def _own_workspace(self, k: int) -> bool:
        if not self.launches:
            return False
        for control, launch in self.launches:
            v = launch.operands[k]
            allocs = [o for o in walk_ops(control.body) if o.name == "alloc" and o.results[0] is v]
            uses = [o for o in walk_ops(control.body) if any(x is v for x in o.operands)]
            if len(allocs) != 1 or uses != [launch] or sum(x is v for x in launch.operands) != 1:
                return False
        return True

    def _twinnable(self, loop: Op, name: str) -> bool:
        """Whether :meth:`twins` (``fresh``) gives tensor parameter ``name``, written in ``loop``,
        a twin."""
        tensors = [p.name for p in self.func.params if p.is_tensor]
        roots = view_bases(op for op in self.func.body if op.name == "view")
        return name in tensors and self._twin_ok(loop, tensors.index(name), roots, True)

    def _twin_ok(self, loop: Op, k: int, roots: dict[str, str], fresh: bool) -> bool:
        """The conditions of :meth:`twins` on tensor parameter ``k`` besides its being written."""
        name = [p.name for p in self.func.params if p.is_tensor][k]
        return self._own_workspace(k) and self._only_in(loop, name, roots) and (not fresh or self._fresh_in(loop, k))

    def _fresh_in(self, loop: Op, k: int) -> bool:
        """Whether every launch's workspace for tensor parameter ``k`` was allocated inside
        ``loop`` (``within`` its index)."""
        for control, launch in self.launches:
            v = launch.operands[k]
            allocs = [o for o in walk_ops(control.body) if o.name == "alloc" and o.results[0] is v]
            if not allocs or loop.attrs["index"] not in allocs[0].attrs.get("within", ()):
                return False
        return True

    def _only_in(self, loop: Op, name: str, roots: dict[str, str]) -> bool:
        """Whether the kernel touches ``name`` only in ``loop`` (at any depth: a KV loop inside
        its row block loop) and in the views of it at the top."""
        mine = {name} | {v for v, r in roots.items() if r == name}
        inside = {id(o) for o in loop.walk()}
        return not any(x.name in mine for op in self.func.body if op.name != "view"
                       for o in op.walk() if id(o) not in inside for x in o.operands)

    def _add_twin(self, p: Param, k: int) -> Value:
        f = self.func
        name = _fresh(f, f"{p.name}_twin")
        value = Value(name, p.type)
        last = max(i for i, q in enumerate(f.params) if q.is_tensor)
        f.params.insert(last + 1, Param(name, p.type, p.dtype, p.mode, value))
        for control, launch in self.launches:
            v = launch.operands[k]
            region, at = _place(control.body, v)
            alloc = region[at]
            twin = Value(_fresh(control, f"{v.name}_twin"), v.type)
            region.insert(at + 1, Op("alloc", [], dict(alloc.attrs), [twin], [], alloc.span))
            launch.operands.append(twin)
        return value


def _place(ops: list[Op], v: Value) -> tuple[list[Op], int]:
    for i, op in enumerate(ops):
        if op.name == "alloc" and op.results[0] is v:
            return ops, i
        for r in op.regions:
            found = _place(r, v)
            if found is not None:
                return found
    return None


def _fresh(f: Func, stem: str) -> str:
    taken = {p.name for p in f.params} | {v.name for o in f.walk() for v in (*o.operands, *o.results)}
    name, k = stem, 1
    while name in taken:
        name, k = f"{stem}_{k}", k + 1
    return name


def run(module: Module, ctx: PassContext) -> Module:
    fresh = module.clone()
    if not schedule_of(module).pass_options.get("skew", 1):
        return fresh
    for name in [f.name for f in fresh.funcs if f.kind == "mixed"]:
        # skewed on a copy of the module (the twins change the control programs too), kept only
        # where the kernel still fits the target (passes/trial.py): a twin is one more parameter
        # on the stack, a gate one more loop
        tried = fresh.clone()
        f = next(g for g in tried.funcs if g.name == name)
        original = next(g for g in fresh.funcs if g.name == name)
        before = str(f)
        f.body = _Kernel(tried, f).region(f.body)
        if str(f) == before:
            continue
        strided = stack.strided_params(tried)
        params = stack.every_tensor(f) if strided is None else strided.get(name, set())
        if trial.compiles(f, ctx, params) and trial.keeps_frame(original, f, ctx.target, params) and \
                not _costs_the_split(fresh, original, tried, f, ctx, params):
            fresh = tried
    return fresh


def _costs_the_split(module: Module, original: Func, tried: Module, skewed: Func, ctx: PassContext,
                     strided: set[str] | frozenset[str]) -> bool:
    """Whether skewing would cost the kernel the split of its vector work between two cores
    (``passes/aivsplit.py``, a later pass): the split fits the frame without the skew and not with
    it. Halving the vector time is worth more than overlapping it with the cube (varlen attention:
    262 us split, 359 us skewed alone)."""
    def splits(m: Module, f: Func) -> bool:
        split = aivsplit.split_kernel(f, ctx, strided, param_aliases(m).get(f.name, {}), ordered_params(m, f))
        return split is not f
    return splits(module, original) and not splits(tried, skewed)


PASS = Pass("skew", "block", "block", run, frozenset({"blocked"}), frozenset({"skewed"}))

__all__ = ["PASS", "parts_of", "run", "skew_loop"]
