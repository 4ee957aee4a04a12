"""Run-time bounds guards of accesses whose region the checker could not prove inside its tensor.

Lowering places a ``guard`` op before such a write, view or element read, and one before an
indexing op for each index it reads from a tensor (``access = "index"``); the simulator, the
control program of the CPU build and the NPU host program evaluate its condition and, when it
fails, stop the call before the access with the same diagnostic (E0730), so no backend ever stores
or loads outside a tensor. A loop whose trip count comes from data has a guard of the same form
before it (``access = "trips"``): a count past the call's largest dim stops the call (E0870)
instead of running for hours.
"""

from __future__ import annotations

from ..diagnostics import Diagnostic, DiagnosticError, Span


class GuardError(DiagnosticError, ValueError):
    """A call stopped by a failed bounds guard; ``.diagnostic`` holds the structured form."""


def guard_failure(attrs: dict, span: Span | None, offset: int, extent: int, dim: int) -> GuardError:
    """The error of a failed guard, with the values its bound took in this call."""
    access = attrs.get("access", "write")
    if access == "trips":
        return GuardError(Diagnostic(
            "E0870", f"loop `{attrs['loop']}` would run {offset} times, more than the largest dim of the call",
            span, f"its trip count comes from data; the call's largest dim is {dim}",
            notes=("the call stopped before this loop; outputs written earlier in the call keep their values",),
            help="check the lengths read from the tensors; a negative or zero trip count is an empty loop, and "
                 "a bound clamped with `min(..., N)` to a dim needs no check"))
    tensor, axis = attrs["tensor"], attrs["axis"]
    if access == "repeat":
        # a scatter's positions declared unique: `offset` is the value, `extent` its second position
        source = attrs.get("source", "?")
        return GuardError(Diagnostic(
            "E0731", f"`{source}` names position {offset} of `{tensor}` twice, but its positions are declared unique",
            span, f"`{source}[{extent}]` repeats an earlier value {offset}",
            notes=("the call stopped before this op wrote anything; outputs written earlier in the call keep "
                   "their values",
                   "with `unique_indices=True` the rows are written in any order, so a repeated position would "
                   "keep an unspecified one of its rows"),
            help=f"pass distinct positions in `{source}`, or drop `unique_indices=True` to write the rows in "
                 "order (the later one wins a repeated position)"))
    if access == "index":
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
    if access == "write":
        return GuardError(Diagnostic(
            "E0730", f"this write would store outside `{tensor}` on dim {axis}", span,
            f"the region is [{offset}, {offset + extent}) on dim {axis}, but `{tensor}` has {dim} there",
            notes=("the call stopped before this write; outputs written earlier in the call keep their values",),
            help="the region's offset or size comes from a run-time value (a scalar or an element read from a "
                 "tensor): keep it inside the tensor, or clamp it with min/max before the write"))
    if access == "view":
        message = f"this view would read outside `{tensor}` on dim {axis}"
        label = f"the view starts at {offset} on dim {axis}, but `{tensor}` has {dim} there"
    else:
        message = f"this element read would load outside `{tensor}` on dim {axis}"
        label = f"the index is {offset} on dim {axis}, but `{tensor}` has {dim} there"
    return GuardError(Diagnostic(
        "E0730", message, span, label,
        notes=("the call stopped before this read; outputs written earlier in the call keep their values",),
        help="the offset or index comes from a run-time value (an element read from a tensor, a scalar, a loop "
             "index): keep it inside the tensor, or clamp it with min/max before the read"))


__all__ = ["GuardError", "guard_failure"]
