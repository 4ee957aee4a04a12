"""The cpu backend of a :class:`~ptodsl.runtime.program.Program`: build the variant's C++ (the
program's own, emitted or shipped) with the host compiler, load it once and call its entry."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..backends.cpp import load
from ..ir.gm import guard_ops
from .program import Program


def defines(program: Program) -> dict[str, object]:
    return load.target_defines(program.target)


def load_variant(program: Program, index: int) -> load.Loaded:
    """The variant's library, built and loaded; E0908 where it could not compute against a
    PTO_ISA_ROOT checkout what the hardware does (``load.faithful``)."""
    if os.environ.get("PTO_ISA_ROOT"):
        module = program.block_module(index)
        launched = {o.attrs["kernel"] for o in module.func(program.control(index)).walk() if o.name == "launch"}
        load.faithful(program.cpu_source(index), program.target, [f for f in module.funcs if f.name in launched],
                      program.op, program.variants[index].name)
    return load.load(program.cpu_source(index), defines(program))


def run_variant(program: Program, index: int, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
                symbols: Mapping[str, int], poison: bool = False) -> None:
    """Run one variant on the CPU; out/inout arrays are written in place."""
    module = program.block_module(index)
    control = module.func(program.control(index))
    load.call_loaded(load_variant(program, index), arrays, scalars, symbols, poison,
                     lambda: guard_ops(module, control), program.op, program.span)


__all__ = ["defines", "load_variant", "run_variant"]
