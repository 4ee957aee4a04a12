"""What every pass may read besides the IR (the target, where to report), and what a pass is: a
name, the IR level it takes and gives, and the properties it requires and establishes.

The schedule is not here: it travels in the module's attributes (:mod:`ptodsl.ir.schedule`), so the
passes can resume from a printed module."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..diagnostics import Diagnostics, Label, Span
from ..targets import Target


@dataclass
class PassContext:
    target: Target
    diags: Diagnostics = field(default_factory=Diagnostics)
    # Where a schedule key (a YAML path such as ("schedule", "vec_tile")) is written, for the
    # secondary labels of schedule errors; None when compiling from a printed module.
    yaml_at: Callable[[tuple], Span | None] | None = None

    def labels(self, path: tuple, message: str) -> list[Label]:
        """A secondary label at the YAML key ``path``, when the module came from a spec that has it."""
        span = self.yaml_at(path) if self.yaml_at is not None else None
        return [Label(span, message)] if span is not None else []


@dataclass(frozen=True)
class Pass:
    """One pass of the pipeline. ``requires`` names properties of the IR that earlier passes must
    have established (``"peeled"``: no is_loop_begin/is_loop_end branch is left, ...); the driver
    checks the order once, when the pipeline is built, and the levels on every run."""

    name: str
    takes: str  # the IR level the pass reads: tensor | tile | block
    gives: str  # the level it produces
    run: Callable  # (Module, PassContext) -> Module; never mutates its input
    requires: frozenset[str] = frozenset()
    establishes: frozenset[str] = frozenset()
    # (Module, Target) -> problems; a proof of what the pass established, run after it in every compile
    check: Callable | None = None


def check_pipeline(passes: Sequence[Pass], start: str = "tensor", have: Sequence[str] = ()) -> None:
    """Raise ValueError when a pass would run on the wrong level or before what it requires;
    ``have`` is what the IR already established (when resuming from a printed module)."""
    level, have, seen = start, set(have), set()
    for p in passes:
        if p.name in seen:
            raise ValueError(f"pass `{p.name}` appears twice")
        if p.takes != level:
            raise ValueError(f"pass `{p.name}` takes {p.takes} IR, but the pipeline has {level} IR there")
        missing = p.requires - have
        if missing:
            raise ValueError(f"pass `{p.name}` requires {', '.join(sorted(missing))}, which no earlier pass "
                             "establishes")
        seen.add(p.name)
        level = p.gives
        have |= p.establishes


def on_compute_kernels(module, fn) -> object:
    """A fresh copy of a Block IR module with ``fn`` applied in place to each compute kernel; the
    shape of the block-level passes that work one kernel at a time."""
    fresh = module.clone()  # passes never mutate their input
    for f in fresh.funcs:
        if f.kind in ("vector", "cube", "mixed"):
            fn(f)
    return fresh
