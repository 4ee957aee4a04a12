"""The simulator's meaning of the indexing tile ops (``ir/opdefs.py``, the ``_indexing`` block).

Gathers and scatters move whole rows (``Coalesce::Row``) or single elements of one row
(``Coalesce::Elem``) between a GM tensor and a tile, at the positions an i32 index tile holds. The
control program has checked every index before (E0730), so an index outside the table here is a
compiler bug: it is reported as a failed check (E0712), as the CPU header reports it, never read.
"""

from __future__ import annotations

import numpy as np

from ...ir import Op
from . import SIM, Machine, SimError, _f32, _round_to, _timed


def _rows(valid: tuple[int, ...]) -> int:
    rows = 1
    for v in valid[:-1]:
        rows *= v
    return rows


def _row_at(r: int, rank: int) -> tuple:
    """Element (r, :) of a rows tile ``[R, 1, ..., C]``."""
    return (r, *(0 for _ in range(rank - 2)))


def _index(m: Machine, op: Op, value: int, cap: int) -> int:
    if not 0 <= value < cap:
        raise SimError(f"index {value} is outside a table of {cap} (the guards should have stopped the call)", op)
    return int(value)


@SIM.on("gather_rows")
@_timed
def _gather_rows(m: Machine, op: Op) -> None:
    dst, idx = m.tiles[op.operands[0].name], m.tiles[op.operands[2].name]
    table = m.tensors[op.operands[1].name]
    offs = [m.evi(o) for o in op.attrs["offsets"]]
    cols = dst.valid[-1]
    if _rows(dst.valid) != idx.valid[-1]:
        raise SimError(f"{_rows(dst.valid)} rows gathered with {idx.valid[-1]} indices", op)
    cap = table.shape[0] - offs[0]
    for r in range(_rows(dst.valid)):
        i = _index(m, op, idx.data.reshape(-1)[r], cap)
        src = table[(offs[0] + i, *offs[1:-1], slice(offs[-1], offs[-1] + cols))]
        dst.data[(*_row_at(r, dst.data.ndim), slice(0, cols))] = src
    m.count("load", table, _rows(dst.valid) * cols * table.dtype.itemsize)


@SIM.on("gather_elem")
@_timed
def _gather_elem(m: Machine, op: Op) -> None:
    dst, idx = m.tiles[op.operands[0].name], m.tiles[op.operands[2].name]
    table = m.tensors[op.operands[1].name]
    offs = [m.evi(o) for o in op.attrs["offsets"]]
    if _rows(dst.valid) != 1 or idx.valid[-1] != dst.valid[-1]:
        raise SimError(f"an element gather into a tile of valid {list(dst.valid)} with indices of valid "
                       f"{list(idx.valid)}", op)
    row = table[tuple(offs[:-1])]
    cols = dst.valid[-1]
    picked = [_index(m, op, i, row.shape[0]) for i in idx.data.reshape(-1)[:cols]]
    dst.data.reshape(-1)[:cols] = row[picked]
    m.count("load", table, cols * table.dtype.itemsize)


@SIM.on("scatter_rows")
@_timed
def _scatter_rows(m: Machine, op: Op) -> None:
    table = m.tensors[op.operands[0].name]
    src, idx = m.tiles[op.operands[1].name], m.tiles[op.operands[2].name]
    offs = [m.evi(o) for o in op.attrs["offsets"]]
    cols = src.valid[-1]
    if _rows(src.valid) != idx.valid[-1]:
        raise SimError(f"{_rows(src.valid)} rows scattered with {idx.valid[-1]} indices", op)
    cap = table.shape[0] - offs[0]
    for r in range(_rows(src.valid)):  # in order: of rows sent to one place, the last one stays
        i = _index(m, op, idx.data.reshape(-1)[r], cap)
        table[(offs[0] + i, *offs[1:-1], slice(offs[-1], offs[-1] + cols))] = \
            src.data[(*_row_at(r, src.data.ndim), slice(0, cols))]
    m.count("store", table, _rows(src.valid) * cols * table.dtype.itemsize)


@SIM.on("ci")
@_timed
def _ci(m: Machine, op: Op) -> None:
    dst = m.tiles[op.operands[0].name]
    if _rows(dst.valid) != 1:
        raise SimError(f"TCI fills one row, not a tile of valid {list(dst.valid)}", op)
    cols = dst.valid[-1]
    start = m.evi(op.attrs["start"])
    values = np.arange(start, start + cols, dtype=np.int64)
    dst.data.reshape(-1)[:cols] = _round_to(values, op.operands[0].type.dtype)


@SIM.on("tri_tile")
@_timed
def _tri(m: Machine, op: Op) -> None:
    dst = m.tiles[op.operands[0].name]
    rows, cols = dst.valid[-2], dst.valid[-1]
    if any(v != 1 for v in dst.valid[:-2]):
        raise SimError(f"TTRI fills one matrix, not a tile of valid {list(dst.valid)}", op)
    d = m.evi(op.attrs["diagonal"])
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    ones = (j - i <= d) if op.attrs["lower"] else (j - i >= d)
    lead = tuple(0 for _ in dst.valid[:-2])
    dst.data[(*lead, slice(0, rows), slice(0, cols))] = _round_to(ones.astype(np.int64), op.operands[0].type.dtype)


@SIM.on("argreduce_tile")
@_timed
def _argreduce(m: Machine, op: Op) -> None:
    """The first index of the row's maximum (minimum), as a left-to-right scan with a strict
    comparison finds it (pto-isa's reference and the CPU header): a NaN is never taken, except in
    the first column, which then stays."""
    dst, src = m.tiles[op.operands[0].name], m.tiles[op.operands[1].name]
    vals = _f32(src.data[src.region()])
    largest = op.name == "tile.argmax"
    if vals.shape[-1] == 0:
        raise SimError("an arg-reduction over an empty row", op)
    if vals.dtype.kind == "f":
        first_nan = np.isnan(vals[..., 0])
        vals = np.where(np.isnan(vals), -np.inf if largest else np.inf, vals)
        out = np.argmax(vals, axis=-1) if largest else np.argmin(vals, axis=-1)
        out = np.where(first_nan, 0, out)
    else:
        out = np.argmax(vals, axis=-1) if largest else np.argmin(vals, axis=-1)
    dst.data[dst.region()] = out.astype(np.int64)[..., None].astype(dst.data.dtype)
