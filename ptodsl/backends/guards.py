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
    if attrs.get("access") == "index":
        # an index a gather, scatter or index_select read from a tensor (the guard checks each one
        # before the op, since the op itself would move data at that position)
        source = attrs.get("source", "?")
        return GuardError(Diagnostic(
            "E0730", f"an index read from `{source}` is outside dim {axis} of `{tensor}`", span,
            f"`{source}` holds {offset}, but dim {axis} of `{tensor}` has {dim} positions: [0, {dim})",
            notes=("the call stopped before this op read or wrote anything; outputs written earlier in the call "
                   "keep their values",
                   "indices are checked, never wrapped: a negative index is refused as torch refuses it"),
            help=f"keep every value of `{source}` in [0, {dim}), or clamp it first: "
                 f"`minimum(maximum({source}, 0), {dim - 1 if dim > 0 else 0})`"))
    return GuardError(Diagnostic(
        "E0730", f"this write would store outside `{tensor}` on dim {axis}", span,
        f"the region is [{offset}, {offset + extent}) on dim {axis}, but `{tensor}` has {dim} there",
        notes=("the call stopped before this write; outputs written earlier in the call keep their values",),
        help="the region's offset or size comes from a run-time value (a scalar or an element read from a "
             "tensor): keep it inside the tensor, or clamp it with min/max before the write"))


__all__ = ["GuardError", "guard_failure"]
