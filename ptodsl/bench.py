"""``ptodsl bench``: per spec case, the kernel's time on a backend next to numpy's reference and
torch's equivalent, all measured in the same run, and the GM traffic the Block IR moves against
the compulsory minimum (from :mod:`ptodsl.stats`).

Times are the best of a few rounds, each long enough to be measured (see :func:`measure`); the
first call is a warm-up, so a cpu build or cache lookup is not counted. Idle OpenMP threads sleep
(see :func:`passive_openmp`) so that no library's thread pool slows the others down. The numpy column runs the
spec's own reference (``reference:`` in the YAML) on the case's inputs; the torch column runs the
equivalent from :data:`TORCH` when torch is installed and the op has one, and is left out
otherwise. Ratios above 1 mean ptodsl is slower.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from .api import Operator, literal_value, load, run_kernel, to_torch
from .diagnostics import CompileError
from .golden import _as_ref_input, case_id, load_reference, make_inputs

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
    fn()  # warm-up: builds, caches, first-touch of the buffers
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_round_s or number >= 1 << 20:
            break
        number *= 2 if elapsed > min_round_s / 4 else 8
    best = elapsed / number
    for _ in range(rounds - 1):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def _torch_table() -> dict[str, Callable[..., Any]]:
    """Torch equivalents of the library's ops, by op name: inputs positionally, scalars by name."""
    import torch

    f = torch.nn.functional
    return {
        "abs_neg": lambda x: (x.abs(), -x),
        "add_bcast": lambda x, bias: x + bias,
        "add_one": lambda x: x + 1.0,
        "amax_rows": lambda x: x.amax(-1),
        "amin_cols": lambda x: x.amin(0, keepdim=True),
        "attn": lambda q, k, v, scale: (torch.softmax((q @ k.T).float() * scale, -1).to(q.dtype) @ v),
        "flash_attn": lambda q, k, v, scale: (torch.softmax((q @ k.T).float() * scale, -1).to(q.dtype) @ v),
        "cast_f16_f32": lambda x: x.float(),
        "cast_f32_f16": lambda x: x.half(),
        "div_bcast": lambda x, d: x / d,
        "erf": torch.erf,
        "clamp": lambda x, lo=-1.0, hi=1.0: torch.clamp(x, lo, hi),
        "exp": torch.exp,
        "gelu": lambda x: f.gelu(x, approximate="tanh"),
        "layernorm": lambda x, g, b, eps=1e-5: f.layer_norm(x, x.shape[-1:], g, b, eps),
        "log": torch.log,
        "log_softmax": lambda x: torch.log_softmax(x, -1),
        "matmul": lambda a, b: (a @ b).float(),
        "matmul_bias_relu": lambda a, b, bias: torch.relu((a @ b).float() + bias),
        "mean_rows": lambda x: x.mean(-1),
        "mul_bcast": lambda x, s: x * s,
        "reciprocal": torch.reciprocal,
        "relu": torch.relu,
        "rmsnorm": lambda x, g, eps=1e-6: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g,
        "rsqrt": torch.rsqrt,
        # rows past each batch's length keep out's values: a mask, as eager torch code would write it
        "seq_add": lambda inp, act_seqs, out: torch.where(
            torch.arange(inp.shape[1])[None, :, None] < act_seqs[:, None, None], inp + 1.0, out),
        "scalar_ops": lambda x, s=0.25: (x - 1.5) * 2.0 / 4.0 + s,
        "scale_shift": lambda x, alpha, beta=0.5: x * alpha + beta,
        "sigmoid": torch.sigmoid,
        "silu": f.silu,
        "softmax": lambda x: torch.softmax(x, -1),
        "softmax_long": lambda x: torch.softmax(x, -1),
        "sqrt": torch.sqrt,
        "sub_bcast": lambda x, m: x - m,
        "sum_cols": lambda x: x.sum(0, keepdim=True),
        "sum_rows": lambda x: x.sum(-1, keepdim=True),
        "swiglu": lambda a, b: f.silu(a) * b,
        "tanh": torch.tanh,
        "tensor_sum": lambda x: x.sum(0, keepdim=True),
        "where_relu": lambda x: torch.where(x > 0, x, x * 0.1),
    }


def torch_table() -> dict[str, Callable[..., Any]] | None:
    try:
        return _torch_table()
    except ImportError:
        return None


@dataclass
class Row:
    case: str
    seconds: float | None = None  # the kernel on the chosen backend
    numpy_s: float | None = None
    torch_s: float | None = None
    traffic: float | None = None  # GM bytes moved / compulsory minimum
    error: str | None = None


def bench_case(op: Operator, case, backend: str, torch_ops: dict | None, traffic: dict[str, float]) -> Row:
    row = Row(case_id(op.spec, case), traffic=traffic.get(case_id(op.spec, case)))
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
    full = {p.name: scalars.get(p.name, _default(p)) for p in op.scalars}
    row.seconds = measure(lambda: run_kernel(op.compiled, index, arrays, full, symbols, backend))
    reference = load_reference(op.spec)
    if reference is not None:
        ref_inputs = [_as_ref_input(inputs[p.name]) for p in op.inputs]
        row.numpy_s = measure(lambda: reference(*ref_inputs, **scalars))
    fn = (torch_ops or {}).get(op.spec.op)
    if fn is not None:
        tensors = [to_torch(np.ascontiguousarray(inputs[p.name])) for p in op.inputs]
        row.torch_s = measure(lambda: fn(*tensors, **scalars))
    return row


def _default(p) -> Any:
    return literal_value(p.default) if p.default is not None else None


def traffic_ratios(op: Operator) -> dict[str, float]:
    from .stats import collect

    out = {}
    for variant in collect(op):
        for cid, moved, minimum in variant.traffic:
            if minimum:
                out[cid] = moved / minimum
    return out


def bench(paths: Sequence[str], backend: str = "cpu", k: str | None = None, out: TextIO | None = None) -> int:
    """Benchmark every case of the specs under ``paths``, printing a row per case as it is done
    (to ``out``, by default the ``sys.stdout`` of the moment); returns how many cases could not run."""
    out = out if out is not None else sys.stdout
    from .frontend.spec import load_spec
    from .golden import spec_paths

    passive_openmp()
    torch_ops = torch_table()
    columns = Columns(backend, torch_ops is not None)
    out.write(columns.header())
    failed = 0
    for path in [p for root in paths for p in spec_paths(root)]:
        if k and not any(k in case_id(s, c) for s in [load_spec(path)] for c in s.tests):
            continue
        try:
            t0 = time.perf_counter()
            op = load(path)
            compile_s = time.perf_counter() - t0
            traffic = traffic_ratios(op)
        except CompileError as e:
            out.write(columns.row(Row(path, error=e.diagnostics[0].message)))
            failed += 1
            continue
        # the IR verifier runs after every pass of every compile: its share of compile time is shown
        out.write(f"# {path}: compiled in {compile_s * 1e3:.0f} ms, IR verification "
                  f"{op.compiled.verify_seconds * 1e3:.0f} ms of it\n")
        for case in op.spec.tests:
            if k and k not in case_id(op.spec, case):
                continue
            try:
                row = bench_case(op, case, backend, torch_ops, traffic)
            except (CompileError, ValueError, TypeError) as e:
                message = e.diagnostics[0].message if isinstance(e, CompileError) else str(e)
                row = Row(case_id(op.spec, case), error=message.splitlines()[0])
                failed += 1
            out.write(columns.row(row))
            out.flush()
    return failed


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
                + ([f"{b}/torch"] if self.with_torch else []) + ["GM traffic"])

    def header(self) -> str:
        return "case".ljust(self.case_width) + "".join(c.rjust(self.width) for c in self.names()) + "\n"

    def row(self, r: Row) -> str:
        name = r.case.ljust(self.case_width)
        if r.error is not None:
            return f"{name}  error: {r.error}\n"
        cells = [_ms(r.seconds), _ms(r.numpy_s)] + ([_ms(r.torch_s)] if self.with_torch else [])
        cells += [_ratio(r.seconds, r.numpy_s)] + ([_ratio(r.seconds, r.torch_s)] if self.with_torch else [])
        cells.append("-" if r.traffic is None else f"{r.traffic:.2f}")
        return name + "".join(c.rjust(self.width) for c in cells) + "\n"


__all__ = ["Columns", "Row", "bench", "bench_case", "measure", "passive_openmp", "torch_table", "traffic_ratios"]
