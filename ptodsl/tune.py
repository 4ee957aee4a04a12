"""``ptodsl tune SPEC``: search the tiles of a spec, show every candidate, write the best into the YAML.

The candidates and their ranking are the compiler's own (``cost/choose.py``, the search a spec
without ``vec_tile``/``cube_tile`` gets at every compile): tune runs that same search, once as the
compiler does (only the tiles the spec leaves out, to show truthfully what a compile of the spec as
it is uses) and once over every tile, shows the table, optionally measures each candidate on the cpu
backend, and with ``write`` puts the best tiles into the YAML text, keeping its comments and layout.
Candidates are compiled and estimated on a process pool, or on an existing Ray cluster with
``ray_address``; each is evaluated once, however many of the searches try it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from math import prod

from .api import Operator
from .cost.choose import Candidate, choose, evaluate, left_out
from .diagnostics import CompileError, Diagnostics
from .driver import Compiled, compile_spec, search_cases, with_schedule
from .ir.schedule import schedule_attrs
from .progress import Progress
from .schedule import Schedule
from .yamlio.nodes import YMap, compose

RAY_MISSING = "`--ray` needs the `ray` package (pip install 'ptodsl[ray]')"


@dataclass
class Row:
    candidate: Candidate
    label: str
    minimum: int  # compulsory GM bytes over the cases
    measured_s: float | None = None
    compiled: bool = False  # the tiles a compile of the spec as it is uses
    best: bool = False  # the best candidate: what ``--write`` writes


@cache
def _base(path: str) -> Compiled:
    """The spec's Tensor IR; no tiles are lowered here, not even the target's defaults."""
    return compile_spec(path, choose=False, lower=False)


def _evaluate_one(path: str, schedule: Schedule) -> Candidate:
    """One candidate, in a worker: compiles the spec once per process."""
    c = _base(path)
    return evaluate(c.stages["tensor"], c.target, schedule, search_cases(c.stages["tensor"], c.spec))


# A batch evaluator yields each candidate as it is done, in the order of the schedules.
Batch = Callable[[list[Schedule]], Iterable[Candidate]]


def pool_evaluator(path: str, jobs: int) -> Batch:
    def run(schedules: list[Schedule]) -> Iterable[Candidate]:
        if jobs <= 1 or len(schedules) <= 1:
            yield from (_evaluate_one(path, s) for s in schedules)
            return
        with ProcessPoolExecutor(max_workers=min(jobs, len(schedules))) as pool:
            yield from pool.map(_evaluate_one, [path] * len(schedules), schedules)
    return run


def ray_evaluator(path: str, address: str) -> Batch:
    try:
        import ray
    except ImportError:
        raise RuntimeError(RAY_MISSING) from None
    if not ray.is_initialized():
        ray.init(address=address)
    remote = ray.remote(_evaluate_one)

    def run(schedules: list[Schedule]) -> Iterable[Candidate]:
        refs = [remote.remote(path, s) for s in schedules]
        return (ray.get(r) for r in refs)
    return run


def _key(s: Schedule) -> str:
    """Equal for schedules that compile alike, however their dicts are ordered (the spec's
    cube_tile in the order it was written, a candidate's m, k, n)."""
    return repr(schedule_attrs(s))


class _Memo:
    """The searches' evaluator: each distinct schedule is evaluated once, and the progress line
    counts the candidates as they are done."""

    def __init__(self, batch: Batch, progress: Progress | None):
        self.batch = batch
        self.progress = progress
        self.done: dict[str, Candidate] = {}

    def __call__(self, schedules: list[Schedule]) -> list[Candidate]:
        new = list({_key(s): s for s in schedules if _key(s) not in self.done}.values())
        if self.progress is not None:
            self.progress.total += len(new)
        for s, c in zip(new, self.batch(new), strict=True):
            self.done[_key(s)] = c
            if self.progress is not None:
                self.progress.step(describe(s))
        return [self.done[_key(s)] for s in schedules]


def tune(path: str, jobs: int = 0, ray_address: str | None = None,
         progress: Progress | None = None) -> tuple[Compiled, Schedule, list[Row]]:
    """Search ``path``'s tiles. The first row is what a compile of the spec uses (its own tiles, or
    the compiler's choice of those it leaves out), then every other candidate tried; returns the
    spec's Tensor IR, the best schedule and the rows. ``progress`` counts the candidates evaluated."""
    base = _base(path)
    ir, cases = base.stages["tensor"], search_cases(base.stages["tensor"], base.spec)
    jobs = jobs or os.cpu_count() or 1
    memo = _Memo(ray_evaluator(path, ray_address) if ray_address else pool_evaluator(path, jobs), progress)
    left = left_out(ir)
    compiled, _ = choose(ir, base.target, cases, memo)  # exactly the compiler's search (driver._chosen_schedule)
    best, tried = choose(ir, base.target, cases, memo, everything=True)
    own = memo([compiled])[0]
    minimum = _minimum(base, cases)
    rows = [Row(own, compiled_label(left, compiled), minimum, compiled=True)]
    shown = {_key(compiled)}
    for c in tried:  # a schedule both stages of the search try (cube, then vector) is shown once
        if _key(c.schedule) not in shown:
            shown.add(_key(c.schedule))
            rows.append(Row(c, "", minimum))
    for r in rows:
        if _key(r.candidate.schedule) == _key(best):
            r.best = True
            r.label = f"{r.label}, best" if r.label else "best"
    return base, best, rows


def compiled_label(left: tuple[str, ...], schedule: Schedule) -> str:
    """Where the tiles a compile of the spec uses come from."""
    if not left:
        return "compiled: the spec's tiles"
    leaves = " and ".join(left)
    if all(getattr(schedule, key) is None for key in left):
        return f"compiled: the target's default (the spec leaves out {leaves}; its test shapes are too large to model)"
    return f"compiled: the compiler's choice (the spec leaves out {leaves})"


def _minimum(base: Compiled, cases) -> int:
    """Compulsory GM bytes: every tensor parameter of each case's variant moved once."""
    from . import sym
    from .dtypes import itemsize

    total = 0
    for case in cases:
        f = base.stages["tensor"].func(case.control)
        for p in f.params:
            if p.is_tensor:
                total += prod(int(sym.evaluate(d, case.symbols)) for d in p.type.shape) * itemsize(p.dtype)
    return total


def measure(base: Compiled, schedule: Schedule) -> float | None:
    """Seconds per call of the largest test case on the cpu backend, with ``schedule``."""
    from .bench import bench_case

    runs = [c for c in base.spec.tests if c.refuses is None]
    if not runs:
        return None
    op = Operator(with_schedule(base, schedule))
    case = max(runs, key=lambda c: prod(c.shapes.values()))
    return bench_case(op, case, "cpu", None, {}).seconds


def describe(s: Schedule) -> str:
    parts = []
    if s.vec_tile is not None:
        parts.append(f"vec_tile {list(s.vec_tile)}")
    for name, ls in sorted(s.loops.items()):
        if ls.vec_tile is not None:
            parts.append(f"{name}.vec_tile {list(ls.vec_tile)}")
    if s.cube_tile:
        parts.append("cube_tile " + " ".join(f"{a}={list(v)}" for a, v in sorted(s.cube_tile.items())))
    return ", ".join(parts) or "target defaults"


def render(path: str, rows: list[Row]) -> str:
    head = f"{'candidate':<52} {'pipe work':>11} {'GM ratio':>9} {'on-chip B':>10} {'cpu time':>10}"
    lines = [f"tune {path}: candidates ranked by modelled pipe work (cycles, summed over pipes and cases)", head]
    for r in rows:
        c = r.candidate
        mark = f" <- {r.label}" if r.label else ""
        if c.cycles is None:
            lines.append(f"{describe(c.schedule):<52} {'does not compile: ' + c.problem[:60]}{mark}")
            continue
        ratio = c.gm_bytes / r.minimum if r.minimum else float("nan")
        t = "-" if r.measured_s is None else f"{r.measured_s * 1e6:.1f} us"
        lines.append(f"{describe(c.schedule):<52} {c.cycles:>11.0f} {ratio:>9.2f} {c.on_chip:>10} {t:>10}{mark}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- writing the YAML

def write_tiles(text: str, file: str, schedule: Schedule) -> str:
    """``text`` with ``schedule``'s vec_tile and cube_tile written under ``schedule:``, every other
    line (comments included) unchanged. Per-loop vec_tiles the search replaced are removed."""
    diags = Diagnostics()
    root = compose(text, file, diags)
    if root is None or not isinstance(root, YMap):
        raise CompileError(diags.items)
    lines = text.splitlines(keepends=True)
    values = {}
    if schedule.vec_tile is not None:
        values["vec_tile"] = "[" + ", ".join(map(str, schedule.vec_tile)) + "]"
    if schedule.cube_tile:
        values["cube_tile"] = "{" + ", ".join(f"{a}: [{v[0]}, {v[1]}]" for a, v in schedule.cube_tile.items()) + "}"
    pair = root.get("schedule")
    if pair is None:
        at = _insert_line(root, len(lines))
        block = ["schedule:\n"] + [f"  {k}: {v}\n" for k, v in values.items()]
        return "".join(lines[:at] + block + lines[at:])
    if not isinstance(pair.value, YMap) or pair.value.span.line == pair.key.span.line:
        raise ValueError("`schedule:` is written in flow style ({...}); tune writes block-style schedules only")
    body = pair.value
    for key, v in values.items():
        old = body.get(key)
        if old is not None:
            i = old.key.span.line - 1
            lines[i] = re.sub(rf"^(\s*{key}:\s*).*?(\s*#.*)?$", lambda m, v=v: m.group(1) + v + (m.group(2) or ""),
                              lines[i].rstrip("\n")) + "\n"
        else:
            indent = " " * (body.span.col - 1)
            lines.insert(body.span.line - 1, f"{indent}{key}: {v}\n")
            body = compose("".join(lines), file, diags).get("schedule").value
    if schedule.vec_tile is not None and body.get("loops") is not None:
        lines = _drop_loop_vec_tiles(lines, body.get("loops").value)
    return "".join(lines)


def without_schedule(text: str, file: str) -> str:
    """``text`` with its whole ``schedule:`` block removed (comments above the next key stay)."""
    diags = Diagnostics()
    root = compose(text, file, diags)
    if root is None or not isinstance(root, YMap) or root.get("schedule") is None:
        return text
    lines = text.splitlines(keepends=True)
    pairs = root.pairs
    k = next(i for i, p in enumerate(pairs) if p.key.text == "schedule")
    start = pairs[k].key.span.line - 1
    end = pairs[k + 1].key.span.line - 1 if k + 1 < len(pairs) else len(lines)
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1
    return "".join(lines[:start] + lines[end:])


def replace_text(path: str, text: str) -> None:
    """Write ``path`` whole or not at all: a crash mid-write leaves the old spec."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _insert_line(root: YMap, n_lines: int) -> int:
    """Where a new top-level block goes: before `reference:`/`tests:`, else at the end."""
    for key in ("reference", "tests"):
        pair = root.get(key)
        if pair is not None:
            return pair.key.span.line - 1
    return n_lines


def _drop_loop_vec_tiles(lines: list[str], loops) -> list[str]:
    out = list(lines)
    for pair in reversed(loops.pairs if isinstance(loops, YMap) else []):
        inner = pair.value
        if isinstance(inner, YMap) and inner.get("vec_tile") is not None:
            i = inner.get("vec_tile").key.span.line - 1
            if inner.span.line == pair.key.span.line:  # flow style: {vec_tile: [...], unroll: [...]}
                out[i] = re.sub(r"vec_tile:\s*\[[^\]]*\],?\s*", "", out[i])
            else:
                del out[i]
    return out


__all__ = ["Row", "describe", "measure", "render", "replace_text", "tune", "without_schedule", "write_tiles"]
