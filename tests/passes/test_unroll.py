"""Unroll: sub-loops by descending factor cover every trip count, runtime ones and zero included."""

import numpy as np
import pytest

import ptodsl

PTO = """
kernel rowscale(x: f32[R, N], y: out f32[R, N], z: out f32[R, N]):
    for r in loop(R, name="rows"):
        y[r, :] = x[r, :] * 2.0 + 1.0
    for i, k in loop_unroll(0, R, 1, name="blocks"):
        z[i:i + k, :] = x[i:i + k, :] * 3.0
"""
YAML = """
op: rowscale
schedule:
  vec_tile: [4, 64]
  loops:
    rows: {unroll: [4, 2, 1]}
    blocks: {unroll: [4, 2]}
"""


@pytest.fixture(scope="module")
def op(tmp_path_factory):
    d = tmp_path_factory.mktemp("unroll")
    (d / "rowscale.pto").write_text(PTO)
    (d / "rowscale.yaml").write_text(YAML)
    return ptodsl.load(str(d / "rowscale.yaml"))


@pytest.mark.parametrize("trips", range(13))
def test_every_runtime_trip_count(op, trips):
    x = np.random.default_rng(trips).standard_normal((trips, 70)).astype(np.float32)
    y, z = op(x)
    np.testing.assert_array_equal(y, x * 2 + 1)
    np.testing.assert_allclose(z, x * 3)


def test_sub_loops_by_descending_factor(op):
    tensor_ir = op.compiled.after["unroll"]
    loops = [o for o in tensor_ir.funcs[0].body if o.name == "loop"]
    assert [(o.attrs["name"], o.attrs["unrolled"]) for o in loops] == [
        ("rows", 4), ("rows", 2), ("rows", 1), ("blocks", 4), ("blocks", 2), ("blocks", 1)]
    # the body of the factor-4 sub-loop holds four copies; loop_unroll keeps one body per k
    assert sum(o.name == "assemble" for o in loops[0].regions[0]) == 4
    assert sum(o.name == "assemble" for o in loops[3].regions[0]) == 1
