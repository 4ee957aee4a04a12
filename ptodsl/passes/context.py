"""What every pass may read besides the IR: the spec, the target and where to report."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Diagnostics
from ..frontend.spec import Spec
from ..targets import Target


@dataclass
class PassContext:
    spec: Spec
    target: Target
    diags: Diagnostics = field(default_factory=Diagnostics)


def on_compute_kernels(module, fn) -> object:
    """A fresh copy of a Block IR module with ``fn`` applied in place to each compute kernel; the
    shape of the block-level passes that work one kernel at a time."""
    fresh = module.clone()  # passes never mutate their input
    for f in fresh.funcs:
        if f.kind in ("vector", "cube"):
            fn(f)
    return fresh
