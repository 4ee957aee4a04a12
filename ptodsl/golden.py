"""The golden harness: run a spec's ``tests:`` cases and compare against its numpy reference.

Inputs are generated reproducibly from the case's seed (default: derived from the op name and case
index). Tolerances come from a per-dtype table that a case may override. A mismatch report says
how many elements differ, the worst absolute and relative errors with their index, whether the
mismatches sit in tail tiles, and any NaN/Inf.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import sym
from .api import Operator, load, run_kernel
from .check.types import TensorTy
from .cost.timeline import Timeline
from .diagnostics import CompileError, Diagnostic, Diagnostics, Span
from .dtypes import DTYPES, numpy_dtype
from .frontend.spec import Spec, TestCase, check_spec_files

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
    spec: str
    case: TestCase
    ok: bool
    report: str = ""
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    traffic: dict[str, int] = field(default_factory=dict)  # GM bytes loaded and stored
    # the same by parameter name, and WORKSPACES for the compiler's GM workspaces and locals
    traffic_by_tensor: dict[str, dict[str, int]] = field(default_factory=dict)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    timeline: Timeline | None = None  # the cost model's account of the run (sim, Block IR)


def case_id(spec: Spec, case: TestCase, backend: str | None = None) -> str:
    """Readable ids such as ``softmax[bf16-B33]``: dtypes, then the case name or its shapes."""
    parts = [case.dtypes[k] for k in sorted(case.dtypes)]
    parts.append(case.name or "-".join(f"{k}{v}" for k, v in case.shapes.items()) or f"case{case.index}")
    if backend:
        parts.append(backend)
    return f"{spec.op}[{'-'.join(parts)}]"


def tolerance(case: TestCase, dtype: str) -> tuple[float, float]:
    """(rtol, atol) for an output of ``dtype``: the case's own values, else the dtype's defaults."""
    rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
    return (case.rtol if case.rtol is not None else rtol, case.atol if case.atol is not None else atol)


def test_error(spec: Spec, path: tuple, message: str, label: str, help: str, code: str = "E0232") -> CompileError:
    """A mistake in a spec's reference or test case, reported at its YAML entry."""
    return CompileError([Diagnostic(code, message, spec.spans.at(path) if spec.spans else Span(spec.path, 1, 1),
                                    label, (), (), help)])


def _reference_module(spec: Spec):
    """The reference file of ``spec``, imported once per process."""
    # The reference is Python and runs: only a file inside the spec's root may be loaded, whoever
    # built this Spec (load_spec reports the same as E0219).
    diags = Diagnostics()
    check_spec_files(spec, diags)
    diags.raise_if_errors()
    path = spec.reference_path
    assert path is not None and spec.reference is not None
    where = ("reference",)
    if not os.path.isfile(path):
        raise test_error(spec, where, f"the reference file `{spec.reference.file}` does not exist",
                         "no such file beside the spec", "write `reference: FILE.py:FUNCTION`, FILE relative to "
                         "the YAML's folder", code="E0230")
    mod_name = f"_ptodsl_ref_{zlib.crc32(os.path.abspath(path).encode()):08x}"
    module = sys.modules.get(mod_name)
    if module is None:
        loader_spec = importlib.util.spec_from_file_location(mod_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise test_error(spec, where, f"`{spec.reference.file}` cannot be loaded as a Python module",
                             "not a Python file", "name a .py file", code="E0230")
        module = importlib.util.module_from_spec(loader_spec)
        try:
            loader_spec.loader.exec_module(module)
        except Exception as exc:  # the reference is the user's code: any failure is theirs to see
            raise test_error(spec, where, f"importing `{spec.reference.file}` failed: "
                             f"{type(exc).__name__}: {exc}", "this file raised while loading",
                             "fix the reference module; it must import on its own") from None
        sys.modules[mod_name] = module
    return module


def _function(spec: Spec, module, name: str, key: str, code: str):
    fn = getattr(module, name, None)
    if not callable(fn):
        assert spec.reference is not None
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise test_error(spec, (key,), f"`{spec.reference.file}` has no function `{name}`",
                         "named here", "functions there: " + (", ".join(names) or "none"), code=code)
    return fn


def load_reference(spec: Spec):
    """The spec's numpy reference function, or None when it names none."""
    if spec.reference is None:
        return None
    return _function(spec, _reference_module(spec), spec.reference.function, "reference", "E0230")


def load_torch(spec: Spec):
    """The spec's torch equivalent (``torch:``, a function of the reference file), or None when it
    names none. Loading it does not import torch; calling it does."""
    if spec.torch is None:
        return None
    if spec.reference is None:
        raise test_error(spec, ("torch",), f"`torch: {spec.torch}` names a function of the reference file, "
                         "and the spec has no `reference:`", "no file to look in",
                         "add `reference: FILE.py:FUNCTION` and define both functions in FILE", code="E0234")
    return _function(spec, _reference_module(spec), spec.torch, "torch", "E0234")


def make_inputs(op: Operator, case: TestCase) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    spec = op.spec
    seed = case.seed if case.seed is not None else zlib.crc32(f"{spec.op}:{case.index}".encode())
    rng = np.random.default_rng(seed)
    variant = spec.variant_of(case)
    env = dict(spec.symbols) | dict(case.shapes)
    arrays: dict[str, np.ndarray] = {}
    for p in op.inputs:
        dtype = variant.get(p.dtype, p.dtype)
        shape = tuple(int(sym.evaluate(d.value if isinstance(d.value, int) else sym.Sym(d.value), env))
                      for d in p.dims)
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


def _as_ref_input(a: np.ndarray) -> np.ndarray:
    if a.dtype == numpy_dtype("bf16") or a.dtype == np.float16:
        return a.astype(np.float32)
    return a.copy()


def case_variant(op: Operator, case: TestCase) -> int:
    """The index of the dtype variant a case runs (raises what ``run_case`` would for a bad case)."""
    inputs, _ = make_inputs(op, case)
    return op.resolve(dict(inputs))[0]


def run_case(op: Operator, case: TestCase, backend: str = "sim", poison: bool = True,
             level: str = "block") -> CaseResult:
    """Run one case; the simulator executes the Block IR, or the Tile IR with ``level="tile"``."""
    spec = op.spec
    where = ("tests", case.index)
    ref_fn = load_reference(spec)
    if ref_fn is None:
        raise test_error(spec, where, "a test case without a reference cannot pass",
                         "this case has nothing to compare with",
                         "add `reference: FILE.py:FUNCTION`, a numpy function computing the outputs",
                         code="E0231")
    try:
        inputs, scalars = make_inputs(op, case)
    except KeyError as exc:
        raise test_error(spec, where, f"the case gives no size for the dim symbol `{exc.args[0]}`",
                         "this case", f"add it to the case: `shapes: {{{exc.args[0]}: ...}}`",
                         code="E0233") from None
    try:
        ref_out = ref_fn(*(_as_ref_input(inputs[p.name]) for p in op.inputs), **scalars)
    except Exception as exc:  # the reference is the user's code
        args = ", ".join([p.name for p in op.inputs] + [f"{k}=..." for k in scalars])
        raise test_error(spec, ("reference",), f"the reference raised {type(exc).__name__}: {exc}",
                         f"called as {spec.reference.function}({args})",
                         "the reference takes the inputs in parameter order (half floats as f32) and "
                         "the case's scalars by keyword, and returns the outputs in parameter order") from None
    expected = list(ref_out) if isinstance(ref_out, (tuple, list)) else [ref_out]
    if len(expected) != len(op.outputs):
        raise test_error(spec, ("reference",), f"the reference returned {len(expected)} output"
                         f"{'s' if len(expected) != 1 else ''}, the op has {len(op.outputs)} ("
                         + ", ".join(p.name for p in op.outputs) + ")", "this function",
                         "return one array per `out`/`inout` parameter, in parameter order")
    tensors = dict(inputs)
    index, arrays, symbols = op.resolve(tensors)
    ck = op.compiled.checked[index]
    for s, v in case.shapes.items():
        symbols.setdefault(s, v)
    outs = []
    for p in op.outputs:
        if p.name in arrays:
            outs.append(p.name)
            continue
        t = ck.params[p.name].ty
        assert isinstance(t, TensorTy)
        shape = tuple(int(sym.evaluate(s, symbols)) for s in t.shape)
        fill = np.nan if DTYPES[t.dtype].is_float and poison else 0
        arrays[p.name] = np.full(shape, fill).astype(numpy_dtype(t.dtype))
        outs.append(p.name)
    full_scalars = {p.name: scalars.get(p.name, _default(p)) for p in op.scalars}
    machine = run_kernel(op.compiled, index, arrays, full_scalars, symbols, backend, poison=poison, level=level)
    result = CaseResult(spec.op, case, True, outputs={n: arrays[n] for n in outs})
    result.traffic = dict(machine.traffic) if machine is not None else {}
    result.timeline = machine.timeline if machine is not None else None
    if machine is not None and hasattr(machine, "traffic_by_buffer"):
        from .backends.sim import gm_root

        by_id = {id(gm_root(a)): name for name, a in arrays.items()}
        for key, moved in machine.traffic_by_buffer.items():
            name = by_id.get(key, WORKSPACES)
            have = result.traffic_by_tensor.setdefault(name, {"load": 0, "store": 0})
            for kind, n in moved.items():
                have[kind] += n
    result.inputs = inputs
    reports = []
    for name, want in zip(outs, expected):
        got = arrays[name]
        rtol, atol = tolerance(case, ck.params[name].ty.dtype)
        text = compare(name, got, np.asarray(want), rtol, atol, tile_of(op, name))
        if text:
            reports.append(text)
    result.ok = not reports
    result.report = "\n".join(reports)
    return result


def _default(p):
    from .api import literal_value

    return literal_value(p.default) if p.default is not None else None


def tile_of(op: Operator, name: str) -> tuple[int, ...] | None:
    sched = op.spec.schedule
    tiles = [ls.vec_tile for ls in sched.loops.values() if ls.vec_tile] + ([sched.vec_tile] if sched.vec_tile else [])
    return tuple(tiles[0]) if tiles else None


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


def spec_paths(root: str) -> list[str]:
    if os.path.isfile(root):
        return [root]
    out = []
    for dirpath, _dirs, files in os.walk(root):
        out.extend(os.path.join(dirpath, f) for f in files if f.endswith(".yaml"))
    return sorted(out)


__all__ = ["TOLERANCES", "CaseResult", "case_id", "compare", "load", "run_case", "spec_paths", "tolerance"]
