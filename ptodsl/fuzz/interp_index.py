"""The oracle's meaning of the indexing builtins, from docs/LANGUAGE.md §1.6 alone.

An index outside ``[0, dim)`` of the dim it indexes (negative ones included) makes the call stop
before the op (E0730 on every backend): the interpreter's ``Stopped``. Arg-reductions take the
first index of the extreme value; ``topk`` and ``argsort`` order equal values by index (a stable
sort).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import numpy_dtype


def _checked(idx: np.ndarray, dim: int, what: str, stop: Callable[[str], None]) -> np.ndarray:
    """The indices, after ``stop`` (the interpreter's: it raises ``Stopped`` unless the run goes on
    past stops, to look for a refusal) is told of the first one outside ``[0, dim)``."""
    bad = (idx < 0) | (idx >= dim)
    if bad.any():
        stop(f"{what} holds {int(idx[bad].reshape(-1)[0])}, outside [0, {dim})")
        return np.clip(idx, 0, max(dim - 1, 0)).astype(np.int64)  # (values past a stop mean nothing)
    return idx.astype(np.int64)


def index_select(t: Any, axis: int, index: Any, TV: type, stop: Callable[[str], None]) -> Any:
    valid_idx = index.a[: index.valid[0]]
    axis %= t.a.ndim
    src = t.a[tuple(slice(0, v) for v in t.valid)]
    picked = np.take(src, _checked(valid_idx, t.valid[axis], "the index", stop), axis=axis)
    valid = list(t.valid)
    valid[axis] = index.valid[0]
    shape = list(t.a.shape)
    shape[axis] = index.a.shape[0]
    out = np.zeros(shape, t.a.dtype)
    out[tuple(slice(0, v) for v in picked.shape)] = picked
    return TV(out, t.dtype, tuple(valid))


def gather(t: Any, index: Any, TV: type, stop: Callable[[str], None]) -> Any:
    valid = tuple(min(a, b) for a, b in zip(index.valid[:-1], t.valid[:-1])) + (index.valid[-1],)
    idx = index.a[tuple(slice(0, v) for v in index.valid)]
    idx = _checked(idx, t.valid[-1], "the index", stop)
    rows = t.a[tuple(slice(0, v) for v in valid[:-1])]
    picked = np.take_along_axis(rows, idx[tuple(slice(0, v) for v in valid[:-1])], axis=-1)
    out = np.zeros(index.a.shape, t.a.dtype)
    out[tuple(slice(0, v) for v in valid)] = picked
    return TV(out, t.dtype, valid)


def scatter_update(dst: Any, index: Any, src: Any, rounded, stop: Callable[..., None], unique: bool = False) -> None:
    """Row index[r] of dst = row r of src, in order (a later row sent to one place stays); with
    ``unique``, a position named twice stops the call (E0731) after the range check."""
    idx = _checked(index.a[: index.valid[0]], dst.valid[0], "the index", stop)
    if unique and len(np.unique(idx)) < len(idx):
        stop("the index names a position twice", "E0731")
    rows = min(src.valid[0], len(idx))
    cols = tuple(slice(0, v) for v in src.valid[1:])
    for r in range(rows):
        dst.a[(int(idx[r]), *cols)] = rounded(src.a[(r, *cols)], dst.dtype)


def arange(start: int, stop: int, dtype: str, TV: type) -> Any:
    a = np.arange(start, stop).astype(numpy_dtype(dtype))
    return TV(a, dtype, a.shape)


def triangle(x: Any, lower: bool, diagonal: int, TV: type) -> Any:
    a = x.a.astype(np.float64) if x.a.dtype.kind == "f" else x.a
    out = (np.tril(a, diagonal) if lower else np.triu(a, diagonal)).astype(x.a.dtype)
    return TV(out, x.dtype, x.valid)


def argreduce(x: Any, largest: bool, keep: bool, TV: type) -> Any:
    data = x.a[tuple(slice(0, v) for v in x.valid)].astype(np.float64)
    first = np.argmax(data, axis=-1) if largest else np.argmin(data, axis=-1)
    out = np.zeros(x.a.shape[:-1], np.int32)
    out[tuple(slice(0, v) for v in x.valid[:-1])] = first
    valid = x.valid[:-1]
    if keep or not valid:
        out = out[..., None]
        valid = (*valid, 1)
    return TV(out, "i32", valid)


def sort_order(x: Any, largest: bool) -> np.ndarray:
    """Per row, the columns from the best value to the worst; equal values in column order."""
    data = x.a[tuple(slice(0, v) for v in x.valid)].astype(np.float64)
    return np.argsort(-data if largest else data, axis=-1, kind="stable")


def topk(x: Any, k: int, largest: bool, TV: type) -> tuple[Any, Any]:
    order = sort_order(x, largest)[..., :k]
    values = np.take_along_axis(x.a[tuple(slice(0, v) for v in x.valid)], order, axis=-1)
    shape = (*x.a.shape[:-1], k)
    v_out, i_out = np.zeros(shape, x.a.dtype), np.zeros(shape, np.int32)
    rows = tuple(slice(0, v) for v in x.valid[:-1])
    v_out[rows] = values
    i_out[rows] = order
    valid = (*x.valid[:-1], k)
    return TV(v_out, x.dtype, valid), TV(i_out, "i32", valid)


def argsort(x: Any, descending: bool, TV: type) -> Any:
    order = sort_order(x, descending)
    out = np.zeros(x.a.shape, np.int32)
    out[tuple(slice(0, v) for v in x.valid)] = order
    return TV(out, "i32", x.valid)
