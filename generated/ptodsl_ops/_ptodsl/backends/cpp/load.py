"""The CPU backend's run-time half: build C++ sources through the cached ``build_shared``, load the
library once per process and call a variant's entry with ctypes.

It needs the sources, the entry's parameters and the target's buffer sizes, not the compiler, so
the runtime of a generated package calls it with the C++ the package ships
(:mod:`ptodsl.runtime.cpu`) and the compiler with the C++ it just emitted (:mod:`.run`).

A process loads each library once: libraries are remembered by the digest of their sources and
build settings, so two compilations of the same spec share one build.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ...diagnostics import CompileError, Diagnostic, DiagnosticError, Span
from ...dtypes import numpy_dtype
from ...ir import Func
from ...ops import OPS
from ..guards import guard_failure
from ..memory import allocation_failure
from . import arch
from .build import build_shared, compiler_name, library_function, load_library, pto_isa_bf16_gap

# ctypes types of the entry's scalar parameters (16-bit float scalars cross as float).
_SCALAR_CTYPES: dict[str, Any] = {
    "f32": ctypes.c_float, "f16": ctypes.c_float, "bf16": ctypes.c_float, "i8": ctypes.c_int8,
    "i16": ctypes.c_int16, "i32": ctypes.c_int32, "i64": ctypes.c_int64, "u8": ctypes.c_uint8,
    "bool": ctypes.c_uint8,
}


class Entry(Protocol):
    """What a variant's C++ must say: its exported entry, its sources and its parameters."""

    entry: str
    sources: dict[str, str]
    params: Sequence[Any]  # each with .name, .kind (tensor | scalar | symbol | poison) and .dtype


@dataclass
class Loaded:
    variant: Entry
    path: Path
    function: Any  # the ctypes function of the entry
    library: Any = None  # the ctypes library, for the guard report the entry leaves in it
    failure: Any = None  # the entry's `<entry>_failure()`: what a failed check said


class KernelFailure(DiagnosticError):
    """A check of the CPU header failed inside a kernel; ``.diagnostic`` says which (E0712)."""


_lock = threading.Lock()
_built: dict[str, Path] = {}  # sources digest -> library built by this process
# sources digest -> why the compiler rejected it in this process: the other cases of a variant
# that does not compile fail at once with the same diagnostic instead of compiling it again.
# Only the compiler's verdict on the text is remembered; a timeout or a cache fault may pass.
_failed: dict[str, CompileError] = {}
_REJECTED = ("E0901", "E0902")
_loaded: dict[str, Loaded] = {}  # sources digest -> its loaded entry


def target_defines(target: Any) -> dict[str, object]:
    """The CPU header's buffer sizes, from the target rather than the header's defaults, and its
    check that every wait_flag has a set_flag before it (a wait that would hang the NPU)."""
    t = target
    # the UB arena holds a block's two vector cores' UBs, one after the other (a mixed kernel's
    # second core's tiles sit above the first's: backends/cpp/kernel_mixed.py, AIV1_UB)
    return {"PTO_CPU_CHECK_FLAGS": None, "PTO_CPU_UB_BYTES": 2 * t.ub_bytes, "PTO_CPU_L1_BYTES": t.l1_bytes,
            "PTO_CPU_L0A_BYTES": t.l0a_bytes, "PTO_CPU_L0B_BYTES": t.l0b_bytes, "PTO_CPU_L0C_BYTES": t.l0c_bytes,
            "PTO_CPU_BIAS_BYTES": t.bias_bytes, "PTO_CPU_ADDRESS_ALIGN": t.ub_block_bytes}


def unbuildable_reason(v: Entry) -> str | None:
    """Why this toolchain cannot build the variant faithfully against the PTO_ISA_ROOT checkout
    (its C++ uses bfloat16_t and the compiler lacks std::bfloat16_t), or None."""
    gap = pto_isa_bf16_gap()
    if gap is None or not any("bfloat16_t" in text for text in v.sources.values()):
        return None
    return gap


def unfaithful_reason(v: Entry, target: Any, kernels: Iterable[Func]) -> str | None:
    """Why the variant (its C++ ``v``, the compute ``kernels`` its control program launches) would
    not compute against the PTO_ISA_ROOT checkout what the hardware does, or None: the compiler
    lacks a type it needs, its C++ uses an instruction pto-isa's CPU simulation does not implement
    (the target's ``cpu_sim: false`` rules), or a rounding TCVT the simulation copies."""
    reason = unbuildable_reason(v)
    if reason is not None or not os.environ.get("PTO_ISA_ROOT"):
        return reason
    missing = sorted(name for name, rule in target.vector_instructions.items()
                     if not rule.cpu_sim and any(f"{name}(" in text for text in v.sources.values()))
    if missing:
        return (f"pto-isa's CPU simulation does not implement {', '.join(missing)}, which this kernel uses "
                "(pass_options: {multiply_add: false} keeps the unfused instructions)")
    names = {f"tile.{n}" for n, od in OPS.items() if od.round_mode is not None}
    rounding = sorted({op.name[len("tile."):] for f in kernels for op in f.walk() if op.name in names})
    if rounding:
        return (f"pto-isa's CPU simulation copies a float TCVT to its own dtype where the hardware rounds "
                f"it to an integral value ({', '.join(rounding)} here; docs/PTO-ISA-NOTES.md)")
    return None


def faithful(v: Entry, target: Any, kernels: Iterable[Func], op: str, variant: str) -> None:
    """Raise E0908 where :func:`unfaithful_reason` finds a reason (``op`` and ``variant``, ``T=bf16``
    or empty, name it in the message): a build would give another answer than the hardware's."""
    reason = unfaithful_reason(v, target, kernels)
    if reason is not None:
        what = f"`{op}` ({variant})" if variant else f"`{op}`"
        raise CompileError([Diagnostic(
            "E0908", f"{what} cannot run faithfully against the PTO_ISA_ROOT checkout: {reason}",
            help="unset PTO_ISA_ROOT to run it on ptodsl's own CPU header")])


def digest(v: Entry, defines: Mapping[str, object]) -> str:
    """What decides a library's bytes: its sources, defines, compiler, header and instruction set choice."""
    h = hashlib.sha256()
    for name in sorted(v.sources):
        h.update(name.encode() + b"\0" + v.sources[name].encode() + b"\0")
    h.update(repr(sorted(defines.items())).encode())
    h.update(f"{compiler_name()}\0{os.environ.get('PTO_ISA_ROOT', '')}\0{arch.requested()}".encode())
    return h.hexdigest()


def build(v: Entry, defines: Mapping[str, object], *, reuse: bool = True) -> Path:
    """Build (or find in the cache) the library of one variant; returns its path.

    With ``reuse`` a library this process already built is returned without asking the cache,
    whatever cache directory is current; ``reuse=False`` always goes through ``build_shared``.
    """
    key = digest(v, defines)
    if reuse:
        with _lock:
            path = _built.get(key)
            failed = _failed.get(key)
        if path is not None and path.exists():
            return path
        if failed is not None:
            raise CompileError(failed.diagnostics)
    try:
        path = build_shared(v.sources, v.entry, defines=dict(defines))
    except CompileError as exc:
        if exc.diagnostics and all(d.code in _REJECTED for d in exc.diagnostics):
            with _lock:
                _failed[key] = exc
        raise
    with _lock:
        _built[key] = path
        _failed.pop(key, None)
    return path


def load(v: Entry, defines: Mapping[str, object]) -> Loaded:
    """The loaded library of a variant, built first when needed; loaded once per process."""
    key = digest(v, defines)
    with _lock:
        found = _loaded.get(key)
    if found is not None:
        return found
    path = build(v, defines)
    loaded = bind_entry(_load(path), path, v)
    with _lock:
        return _loaded.setdefault(key, loaded)


def bind_entry(library: ctypes.CDLL, path: Path, v: Entry) -> Loaded:
    """The entry of variant ``v`` and its failure report, in a loaded library (which may hold
    other programs too)."""
    function = library_function(library, path, v.entry)
    # 0; the number of the bounds guard that stopped the call; -1 when a header check failed; -2
    # when a GM workspace could not be allocated
    function.restype = ctypes.c_int
    function.argtypes = [_ctype(p.kind, p.dtype) for p in v.params]
    failure = library_function(library, path, f"{v.entry}_failure")
    failure.restype = ctypes.c_char_p
    failure.argtypes = []
    return Loaded(v, path, function, library, failure)


def _load(path: Path) -> ctypes.CDLL:
    """Load a kernel library so that its OpenMP threads sleep when idle.

    OpenMP reads its settings once, when the runtime loads with the first kernel library. By
    default idle threads spin, which steals the cores from the Python thread between calls and
    from other thread pools (torch's); passive waiting costs a few microseconds per parallel loop
    instead. The variable is set only while the library loads, and never over the user's choice.
    """
    if "OMP_WAIT_POLICY" in os.environ:
        return load_library(path)
    os.environ["OMP_WAIT_POLICY"] = "passive"
    try:
        return load_library(path)
    finally:
        os.environ.pop("OMP_WAIT_POLICY", None)


def _ctype(kind: str, dtype: str) -> Any:
    if kind == "tensor":
        return ctypes.c_void_p
    if kind == "poison":
        return ctypes.c_int
    return _SCALAR_CTYPES[dtype]


def call_loaded(loaded: Loaded, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
                symbols: Mapping[str, int], poison: bool, guards: Callable[[], list[Any]], op: str,
                span: Span | None) -> None:
    """Call a bound entry; a stopping guard or a failed header check raises its diagnostic.

    ``guards()`` gives the ``guard`` ops in the order the C++ numbers them (:func:`ptodsl.ir.gm.guard_ops`:
    the control program's, then its kernels'); ``op`` and ``span`` name the kernel in a failed header
    check's report."""
    args: list[Any] = []
    keep: list[np.ndarray] = []
    for p in loaded.variant.params:
        if p.kind == "tensor":
            args.append(_pointer(arrays, p.name, p.dtype, keep))
        elif p.kind == "scalar":
            if scalars.get(p.name) is None:
                raise ValueError(f"scalar argument `{p.name}` has no value")
            args.append(scalars[p.name])
        elif p.kind == "symbol":
            if p.name not in symbols:
                raise ValueError(f"symbol `{p.name}` has no value: pass a tensor whose shape binds it")
            args.append(int(symbols[p.name]))
        else:
            args.append(1 if poison else 0)
    stopped = loaded.function(*args)
    if stopped > 0:
        # the guards are numbered as ir.gm.guard_ops lists them, as the emitters number them
        guard = guards()[stopped - 1]
        offset, extent, dim = (ctypes.c_int64 * 3).in_dll(loaded.library, f"{loaded.variant.entry}_guard")
        raise guard_failure(guard.attrs, guard.span, offset, extent, dim)
    if stopped == -2:
        raise allocation_failure(f"a GM workspace of the kernels of `{op}`", None, span, "in this kernel",
                                 (f"library: {loaded.path}",))
    if stopped < 0:
        message = (loaded.failure() or b"").decode("utf-8", errors="replace")
        raise KernelFailure(Diagnostic(
            "E0712", f"a check failed inside the kernels of `{op}`: {message}", span,
            "in this kernel", (), (f"library: {loaded.path}",),
            "the outputs are incomplete; the inputs or the compiled kernel break a pto-isa rule "
            "that the NPU would not report (see `ptodsl explain E0712`)"))


def _pointer(arrays: Mapping[str, np.ndarray], name: str, dtype: str, keep: list[np.ndarray]) -> int | None:
    if name not in arrays:
        raise ValueError(f"tensor argument `{name}` is missing")
    a = arrays[name]
    if a.dtype != numpy_dtype(dtype):
        raise TypeError(f"tensor `{name}` has dtype {a.dtype}, the kernel takes {dtype}")
    if not a.flags.c_contiguous:
        raise ValueError(f"tensor `{name}` must be C-contiguous for the cpu backend")
    keep.append(a)
    return a.ctypes.data or None


__all__ = ["Entry", "KernelFailure", "Loaded", "bind_entry", "build", "call_loaded", "digest", "load",
           "target_defines", "unbuildable_reason"]
