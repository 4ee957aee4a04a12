"""Writes store exactly the region they name, on the simulator and the emitted C++ alike.

Broadcast writes: a value with a dim of 1 written into a wider region fills the whole region, as
numpy's ``t[region] = value`` does, for every write form (slice assignment, ``move``, a keepdim
reduction, a row, a column, a [1, 1] value, a lower-rank value, a valid shape known only at run
time). One kernel holds every form so that the C++ side costs a single build.
"""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl

BROADCASTS = """\
kernel bw(x: f32[M, N], r: f32[N], s: f32[1, 1], rows: out f32[M, N], cols: out f32[M, N],
          one: out f32[M, N], vec: out f32[M, N], part: inout f32[M, N], n: i32):
    rows[:] = x[0, :] + 1.0
    cols.move(sum(x, dim=-1, keepdim=True))
    one[:, :] = s * 2.0
    vec[:] = r
    part[1:3, :] = amax(x[1:3, :], dim=-1, keepdim=True)
    v = view(x, [1, N], [2, 0], valid_shape=[1, n])
    part[4:M, :] = v
"""


def _broadcasts(write_spec) -> ptodsl.Operator:
    return ptodsl.load(write_spec("bw", BROADCASTS, "op: bw\nschedule:\n  vec_tile: [4, 64]\n"))


def _expected(x, r, part, n):
    m, width = x.shape
    part = part.copy()
    part[1:3] = x[1:3].max(-1, keepdims=True)
    part[4:, :n] = x[2, :n]
    return [np.broadcast_to(x[0] + 1, (m, width)), np.broadcast_to(x.sum(-1, keepdims=True), (m, width)),
            np.full((m, width), 6.0, np.float32), np.broadcast_to(r, (m, width)), part]


def _check_broadcasts(op, backend: str, m: int, width: int, n: int) -> None:
    rng = np.random.default_rng(m * width + n)
    x = rng.standard_normal((m, width)).astype(np.float32)
    r = rng.standard_normal(width).astype(np.float32)
    s = np.full((1, 1), 3.0, np.float32)
    part = np.full((m, width), 7.0, np.float32)
    want = _expected(x, r, part, n)
    got = op(x, r, s, part=part, n=n, backend=backend)
    for name, g, w in zip(("rows", "cols", "one", "vec", "part"), got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("m, width, n", [(6, 64, 64), (9, 130, 70), (5, 200, 0), (4, 1, 1)])
def test_broadcast_writes_fill_the_region_on_the_simulator(write_spec, m, width, n):
    _check_broadcasts(_broadcasts(write_spec), "sim", m, width, n)


@pytest.mark.cpu
def test_broadcast_writes_fill_the_region_in_the_cpp(write_spec, gxx):
    op = _broadcasts(write_spec)
    for m, width, n in [(6, 64, 64), (9, 130, 70), (5, 200, 0)]:
        _check_broadcasts(op, "cpu", m, width, n)


BROADCASTS_3D = """\
kernel b3(x: T[B, S, H], bias: T[H], y: out T[B, S, H], z: out T[B, S, H], w: out T[B, S, H]):
    y[:, :, :] = bias
    for b in loop(B, name="batch"):
        z[b, :, :] = amax(x[b, :, :], dim=-1, keepdim=True)
        w[b] = x[b, 0:1, :] * 2.0
"""


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.cpu)])
def test_broadcast_writes_in_three_dims_and_half_floats(write_spec, backend, request):
    if backend == "cpu":
        request.getfixturevalue("gxx")
    op = ptodsl.load(write_spec("b3", BROADCASTS_3D, "op: b3\ndtypes: {T: [f32, f16]}\n"
                                "schedule:\n  vec_tile: [1, 16, 64]\n"))
    for dtype in (np.float32, np.float16):
        b, s, h = 3, 21, 100
        rng = np.random.default_rng(b)
        x = rng.standard_normal((b, s, h)).astype(dtype)
        bias = rng.standard_normal(h).astype(dtype)
        y, z, w = op(x, bias, backend=backend)
        np.testing.assert_array_equal(y, np.broadcast_to(bias, x.shape))
        np.testing.assert_array_equal(z, np.broadcast_to(x.max(-1, keepdims=True), x.shape))
        np.testing.assert_array_equal(w, np.broadcast_to(x[:, 0:1, :] * dtype(2), x.shape))


def test_a_value_numpy_would_not_broadcast_is_rejected(write_spec):
    pto = "kernel bad(x: f32[M, N], y: out f32[M, 1]):\n    y[:] = x\n"
    with pytest.raises(ptodsl.CompileError) as info:
        ptodsl.load(write_spec("bad", pto, "op: bad\n"))
    assert [d.code for d in info.value.diagnostics] == ["E0318"]
