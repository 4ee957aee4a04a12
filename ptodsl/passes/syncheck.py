"""A static checker, separate from the sync pass, that every cross-pipe dependency is ordered.

It linearises a compute kernel, running each grid loop body twice (so a dependency carried to the
next iteration shows; once for a loop that provably runs at most once), and for every pair of ops on different pipes that touch overlapping buffers
(at least one writing), it requires a ``sync.set(src, dst, e)`` issued after the producer and a
``sync.wait(src, dst, e)`` that consumes that set before the consumer. Dependent vector ops need a
``sync.barrier`` between them. It also checks that event ids stay below the target's limit, that
every wait has a set to consume, and that sets and waits balance in every region (a loop body that
leaves a flag set would leak it into the next iteration or the next launch). The check accepts direct edges plus each pipe's own program
order, which is the form the sync pass produces.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass

from ..ir import Func, Module, Op
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


@dataclass(frozen=True)
class MissingSync:
    kernel: str
    producer: Op
    consumer: Op
    src: str
    dst: str

    def __str__(self) -> str:
        where = f" ({self.consumer.span})" if self.consumer.span else ""
        return (f"{self.kernel}: {self.consumer.name} on {self.dst} depends on {self.producer.name} on "
                f"{self.src} with no {self.src}->{self.dst} flag between them{where}")


def _flag(op: Op) -> tuple:
    """What a wait consumes: a pipe flag by its pipes and event id; a flag between cores by the
    core it is sent to and its id alone, as the hardware counts it (``wait_flag_dev(id)``)."""
    a = op.attrs
    if is_cross(a["src"], a["dst"]):
        return ("cross", split_unit(a["dst"])[0], a["event"])
    return (a["src"], a["dst"], a["event"])


def _order_key(src: str, dst: str) -> tuple[str, str]:
    """The waits that order ``src`` before ``dst``: a pipe flag's pipes; a flag between cores
    holds back everything its core issues after the wait, so it is indexed by that core."""
    return (src, "core:" + str(split_unit(dst)[0])) if is_cross(src, dst) else (src, dst)


def _trace(ops: list[Op], mixed: bool) -> list[Op]:
    out: list[Op] = []
    for op in ops:
        if op.name == "loop":
            body = op.regions[0]
            out.extend(_trace(body, mixed))
            if not at_most_once(op):
                out.extend(_trace(body, mixed))
        elif op.name.startswith("sync.") or unit_of(op, mixed) is not None:
            out.append(op)
    return out


def _balance(ops: list[Op], where: str, problems: list) -> None:
    """Every set is consumed in the region it is made in: a loop body leaves no flag behind."""
    counts: dict[tuple, int] = {}
    for op in ops:
        if op.name in ("sync.set", "sync.wait"):
            key = _flag(op)
            counts[key] = counts.get(key, 0) + (1 if op.name == "sync.set" else -1)
        for r in op.regions:
            _balance(r, f"{where} > {op.attrs.get('name', op.name)}", problems)
    for key, n in sorted(counts.items()):
        if n:
            what = "set never waited for" if n > 0 else "wait with no set"
            problems.append(f"{where}: {abs(n)} {what} on {key[0]}->{key[1]} event {key[2]}")


def _bounded(trace: list[Op], consumed_by: Mapping[int, int], name: str, problems: list) -> None:
    """A flag between cores is a counter of a few bits, and the producer core runs ahead of the
    consumer as far as nothing holds it back. Prove that sets do not pile up: between two runs of
    one set (a loop's next iteration), the producer core waits for a flag that the consumer core set
    after consuming the first (program order on each core then puts the second after that
    consumption), so at most one set per set op of the flag is ever pending."""
    waited = {s: w for w, s in consumed_by.items()}
    sets: dict[tuple, list[int]] = {}
    to_core: dict[str, list[int]] = {}  # cross waits on each core, in trace order
    for k, op in enumerate(trace):
        if op.name in ("sync.set", "sync.wait") and is_cross(op.attrs["src"], op.attrs["dst"]):
            if op.name == "sync.set":
                sets.setdefault((*_flag(op), id(op)), []).append(k)
            else:
                to_core.setdefault(split_unit(op.attrs["dst"])[0], []).append(k)
    for key, ks in sets.items():
        producer = split_unit(trace[ks[0]].attrs["src"])[0]
        waits = to_core.get(producer, [])
        for k, k2 in zip(ks, ks[1:]):
            w = waited.get(k)
            lo, hi = bisect_right(waits, k), bisect_left(waits, k2)
            if w is None or not any(consumed_by.get(p, -1) > w for p in waits[lo:hi]):
                problems.append(f"{name}: cross-core flag {key[2]} to the {key[1]} core is set again before "
                                "the producer knows the last set was consumed")
                return


class _RangeMax:
    """The largest of ``values[lo:hi]`` in constant time, after building a sparse table."""

    def __init__(self, values: list[int]):
        self.table = [values]
        width = 1
        while 2 * width <= len(values):
            prev = self.table[-1]
            self.table.append([max(prev[k], prev[k + width]) for k in range(len(prev) - width)])
            width *= 2

    def max(self, lo: int, hi: int) -> int:
        level = (hi - lo).bit_length() - 1
        row = self.table[level]
        return max(row[lo], row[hi - (1 << level)])


def check_kernel(func: Func, max_events: int, same: Mapping[str, str] | None = None,
                 cross_flags: int | None = None) -> list[MissingSync | str]:
    """The problems of one kernel's flags; ``cross_flags``: the target's ids of flags between
    cores (None: their ids are not checked against a limit)."""
    mixed = func.kind == "mixed"
    placement = placement_of(func.body) | gm_buffers(func, same)
    trace = _trace(func.body, mixed)
    problems: list[MissingSync | str] = []
    _balance(func.body, func.name, problems)
    # which set each wait consumes: the latest earlier unconsumed set of the same (src, dst, event)
    pending: dict[tuple, list[int]] = {}
    consumed_by: dict[int, int] = {}  # wait index -> set index
    for i, op in enumerate(trace):
        if op.name in ("sync.set", "sync.wait"):
            key = _flag(op)
            limit = cross_flags if key[0] == "cross" else max_events
            if limit is not None and op.attrs["event"] >= limit:
                problems.append(f"{func.name}: event id {op.attrs['event']} is over the limit of {limit}")
            if op.name == "sync.set":
                pending.setdefault(key, []).append(i)
            elif pending.get(key):
                consumed_by[i] = pending[key].pop(0)
            else:
                problems.append(f"{func.name}: wait {key} at step {i} has no set to consume")
    if mixed:
        _bounded(trace, consumed_by, func.name, problems)
    # walk the trace keeping, per buffer range, the last writer and the readers since it; by
    # memory space (ranges of different spaces never overlap), so that a kernel touching many GM
    # tensors is not checked in time quadratic in their number
    writers: dict[str, list[tuple[Range, int]]] = {}
    readers: dict[str, dict[Range, list[int]]] = {}  # and by range: many readers of one tile are skipped at once
    seen: set[tuple[int, int]] = set()
    # trace positions of the waits of each pipe pair, and of the vector barriers, in order
    waits: dict[tuple[str, str], list[int]] = {}
    barriers: list[int] = []
    for k, op in enumerate(trace):
        if op.name == "sync.wait":
            waits.setdefault(_order_key(op.attrs["src"], op.attrs["dst"]), []).append(k)
        elif op.name == "sync.barrier":
            barriers.append(k)
    # per pipe pair, the set each wait consumes (-1: none), for "a wait between i and j consumes a
    # set made after i" in constant time however far apart the producer and the consumer are
    latest = {pair: _RangeMax([consumed_by.get(k, -1) for k in ks]) for pair, ks in waits.items()}
    for j, b in enumerate(trace):
        pb = unit_of(b, mixed)
        if pb is None:
            continue
        rb, wb = reads_writes(b, placement)
        touched = rb + wb
        producers = {i for sp in {x[0] for x in touched} for rng, i in writers.get(sp, ())
                     if any(overlap(rng, x) for x in touched)}
        producers |= {i for sp in {x[0] for x in wb} for rng, ks in readers.get(sp, {}).items()
                      if any(overlap(rng, x) for x in wb) for i in ks}
        for i in sorted(producers):
            a = trace[i]
            pa = unit_of(a, mixed)
            if pa == pb:
                at = bisect_right(barriers, i)
                if split_unit(pa)[1] == "V" and not (at < len(barriers) and barriers[at] < j):
                    problems.append(f"{func.name}: {b.name} reads or overwrites what {a.name} wrote on V with "
                                    "no barrier between them")
                continue
            order = _order_key(pa, pb)
            between = waits.get(order, [])
            lo, hi = bisect_right(between, i), bisect_left(between, j)
            ok = lo < hi and latest[order].max(lo, hi) > i
            if not ok and (id(a), id(b)) not in seen:
                seen.add((id(a), id(b)))
                problems.append(MissingSync(func.name, a, b, pa, pb))
        for w in wb:
            writers[w[0]] = [x for x in writers.get(w[0], ()) if not covers(w, x[0])]
            by_range = readers.get(w[0], {})
            for rng in [rng for rng in by_range if covers(w, rng)]:
                del by_range[rng]
            writers[w[0]].append((w, j))
        for r in rb:
            readers.setdefault(r[0], {}).setdefault(r, []).append(j)
    return problems


def check(module: Module, max_events: int, cross_flags: int | None = None) -> list[MissingSync | str]:
    out: list[MissingSync | str] = []
    aliases = param_aliases(module)
    for f in module.funcs:
        if f.kind in ("vector", "cube", "mixed"):
            out.extend(check_kernel(f, max_events, aliases.get(f.name), cross_flags))
    return out
