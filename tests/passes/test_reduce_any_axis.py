"""A reduction the checker accepts lowers on every backend: over any axis or axes of a rank-2, -3
or -4 tensor, with and without keepdim, under a vec tile that leaves tails in every dim. Each case
runs on the simulator against numpy and is emitted as C++ and checked against the target's rules
(``ptodsl check --target-rules``), which is where the emitter refused "a reduction over axis 0
of a rank-3 tile" and "a rank-3 tile whose valid region is not whole inner rows". The library
spec specs/reduce_axes.yaml builds such kernels and runs them on the cpu backend."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ptodsl
from ptodsl.backends.cpp.rules import spec_violations
from ptodsl.driver import compile_spec
from ptodsl.passes.tile_rows import reduction_tile, whole_rows

SHAPES = {2: (7, 45), 3: (5, 7, 45), 4: (3, 5, 7, 45)}
TILES = {2: [4, 32], 3: [2, 4, 32], 4: [2, 2, 4, 32]}
NUMPY = {"sum": np.sum, "amax": np.max, "amin": np.min, "mean": np.mean}
DIMS = "ABCD"


def _cases():
    for rank in (3, 4):
        for n in (1, 2, 3):
            for axes in itertools.combinations(range(rank), n):
                yield rank, axes
    yield 2, (0,)
    yield 2, (0, 1)


def _spec(tmp_path, rank: int, axes: tuple[int, ...], op: str, keep: bool):
    dims = DIMS[:rank]
    out = [("1" if k in axes else d) for k, d in enumerate(dims)] if keep else \
        [d for k, d in enumerate(dims) if k not in axes] or ["1"]
    dim = str(axes[0] - rank) if len(axes) == 1 else "[" + ", ".join(map(str, axes)) + "]"
    name = f"r{rank}_{'_'.join(map(str, axes))}_{op}_{int(keep)}"
    (tmp_path / f"{name}.pto").write_text(
        f"kernel {name}(x: f32[{', '.join(dims)}], y: out f32[{', '.join(out)}]):\n"
        f"    y[:] = {op}(x, dim={dim}, keepdim={keep})\n")
    (tmp_path / f"{name}.yaml").write_text(f"op: {name}\nschedule: {{vec_tile: {TILES[rank]}}}\n")
    return str(tmp_path / f"{name}.yaml")


@pytest.mark.parametrize("rank, axes", list(_cases()), ids=lambda v: str(v))
@pytest.mark.parametrize("keep", [True, False])
def test_a_reduction_over_any_axes_runs_and_emits(tmp_path, rank, axes, keep):
    op_name = ("sum", "amax", "amin", "mean")[(sum(axes) + rank + keep) % 4]
    path = _spec(tmp_path, rank, axes, op_name, keep)
    assert spec_violations(compile_spec(path)) == []  # the C++ emitter takes it; the rules too
    x = np.random.default_rng(rank * 10 + len(axes)).uniform(-1, 1, SHAPES[rank]).astype(np.float32)
    y = ptodsl.load(path)(x)
    want = NUMPY[op_name](x.astype(np.float64), axis=axes, keepdims=keep)
    np.testing.assert_allclose(y, want.reshape(y.shape), rtol=1e-5, atol=1e-6)


def test_an_elementwise_op_on_a_rank3_tensor_with_a_middle_tail_emits(tmp_path):
    (tmp_path / "k.pto").write_text("kernel k(x: f32[A, B, C], y: out f32[A, B, C]):\n    y[:] = x * 2.0 + 1.0\n")
    (tmp_path / "k.yaml").write_text("op: k\nschedule: {vec_tile: [2, 4, 64]}\n")
    assert spec_violations(compile_spec(str(tmp_path / "k.yaml"))) == []
    x = np.random.default_rng(0).standard_normal((3, 7, 70)).astype(np.float32)
    np.testing.assert_allclose(ptodsl.load(str(tmp_path / "k.yaml"))(x), x * 2 + 1, rtol=1e-6)


def test_tiles_fold_their_rows_only_where_a_middle_dim_may_end_in_a_tail():
    assert whole_rows((2, 4, 64), (6, 8, 64), (6, 8, 64)) == (2, 4, 64)  # 8 rows of 4: whole
    assert whole_rows((2, 4, 64), (6, 7, 64), (6, 7, 64)) == (1, 8, 64)
    assert whole_rows((2, 4, 64), ("B", 8, 64), ("B", 8, 64)) == (2, 4, 64)  # the first dim may end anywhere
    assert whole_rows((1, 4, 64), (6, 7, 64), (6, 7, 64)) == (1, 4, 64)
    assert whole_rows((2, 2, 4, 32), (3, 5, 7, 45), (3, 5, 7, 45)) == (1, 1, 16, 32)
    assert reduction_tile((2, 4, 32), 0) == (8, 1, 32)
    assert reduction_tile((2, 4, 32), 2) == (1, 8, 32)
    assert reduction_tile((1, 2, 4, 32), 1) == (1, 8, 1, 32)
