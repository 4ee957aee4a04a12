"""The differential driver: compile each random program, run it three ways, compare, classify.

Each program is written to a folder as ``fzSEED.pto``/``fzSEED.yaml``, compiled through the public
API (:func:`ptodsl.api.load`), and run on

* the numpy interpreter of its AST (:mod:`.interp`), the oracle;
* the simulator, with poison on (uninitialised on-chip memory and never-written outputs are NaN);
* the probes (:mod:`.probes`), on the simulator: the call made again with an input and an output
  sharing memory, and with broadcast inputs of [2**28, 2**28];
* the CPU backend, also poisoned. The CPU side builds many programs into one shared library (each
  program's translation units wrapped in a namespace of their own; their entry points carry the
  program's unique op name), which costs one compiler start-up and one header parse per batch
  instead of one per kernel.

Outcomes: ``ok``; ``mismatch`` (an output differs beyond the per-dtype tolerance); ``crash`` (an
exception that is not a diagnostic); ``hang`` (over the time limit); ``rejected`` (a program the
generator wrote as well-typed, but the compiler or a backend refused with diagnostics); and
``interp`` (the oracle itself failed: a limitation of the fuzzer, reported apart).
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dtypes import DTYPES, numpy_dtype
from .gen import Program
from .interp import InterpError, Refused, Stopped, interpret

# (rtol, atol) per output dtype for a chain of ops; atol is scaled by the output's magnitude.
TOLERANCES: dict[str, tuple[float, float]] = {"f32": (1e-4, 1e-4), "f16": (2e-2, 2e-2), "bf16": (8e-2, 8e-2)}
KINDS = ("ok", "mismatch", "crash", "hang", "rejected", "interp")
DEFAULT_TIMEOUT_S = 60.0


class Hang(Exception):
    pass


@dataclass
class Outcome:
    seed: int
    kind: str  # one of KINDS
    backend: str = ""  # which side failed: compile | sim | cpu | interp
    detail: str = ""
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.kind not in ("ok",)

    def signature(self) -> tuple[str, str]:
        """What makes two failures the same failure, for the shrinker: kind, side, error class."""
        lines = [ln for ln in self.detail.strip().splitlines() if ln.strip()]
        if self.kind in ("crash", "interp"):
            last = lines[-1] if lines else ""
            key = re.sub(r"\d+", "#", re.sub(r"(at|-->) \S+", "", last))[:80]
        elif self.kind == "rejected":
            key = ",".join(sorted(set(re.findall(r"\b[EW]\d{4}\b", self.detail)))) or (lines[0][:40] if lines else "")
        elif self.kind == "mismatch":
            key = re.sub(r"\d+", "#", lines[0].split(":")[0]) if lines else ""
        else:
            key = ""
        return (self.kind, f"{self.backend}:{key}")


@dataclass
class Prepared:
    """A compiled program with its inputs and the interpreter's expected outputs."""

    program: Program
    op: Any
    index: int
    symbols: dict[str, int]
    inputs: dict[str, np.ndarray]  # every tensor parameter before the run (outputs poisoned)
    scalars: dict[str, Any]
    expected: dict[str, np.ndarray]
    outputs: list[str]
    dtypes: dict[str, str] = field(default_factory=dict)
    stop: str | None = None  # the oracle's reason why the call must stop (outputs not compared)
    stop_code: str = "E0730"  # with which diagnostic: an access outside a tensor, or E0870 (trip count)


@contextmanager
def time_limit(seconds: float):
    """Raise Hang in the main thread after ``seconds`` (Python code only; a no-op off the main thread)."""
    import threading

    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise Hang(f"over {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def write_program(program: Program, folder: str) -> str:
    os.makedirs(folder, exist_ok=True)
    base = os.path.join(folder, program.op)
    with open(base + ".pto", "w", encoding="utf-8") as f:
        f.write(program.pto())
    with open(base + ".yaml", "w", encoding="utf-8") as f:
        f.write(program.yaml())
    return base + ".yaml"


def make_inputs(program: Program) -> dict[str, np.ndarray]:
    """Inputs of every tensor parameter, from the program's seed; ``out`` tensors are NaN."""
    rng = np.random.default_rng(program.seed)
    env = dict(program.shapes)
    arrays: dict[str, np.ndarray] = {}
    for p in program.used_params():
        if p.kind == "scalar":
            continue
        dtype = program.dtype if p.dtype == "T" else p.dtype
        shape = tuple(int(d) if d.isdigit() else env[d] for d in p.dims)
        if p.kind == "out":
            fill = np.nan if DTYPES[dtype].is_float else 0
            arrays[p.name] = np.full(shape, fill).astype(numpy_dtype(dtype))
        elif p.role == "index":
            arrays[p.name] = row_indices(program.seed, shape, env["M"], numpy_dtype(dtype))
        elif p.role in ("length", "cumulative"):
            arrays[p.name] = data_lengths(program.seed, shape, env["N" if p.role == "length" else "M"],
                                          p.role == "cumulative", numpy_dtype(dtype))
        elif p.index_of is not None:
            # positions in [0, dim) of the dim indexed, repeats included; maybe one outside it
            bound = int(p.index_of) if p.index_of.isdigit() else env[p.index_of]
            a = rng.integers(0, bound, size=shape)
            if p.distinct and a.size <= bound:
                # positions declared unique: distinct, but for one repeat now and then (E0731)
                a = rng.permutation(bound)[:a.size].reshape(shape)
                if a.size > 1 and rng.random() < 0.2:
                    a.reshape(-1)[int(rng.integers(1, a.size))] = a.reshape(-1)[0]
            if p.oob and a.size and rng.random() < 0.6:
                at = tuple(int(rng.integers(0, s)) for s in shape)
                a[at] = rng.choice([-1, -bound, bound, bound + 5])
            arrays[p.name] = a.astype(numpy_dtype(dtype))
        elif p.ints is not None:
            arrays[p.name] = rng.integers(p.ints[0], p.ints[1] + 1, size=shape).astype(numpy_dtype(dtype))
        elif DTYPES[dtype].is_float:
            arrays[p.name] = rng.uniform(p.lo, p.hi, size=shape).astype(numpy_dtype(dtype))
        elif dtype == "i8":  # matmul operands: the whole int8 range
            arrays[p.name] = rng.integers(int(p.lo), int(p.hi) + 1, size=shape).astype(numpy_dtype(dtype))
        else:
            # i32 inputs are lengths and branch selectors: fractions of N, half of them small.
            n = env.get("N", 8)
            hi = int(round(p.hi * n))
            big = rng.integers(int(p.lo * n), hi + 1, size=shape)
            small = rng.integers(0, min(hi, 8) + 1, size=shape)
            arrays[p.name] = np.where(rng.random(size=shape) < 0.5, small, big).astype(numpy_dtype(dtype))
    return arrays


def row_indices(seed: int, shape: tuple[int, ...], rows: int, dtype: np.dtype) -> np.ndarray:
    """Row indices into ``rows`` rows; for a third of the seeds one entry lies outside [0, rows)
    (or at ``rows``, where a view is empty but an element read is outside). A generator of its
    own, so the other inputs of a program stay as they were."""
    rng = np.random.default_rng([seed, 1])
    out = rng.integers(0, rows, size=shape)
    if out.size and rng.random() < 1 / 3:
        bad = [-1, rows, rows + 1, -rows, 2**31 - 1, -(2**31)]
        out.flat[int(rng.integers(0, out.size))] = bad[int(rng.integers(0, len(bad)))]
    return out.astype(dtype)


def compared_as(dtype: str, variant: str) -> str:
    """The dtype whose tolerance a float output is held to: its own, or the variant's when that is
    less precise. An f32 output computed from f16 values (a matmul of f16 operands that were
    themselves computed, each step rounded to f16 as the hardware rounds it) carries f16 error, which
    f32's tolerance cannot admit; integer outputs stay exact."""
    if dtype in TOLERANCES and variant in TOLERANCES and TOLERANCES[variant] > TOLERANCES[dtype]:
        return variant
    return dtype
def data_lengths(seed: int, shape: tuple[int, ...], extent: int, cumulative: bool, dtype: np.dtype) -> np.ndarray:
    """Lengths in [-2, extent] (row lengths of a ragged block), or offsets rising from 0 to at most
    ``extent`` (cumulative lengths of segments). For a third of the seeds one entry is off: past
    ``extent`` (an access outside the tensor, E0730), 2**31 - 1 (more trips than any dim, E0870) or
    negative (an empty loop; a segment whose offsets go down). A generator of its own, so the other
    inputs of a program stay as they were."""
    rng = np.random.default_rng([seed, 2])
    if cumulative:
        out = np.minimum(np.cumsum(rng.integers(0, max(extent // 2, 1) + 1, size=shape)), extent)
        if out.size:
            out.flat[0] = 0
    else:
        out = rng.integers(-2, extent + 1, size=shape)
    if out.size and rng.random() < 1 / 3:
        bad = [extent + 1, extent + 17, 2**31 - 1, -3]
        out.flat[int(rng.integers(0, out.size))] = bad[int(rng.integers(0, len(bad)))]
    return out.astype(dtype)


def compare(got: np.ndarray, want: np.ndarray, dtype: str) -> str:
    """Empty when ``got`` matches ``want`` within the dtype's tolerance, else a short report."""
    rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    finite = np.isfinite(w)
    scale = float(np.max(np.abs(w[finite]))) if finite.any() else 1.0
    atol *= max(1.0, scale)
    with np.errstate(invalid="ignore", over="ignore"):
        bad = ~(np.abs(g - w) <= atol + rtol * np.abs(w))
    bad &= ~(np.isnan(g) & np.isnan(w))
    bad &= ~(np.isinf(g) & np.isinf(w) & (np.sign(g) == np.sign(w)))
    if not bad.any():
        return ""
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    rows = sorted({int(i[0]) for i in np.argwhere(bad)})
    return (f"{int(bad.sum())} of {bad.size} elements differ; first at {list(idx)}: got {g[idx]:.6g}, "
            f"want {w[idx]:.6g}; bad rows {rows[:8]}{'...' if len(rows) > 8 else ''}")


def prepare(program: Program, folder: str, timeout: float = DEFAULT_TIMEOUT_S) -> Prepared | Outcome:
    """Compile and interpret ``program``; an Outcome when that already fails."""
    from ..api import ArgumentError, load
    from ..diagnostics import CompileError, Diagnostics
    from ..frontend.parser import parse_module

    path = write_program(program, folder)
    try:
        with time_limit(timeout):
            op = load(path)
    except CompileError as exc:
        codes = {d.code for d in exc.diagnostics if d.is_error}
        allowed = program.expect_reject or (bool(program.tolerated) and codes <= set(program.tolerated))
        return Outcome(program.seed, "ok" if allowed else "rejected", "compile", exc.render())
    except Hang as exc:
        return Outcome(program.seed, "hang", "compile", str(exc))
    except Exception:  # noqa: BLE001 - anything but a diagnostic is a crash of the compiler
        return Outcome(program.seed, "crash", "compile", traceback.format_exc(limit=-4))
    if program.expect_reject:
        return Outcome(program.seed, "rejected", "compile", "an invalid program compiled without error")
    arrays = make_inputs(program)
    tensors = {p.name: arrays[p.name] for p in op.inputs}
    falls = [n for n in program.ordered if n in arrays and bool((np.diff(arrays[n].astype(np.int64)) < 0).any())]
    try:
        index, _, symbols = op.resolve(tensors)
    except ArgumentError as exc:
        if exc.diagnostic.code == "E0732":
            return Outcome(program.seed, "ok" if falls else "mismatch", "call",
                           f"refused{' as it must be' if falls else ' although nothing decreases'}: {exc.diagnostic.message}")
        return Outcome(program.seed, "crash", "compile", traceback.format_exc(limit=-4))
    except Exception:  # noqa: BLE001
        return Outcome(program.seed, "crash", "compile", traceback.format_exc(limit=-4))
    if falls:
        return Outcome(program.seed, "mismatch", "call", f"the call ran although `{falls[0]}` (nondecreasing) decreases")
    symbols = {**program.shapes, **symbols}
    outputs = [p.name for p in op.outputs]
    dtypes = {}
    for p in op.kernel.params:
        if p.is_tensor:
            dtypes[p.name] = compared_as(program.dtype if p.dtype == "T" else p.dtype, program.dtype)
    scalars = dict(program.scalars)
    diags = Diagnostics()
    module = parse_module(program.pto(), program.op + ".pto", diags)
    expected = {k: v.copy() for k, v in arrays.items()}
    try:
        kernel = module.kernel(program.op)
        interpret(kernel, {"T": program.dtype}, symbols, expected, scalars, op.spec.schedule.valid_shapes)
    except Refused as why:
        return refused_at_call(program, op, index, arrays, scalars, symbols, str(why))
    except Stopped as why:
        return Prepared(program, op, index, symbols, arrays, scalars, {}, outputs, dtypes, str(why), why.code)
    except (InterpError, Exception):  # noqa: BLE001 - the oracle's own failure
        return Outcome(program.seed, "interp", "interp", traceback.format_exc(limit=-3))
    return Prepared(program, op, index, symbols, arrays, scalars, expected, outputs, dtypes)


def stopped_or_refused(prep: Prepared, exc: Exception, backend: str) -> Outcome | None:
    """The outcome of a call that raised a diagnostic: right when the oracle says it must stop at a
    guard (E0730), else a refusal of a program the oracle runs (a read refused as a length, E0711;
    a guard that should not fail)."""
    code = exc.diagnostic.code  # type: ignore[attr-defined]
    if prep.stop is not None and code == prep.stop_code:
        return None
    why = f" (the oracle stops: {prep.stop})" if prep.stop is not None else " (the oracle runs it)"
    return Outcome(prep.program.seed, "rejected", backend, f"{code}{why}\n{exc}")


def ran_past_a_stop(prep: Prepared, backend: str) -> Outcome:
    return Outcome(prep.program.seed, "mismatch", backend,
                   f"the call ran although it must stop ({prep.stop_code}): {prep.stop}")


def refused_at_call(program: Program, op, index: int, arrays: dict[str, np.ndarray], scalars: dict,
                    symbols: dict, why: str) -> Outcome:
    """The oracle says the call must refuse these inputs (E0711) before any kernel runs."""
    from ..api import ArgumentError, run_kernel

    try:
        run_kernel(op.compiled, index, {k: v.copy() for k, v in arrays.items()}, scalars, symbols, "sim")
    except ArgumentError as exc:
        if exc.diagnostic.code == "E0711":
            return Outcome(program.seed, "ok", "call", f"refused as it must be: {why}")
        return Outcome(program.seed, "mismatch", "call", f"refused with {exc.diagnostic.code}, not E0711: {why}")
    except Exception:  # noqa: BLE001
        return Outcome(program.seed, "crash", "call", traceback.format_exc(limit=-4))
    return Outcome(program.seed, "mismatch", "call", f"the call ran although {why}")


def check_outputs(prep: Prepared, arrays: dict[str, np.ndarray], backend: str) -> Outcome | None:
    reports = []
    for name in prep.outputs:
        text = compare(arrays[name], prep.expected[name], prep.dtypes[name])
        if text:
            reports.append(f"output `{name}` ({backend}): {text}")
    if reports:
        return Outcome(prep.program.seed, "mismatch", backend, "\n".join(reports))
    return None


def run_sim(prep: Prepared, timeout: float = DEFAULT_TIMEOUT_S) -> Outcome | None:
    from ..api import run_kernel
    from ..diagnostics import CompileError, DiagnosticError

    arrays = {k: v.copy() for k, v in prep.inputs.items()}
    try:
        with time_limit(timeout):
            run_kernel(prep.op.compiled, prep.index, arrays, prep.scalars, prep.symbols, "sim", poison=True)
    except Hang as exc:
        return Outcome(prep.program.seed, "hang", "sim", str(exc))
    except CompileError as exc:
        return Outcome(prep.program.seed, "rejected", "sim", exc.render())
    except DiagnosticError as exc:
        return stopped_or_refused(prep, exc, "sim")
    except Exception:  # noqa: BLE001
        return Outcome(prep.program.seed, "crash", "sim", traceback.format_exc(limit=-4))
    if prep.stop is not None:
        return ran_past_a_stop(prep, "sim")
    failure = check_outputs(prep, arrays, "sim")
    if failure is not None:
        return failure
    from .probes import aliased, huge

    try:
        with time_limit(timeout):
            return aliased(prep) or huge(prep)
    except Hang as exc:
        return Outcome(prep.program.seed, "hang", "probe", str(exc))


# ----------------------------------------------------------------------------------- cpu batches

def run_cpu_batch(preps: Sequence[Prepared], jobs: int = 2, on_start: Callable[[int], None] | None = None,
                  opt: str = "-O0") -> list[Outcome | None]:
    """Run many programs on the CPU backend, building them as ``jobs`` shared libraries.

    ``-O0`` by default: a batch builds about twice as fast as at ``-O1``; the emitted code is the
    same, only the compiler's optimisation of it differs from a user's ``-O3`` build.
    """
    from ..backends.cpp.build import build_shared, load_library
    from ..backends.cpp.run import bind_entry, build_defines, call_loaded, emitted
    from ..diagnostics import CompileError, DiagnosticError

    results: list[Outcome | None] = [None] * len(preps)
    variants: list[Any] = [None] * len(preps)
    for i, prep in enumerate(preps):
        try:
            variants[i] = emitted(prep.op.compiled, prep.index)
        except CompileError as exc:
            results[i] = Outcome(prep.program.seed, "rejected", "cpu", exc.render())
        except Exception:  # noqa: BLE001
            results[i] = Outcome(prep.program.seed, "crash", "cpu", traceback.format_exc(limit=-4))
    todo = [i for i in range(len(preps)) if results[i] is None]
    if not todo:
        return results
    groups = [todo[g::jobs] for g in range(min(jobs, len(todo)))]

    def build(group: list[int]):
        # file names start with each program's unique op name; the build puts every file in a
        # namespace of its own inside one translation unit (build.unity_source)
        sources = {f: t for i in group for f, t in variants[i].sources.items()}
        digest = hashlib.sha256("".join(f + t for f, t in sorted(sources.items())).encode()).hexdigest()
        defines = build_defines(preps[group[0]].op.compiled)
        path = build_shared(sources, "fzbatch_" + digest[:12], flags=(opt,), defines=defines)
        return load_library(path), path

    libs: dict[int, Any] = {}
    with ThreadPoolExecutor(max_workers=max(1, len(groups))) as pool:
        futures = [(g, pool.submit(build, g)) for g in groups]
        for group, fut in futures:
            try:
                lib = fut.result()
                for i in group:
                    libs[i] = lib
            except CompileError:
                # Some program of the batch does not build: build each alone to find which.
                for i in group:
                    try:
                        libs[i] = build([i])
                    except CompileError as exc:
                        results[i] = Outcome(preps[i].program.seed, "crash", "cpu",
                                             "emitted C++ does not build:\n" + exc.render())
    for i in todo:
        if results[i] is not None or i not in libs:
            continue
        prep = preps[i]
        if on_start is not None:
            on_start(i)
        arrays = {k: v.copy() for k, v in prep.inputs.items()}
        try:
            # guards and header checks report as they do for a user's call (GuardError, KernelFailure)
            call_loaded(bind_entry(*libs[i], variants[i]), prep.op.compiled, prep.index, arrays, prep.scalars,
                        prep.symbols, poison=True)
        except DiagnosticError as exc:
            results[i] = stopped_or_refused(prep, exc, "cpu")
            continue
        except Exception:  # noqa: BLE001
            results[i] = Outcome(prep.program.seed, "crash", "cpu", traceback.format_exc(limit=-4))
            continue
        results[i] = ran_past_a_stop(prep, "cpu") if prep.stop is not None else check_outputs(prep, arrays, "cpu")
    return results


# ----------------------------------------------------------------------------------- driver


def run_programs(programs: Sequence[Program], backends: Iterable[str] = ("sim", "cpu"), folder: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, cpu_jobs: int = 2,
                 on_start: Callable[[int, str], None] | None = None) -> list[Outcome]:
    """Run every program in this process and return one Outcome each (the first failure found)."""
    backends = tuple(backends)
    folder = folder or tempfile.mkdtemp(prefix="ptodsl-fuzz-")
    outcomes: list[Outcome | None] = [None] * len(programs)
    preps: list[tuple[int, Prepared]] = []
    started = [time.perf_counter()] * len(programs)
    for i, program in enumerate(programs):
        started[i] = time.perf_counter()
        if on_start is not None:
            on_start(program.seed, "compile")
        prep = prepare(program, folder, timeout)
        if isinstance(prep, Outcome):
            outcomes[i] = prep
            continue
        if "sim" in backends:
            if on_start is not None:
                on_start(program.seed, "sim")
            failure = run_sim(prep, timeout)
            if failure is not None:
                outcomes[i] = failure
                continue
        preps.append((i, prep))
    if "cpu" in backends and preps:
        if on_start is not None:
            on_start(-1, "build")

        def started_cpu(k: int) -> None:
            if on_start is not None:
                on_start(preps[k][1].program.seed, "cpu")

        results = run_cpu_batch([p for _, p in preps], cpu_jobs, started_cpu)
        for (i, _), r in zip(preps, results):
            outcomes[i] = r
    out = []
    for i, (program, o) in enumerate(zip(programs, outcomes)):
        o = o or Outcome(program.seed, "ok")
        o.seconds = time.perf_counter() - started[i]
        out.append(o)
    return out


__all__ = ["KINDS", "TOLERANCES", "Outcome", "Prepared", "compare", "prepare", "run_cpu_batch",
           "run_programs", "run_sim", "write_program"]
