"""Run-time bounds guards of writes whose region the checker could not prove inside its tensor.

Lowering places a ``guard`` op before such a write; the simulator and the control program of the
CPU build evaluate its condition and, when it fails, stop the call before the write with the same
diagnostic (E0730), so no backend ever stores outside a tensor.
"""

from __future__ import annotations

from ..diagnostics import Diagnostic, DiagnosticError, Span


class GuardError(DiagnosticError, ValueError):
    """A call stopped by a failed bounds guard; ``.diagnostic`` holds the structured form."""


def guard_failure(attrs: dict, span: Span | None, offset: int, extent: int, dim: int) -> GuardError:
    """The error of a failed guard, with the values its bound took in this call."""
    tensor, axis = attrs["tensor"], attrs["axis"]
    return GuardError(Diagnostic(
        "E0730", f"this write would store outside `{tensor}` on dim {axis}", span,
        f"the region is [{offset}, {offset + extent}) on dim {axis}, but `{tensor}` has {dim} there",
        notes=("the call stopped before this write; outputs written earlier in the call keep their values",),
        help="the region's offset or size comes from a run-time value (a scalar or an element read from a "
             "tensor): keep it inside the tensor, or clamp it with min/max before the write"))


__all__ = ["GuardError", "guard_failure"]
