"""The CPU backend, compiler side: emit a compiled spec's variants once and build, load and call
them through :mod:`.load` (which a generated package's runtime uses with the C++ it ships).

One shared library per dtype variant, named after it (``libsoftmax_f32.so``), holds the
variant's kernels and its control program. Building a whole spec, or the whole library, builds
its variants in parallel, one compiler per core.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ...driver import Compiled
from ...frontend.spec import variant_name
from . import load
from .emit import EmittedVariant, control_of, emit_variant
from .gm import guard_ops
from .load import KernelFailure, Loaded, bind_entry

_lock = threading.Lock()
_emitted: dict[int, tuple[weakref.ref, dict[int, EmittedVariant]]] = {}


def build_defines(compiled: Compiled) -> dict[str, object]:
    """The CPU header's defines for a spec's target (see :func:`.load.target_defines`)."""
    return load.target_defines(compiled.target)


def emitted(compiled: Compiled, index: int) -> EmittedVariant:
    """The variant's sources, emitted once per compiled spec."""
    with _lock:
        entry = _emitted.get(id(compiled))
        if entry is None or entry[0]() is not compiled:
            entry = (weakref.ref(compiled), {})
            _emitted[id(compiled)] = entry
            weakref.finalize(compiled, _emitted.pop, id(compiled), None)
        cache = entry[1]
    if index not in cache:
        cache[index] = emit_variant(compiled, index)
    return cache[index]


def unbuildable_reason(compiled: Compiled, index: int) -> str | None:
    """Why this toolchain cannot run the variant faithfully against PTO_ISA_ROOT, or None
    (``load.unfaithful_reason``)."""
    return load.unfaithful_reason(emitted(compiled, index), compiled.target, _launched(compiled, index))


def _launched(compiled: Compiled, index: int) -> list:
    """The compute kernels the variant's control program launches."""
    block = compiled.stages["block"]
    names = {o.attrs["kernel"] for o in control_of(compiled, index).walk() if o.name == "launch"}
    return [f for f in block.funcs if f.name in names]


def faithful(compiled: Compiled, index: int) -> None:
    """E0908 where the variant cannot run as the hardware computes against PTO_ISA_ROOT."""
    load.faithful(emitted(compiled, index), compiled.target, _launched(compiled, index), compiled.spec.op,
                  variant_name(compiled.checked[index].variant))


def build_variant(compiled: Compiled, index: int, *, reuse: bool = True) -> Path:
    """Build (or find in the cache) the library of one variant; returns its path."""
    faithful(compiled, index)
    return load.build(emitted(compiled, index), build_defines(compiled), reuse=reuse)


def build_spec(compiled: Compiled, jobs: int | None = None, *, reuse: bool = True) -> list[Path]:
    """Build every variant of a spec that can run faithfully (:func:`faithful`), ``jobs``
    compilers at a time (default: one per core); a call of another stops with E0908."""
    return build_many([(compiled, i) for i in range(len(compiled.checked)) if unbuildable_reason(compiled, i) is None],
                      jobs, reuse=reuse)


def build_many(variants: Sequence[tuple[Compiled, int]], jobs: int | None = None, *,
               reuse: bool = True) -> list[Path]:
    """Build many variants in parallel; the ones with the most kernels start first."""
    jobs = jobs or os.cpu_count() or 1
    for compiled, index in variants:
        emitted(compiled, index)  # emission errors surface here, in order, before any compiler runs
    order = sorted(range(len(variants)), key=lambda k: -len(emitted(*variants[k]).sources))
    paths: list[Path | None] = [None] * len(variants)

    def build(k: int) -> None:
        paths[k] = build_variant(*variants[k], reuse=reuse)

    if jobs == 1 or len(variants) < 2:
        for k in order:
            build(k)
    else:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(build, order))
    return [p for p in paths if p is not None]


def load_variant(compiled: Compiled, index: int) -> Loaded:
    """The loaded library of a variant, built first when needed; loaded once per process."""
    faithful(compiled, index)
    return load.load(emitted(compiled, index), build_defines(compiled))


def run_variant(compiled: Compiled, index: int, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
                symbols: Mapping[str, int], poison: bool = False) -> None:
    """Run one variant on the CPU; out/inout arrays are written in place."""
    call_loaded(load_variant(compiled, index), compiled, index, arrays, scalars, symbols, poison)


def call_loaded(loaded: Loaded, compiled: Compiled, index: int, arrays: Mapping[str, np.ndarray],
                scalars: Mapping[str, Any], symbols: Mapping[str, int], poison: bool = False) -> None:
    """Call a bound entry of a compiled spec; a stopping guard or a failed check raises its diagnostic."""
    kernel = compiled.module.kernel(compiled.spec.op)
    load.call_loaded(loaded, arrays, scalars, symbols, poison,
                     lambda: guard_ops(compiled.stages["block"], control_of(compiled, index)),
                     compiled.spec.op, kernel.span)


__all__ = ["KernelFailure", "Loaded", "bind_entry", "build_defines", "build_many", "build_spec", "build_variant",
           "call_loaded", "emitted", "faithful", "load_variant", "run_variant", "unbuildable_reason"]
