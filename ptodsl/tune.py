"""``ptodsl tune SPEC``: search the tiles of a spec, show every candidate, write the best into the YAML.

The candidates and their ranking are the compiler's own (``cost/choose.py``, the search a spec
without ``vec_tile``/``cube_tile`` gets at every compile); tune also searches the tiles the spec
gives, shows the table, optionally measures each candidate on the cpu backend, and with ``write``
puts the chosen tiles into the YAML text, keeping its comments and layout. Candidates are compiled
and estimated on a process pool, or on an existing Ray cluster with ``ray_address``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from math import prod

from .api import Operator
from .cost.choose import Candidate, choose, evaluate
from .diagnostics import CompileError, Diagnostics
from .driver import Compiled, compile_spec, search_cases, with_schedule
from .schedule import Schedule
from .yamlio.nodes import YMap, compose

RAY_MISSING = "`--ray` needs the `ray` package (pip install 'ptodsl[ray]')"


@dataclass
class Row:
    candidate: Candidate
    label: str
    minimum: int  # compulsory GM bytes over the cases
    measured_s: float | None = None


@cache
def _base(path: str) -> Compiled:
    return compile_spec(path, choose=False)


def _evaluate_one(path: str, schedule: Schedule) -> Candidate:
    """One candidate, in a worker: compiles the spec once per process."""
    c = _base(path)
    return evaluate(c.stages["tensor"], c.target, schedule, search_cases(c.stages["tensor"], c.spec))


def pool_evaluator(path: str, jobs: int) -> Callable[[list[Schedule]], list[Candidate]]:
    def run(schedules: list[Schedule]) -> list[Candidate]:
        if jobs <= 1:
            return [_evaluate_one(path, s) for s in schedules]
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(_evaluate_one, [path] * len(schedules), schedules))
    return run


def ray_evaluator(path: str, address: str) -> Callable[[list[Schedule]], list[Candidate]]:
    try:
        import ray
    except ImportError:
        raise RuntimeError(RAY_MISSING) from None
    if not ray.is_initialized():
        ray.init(address=address)
    remote = ray.remote(_evaluate_one)

    def run(schedules: list[Schedule]) -> list[Candidate]:
        return list(ray.get([remote.remote(path, s) for s in schedules]))
    return run


def tune(path: str, jobs: int = 0, ray_address: str | None = None) -> tuple[Compiled, Schedule, list[Row]]:
    """Search ``path``'s tiles; the spec's own schedule is the first row."""
    base = _base(path)
    ir, cases = base.stages["tensor"], search_cases(base.stages["tensor"], base.spec)
    jobs = jobs or os.cpu_count() or 1
    evaluate_all = ray_evaluator(path, ray_address) if ray_address else pool_evaluator(path, jobs)
    own = evaluate(ir, base.target, base.spec.schedule, cases)
    best, tried = choose(ir, base.target, cases, evaluate_all, everything=True)
    minimum = _minimum(base, cases)
    rows = [Row(own, "spec", minimum)] + [Row(c, "", minimum) for c in tried]
    for r in rows:
        if r.candidate.schedule == best and r.label != "spec":
            r.label = "chosen"
    return base, best, rows


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
