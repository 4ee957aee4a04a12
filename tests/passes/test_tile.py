"""Tiling: grids, tails with valid shapes, broadcasting and reductions spanning several tiles."""

import numpy as np
import pytest

import ptodsl
from ptodsl.ir import TileType


def _tiles(module):
    return [op for op in module.walk() if op.name == "tile.alloc"]


def test_tail_tiles_carry_valid_shapes():
    op = ptodsl.load("specs/add_one.yaml")
    text = op.ir("tile")
    assert "valid [min(M - _g0 * 8, 8), min(N - _g1 * 256, 256)]" in text
    for alloc in _tiles(op.compiled.stages["tile"]):
        assert isinstance(alloc.result.type, TileType)


@pytest.mark.parametrize("m, n", [(1, 1), (8, 256), (9, 257), (17, 1000), (3, 255)])
def test_add_one_with_and_without_partial_tiles(m, n):
    op = ptodsl.load("specs/add_one.yaml")
    x = np.random.default_rng(m * n).standard_normal((m, n)).astype(np.float32)
    np.testing.assert_array_equal(op(x), x + 1)


ROWSUM = """
kernel rowsoftmax(x: f32[R, N], y: out f32[R, N], s: out f32[R, 1], m: out f32[R]):
    for r in loop(R, name="rows"):
        row = x[r, :]
        e = exp(row - amax(row, dim=-1, keepdim=True))
        y[r, :] = e / sum(e, dim=-1, keepdim=True)
        s[r, :] = sum(row, dim=-1, keepdim=True)
        m[r] = mean(row, dim=-1)
"""


@pytest.mark.parametrize("n", [3000, 1024, 1025, 7])
def test_reduction_spanning_several_tiles(write_spec, n):
    path = write_spec("rowsoftmax", ROWSUM, "op: rowsoftmax\nschedule:\n  vec_tile: [1, 1024]\n")
    op = ptodsl.load(path)
    x = np.random.default_rng(n).standard_normal((3, n)).astype(np.float32) * 4
    y, s, m = op(x)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(s[:, 0], x.sum(-1), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(m, x.mean(-1), rtol=1e-5, atol=1e-5)


def test_column_reduction_and_broadcast(write_spec):
    pto = ("kernel colnorm(x: f32[R, C], y: out f32[R, C]):\n"
           "    y[:] = x - amax(x, dim=0, keepdim=True)\n")
    op = ptodsl.load(write_spec("colnorm", pto, "op: colnorm\nschedule:\n  vec_tile: [8, 64]\n"))
    x = np.random.default_rng(3).standard_normal((19, 70)).astype(np.float32)
    np.testing.assert_allclose(op(x), x - x.max(0, keepdims=True))


def test_data_dependent_valid_shape_writes_only_valid_rows(write_spec):
    pto = ("kernel seq_add(inp: f32[B, S, H], act_seqs: i32[B], out: inout f32[B, S, H]):\n"
           "    for b in loop(B, name=\"b_loop\"):\n"
           "        cur_seq = act_seqs[b]\n"
           "        a0 = view(inp, [1, S, H], [b, 0, 0], valid_shape=[1, cur_seq, H])\n"
           "        out[b, :, :] = a0 + 1.0\n")
    op = ptodsl.load(write_spec("seq_add", pto, "op: seq_add\nschedule:\n  vec_tile: [1, 4, 32]\n"))
    rng = np.random.default_rng(5)
    inp = rng.standard_normal((3, 10, 40)).astype(np.float32)
    seqs = np.array([0, 7, 10], np.int32)
    out = np.full_like(inp, -7.0)
    op(inp, seqs, out=out)
    for b, n in enumerate(seqs):
        np.testing.assert_array_equal(out[b, :n], inp[b, :n] + 1)
        assert (out[b, n:] == -7.0).all(), "rows past the valid shape must stay untouched"


def test_intermediate_feeding_an_assemble_is_stored_directly():
    op = ptodsl.load("specs/add_one.yaml")
    names = [o.name for o in op.compiled.stages["tile"].walk()]
    assert "alloc" not in names, "y[:] = x + 1.0 needs no GM workspace"


def test_view_reaching_past_the_tensor_edge(write_spec):
    """A fixed-size block view over a tail: its valid shape is clipped, nothing past N is touched."""
    pto = ("kernel tail_view(x: f32[R, N], y: out f32[R, N]):\n"
           "    for j in loop(cdiv(N, 256), name=\"cols\"):\n"
           "        blk = view(x, [R, 256], [0, j * 256])\n"
           "        y.assemble(blk + 1.0, [0, j * 256])\n")
    op = ptodsl.load(write_spec("tail_view", pto, "op: tail_view\nschedule:\n  vec_tile: [8, 256]\n"))
    for n in (256, 300, 512, 1):
        x = np.random.default_rng(n).standard_normal((4, n)).astype(np.float32)
        np.testing.assert_array_equal(op(x), x + 1)
