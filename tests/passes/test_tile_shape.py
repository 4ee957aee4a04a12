"""Tiles every backend can express (passes/tile_shape.py): pto-isa's tiles are 2-D, so a tile of
rank 3 or 4 keeps its valid region whole inner rows, and every broadcast is one value per row, one
row for all, or a copy. Everything here checked clean before and failed only when the C++ was
emitted (E0800: "neither per row nor per column", "not whole inner rows")."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl import sym
from ptodsl.passes.tile_shape import spread_rows

S, B = sym.Sym("S"), sym.Sym("B")


def test_an_operand_broadcast_along_some_row_dims_only_makes_the_dims_before_them_one():
    full = [B, 8, 64]
    assert spread_rows(full, [2, 4, 64], [[B, 1, 64]]) == (1, 4, 64)  # per batch: one row for all
    assert spread_rows(full, [2, 4, 64], [[1, 1, 64]]) == (2, 4, 64)  # one row for the whole tile
    assert spread_rows(full, [2, 4, 64], [[B, 8, 1]]) == (2, 4, 64)  # one value per row
    assert spread_rows(full, [2, 4, 64], [[8, 64]]) == (1, 4, 64)  # a missing leading dim spreads
    assert spread_rows([2, 3, 4, 64], [2, 3, 4, 64], [[2, 1, 4, 1]]) == (1, 1, 4, 64)


PTO = """kernel k(x: f32[S, H], z: f32[B, S, H], m: f32[B, 1, H], v: f32[B, S, 1],
         y: out f32[1, S, H], w: out f32[B, S, H], u: out f32[B, S, H], t: out f32[B, S, H]):
    y[:] = x
    w[:] = z + x
    u[:] = z * m + 1.0
    t[:] = maximum(z, v)
"""


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=[pytest.mark.cpu, pytest.mark.slow])])
def test_rank_3_broadcasts_and_tails_under_a_tile_with_leading_dims(write_spec, backend):
    op = ptodsl.load(write_spec("k", PTO, "op: k\nsymbols: {H: 64}\nschedule: {vec_tile: [2, 4, 64]}\n"))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((7, 64)).astype(np.float32)
    z = rng.standard_normal((3, 7, 64)).astype(np.float32)
    m = rng.standard_normal((3, 1, 64)).astype(np.float32)
    v = rng.standard_normal((3, 7, 1)).astype(np.float32)
    y, w, u, t = op(x, z, m, v, backend=backend)
    np.testing.assert_array_equal(y, x[None])
    np.testing.assert_allclose(w, z + x, rtol=1e-6)
    np.testing.assert_allclose(u, z * m + 1.0, rtol=1e-6)
    np.testing.assert_array_equal(t, np.maximum(z, v))


@pytest.mark.parametrize("backend", ["sim", "cpu"])
def test_a_rank_4_tile_dividing_fixed_dims_has_whole_inner_rows(write_spec, backend):
    """A rank-4 tile [1, 2, 4, 128] over fixed dims it divides has no tail: its valid extents are the
    tile's own, not min(32 - g * 2, 2), which the C++ emitter cannot prove whole (E0800 after a clean
    check: two of PyPTO's examples, found by `benchmarks/port_examples.py`)."""
    pto = "kernel r4(a: f32[4, 32, 64, 256], b: f32[4, 32, 64, 256], c: out f32[4, 32, 64, 256]):\n    c[:] = a + b\n"
    op = ptodsl.load(write_spec("r4", pto, "op: r4\nschedule: {vec_tile: [1, 2, 4, 128]}\n"))
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((4, 32, 64, 256)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(op(a, b, backend=backend), a + b)
