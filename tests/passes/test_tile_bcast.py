"""Broadcast forwarding (passes/tile_bcast.py): an elementwise op reads an ``expand``'s source and
expands it on chip, instead of the expand's full-size GM workspace being written and read back."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl

SPREAD = """kernel k(x: f32[B, S, H], bias: f32[B, H], y: out f32[B, S, H]):
    y[:] = x + expand(unsqueeze(bias, 1), [B, S, H])
"""

# the source is written between the clone and its reader: the clone must keep the old values
WRITTEN = """kernel k(x: f32[B, H], bias: inout f32[B, H], y: out f32[B, H]):
    e = clone(bias)
    bias[:] = bias * 2.0
    y[:] = x + e
"""

YAML = "op: k\nschedule: {vec_tile: [2, 8, 64]}\n"


def _allocs(op) -> list:
    return [o for o in op.compiled.stages["tile"].walk() if o.name == "alloc"]


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_an_expanded_operand_is_expanded_on_chip_not_through_a_workspace(write_spec, backend):
    op = ptodsl.load(write_spec("k", SPREAD, YAML))
    assert not _allocs(op), "the expand's [B, S, H] result is no GM workspace"
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 11, 70)).astype(np.float32)
    bias = rng.standard_normal((3, 70)).astype(np.float32)
    np.testing.assert_array_equal(op(x, bias, backend=backend), x + bias[:, None, :])


def test_a_clone_whose_source_is_written_before_its_reader_keeps_the_old_values(write_spec):
    """The clone is a snapshot of the source taken before the write: not read from the source after
    it (the grids fuse, so each iteration reads its tile of `bias` into the clone's tile before it
    overwrites that tile)."""
    op = ptodsl.load(write_spec("k", WRITTEN, "op: k\nschedule: {vec_tile: [8, 64]}\n"))
    rng = np.random.default_rng(6)
    x = rng.standard_normal((19, 200)).astype(np.float32)
    bias = rng.standard_normal((19, 200)).astype(np.float32)
    for backend in ("sim", "cpu"):
        outs = op(x, bias.copy(), backend=backend)
        np.testing.assert_array_equal(outs[0], bias * 2.0)
        np.testing.assert_array_equal(outs[1], x + bias)
