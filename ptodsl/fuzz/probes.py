"""Calls of a program that passed, made again with hostile arguments: the runtime's side.

* ``aliased``: an input and an output of the same shape and dtype in one buffer, the output one
  row further (``x = buf[0:M]``, ``y = buf[1:M + 1]``): the output must still be what the oracle
  computed from the input as it was (numpy's meaning of overlapping operands).
* ``huge``: every input a broadcast view of one element (stride 0) of [2**28, 2**28] rows and
  columns: the call must end in a diagnostic (the outputs cannot be allocated, E0718), before
  anything is allocated or run, never in numpy's MemoryError.

Both run on the simulator through the runtime every backend shares (argument checks, copies,
allocation); a failure is an Outcome like the differential run's.
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .run import Outcome, Prepared

HUGE = 2**28  # [HUGE, HUGE] floats are 256 PiB, past any memory; with a batch dim the view fits an address


def aliased(prep: Prepared) -> Outcome | None:
    from ..api import run_kernel
    from .run import Outcome, compare

    modes = {p.name: p.mode for p in prep.op.kernel.params if p.is_tensor}
    pairs = [(i, o) for i in modes if modes[i] == "in" for o in modes if modes[o] == "out"
             and prep.inputs[i].shape == prep.inputs[o].shape and prep.inputs[i].dtype == prep.inputs[o].dtype
             and prep.inputs[i].ndim >= 1 and prep.inputs[i].shape[0] >= 1
             and not np.isnan(prep.expected[o].astype(np.float64)).any()]  # outputs written whole only
    if not pairs:
        return None
    x, y = pairs[prep.program.seed % len(pairs)]
    a = prep.inputs[x]
    buf = np.empty((a.shape[0] + 1,) + a.shape[1:], a.dtype)
    buf[: a.shape[0]] = a
    arrays = {k: v.copy() for k, v in prep.inputs.items()}
    arrays[x], arrays[y] = buf[: a.shape[0]], buf[1:]
    try:
        run_kernel(prep.op.compiled, prep.index, arrays, prep.scalars, prep.symbols, "sim")
    except Exception:  # noqa: BLE001
        return Outcome(prep.program.seed, "crash", "alias", traceback.format_exc(limit=-4))
    text = compare(buf[1:], prep.expected[y], prep.dtypes[y])
    if text:
        return Outcome(prep.program.seed, "mismatch", "alias",
                       f"output `{y}` sharing memory with input `{x}`, one row further: {text}")
    return None


def huge(prep: Prepared) -> Outcome | None:
    from ..diagnostics import DiagnosticError
    from .run import Outcome

    op = prep.op
    params = {p.name: p for p in op.kernel.params if p.is_tensor}
    if not any(p.mode == "out" and {"M", "N"} <= {str(d.value) for d in p.dims} for p in params.values()):
        return None  # no output of rows and columns: the call might fit in memory and run for real
    dims = {**prep.symbols, "M": HUGE, "N": HUGE}
    args = {}
    for p in op.inputs:
        shape = tuple(d.value if isinstance(d.value, int) else dims.get(d.value, 1) for d in params[p.name].dims)
        args[p.name] = np.broadcast_to(prep.inputs[p.name].reshape(-1)[:1].reshape(()), shape)
    try:
        op(**args, **prep.scalars)
    except DiagnosticError:
        return None
    except Exception:  # noqa: BLE001
        return Outcome(prep.program.seed, "crash", "huge", traceback.format_exc(limit=-4))
    return Outcome(prep.program.seed, "mismatch", "huge", "a call on [2**28, 2**28] broadcast inputs ran")


__all__ = ["HUGE", "aliased", "huge"]
