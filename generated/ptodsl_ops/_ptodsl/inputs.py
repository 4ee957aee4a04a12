"""Runtime values checked before a kernel runs: scalars, dims and lengths read from tensors.

Tensors come from real workloads and scalars from callers: a value the kernel cannot hold must be
a diagnostic before anything runs, not an infinity, a wrapped integer, a loop that never ends or a
write past the end of a tensor. Each check returns the :class:`Diagnostic` of the first problem,
or None; :mod:`ptodsl.api` raises it as an ``ArgumentError``.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import sym
from .backends.memory import allocation_failure, human
from .diagnostics import Diagnostic, Span
from .dtypes import DIM_MAX, DTYPES, value_range
from .ir import Func, Op, TensorType

E_SCALAR = "E0706"
E_DIM = "E0710"
E_LENGTH = "E0711"
E_OVERLAP = "E0717"
MAX_DISTINCT_LENGTHS = 1 << 16  # distinct values a length tensor is checked for, one by one


def _diag(code: str, message: str, span: Span | None, label: str, help: str) -> Diagnostic:
    return Diagnostic(code, message, span, label, (), (), help)


def scalar_value(name: str, dtype: str, value: Any, span: Span | None) -> tuple[Any, Diagnostic | None]:
    """``value`` as the Python number a scalar of ``dtype`` takes, or the diagnostic why it cannot."""
    if hasattr(value, "shape") and hasattr(value, "item") and tuple(value.shape) == ():
        value = value.item()  # a 0-d numpy array or torch tensor
    bad_kind = None
    if value is None or isinstance(value, str | bytes) or not isinstance(value, numbers.Number):
        bad_kind = type(value).__name__
    elif isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        bad_kind = "complex"
    if bad_kind is not None:
        return None, _diag(E_SCALAR, f"scalar `{name}` must be a real number, got {bad_kind}", span,
                           f"declared {dtype} here", f"pass a Python or numpy number, e.g. `{name}=1`")
    info = DTYPES[dtype]
    lo, hi = value_range(dtype)
    if info.is_float:
        v = float(value) if not isinstance(value, int) or abs(value) <= 2**1023 else (math.inf if value > 0 else -math.inf)
        if math.isfinite(v) and not lo <= v <= hi or not math.isfinite(v) and isinstance(value, numbers.Rational):
            return None, _diag(E_SCALAR, f"scalar `{name}` = {_short(value)} is out of the range of {dtype}", span,
                               f"declared {dtype} here", f"{dtype} holds finite values up to {hi:.7g} in magnitude; "
                               "pass float('inf') if infinity is meant")
        return v, None
    if isinstance(value, bool | np.bool_):
        value = int(value)
    if not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
            value = int(value)
        else:
            return None, _diag(E_SCALAR, f"scalar `{name}` = {_short(value)} is not an integer", span,
                               f"declared {dtype} here", f"pass an integer, e.g. `{name}=round(value)`")
    v = int(value)
    if not lo <= v <= hi:
        return None, _diag(E_SCALAR, f"scalar `{name}` = {_short(v)} does not fit {dtype}", span,
                           f"declared {dtype} here", f"{dtype} holds values from {lo} to {hi}")
    return (bool(v) if dtype == "bool" else v), None


def _short(value: Any) -> str:
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"  # repr() refuses past 4300 digits
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def check_dims(symbols: Mapping[str, int], spans: Mapping[str, Span | None]) -> Diagnostic | None:
    """Every bound symbol is a dim the kernels can index with (0 .. 2**31-1)."""
    for name, value in symbols.items():
        if not 0 <= int(value) <= DIM_MAX:
            return _diag(E_DIM, f"dim `{name}` = {value} is larger than the kernels support", spans.get(name),
                         f"`{name}` bound here", f"dims are at most {DIM_MAX}; split the tensor")
    return None


def check_empty(symbols: Mapping[str, int], outputs: Mapping[str, np.ndarray],
                spans: Mapping[str, Span | None]) -> tuple[bool, Diagnostic | None]:
    """(nothing to compute, problem) for calls with a zero-size dim.

    When every output is empty there is nothing to compute and the right answer is to return
    them as they are. A zero dim with non-empty outputs means a reduction (or a matmul's K) over
    an empty axis, whose value depends on the operation (0, -inf, NaN); it is refused rather than
    guessed.
    """
    zeros = [name for name, value in symbols.items() if int(value) == 0]
    if not zeros:
        return False, None
    if all(a.size == 0 for a in outputs.values()):
        return True, None
    name = zeros[0]
    return False, _diag(E_DIM, f"dim `{name}` is 0, but the outputs are not empty", spans.get(name),
                        f"`{name}` bound here",
                        "the kernel would reduce over an empty axis; handle the empty case before calling")


def check_lengths(func: Func, arrays: Mapping[str, np.ndarray], symbols: Mapping[str, int],
                  spans: Mapping[str, Span | None]) -> Diagnostic | None:
    """Values read from a tensor and used as a valid extent stay within the dim they bound.

    ``cur = act_seqs[b]; view(x, [1, S, H], valid_shape=[1, cur, H])`` needs ``0 <= cur <= S``
    for every value of ``act_seqs``; a larger one would make the kernel write into the next batch.
    Only valid shapes the spec gives (inline or in the YAML; a view records them as
    ``valid_given``) are lengths: the extent a view infers from its offset (``view(x, [1, C],
    [r, 0])`` holds ``min(max(R - r, 0), 1)`` rows) is no input of the caller's, and where such an
    offset may leave the tensor a guard stops the call (E0730).
    """
    reads: dict[str, tuple[str, Op]] = {}  # symbol -> (tensor parameter, read op)
    for op in func.walk():
        if op.name == "read" and op.operands and op.operands[0].name in arrays:
            reads[op.attrs["sym"]] = (op.operands[0].name, op)
    if not reads:
        return None
    for op in func.walk():
        given = op.attrs.get("valid_given") if op.name == "view" else None
        if not given:
            continue
        t = op.result.type
        assert isinstance(t, TensorType)
        for extent, dim in zip(given, t.shape):
            # The checker clamps a given valid extent into its view, so nothing is written outside
            # it whatever the data; a length outside the dim is still a wrong input.
            used = sym.free_symbols(extent) & set(reads) if not isinstance(extent, int) else set()
            for s in sorted(used):
                problem = _length_problem(s, extent, dim, reads[s][0], arrays, symbols)
                if problem is not None:
                    tensor = reads[s][0]
                    return _diag(E_LENGTH, f"`{tensor}` holds {problem}", spans.get(tensor) or op.span,
                                 f"`{tensor}` declared here",
                                 f"every value read from `{tensor}` must give a valid extent "
                                 f"`{_as_written(extent)}` between 0 and `{sym.to_text(dim)}`")
    return None


def _as_written(e: sym.Expr) -> str:
    """``e`` with the names the spec gave: unrolled and peeled copies suffix their scalars."""
    names = {n: sym.Sym(re.sub(r"(_u\d+c\d+|_first|_last)+$", "", n)) for n in sym.free_symbols(e)}
    return sym.to_text(sym.substitute(e, names))


def _length_problem(s: str, extent: sym.Expr, dim: sym.Expr, tensor: str, arrays: Mapping[str, np.ndarray],
                    symbols: Mapping[str, int]) -> str | None:
    values = np.unique(arrays[tensor])
    if values.size > MAX_DISTINCT_LENGTHS:
        values = np.array([values.min(), values.max()])
    try:
        bound = sym.evaluate(dim, symbols)
    except (KeyError, ZeroDivisionError):
        return None
    for v in values.tolist():
        try:
            got = sym.evaluate(extent, {**symbols, s: v})
        except (KeyError, ZeroDivisionError, OverflowError):
            continue
        if not 0 <= got <= bound:
            return f"{v}, which makes the valid extent {got} where the dim is {bound}"
    return None


def memory_span(x: Any) -> tuple[str, int, int] | None:
    """(device, first byte, byte after the last) of the memory a numpy array or a torch tensor spans
    through its strides; None when it holds no element."""
    if type(x).__module__.startswith("torch"):
        if x.numel() == 0:
            return None
        start, shape, strides, item = x.data_ptr(), tuple(x.shape), tuple(x.stride()), x.element_size()
        strides = tuple(st * item for st in strides)
        device = str(x.device)
    else:
        a = np.asarray(x)
        if a.size == 0:
            return None
        start, shape, strides, item, device = a.__array_interface__["data"][0], a.shape, a.strides, a.itemsize, "cpu"
    lo = hi = start
    for n, st in zip(shape, strides):
        reach = (n - 1) * st
        lo, hi = lo + min(reach, 0), hi + max(reach, 0)
    return device, lo, hi + item


def _overlap(a: tuple[str, int, int] | None, b: tuple[str, int, int] | None) -> bool:
    return a is not None and b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def check_aliasing(modes: Mapping[str, str], tensors: Mapping[str, Any],
                   spans: Mapping[str, Span | None]) -> tuple[list[tuple[str, str]], Diagnostic | None]:
    """(inputs that share memory with an output, as (input, output) pairs; the problem) of a call.

    ``modes`` maps each tensor parameter to in, out or inout. Two outputs (out or inout) that share
    memory are refused (E0717): what a kernel leaves in the shared part would depend on the order
    of its stores. An input that shares memory with an output, exactly or in part, is read as it
    was before the call, as numpy does for overlapping operands: the caller copies it first (the
    kernel may read an element after it wrote the output element in its place). The spans are
    the memory the strides reach, so an input interleaved with an output is copied too.
    """
    found = {name: memory_span(t) for name, t in tensors.items() if name in modes}
    outs = [n for n in found if modes[n] != "in"]
    for i, a in enumerate(outs):
        for b in outs[i + 1:]:
            if _overlap(found[a], found[b]):
                return [], Diagnostic(
                    E_OVERLAP, f"outputs `{a}` and `{b}` share memory", spans.get(b), f"`{b}` declared here",
                    (), ("a kernel writes both: what the shared part holds after the call would depend on "
                         "the order of its stores",),
                    f"pass `{a}` and `{b}` separate buffers that do not overlap; an input may share memory "
                    "with an output (it is read as it was before the call)")
    copies = []
    for name, span in found.items():
        if modes[name] == "in":
            hit = next((o for o in outs if _overlap(span, found[o])), None)
            if hit is not None:
                copies.append((name, hit))
    return copies, None


def memory_limit() -> int | None:
    """The bytes one call may allocate: this machine's physical memory (None where the system does
    not say). With Linux's overcommit a larger buffer may be granted and the process killed when
    the kernels write it, so the limit is checked before anything is allocated."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * size if pages > 0 and size > 0 else None


def check_memory(buffers: Sequence[tuple[str, int, Span | None]], limit: int | None) -> Diagnostic | None:
    """The buffers a call allocates, (what, bytes, span) in the order it allocates them, within
    ``limit`` bytes in all: E0718 naming the first one that goes past it."""
    if limit is None:
        return None
    total = 0
    for what, nbytes, span in buffers:
        total += nbytes
        if total > limit:
            before = total - nbytes
            notes = [f"this call may allocate at most {human(limit)}, the memory of this machine"]
            if before:
                notes.insert(0, f"the call allocates {human(before)} before it, {human(total)} in all")
            return allocation_failure(what, nbytes, span, "declared here" if span is not None else "",
                                      tuple(notes)).diagnostic
    return None


def buffer_bytes(shape: Sequence[int], dtype: str) -> int:
    return math.prod(int(n) for n in shape) * DTYPES[dtype].itemsize


__all__ = ["DIM_MAX", "buffer_bytes", "check_aliasing", "check_dims", "check_empty", "check_lengths",
           "check_memory", "memory_limit", "memory_span", "scalar_value"]
