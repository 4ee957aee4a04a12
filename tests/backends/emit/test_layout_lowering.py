"""The layout ops on the simulator and the cpu backend, against numpy, and what they lower to: a
relabelling of GM memory where nothing can change it, a copy where something can (a value as of
its statement), TTRANS and TCONCAT on tiles."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl.driver import compile_spec

EDGE = """kernel edge(x: f32[M, N], q: f32[B, S, H, D], lens: i32[B], y1: out f32[M4], y2: out f32[B, D, S, H],
             y3: out f32[M, N], y4: out f32[MM, N], y5: out f32[M, N3], y6: inout f32[B, S, D],
             y7: out f32[N, M], y8: out f32[N, N, M]):
    y1[:] = reshape(x[:, 0:4], [M4])
    y2[:] = permute(q, [0, 3, 1, 2])
    t = zeros([M, N], f32)
    t[:] = x + 1.0
    r = reshape(t, [M, N])
    t[:] = x * 0.0
    y3[:] = r + t
    y4[0:M + M, :] = concat([x, x * 2.0], dim=0)
    y5[:] = concat([x, -x, x + 1.0], dim=-1)
    for b in loop(B):
        n = lens[b]
        v = view(q, [1, S, 1, D], [b, 0, 0, 0], valid_shape=[1, n, 1, D])
        w = squeeze(v, 2)
        y6[b:b + 1, :, :] = transpose(transpose(w, 1, 2), 1, 2)
    y7[:] = transpose(x, 0, 1)
    u = x * 3.0
    y8[:] = expand(unsqueeze(transpose(u, 0, 1), 0), [N, N, M])
"""
EDGE_YAML = "op: edge\nsymbols: {N: 16, N3: 48}\nschedule: {vec_tile: [1, 1, 8, 16]}\n"


def _edge_expected(x, q, lens, y6):
    want6 = y6.copy()
    for b, n in enumerate(lens):
        want6[b, :n] = q[b, :n, 0, :]
    return [x[:, 0:4].reshape(-1), q.transpose(0, 3, 1, 2), x + 1.0, np.concatenate([x, 2 * x], 0),
            np.concatenate([x, -x, x + 1.0], -1), want6, x.T, np.broadcast_to((x * 3.0).T, (16, 16, 5))]


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=[pytest.mark.cpu, pytest.mark.slow])])
def test_layout_ops_compute_what_numpy_does(write_spec, backend):
    op = ptodsl.load(write_spec("edge", EDGE, EDGE_YAML))
    rng = np.random.default_rng(11)
    m, b, s, h, d = 5, 2, 7, 3, 16
    x = rng.standard_normal((m, 16)).astype(np.float32)
    q = rng.standard_normal((b, s, h, d)).astype(np.float32)
    lens = np.array([3, 7], np.int32)
    y6 = np.full((b, s, d), -1.0, np.float32)
    outs = op(x, q, lens, y1=np.zeros(m * 4, np.float32), y4=np.zeros((2 * m, 16), np.float32), y6=y6,
              backend=backend)
    got = [o for o in outs]
    for g, w in zip(got, _edge_expected(x, q, lens, np.full((b, s, d), -1.0, np.float32))):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _ops(compiled, stage="tensor"):
    return [o.name for o in compiled.stages[stage].walk()]


def test_relabel_where_nothing_can_change_the_memory_and_copy_where_something_can():
    c = compile_spec("specs/reshape_heads.yaml")
    assert "reshape" in _ops(c) and "clone" not in _ops(c), "inputs are relabelled"
    c = compile_spec("specs/permute_heads.yaml")
    assert "permute" in _ops(c) and "transpose" not in _ops(c), "the last dim stays last: no data moves"
    c = compile_spec("specs/transpose2d.yaml")
    assert "transpose" in _ops(c) and "tile.trans" in _ops(c, "block")
    c = compile_spec("specs/concat_last.yaml")
    assert "tile.concat" in _ops(c, "block"), "a whole row fits one tile: joined with TCONCAT"


def test_a_reshape_of_a_local_and_of_a_window_are_copies(write_spec):
    c = compile_spec(write_spec("edge", EDGE, EDGE_YAML))
    f = c.stages["tensor"].funcs[0]
    clones = [o for o in f.walk() if o.name == "clone"]
    # the window x[:, 0:4] merged with its rows, and the local t taken before t changes
    assert len(clones) == 2
    sources = {o.operands[0].type.shape for o in clones}
    assert len(sources) == 2


def test_a_loop_reading_a_permutation_of_a_workspace_reads_it_after_it_is_written(write_spec):
    # y reads t through a relabelling that swaps the two leading dims: merging the two grids of
    # equal bounds would read tiles of t the first loop has not stored yet
    pto = ("kernel k(x: f32[N, N, C], y: out f32[N, N, C]):\n"
           "    t = x + 1.0\n"
           "    y[:] = permute(t, [1, 0, 2]) * 2.0\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule:\n  vec_tile: [1, 1, 64]\n"))
    x = np.random.default_rng(6).standard_normal((3, 3, 40)).astype(np.float32)
    for backend in ("sim", "cpu"):
        np.testing.assert_allclose(op(x, backend=backend), ((x + 1.0) * 2.0).transpose(1, 0, 2), rtol=1e-6)


def test_a_transpose_the_target_has_no_instruction_for_is_reported(compile_text):
    assert compile_text("kernel k(x: i64[M, N], y: out i64[N, M]):\n    y[:] = transpose(x, 0, 1)\n",
                        "schedule: {vec_tile: [8, 64]}\n") == ["E0608"]


def test_transposes_stay_within_what_ttrans_indexes_on_ascend950(write_spec):
    # A5's TTRANS indexes 1- and 2-byte tiles with 16-bit registers: a [256, 512] tile of i8 would
    # span 131072 elements, so the transpose runs on tiles half as tall
    pto = "kernel k(x: i8[M, N], y: out i8[N, M]):\n    y[:] = transpose(x, 0, 1)\n"
    path = write_spec("k", pto, "op: k\ntarget: ascend950\nschedule: {vec_tile: [256, 512]}\n")
    c = compile_spec(path)
    limit = c.target.vector_rule("TTRANS").max_elements
    trans = [op for op in c.stages["tile"].walk() if op.name == "tile.trans"]
    assert trans and limit is not None
    for op in trans:
        for v in op.operands:
            rows = int(np.prod(v.type.shape[:-1]))
            assert rows * (-(-v.type.shape[-1] // 32) * 32) <= limit, v.type
    x = np.random.default_rng(2).integers(-100, 100, (300, 40)).astype(np.int8)
    np.testing.assert_array_equal(ptodsl.load(path)(x), x.T)


def test_a_transpose_under_a_tile_of_one_row_builds(write_spec):
    # the destination tile [1, 32] has a static valid row; the source [32, 1] must have a static
    # valid column too, or TTRANS's tile types do not mirror (found by the fuzzer, seed 504)
    pto = "kernel k(x: f32[M, N], y: out f32[N, M]):\n    y[:] = transpose(x * 2.0, 0, 1)\n"
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [1, 32]}\n"))
    x = np.random.default_rng(4).standard_normal((5, 7)).astype(np.float32)
    np.testing.assert_array_equal(op(x, backend="cpu"), (x * 2.0).T)


def test_a_reshape_of_a_block_view_past_the_end_of_its_tensor(write_spec):
    # the last block of rows reaches past k: the simulator's view holds only the rows inside, and
    # its reshape must keep just those (numpy's reshape refused the smaller array)
    pto = ("kernel k(k: f32[L, D], y: out f32[LD]):\n"
           "    for j in loop(cdiv(L, BL)):\n"
           "        kj = view(k, [BL, D], [j * BL, 0])\n"
           "        f = reshape(kj, [BL * D])\n"
           "        y[j * BL * D:j * BL * D + BL * D] = f * 2.0\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nsymbols: {D: 16, BL: 4}\nschedule: {vec_tile: [64]}\n"))
    k = np.random.default_rng(8).standard_normal((6, 16)).astype(np.float32)
    for backend in ("sim", "cpu"):
        np.testing.assert_array_equal(op(k, y=np.zeros(96, np.float32), backend=backend), (k * 2.0).reshape(-1))


def test_a_concat_whose_last_part_may_have_no_valid_column(write_spec):
    # TCONCAT would join a tile of no valid column, which pto-isa refuses (E0712 on cpu): a row
    # with a partial part is written part by part (found by the fuzzer's data-dependent concat)
    pto = ("kernel k(x: f32[M, N], lens: i32[M], y: inout f32[M, N2]):\n"
           "    for r in loop(M):\n"
           "        n = lens[r]\n"
           "        v = view(x, [1, N], [r, 0], valid_shape=[1, n])\n"
           "        y[r:r + 1, :] = concat([x[r:r + 1, :] * 2.0, v], dim=-1)\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nsymbols: {N: 16, N2: 32}\nschedule: {vec_tile: [1, 64]}\n"))
    x = np.random.default_rng(9).standard_normal((4, 16)).astype(np.float32)
    lens = np.array([0, 5, 16, 9], np.int32)
    want = np.full((4, 32), -1.0, np.float32)
    for r, n in enumerate(lens):
        want[r, :16] = 2.0 * x[r]
        want[r, 16:16 + n] = x[r, :n]
    for backend in ("sim", "cpu"):
        np.testing.assert_array_equal(op(x, lens, y=np.full((4, 32), -1.0, np.float32), backend=backend), want)
