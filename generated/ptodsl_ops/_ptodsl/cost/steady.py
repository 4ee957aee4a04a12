"""Alike iterations of the pipeline model: what one iteration changes, and the model moved on by
many such iterations without walking them.

Both the dry run (:mod:`.dryrun`, which decides from the IR which iterations are alike) and the
simulator's batched loops (which evaluate every iteration at once and hand the model one
iteration's calls, :class:`Recorder`, to :func:`replay` once per iteration) use it.

The model's state (:meth:`~.timeline.Timeline.state`) is of two kinds. Accumulators (pipe work,
instructions, elapsed cycles, the chip's bytes and time, the launch's runs of blocks) grow by the
same amounts in every alike iteration. Times (when each pipe frees, the gates it passed, the
release time of each event) evolve by ``max`` and ``+ cycles`` only, so shifting every one of them
by the same ``t`` shifts the next iteration's by ``t`` too. :func:`replay` therefore advances the
model in one step once an iteration has shifted every time by one amount and changed the
accumulators as the iteration before it did: the rest follow exactly (up to rounding). Until then
(at most :data:`WARM_UP` iterations: the pipes filling), and when they never settle so, it walks.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir import Op
from .timeline import Timeline

WARM_UP = 8  # iterations walked at most, looking for a steady state, before walking them all
TIMES = frozenset({"free", "gate", "events"})  # the state's groups of times (the rest accumulate)
BLOCKS = ("run", "blocks")


def state(tl: Timeline) -> dict:
    """Every number of the model, flat, with the launch's runs of blocks under :data:`BLOCKS`."""
    s = tl.state()
    s[BLOCKS] = [tuple(r) for r in tl.chip.runs]
    return s


def set_state(tl: Timeline, s: dict) -> None:
    tl.chip.runs = [list(r) for r in s[BLOCKS]]
    tl.set_state({k: v for k, v in s.items() if k[0] != "run"})


def diff(after: dict, before: dict) -> dict:
    """What one iteration changed: numbers by their difference; the blocks it added to the launch."""
    out = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in set(after) | set(before) if k != BLOCKS}
    out[BLOCKS] = added_runs(before[BLOCKS], after[BLOCKS])
    return out


def added_runs(before: list[tuple], after: list[tuple]) -> list[tuple]:
    """The [duration, count] runs of blocks ``after`` has beyond ``before`` (a prefix of it, its last
    run perhaps grown)."""
    if not before:
        return list(after)
    k = len(before) - 1
    head = [(after[k][0], after[k][1] - before[k][1])] if after[k][1] > before[k][1] else []
    return head + list(after[k + 1:])


def close(x: float, y: float) -> bool:
    return abs(x - y) <= 1e-9 * max(1.0, abs(x), abs(y))


def same(a: dict, b: dict) -> bool:
    """Whether two iterations changed the model alike."""
    if a.keys() != b.keys():
        return False
    for k, x in a.items():
        y = b[k]
        if k == BLOCKS:
            if x != y:
                return False
        elif not close(x, y):
            return False
    return True


def joined(a: dict, b: dict) -> dict:
    """What two iterations in a row changed the model by: ``a`` then ``b``."""
    out = {k: a.get(k, 0.0) + b.get(k, 0.0) for k in set(a) | set(b) if k != BLOCKS}
    out[BLOCKS] = [*a[BLOCKS], *b[BLOCKS]]
    return out


def advance(tl: Timeline, now: dict, delta: dict, times: int, set_to: Callable[[dict], None]) -> None:
    """The model as if ``times`` more iterations had each changed it by ``delta``; ``set_to`` sets
    a state (the caller's own keys in the ``run`` group included), then the blocks are added."""
    if times <= 0:
        return
    out = {k: now.get(k, 0.0) + times * delta.get(k, 0.0) for k in set(now) | set(delta) if k != BLOCKS}
    out[BLOCKS] = now[BLOCKS]
    set_to(out)
    for cycles, count in delta[BLOCKS]:
        tl.chip.block(cycles, {}, int(count) * times)


def shifted(before: dict, after: dict, delta: dict) -> bool:
    """Whether the iteration from ``before`` to ``after`` moved every time of the model by one
    amount (no time appeared or vanished): then the next alike iteration does so again."""
    times = {k for k in before if k[0] in TIMES}
    if times != {k for k in after if k[0] in TIMES}:
        return False
    if not times:
        return True
    t = delta[next(iter(times))]
    return all(close(delta[k], t) for k in times)


# ------------------------------------------------------------------ recorded iterations


class Recorder:
    """Stands in for a :class:`~.timeline.Timeline` while an iteration is evaluated for many at once:
    it keeps the calls, for :func:`play` to make on the real model as often as there were
    iterations. ``("repeat", events, times)`` entries nest recorded iterations."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def begin_launch(self, kind: str, footprint: float | None = None) -> None:
        self.events.append(("begin_launch", kind, footprint))

    def end_launch(self) -> None:
        self.events.append(("end_launch",))

    def begin_kernel(self) -> None:
        self.events.append(("begin_kernel",))

    def end_kernel(self) -> None:
        self.events.append(("end_kernel",))

    def sync(self, op: Op) -> None:
        self.events.append(("sync", op))

    def run(self, op: Op, valid: list[tuple[int, ...]]) -> None:
        self.events.append(("run", op, valid))


def play(tl: Timeline, events: list[tuple]) -> None:
    """Make the recorded calls on ``tl``, in order (a recorder keeps them as they are)."""
    if isinstance(tl, Recorder):
        tl.events.extend(events)
        return
    for e in events:
        if e[0] == "repeat":
            replay(tl, e[1], e[2])
        else:
            getattr(tl, e[0])(*e[1:])


def replay(tl: Timeline, events: list[tuple], times: int) -> None:
    """``events`` played ``times`` times, as that many alike iterations: walked until the model is
    in a steady state (module docstring), then advanced by the rest at once."""
    last: dict | None = None
    for done in range(1, min(times, WARM_UP) + 1):
        before = state(tl)
        play(tl, events)
        after = state(tl)
        delta = diff(after, before)
        if last is not None and shifted(before, after, delta) and same(delta, last):
            advance(tl, after, delta, times - done, lambda s: set_state(tl, s))
            return
        last = delta
    for _ in range(times - WARM_UP):
        play(tl, events)


__all__ = ["Recorder", "added_runs", "advance", "diff", "play", "replay", "same", "set_state", "shifted", "state"]
