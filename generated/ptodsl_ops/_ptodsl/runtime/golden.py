"""Golden cases of a program: inputs made from a case's seed, outputs compared with a reference.

The compiler's harness (:mod:`ptodsl.golden`) and a generated package's own tests
(``pytest --pyargs <package>``) both run cases through :func:`run_case`, so the inputs a case
makes and the verdict on its outputs are the same wherever it runs.
"""

from __future__ import annotations

import importlib.util
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import sym
from ..cases import InputError, TestCase, build_input, case_seed
from ..cost.timeline import Timeline
from ..diagnostics import DiagnosticError
from ..dtypes import DTYPES, numpy_dtype
from .operator import Operator, run_kernel

# (rtol, atol) per output dtype; integers and bool compare exactly.
TOLERANCES: dict[str, tuple[float, float]] = {
    "f32": (1e-5, 1e-6),
    "f16": (5e-3, 1e-3),
    "bf16": (3e-2, 1e-2),
}
DEFAULT_RANGE = (-1.0, 1.0)
DEFAULT_INT_RANGE = (0, 10)
WORKSPACES = "(workspaces)"  # traffic_by_tensor key of GM memory no parameter owns


@dataclass
class CaseResult:
    spec: str  # the op's name
    case: TestCase
    ok: bool
    report: str = ""
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    traffic: dict[str, int] = field(default_factory=dict)  # GM bytes loaded and stored
    # the same by parameter name, and WORKSPACES for the compiler's GM workspaces and locals
    traffic_by_tensor: dict[str, dict[str, int]] = field(default_factory=dict)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    timeline: Timeline | None = None  # the cost model's account of the run (sim, Block IR)


class CaseError(Exception):
    """A mistake in a case or its reference, at the spec's YAML entry ``path``."""

    def __init__(self, path: tuple, message: str, label: str, help: str, code: str = "E0232"):
        super().__init__(message)
        self.path, self.message, self.label, self.help, self.code = path, message, label, help, code


def case_id(op: str, case: TestCase, backend: str | None = None) -> str:
    """Readable ids such as ``softmax[bf16-B33]``: dtypes, then the case name or its shapes."""
    parts = [case.dtypes[k] for k in sorted(case.dtypes)]
    if case.name:
        parts.append(case.name)
    else:
        # cases of one shape told apart by what they give explicitly
        parts.append("-".join([f"{k}{v}" for k, v in case.shapes.items()] + sorted(case.inputs))
                     or f"case{case.index}")
    if backend:
        parts.append(backend)
    return f"{op}[{'-'.join(parts)}]"


def tolerance(case: TestCase, dtype: str) -> tuple[float, float]:
    """(rtol, atol) for an output of ``dtype``: the case's own values, else the dtype's defaults."""
    rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
    return (case.rtol if case.rtol is not None else rtol, case.atol if case.atol is not None else atol)


def import_file(path: str) -> Any:
    """Import a reference file by path, once per process."""
    name = f"_ptodsl_ref_{zlib.crc32(path.encode()):08x}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"`{path}` cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return module


def make_inputs(op: Operator, case: TestCase) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The case's inputs: those its ``inputs:`` gives, made as given, the others drawn at random
    from its seed (in parameter order, so giving one input leaves the others' values alone only
    when it comes last). A dim the case does not give raises KeyError; an unusable ``inputs:``
    entry raises :class:`CaseError` at it."""
    prog = op.program
    seed = case_seed(prog.op, case)
    rng = np.random.default_rng(seed)
    variant = prog.variant_of_case(case)
    env = dict(prog.symbols) | dict(case.shapes)
    sym.bind_defined(prog.defined, env)  # a case that breaks a definition fails at the call, E0866
    arrays: dict[str, np.ndarray] = {}
    for p in op.inputs:
        dtype = variant.get(p.dtype, p.dtype)
        shape = tuple(int(sym.evaluate(d if isinstance(d, int) else sym.Sym(d), env)) for d in p.dims or ())
        if p.name in case.inputs:
            try:
                arrays[p.name] = build_input(p.name, case.inputs[p.name], shape, dtype, seed, env,
                                             prog.data_dir or ".")
            except InputError as exc:
                raise CaseError(("tests", case.index, "inputs", p.name, *exc.where), exc.message, exc.label,
                                exc.help, exc.code) from None
            continue
        info = DTYPES[dtype]
        given = case.ranges.get(p.name) or case.data_range
        if info.is_float:
            lo, hi = given or DEFAULT_RANGE
            a = rng.uniform(lo, hi, size=shape).astype(numpy_dtype(dtype))
        elif dtype == "bool":
            a = rng.integers(0, 2, size=shape).astype(bool)
        else:
            lo, hi = given or DEFAULT_INT_RANGE
            a = rng.integers(int(lo), int(hi) + 1, size=shape).astype(numpy_dtype(dtype))
        arrays[p.name] = a
    return arrays, dict(case.scalars)


def as_ref_input(a: np.ndarray) -> np.ndarray:
    """What a reference gets: half floats widened to f32, everything else copied."""
    if a.dtype == numpy_dtype("bf16") or a.dtype == np.float16:
        return a.astype(np.float32)
    return a.copy()


def run_case(op: Operator, case: TestCase, reference: Callable[..., Any] | None, backend: str = "sim",
             poison: bool = True, level: str = "block", ref_name: str = "reference") -> CaseResult:
    """Run one case; the simulator executes the Block IR, or the Tile IR with ``level="tile"``.

    A mistake of the case or its reference raises :class:`CaseError`."""
    prog = op.program
    where = ("tests", case.index)
    if reference is None:
        raise CaseError(where, "a test case without a reference cannot pass", "this case has nothing to compare with",
                        "add `reference: FILE.py:FUNCTION`, a numpy function computing the outputs", "E0231")
    try:
        inputs, scalars = make_inputs(op, case)
    except KeyError as exc:
        raise CaseError(where, f"the case gives no size for the dim symbol `{exc.args[0]}`", "this case",
                        f"add it to the case: `shapes: {{{exc.args[0]}: ...}}`", "E0233") from None
    if case.refuses is not None:
        return _refused(op, case, inputs, scalars, backend, poison, level)
    try:
        ref_out = reference(*(as_ref_input(inputs[p.name]) for p in op.inputs), **scalars)
    except Exception as exc:  # the reference is the user's code
        args = ", ".join([p.name for p in op.inputs] + [f"{k}=..." for k in scalars])
        raise CaseError(("reference",), f"the reference raised {type(exc).__name__}: {exc}",
                        f"called as {ref_name}({args})",
                        "the reference takes the inputs in parameter order (half floats as f32) and "
                        "the case's scalars by keyword, and returns the outputs in parameter order") from None
    expected = list(ref_out) if isinstance(ref_out, (tuple, list)) else [ref_out]
    if len(expected) != len(op.outputs):
        raise CaseError(("reference",), f"the reference returned {len(expected)} output"
                        f"{'s' if len(expected) != 1 else ''}, the op has {len(op.outputs)} ("
                        + ", ".join(p.name for p in op.outputs) + ")", "this function",
                        "return one array per `out`/`inout` parameter, in parameter order")
    written = {p.name for p in op.outputs}  # an inout's input stays what the case gave, in result.inputs
    tensors = {k: (v.copy() if k in written else v) for k, v in inputs.items()}
    index, arrays, symbols = op.resolve(tensors)
    for s, v in case.shapes.items():
        symbols.setdefault(s, v)
    outs = []
    dtypes: dict[str, str] = {}
    for p in op.outputs:
        dtypes[p.name] = prog.param_type(index, p.name)[0]
        outs.append(p.name)
        if p.name in arrays:
            continue
        dtype, shape = op.output_shape(index, p, symbols)
        fill = np.nan if DTYPES[dtype].is_float and poison else 0
        arrays[p.name] = np.full(shape, fill).astype(numpy_dtype(dtype))
    full_scalars = {p.name: scalars.get(p.name, p.default) for p in op.scalars}
    machine = run_kernel(prog, index, arrays, full_scalars, symbols, backend, poison=poison, level=level)
    result = CaseResult(prog.op, case, True, outputs={n: arrays[n] for n in outs})
    result.traffic = dict(machine.traffic) if machine is not None else {}
    result.timeline = machine.timeline if machine is not None else None
    if machine is not None and hasattr(machine, "traffic_by_buffer"):
        from ..backends.sim import gm_root

        by_id = {id(gm_root(a)): name for name, a in arrays.items()}
        for key, moved in machine.traffic_by_buffer.items():
            name = by_id.get(key, WORKSPACES)
            have = result.traffic_by_tensor.setdefault(name, {"load": 0, "store": 0})
            for kind, n in moved.items():
                have[kind] += n
    result.inputs = inputs
    reports = []
    for name, want in zip(outs, expected):
        rtol, atol = tolerance(case, dtypes[name])
        text = compare(name, arrays[name], np.asarray(want), rtol, atol, prog.tile_hint)
        if text:
            reports.append(text)
    result.ok = not reports
    result.report = "\n".join(reports)
    return result


def _refused(op: Operator, case: TestCase, inputs: dict[str, np.ndarray], scalars: dict[str, Any], backend: str,
             poison: bool, level: str) -> CaseResult:
    """A case whose inputs the call must refuse (`refuses: CODE`): it passes when the call stops
    with that diagnostic, on whichever backend runs it, and fails when the call runs to the end."""
    prog = op.program
    tensors = dict(inputs)
    try:
        # the arguments' own checks (`nondecreasing:`, E0732) refuse before any kernel runs
        index, arrays, symbols = op.resolve(tensors)
        for s, v in case.shapes.items():
            symbols.setdefault(s, v)
        for p in op.outputs:
            if p.name not in arrays:
                dtype, shape = op.output_shape(index, p, symbols)
                arrays[p.name] = np.zeros(shape, numpy_dtype(dtype))
        full_scalars = {p.name: scalars.get(p.name, p.default) for p in op.scalars}
        run_kernel(prog, index, arrays, full_scalars, symbols, backend, poison=poison, level=level)
    except DiagnosticError as exc:
        code = exc.diagnostic.code
        ok = code == case.refuses
        report = (f"refused as expected ({code}: {exc.diagnostic.message})" if ok else
                  f"the call stopped with {code} ({exc.diagnostic.message}), not the expected {case.refuses}")
        return CaseResult(prog.op, case, ok, report, inputs=inputs)
    return CaseResult(prog.op, case, False, f"the call was expected to stop with {case.refuses}, but it ran to "
                      "the end", inputs=inputs)


def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float,
            tile: tuple[int, ...] | None = None) -> str:
    """Empty when every element is within tolerance; otherwise a report for a human."""
    if got.shape != want.shape:
        want = np.broadcast_to(want, got.shape) if want.size == 1 else want
        if got.shape != want.shape:
            return f"output `{name}`: shape {list(got.shape)}, reference gives {list(want.shape)}"
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - w)
        bad = ~(diff <= atol + rtol * np.abs(w))
    both_nan = np.isnan(g) & np.isnan(w)
    bad &= ~both_nan
    if not bad.any():
        return ""
    n, total = int(bad.sum()), bad.size
    lines = [f"output `{name}`: {n} of {total} elements differ ({100.0 * n / total:.2f}%), "
             f"rtol={rtol:g} atol={atol:g}"]
    d = np.where(np.isnan(diff), np.inf, diff)
    worst = np.unravel_index(int(np.argmax(d)), d.shape)
    lines.append(f"  worst abs error {d[worst]:.6g} at {list(map(int, worst))}: got {g[worst]:.6g}, "
                 f"want {w[worst]:.6g}")
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(bad, d / np.maximum(np.abs(w), np.finfo(np.float64).tiny), 0)
    rworst = np.unravel_index(int(np.argmax(rel)), rel.shape)
    lines.append(f"  worst rel error {rel[rworst]:.6g} at {list(map(int, rworst))}")
    idx = np.nonzero(bad)
    spans = [f"dim {axis} from {int(ix.min())} to {int(ix.max())}" for axis, ix in enumerate(idx)
             if ix.min() > 0 or ix.max() < got.shape[axis] - 1]
    if spans:
        lines.append(f"  mismatches span {', '.join(spans)}")
    nans, infs = int(np.isnan(g).sum()), int(np.isinf(g).sum())
    if nans or infs:
        lines.append(f"  output holds {nans} NaN and {infs} Inf (NaN marks never-written or padding data in "
                     "poison mode)")
    if tile is not None and got.ndim:
        t = tile[len(tile) - got.ndim:] if len(tile) >= got.ndim else (1,) * (got.ndim - len(tile)) + tuple(tile)
        idx = np.nonzero(bad)
        in_tail = np.zeros(n, bool)
        tails = []
        for axis, (size, ts) in enumerate(zip(got.shape, t)):
            if size % ts:
                start = size - size % ts
                in_tail |= idx[axis] >= start
                tails.append(f"dim {axis} from {start}")
        if tails:
            k = int(in_tail.sum())
            where = "all" if k == n else f"{k}"
            lines.append(f"  {where} of the mismatches lie in tail tiles ({', '.join(tails)}; tile {list(t)})")
    return "\n".join(lines)


__all__ = ["TOLERANCES", "CaseError", "CaseResult", "as_ref_input", "case_id", "compare", "import_file",
           "make_inputs", "run_case", "tolerance"]
