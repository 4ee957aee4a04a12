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
    overlap,
    param_aliases,
    pipe_of,
    placement_of,
    reads_writes,
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


def _trace(ops: list[Op]) -> list[Op]:
    out: list[Op] = []
    for op in ops:
        if op.name == "loop":
            body = op.regions[0]
            out.extend(_trace(body))
            if not at_most_once(op):
                out.extend(_trace(body))
        elif op.name.startswith("sync.") or pipe_of(op) is not None:
            out.append(op)
    return out


def _balance(ops: list[Op], where: str, problems: list) -> None:
    """Every set is consumed in the region it is made in: a loop body leaves no flag behind."""
    counts: dict[tuple, int] = {}
    for op in ops:
        if op.name in ("sync.set", "sync.wait"):
            key = (op.attrs["src"], op.attrs["dst"], op.attrs["event"])
            counts[key] = counts.get(key, 0) + (1 if op.name == "sync.set" else -1)
        for r in op.regions:
            _balance(r, f"{where} > {op.attrs.get('name', op.name)}", problems)
    for key, n in sorted(counts.items()):
        if n:
            what = "set never waited for" if n > 0 else "wait with no set"
            problems.append(f"{where}: {abs(n)} {what} on {key[0]}->{key[1]} event {key[2]}")


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


def check_kernel(func: Func, max_events: int, same: Mapping[str, str] | None = None) -> list[MissingSync | str]:
    placement = placement_of(func.body) | gm_buffers(func, same)
    trace = _trace(func.body)
    problems: list[MissingSync | str] = []
    _balance(func.body, func.name, problems)
    # which set each wait consumes: the latest earlier unconsumed set of the same (src, dst, event)
    pending: dict[tuple, list[int]] = {}
    consumed_by: dict[int, int] = {}  # wait index -> set index
    for i, op in enumerate(trace):
        if op.name in ("sync.set", "sync.wait"):
            key = (op.attrs["src"], op.attrs["dst"], op.attrs["event"])
            if op.attrs["event"] >= max_events:
                problems.append(f"{func.name}: event id {op.attrs['event']} is over the limit of {max_events}")
            if op.name == "sync.set":
                pending.setdefault(key, []).append(i)
            elif pending.get(key):
                consumed_by[i] = pending[key].pop(0)
            else:
                problems.append(f"{func.name}: wait {key} at step {i} has no set to consume")
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
            waits.setdefault((op.attrs["src"], op.attrs["dst"]), []).append(k)
        elif op.name == "sync.barrier":
            barriers.append(k)
    # per pipe pair, the set each wait consumes (-1: none), for "a wait between i and j consumes a
    # set made after i" in constant time however far apart the producer and the consumer are
    latest = {pair: _RangeMax([consumed_by.get(k, -1) for k in ks]) for pair, ks in waits.items()}
    for j, b in enumerate(trace):
        pb = pipe_of(b)
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
            pa = pipe_of(a)
            if pa == pb:
                at = bisect_right(barriers, i)
                if pa == "V" and not (at < len(barriers) and barriers[at] < j):
                    problems.append(f"{func.name}: {b.name} reads or overwrites what {a.name} wrote on V with "
                                    "no barrier between them")
                continue
            between = waits.get((pa, pb), [])
            lo, hi = bisect_right(between, i), bisect_left(between, j)
            ok = lo < hi and latest[(pa, pb)].max(lo, hi) > i
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


def check(module: Module, max_events: int) -> list[MissingSync | str]:
    out: list[MissingSync | str] = []
    aliases = param_aliases(module)
    for f in module.funcs:
        if f.kind in ("vector", "cube", "mixed"):
            out.extend(check_kernel(f, max_events, aliases.get(f.name)))
    return out
