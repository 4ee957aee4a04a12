"""Scatters whose positions are declared unique (``scatter_update(..., unique_indices=True)``): the
call checks the positions for repeats (E0731) and the rows are shared out over blocks; without
the promise they are written in order on one block. Numbers on the simulator and the cpu backend."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl

RNG = np.random.default_rng(41)
PTO = """kernel sc(t: inout f32[S, D], slots: i32[N], rows: f32[N, D]):
    scatter_update(t, 0, slots, rows FLAG)
"""


def _load(write_spec, unique: bool):
    pto = PTO.replace("FLAG", ", unique_indices=True" if unique else "")
    return ptodsl.load(write_spec("sc", pto, "op: sc\nschedule: {vec_tile: [8, 64]}\n"))


def _block_dims(op) -> list:
    control = next(f for f in op.compiled.stages["block"].funcs if f.kind == "control")
    return [o.attrs.get("block_dim") for o in control.body if o.name == "launch"]


@pytest.mark.parametrize("unique", [True, False])
def test_unique_positions_share_the_rows_out_over_blocks(write_spec, unique):
    op = _load(write_spec, unique)
    assert (_block_dims(op)[0] is not None) == unique
    s, n, d = 200, 77, 64
    slots = RNG.permutation(s)[:n].astype(np.int32)
    rows = RNG.standard_normal((n, d)).astype(np.float32)
    base = RNG.standard_normal((s, d)).astype(np.float32)
    want = base.copy()
    want[slots] = rows
    for backend in ("sim", "cpu"):
        t = base.copy()
        op(t, slots, rows, backend=backend)
        np.testing.assert_array_equal(t, want)


@pytest.mark.parametrize("backend", ["sim", "cpu"])
def test_a_repeated_position_stops_the_call_before_any_row_is_written(write_spec, backend):
    op = _load(write_spec, True)
    t = np.zeros((16, 64), np.float32)
    with pytest.raises(ptodsl.GuardError) as info:
        op(t, np.array([3, 7, 11, 7], np.int32), np.ones((4, 64), np.float32), backend=backend)
    assert info.value.diagnostic.code == "E0731" and "`slots[3]` repeats" in str(info.value.diagnostic)
    assert not t.any()


def test_without_the_promise_the_later_row_wins(write_spec):
    op = _load(write_spec, False)
    t = np.zeros((16, 64), np.float32)
    rows = np.arange(1, 5, dtype=np.float32)[:, None].repeat(64, axis=1)
    for backend in ("sim", "cpu"):
        t[:] = 0
        op(t, np.array([3, 7, 11, 7], np.int32), rows, backend=backend)
        assert (t[3] == 1).all() and (t[7] == 4).all() and (t[11] == 3).all(), backend
