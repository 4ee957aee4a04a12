"""Buffers a call allocates that the machine cannot give (E0718).

A call allocates its outputs, contiguous copies of strided or broadcast inputs, copies of inputs
that share memory with an output, and GM workspaces. Dims within the kernels' limits (E0710) can
still ask for far more than any machine has (a broadcast input of 4 bytes can stand for a
[2**30, 2**30] tensor); such a call stops with a diagnostic naming the buffer and its size,
never with numpy's bare MemoryError or an aborted process.
"""

from __future__ import annotations

from ..diagnostics import Diagnostic, DiagnosticError, Span

E_MEMORY = "E0718"
_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")


class AllocationError(DiagnosticError, MemoryError):
    """A buffer of the call cannot be allocated; ``.diagnostic`` names it and its size."""


def human(nbytes: int) -> str:
    """``4.0 EiB``: a byte count in binary units."""
    value, unit = float(nbytes), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{nbytes} bytes" if unit == 0 else f"{value:.1f} {_UNITS[unit]}"


HELP = ("split the call into smaller ones; an input broadcast with a stride of 0 (np.broadcast_to, "
        "torch's expand) is as large as its shape here: it is copied whole, and so are the outputs it sizes")


def allocation_failure(what: str, nbytes: int | None, span: Span | None, label: str = "",
                       notes: tuple[str, ...] = ()) -> AllocationError:
    """The error of a buffer that cannot be allocated; ``what`` names it (``output `y` ([4, 8] f32)``)."""
    message = (f"{what} cannot be allocated" if nbytes is None else
               f"{what} needs {human(nbytes)} ({nbytes} bytes), which cannot be allocated")
    return AllocationError(Diagnostic(E_MEMORY, message, span, label, (), notes, HELP))


__all__ = ["E_MEMORY", "HELP", "AllocationError", "allocation_failure", "human"]
