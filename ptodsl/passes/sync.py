"""Sync (Block IR -> Block IR): order every dependency between pipes of a compute kernel.

Requires: a memory-planned ``level block`` module (tiles carry offsets, so buffers that share
memory are seen as the same buffer).
Produces: ``sync.set``/``sync.wait`` pairs (``{src, dst, event}``) for each read-after-write,
write-after-read and write-after-write dependency between different pipes (MTE2, V, MTE3, MTE1, M,
FIX), and ``sync.barrier {pipe = "V"}`` between dependent vector ops. A pair is placed in the
innermost region holding both ops: the set after the producer's enclosing op, the wait before the
consumer's, so a wait never runs more often than its set. A dependency carried from one iteration
of a grid loop to the next (the next load overwriting a tile the previous iteration still reads)
gets a wait in the body right before the consumer's enclosing op and a set right after the
producer's, primed by a set before the loop and drained by a wait after it; a loop that provably
runs at most once carries nothing (its dependencies are carried by the loop around it). Event ids are coloured per pipe pair, at most ``max_event_ids``.

In a ``mixed`` kernel the pipes are named by core (``cube.FIX``, ``vec.MTE2``: ``ir/queues.py``),
and a pair between the cores is a cross-core flag (the set on the producer's core, the wait on the
consumer's; ids from one space of ``cross_core_flags``), each hand-over inside a loop answered by a
credit flag back (:meth:`_Deps.credits`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..ir import Func, Module, Op
from . import syncheck
from .context import Pass, PassContext, on_compute_kernels
from .pipes import (
    Range,
    at_most_once,
    covers,
    gm_buffers,
    is_cross,
    overlap,
    param_aliases,
    placement_of,
    reads_writes,
    split_unit,
    unit_of,
)


class _Deps:
    """Abstract execution of a kernel body that collects its dependencies."""

    def __init__(self, func: Func, same: Mapping[str, str] | None = None):
        self.mixed = func.kind == "mixed"
        self.placement = placement_of(func.body) | gm_buffers(func, same)
        self.pos: dict[int, int] = {}
        self.parent: dict[int, tuple[Op | None, list[Op]]] = {}
        self.at: dict[int, int] = {}  # index of an op in its region (list.index would make placing quadratic)
        self.direct: dict[tuple[int, int], tuple[Op, Op]] = {}
        self.carried: dict[tuple[int, int, int], tuple[Op, Op, Op]] = {}
        self.barriers: dict[tuple[int, int], tuple[Op, Op]] = {}
        self.carried_barriers: dict[int, Op] = {}
        self._once: dict[int, bool] = {}  # loop -> whether it provably runs at most once
        self._units: dict[int, str | None] = {}
        counter = [0]

        self.end: dict[int, int] = {}

        def index(ops: list[Op], parent: Op | None) -> None:
            for i, op in enumerate(ops):
                counter[0] += 1
                self.pos[id(op)] = counter[0]
                self.at[id(op)] = i
                self.parent[id(op)] = (parent, ops)
                for r in op.regions:
                    index(r, op)
                self.end[id(op)] = counter[0]

        index(func.body, None)
        # per memory space (only ranges of one space overlap), in the order they were added; the
        # readers by range too, so that the many readers of one tile are skipped together where a
        # write does not touch it (scanning each made a long kernel quadratic)
        self.writers: dict[str, list[tuple[Range, Op, str, int]]] = {}
        self.readers: dict[str, dict[Range, list[tuple[Range, Op, str, int]]]] = {}
        self.added = 0
        self.region(func.body)

    def ancestors(self, op: Op) -> list[Op]:
        chain = []
        cur: Op | None = op
        while cur is not None:
            chain.append(cur)
            cur = self.parent[id(cur)][0]
        return chain

    def region(self, ops: list[Op], again: bool = False) -> None:
        """Walk ``ops``; ``again``: a loop around them is on its second walk.

        A loop's second walk exposes the dependencies it carries. Inside a loop's second walk, a
        loop needs one walk only: its own second walk would find the same pairs of ops as during
        the first walk of the loop around it (the ops between the two are the same, so what they
        cover is too), and no pair with an op before it that its first walk did not (each op's
        earlier writers and readers then are a subset of those its first walk saw). Walking every
        loop twice at every depth made a nest of depth d 2^d walks of its body."""
        for op in ops:
            if op.name == "loop":
                self.region(op.regions[0], again)
                if not again and not self.once(op):
                    self.region(op.regions[0], True)  # a second iteration exposes carried dependencies
                continue
            pipe = self.unit(op)
            if pipe is None:
                continue
            reads, writes = reads_writes(op, self.placement)
            touched = reads + writes
            found = sorted({x[3]: x for sp in {r[0] for r in touched} for x in self.writers.get(sp, ())
                            if any(overlap(x[0], r) for r in touched)}.values(), key=lambda x: x[3])
            found += sorted({x[3]: x for sp in {w[0] for w in writes} for rng, xs in self.readers.get(sp, {}).items()
                             if any(overlap(rng, w) for w in writes) for x in xs}.values(), key=lambda x: x[3])
            for _, a, p, _ in found:
                self.record(a, p, op, pipe)  # a may be op itself, one iteration earlier
            for w in writes:
                self.writers[w[0]] = [x for x in self.writers.get(w[0], ()) if not covers(w, x[0])]
                by_range = self.readers.get(w[0], {})
                for rng in [rng for rng in by_range if covers(w, rng)]:
                    del by_range[rng]
                self.writers[w[0]].append((w, op, pipe, self.added))
                self.added += 1
            for r in reads:
                self.readers.setdefault(r[0], {}).setdefault(r, []).append((r, op, pipe, self.added))
                self.added += 1

    def record(self, a: Op, pa: str, b: Op, pb: str) -> None:
        if pa == pb:
            vector = pa.endswith("V") and split_unit(pa)[1] == "V"
            if vector and self.pos[id(a)] < self.pos[id(b)]:
                self.barriers[(id(a), id(b))] = (a, b)
            elif vector:
                loop = self.carrier(a, b)
                self.carried_barriers[id(loop)] = loop
            return
        if self.pos[id(a)] < self.pos[id(b)]:
            self.direct[(id(a), id(b))] = (a, b)
            return
        loop = self.carrier(a, b)
        self.carried[(id(loop), id(a), id(b))] = (loop, a, b)

    def unit(self, op: Op) -> str | None:
        key = id(op)
        if key not in self._units:  # asked of every op again for each dependency it is in
            self._units[key] = unit_of(op, self.mixed)
        return self._units[key]

    def credits(self) -> None:
        """A flag between cores counts (a cube core's flag to its vector cores is a counter, not a
        bit), so a producer core that nothing holds back could run iterations ahead and overflow
        it. Each hand-over inside a loop that can run again therefore gets a credit back: the
        consumer's flag that the producer waits for before its next hand-over (pto-isa's TPipe
        frees a slot the same way), so a flag's sets never pile up (the checker proves it)."""
        for a, b in list(self.direct.values()):
            if is_cross(self.unit(a), self.unit(b)):
                loop = self.repeating_loop(a, b)
                if loop is not None:
                    self.carried.setdefault((id(loop), id(b), id(a)), (loop, b, a))
        for _loop, a, b in list(self.carried.values()):
            if is_cross(self.unit(a), self.unit(b)):
                self.direct.setdefault((id(b), id(a)), (b, a))

    def repeating_loop(self, a: Op, b: Op) -> Op | None:
        """The innermost loop holding both ops that can run again (a loop of at most one trip
        cannot), if any."""
        around_b = {id(x) for x in self.ancestors(b)[1:]}
        return next((x for x in self.ancestors(a)[1:] if id(x) in around_b and not self.once(x)), None)

    def carrier(self, a: Op, b: Op) -> Op:
        """The loop that carries a dependency of b on a later op a of its previous iteration."""
        loop = self.repeating_loop(a, b)
        assert loop is not None, "a dependency on a later op is carried by a loop"
        return loop

    def once(self, loop: Op) -> bool:
        if id(loop) not in self._once:
            self._once[id(loop)] = at_most_once(loop)
        return self._once[id(loop)]


def insert(func: Func, ctx: PassContext, same: Mapping[str, str] | None = None) -> None:
    """Place the flags and barriers of one compute kernel (in place); ``same``: its tensor
    parameters that launches pass views of one tensor (``pipes.param_aliases``)."""
    deps = _Deps(func, same)
    deps.credits()
    inserts: list[tuple[list[Op], int, float, Op]] = []  # (list, index, order, op); see _place
    pairs: list[tuple[int, int, str, str, list[Op]]] = []  # (set pos, wait pos, src, dst, ops)

    def level_pair(a: Op, b: Op) -> tuple[Op, Op]:
        """The ancestors of a and b that sit in the same region."""
        anc_a, anc_b = deps.ancestors(a), deps.ancestors(b)
        for x in anc_a:
            for y in anc_b:
                if deps.parent[id(x)][1] is deps.parent[id(y)][1]:
                    return x, y
        raise AssertionError("ops of one kernel share the kernel body")

    wanted: dict[tuple[int, str, str], Op] = {}  # (consumer anchor, src, dst) -> latest producer anchor
    for a, b in sorted(deps.direct.values(), key=lambda ab: (deps.pos[id(ab[1])], deps.pos[id(ab[0])])):
        x, y = level_pair(a, b)
        key = (id(y), deps.unit(a), deps.unit(b))
        if key not in wanted or deps.pos[id(x)] > deps.pos[id(wanted[key][0])]:
            wanted[key] = (x, y)
    covered: dict[tuple[int, str, str], int] = {}  # (region, src, dst) -> producer pos already waited
    for (_, src, dst), (x, y) in sorted(wanted.items(), key=lambda kv: deps.pos[id(kv[1][1])]):
        region = deps.parent[id(y)][1]
        ckey = (id(region), src, dst)
        if covered.get(ckey, -1) >= deps.pos[id(x)]:
            continue  # an earlier wait on this pipe already follows a later producer
        covered[ckey] = deps.pos[id(x)]
        set_op = Op("sync.set", [], {"src": src, "dst": dst, "event": 0})
        wait_op = Op("sync.wait", [], {"src": src, "dst": dst, "event": 0})
        inserts.append((region, deps.at[id(x)] + 1, 0, set_op))
        inserts.append((region, deps.at[id(y)], 1, wait_op))
        pairs.append((deps.pos[id(x)], deps.pos[id(y)], src, dst, [set_op, wait_op]))
    for loop, src, dst, x, y in _carried_flags(deps):
        body = loop.regions[0]
        outer = deps.parent[id(loop)][1]
        ops = [Op("sync.set", [], {"src": src, "dst": dst, "event": 0}) for _ in range(2)]
        waits = [Op("sync.wait", [], {"src": src, "dst": dst, "event": 0}) for _ in range(2)]
        inserts.append((outer, deps.at[id(loop)], 2, ops[0]))  # prime
        inserts.append((body, deps.at[id(y)], -1, waits[0]))
        inserts.append((body, deps.at[id(x)] + 1, 0.5, ops[1]))  # before the next op's waits
        inserts.append((outer, deps.at[id(loop)] + 1, -1, waits[1]))  # drain
        start, end = deps.pos[id(loop)], deps.end[id(loop)] + 1
        pairs.append((start, end, src, dst, ops + waits))
    barred: set[int] = set()
    for a, b in deps.barriers.values():
        x, y = level_pair(a, b)
        if id(y) in barred:
            continue  # one barrier orders every earlier vector op before y
        barred.add(id(y))
        region = deps.parent[id(y)][1]
        inserts.append((region, deps.at[id(y)], 0, Op("sync.barrier", [], {"pipe": "V"})))
    for loop in deps.carried_barriers.values():
        # the previous iteration's vector ops finish before this iteration's start
        inserts.append((loop.regions[0], 0, -2, Op("sync.barrier", [], {"pipe": "V"})))
    _colour(pairs, func, ctx)
    _place(inserts)


def _place(inserts: list[tuple[list[Op], int, float, Op]]) -> None:
    """Put each op before the op at its index in its list (at the end for the list's length), the
    ops of one index in ascending order and, of equal order, the one asked for last first. Each
    list is rebuilt once: inserting one op at a time made a long kernel body quadratic."""
    by_list: dict[int, tuple[list[Op], list[tuple[int, float, int, Op]]]] = {}
    for seq, (ops, index, order, op) in enumerate(inserts):
        by_list.setdefault(id(ops), (ops, []))[1].append((index, order, -seq, op))
    for ops, wanted in by_list.values():
        wanted.sort(key=lambda t: t[:3])
        merged: list[Op] = []
        k = 0
        for i in range(len(ops) + 1):
            while k < len(wanted) and wanted[k][0] == i:
                merged.append(wanted[k][3])
                k += 1
            if i < len(ops):
                merged.append(ops[i])
        assert k == len(wanted), "an op is placed past the end of its list"
        ops[:] = merged


def _carried_flags(deps: _Deps) -> list[tuple[Op, str, str, Op, Op]]:
    """(loop, src, dst, producer anchor, consumer anchor) of each flag carried to the next iteration.

    The wait goes right before the consumer and the set right after the producer (both taken at
    the level of the loop body), not at the body's ends: in a double-buffered body, copy 0's next
    load then waits only for copy 0's compute, not copy 1's. One flag before consumer y and after
    producer x also covers every carried dependency with a consumer at or after y and a producer
    at or before x, so the common case stays one flag per pipe pair."""
    def anchor(op: Op, loop: Op) -> Op:
        while deps.parent[id(op)][0] is not loop:
            op = deps.parent[id(op)][0]
        return op

    latest: dict[tuple[int, str, str, int], tuple[Op, Op, Op]] = {}  # (loop, src, dst, y) -> (loop, x, y)
    for loop, a, b in deps.carried.values():
        x, y = anchor(a, loop), anchor(b, loop)
        key = (id(loop), deps.unit(a), deps.unit(b), id(y))
        if key not in latest or deps.pos[id(x)] > deps.pos[id(latest[key][1])]:
            latest[key] = (loop, x, y)
    flags = []
    reach: dict[tuple[int, str, str], int] = {}  # latest producer a kept flag of this loop and pipes sets after
    for (lid, src, dst, _), (loop, x, y) in sorted(latest.items(), key=lambda kv: deps.pos[id(kv[1][2])]):
        if reach.get((lid, src, dst), -1) >= deps.pos[id(x)]:
            continue  # an earlier wait already waits for a later producer
        reach[(lid, src, dst)] = deps.pos[id(x)]
        flags.append((loop, src, dst, x, y))
    return flags


def _colour(pairs, func: Func, ctx: PassContext) -> None:
    """Event ids per pipe pair: overlapping set..wait intervals get different ids. Flags between
    cores share one space of ids (the hardware tells them apart by id alone)."""
    active: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for start, end, src, dst, ops in sorted(pairs, key=lambda p: (p[0], p[1])):
        space = ("cross", "") if is_cross(src, dst) else (src, dst)
        limit = ctx.target.cross_core_flags if space[0] == "cross" else ctx.target.max_event_ids
        # half-open intervals: a pair whose last wait sits right before the op a new pair starts
        # at (a loop's drain, then the next loop's prime) has let its id go by then
        live = [(e, i) for (e, i) in active.get(space, []) if e > start]
        used = {i for _, i in live}
        event = next(i for i in range(len(used) + 1) if i not in used)
        if event >= limit:
            what = "flags between its cube and vector cores" if space[0] == "cross" else f"events between {src} and {dst}"
            ctx.diags.error("E0612", f"compute kernel `{func.name}` needs more than {limit} {what}", func.span,
                            help="use fewer tiles in flight, or split the kernel")
            event = limit - 1
        for op in ops:
            op.attrs["event"] = event
        active[space] = live + [(end, event)]


def run(module: Module, ctx: PassContext) -> Module:
    aliases = param_aliases(module)
    return on_compute_kernels(module, lambda f: insert(f, ctx, aliases.get(f.name)))


def _proof(module: Module, target) -> list:
    """The sync checker proves the pairs the pass placed, with its own model of the pipes."""
    return syncheck.check(module, target.max_event_ids, target.cross_core_flags)


PASS = Pass("sync", "block", "block", run, frozenset({"planned"}), frozenset({"synchronised"}), _proof)
