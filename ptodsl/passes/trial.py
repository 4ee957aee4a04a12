"""Trial lowering of one compute kernel: whether it still compiles within the target's limits.

A pass that may make a kernel larger (keeping a loop of the user's inside it, ``passes/partition.py``;
doubling its buffers, ``passes/dbuf.py``) tries the passes that come next on a copy, reporting
nowhere, and keeps its change only when they succeed, so that the change never turns a spec that
compiled into one refused with E0611 (on-chip memory), E0612 (event ids) or E0613 (stack frame).
"""

from __future__ import annotations

from ..diagnostics import Diagnostics
from ..ir import Func, Module
from ..targets import Target
from . import memplan, stack, sync
from .context import PassContext

# (printed kernel, the target's limits, strided, synchronise) -> the answer: the same kernels are
# tried again and again (the schedule search, each backend lowering the same spec)
_TRIED: dict[tuple, bool] = {}
_TRIED_LIMIT = 1024


def limits(target: Target) -> tuple:
    """What of the target the trial's answer depends on."""
    return (target.name, target.ub_block_bytes, target.max_event_ids, target.stack,
            *(getattr(target, f) for f in memplan.SPACE_FIELD.values()))


def compiles(func: Func, ctx: PassContext, strided: set[str] | frozenset[str], synchronise: bool = True) -> bool:
    """Whether compute kernel ``func`` still compiles: its memory plan, with the largest scratch an
    instruction takes above it (``memplan.scratch_bytes``), fits on chip, its stack
    frame stays under the limit (``strided``: its parameters that take strides) and, with
    ``synchronise``, its flags fit in the target's event ids. ``func`` itself is left as it is."""
    module = Module("trial", "block", [func])
    key = (str(module), limits(ctx.target), frozenset(strided), synchronise)
    if key not in _TRIED:
        trial = module.clone().funcs[0]
        quiet = PassContext(ctx.target, Diagnostics())
        memplan.plan(trial, quiet)
        block = ctx.target.ub_block_bytes
        # the emitter's instruction scratch sits above the plan: it must fit too, or the backend
        # refuses the kernel (E0611) after every pass accepted it
        scratch = memplan.scratch_bytes(trial.body, block, ctx.target.vector_repeat_bytes)
        fits = -(-int(trial.attrs.get("ub_bytes", 0)) // block) * block + scratch <= ctx.target.ub_bytes
        stack.check_kernel(trial, quiet, strided)
        if synchronise and not quiet.diags.has_errors:
            sync.insert(trial, quiet)
        if len(_TRIED) >= _TRIED_LIMIT:
            _TRIED.pop(next(iter(_TRIED)))
        _TRIED[key] = fits and not quiet.diags.has_errors
    return _TRIED[key]


def keeps_frame(before: Func, after: Func, target: Target, strided: set[str] | frozenset[str]) -> bool:
    """Whether ``after``, an optional rewrite of ``before`` (a pipelined loop, vector work split
    between two cores), keeps its stack frame estimate at most the target's warning threshold, or
    at most ``before``'s where that was above it already: the estimate leaves out spills and saved
    registers, so a kernel an optimisation took near the limit could fail the NPU compiler, and
    the library's kernels would warn (W0613) where they did not."""
    frame = stack.estimate(after, target, strided).bytes
    return frame <= max(target.stack.warn_bytes, stack.estimate(before, target, strided).bytes)


__all__ = ["compiles", "keeps_frame", "limits"]
