"""``ptodsl bench``: per spec case, the kernel's time on a backend next to numpy's reference and
torch's equivalent, all measured in the same run, the GM traffic the Block IR moves against the
compulsory minimum, the pipeline cost model's estimated cycles against its roofline (a model of one
NPU core) and the chip model's time against the chip's roofline (all from :mod:`ptodsl.stats`:
models, not measurements). ``--bench`` times each spec's chip-filling ``bench:`` cases instead of
its ``tests:`` (modelled by the dry run: they are too large to simulate for the model columns).

Times are the best of a few rounds, each long enough to be measured, the kernel's, numpy's and
torch's rounds taken in turn (see :func:`measure_together`); the first call is a warm-up, so a cpu
build or cache lookup is not counted. Idle OpenMP threads sleep
(see :func:`passive_openmp`) so that no library's thread pool slows the others down. The numpy column runs the
spec's own reference (``reference:`` in the YAML) on the case's inputs; the torch column runs the
spec's ``torch:`` function (in the same file as the reference) when torch is installed and the
spec names one, and is left out otherwise. Ratios above 1 mean ptodsl is slower.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from .api import Operator, load, run_kernel, to_torch
from .diagnostics import CompileError
from .golden import as_ref_input, case_id, load_reference, load_torch, make_inputs

MIN_ROUND_S = 0.02
ROUNDS = 3


def passive_openmp() -> None:
    """Let idle OpenMP threads sleep in every runtime of this process (the kernels' and torch's)
    unless the user chose otherwise. Spinning idle threads steal the cores from whichever
    library runs next, which on a machine with few cores decides the numbers more than the
    kernels do. OpenMP runtimes read the setting when they load: call this before importing torch.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")


def measure(fn: Callable[[], Any], min_round_s: float = MIN_ROUND_S, rounds: int = ROUNDS) -> float:
    """Seconds per call: best of ``rounds`` rounds, each repeating ``fn`` for at least ``min_round_s``."""
    return measure_together({"fn": fn}, min_round_s, rounds)["fn"]


def measure_together(fns: dict[str, Callable[[], Any]], min_round_s: float = MIN_ROUND_S,
                     rounds: int = ROUNDS) -> dict[str, float]:
    """Seconds per call of each of ``fns``: the best of ``rounds`` rounds each, the rounds of
    the functions taken in turn, so that a change in the machine's load (another process, a
    frequency step) falls on all of them alike rather than on whichever ran during it: the
    ratios between them are what a benchmark reports."""
    numbers = {name: _calibrate(fn, min_round_s) for name, fn in fns.items()}
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            number = numbers[name]
            start = time.perf_counter()
            for _ in range(number):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / number)
    return best


def _calibrate(fn: Callable[[], Any], min_round_s: float) -> int:
    """How many calls make a round of at least ``min_round_s``; the first call is a warm-up
    (builds, caches, first touch of the buffers)."""
    fn()
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_round_s or number >= 1 << 20:
            return number
        number *= 2 if elapsed > min_round_s / 4 else 8


def torch_available() -> bool:
    """Whether torch can be imported; the torch column is left out when it cannot."""
    import importlib.util

    return importlib.util.find_spec("torch") is not None


@dataclass
class Row:
    case: str
    seconds: float | None = None  # the kernel on the chosen backend
    numpy_s: float | None = None
    torch_s: float | None = None
    traffic: float | None = None  # GM bytes moved / compulsory minimum
    cycles: float | None = None  # the pipeline cost model's estimate of the case (one core)
    roofline: float | None = None  # the busiest pipe's work: the estimate's lower bound
    modelled_us: float | None = None  # the chip model's time of the case (cost/chip.py)
    chip_roofline_us: float | None = None  # the chip's lower bound for the case
    error: str | None = None
    spec: str | None = None  # the spec file the case comes from


def bench_case(op: Operator, case, backend: str, with_torch: bool, model: dict[str, tuple],
               min_round_s: float = MIN_ROUND_S, rounds: int = ROUNDS) -> Row:
    """One case measured on ``backend`` and, when torch is there, its torch equivalent; ``model``
    gives (GM ratio, modelled cycles, roofline cycles, chip us, chip roofline us) by case id
    (:func:`modelled`); ``min_round_s`` and ``rounds`` are :func:`measure`'s."""
    cid = case_id(op.spec, case)
    traffic, cycles, roofline, chip_us, chip_roofline = model.get(cid, (None,) * 5)
    row = Row(cid, traffic=traffic, cycles=cycles, roofline=roofline, modelled_us=chip_us,
              chip_roofline_us=chip_roofline)
    inputs, scalars = make_inputs(op, case)
    index, arrays, symbols = op.resolve(dict(inputs))
    for s, v in case.shapes.items():
        symbols.setdefault(s, v)
    ck = op.compiled.checked[index]
    from . import sym
    from .dtypes import numpy_dtype

    for p in op.outputs:
        if p.name not in arrays:
            t = ck.params[p.name].ty
            arrays[p.name] = np.zeros(tuple(int(sym.evaluate(d, symbols)) for d in t.shape), numpy_dtype(t.dtype))
    # the operator's parameters hold scalar defaults as Python values already (``api.program_of``)
    full = {p.name: scalars.get(p.name, p.default) for p in op.scalars}
    fns: dict[str, Callable[[], Any]] = {
        "seconds": lambda: run_kernel(op.compiled, index, arrays, full, symbols, backend)}
    reference = load_reference(op.spec)
    if reference is not None:
        ref_inputs = [as_ref_input(inputs[p.name]) for p in op.inputs]
        fns["numpy_s"] = lambda: reference(*ref_inputs, **scalars)
    fn = load_torch(op.spec) if with_torch else None
    if fn is not None:
        tensors = [to_torch(np.ascontiguousarray(inputs[p.name])) for p in op.inputs]
        fns["torch_s"] = lambda: fn(*tensors, **scalars)
    for name, seconds in measure_together(fns, min_round_s, rounds).items():
        setattr(row, name, seconds)
    return row


def modelled(op: Operator, bench_cases: bool = False) -> dict[str, tuple]:
    """Per case id: GM bytes moved / the compulsory minimum, the cost model's estimated and
    roofline cycles (one core), and the chip model's time and roofline in microseconds, from one
    simulator run of the Block IR (``ptodsl ir --stats``); of the bench cases, from the dry run
    (``ptodsl ir --stats --bench``)."""
    from .stats import collect

    out = {}
    for variant in collect(op, bench=bench_cases):
        cycles = {cid: (est, bound) for cid, est, bound, _ in variant.cycles}
        chip = {c.case: (c.modelled_us, c.chip_roofline_us) for c in variant.chip}
        for cid, moved, minimum in variant.traffic:
            est, bound = cycles.get(cid, (None, None))
            out[cid] = (moved / minimum if minimum else None, est, bound, *chip.get(cid, (None, None)))
    return out


def bench(paths: Sequence[str], backend: str = "cpu", k: str | None = None, out: TextIO | None = None,
          rows: list[Row] | None = None, min_round_s: float = MIN_ROUND_S, rounds: int = ROUNDS,
          bench_cases: bool = False) -> int:
    """Benchmark every case of the specs under ``paths``, printing a row per case as it is done
    (to ``out``, by default the ``sys.stdout`` of the moment) and appending it to ``rows``; returns
    how many cases could not run. ``min_round_s`` and ``rounds`` are :func:`measure`'s (a test
    that only needs every case to run gives 0 and 1). ``bench_cases`` times each spec's
    chip-filling ``bench:`` cases instead of its ``tests:``."""
    rows = rows if rows is not None else []
    out = out if out is not None else sys.stdout
    from .frontend.spec import load_spec
    from .golden import spec_paths

    passive_openmp()
    with_torch = torch_available()
    columns = Columns(backend, with_torch)
    out.write(columns.header())
    failed = 0
    for path in [p for root in paths for p in spec_paths(root)]:
        if k and not any(k in case_id(s, c) for s in [load_spec(path)] for c in _cases(s, bench_cases)):
            continue
        try:
            t0 = time.perf_counter()
            op = load(path)
            compile_s = time.perf_counter() - t0
            model = modelled(op, bench_cases)
        except CompileError as e:
            rows.append(Row(path, error=e.diagnostics[0].message, spec=path))
            out.write(columns.row(rows[-1]))
            failed += 1
            continue
        # the IR verifier runs after every pass of every compile: its share of compile time is shown
        out.write(f"# {path}: compiled in {compile_s * 1e3:.0f} ms, IR verification "
                  f"{op.compiled.verify_seconds * 1e3:.0f} ms of it\n")
        for case in _cases(op.spec, bench_cases):
            if (k and k not in case_id(op.spec, case)) or case.refuses is not None:
                continue  # (a call the case expects refused has nothing to time)
            try:
                row = bench_case(op, case, backend, with_torch, model, min_round_s, rounds)
            except (CompileError, ValueError, TypeError) as e:
                message = e.diagnostics[0].message if isinstance(e, CompileError) else str(e)
                row = Row(case_id(op.spec, case), error=message.splitlines()[0])
                failed += 1
            row.spec = path
            rows.append(row)
            out.write(columns.row(row))
            out.flush()
    return failed


def _cases(spec, bench_cases: bool) -> tuple:
    return spec.bench if bench_cases else spec.tests


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.3f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


@dataclass
class Columns:
    """The table's layout: fixed widths, so rows print as soon as they are measured."""

    backend: str
    with_torch: bool
    case_width: int = 34
    width: int = 12

    def names(self) -> list[str]:
        b = self.backend
        return ([f"{b} ms", "numpy ms"] + (["torch ms"] if self.with_torch else []) + [f"{b}/numpy"]
                + ([f"{b}/torch"] if self.with_torch else []) + ["GM traffic", "model cyc", "/roofline", "chip us",
                                                                  "/chip roof"])

    def header(self) -> str:
        return "case".ljust(self.case_width) + "".join(c.rjust(self.width) for c in self.names()) + "\n"

    def row(self, r: Row) -> str:
        name = r.case.ljust(self.case_width)
        if r.error is not None:
            return f"{name}  error: {r.error}\n"
        cells = [_ms(r.seconds), _ms(r.numpy_s)] + ([_ms(r.torch_s)] if self.with_torch else [])
        cells += [_ratio(r.seconds, r.numpy_s)] + ([_ratio(r.seconds, r.torch_s)] if self.with_torch else [])
        cells.append("-" if r.traffic is None else f"{r.traffic:.2f}")
        cells.append("-" if r.cycles is None else f"{r.cycles:.0f}")
        cells.append(_ratio(r.cycles, r.roofline))
        cells.append("-" if r.modelled_us is None else f"{r.modelled_us:.1f}")
        cells.append(_ratio(r.modelled_us, r.chip_roofline_us))
        return name + "".join(c.rjust(self.width) for c in cells) + "\n"


__all__ = ["Columns", "Row", "bench", "bench_case", "measure", "passive_openmp", "torch_available", "modelled"]
