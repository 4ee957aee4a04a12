"""Scalar values computed in the kernel: element reads anywhere in an expression, and locals bound
to computed scalars, on the simulator and the emitted C++ alike.

Both were internal errors (E0990, "unbound symbol"): a read only became an IR op when it was bound
to a name on its own (`v = x[r, j]`), and a scalar local bound to anything else (`t = s * 2.0`)
named a symbol no op defined. One kernel holds every form.
"""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl

SCALARS = """\
kernel sc(x: f32[R, N], ids: i32[B], y: out f32[B, N], z: out f32[B, N], s: f32):
    t = s * 2.0
    for b in loop(B, name="rows"):
        for c in loop(N, name="cols"):
            y[b:b + 1, c:c + 1] = x[ids[b], c] * t + x[0, c]
        if x[ids[b], 0] > 0.5:
            z[b, :] = x[b, :] * t
        else:
            z[b, :] = x[b, :] - 1.0
"""


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.cpu)])
def test_reads_inside_expressions_and_computed_scalar_locals(write_spec, backend, request):
    if backend == "cpu":
        request.getfixturevalue("gxx")
    op = ptodsl.load(write_spec("sc", SCALARS, "op: sc\nschedule:\n  vec_tile: [1, 8]\n"))
    x = np.linspace(0.0, 1.0, 4 * 8, dtype=np.float32).reshape(4, 8)
    ids = np.array([3, 0, 2, 1], np.int32)
    y, z = op(x, ids, s=1.5, backend=backend)
    np.testing.assert_allclose(y, x[ids] * 3.0 + x[0], rtol=1e-6)
    np.testing.assert_allclose(z, np.where(x[ids, :1] > 0.5, x * 3.0, x - 1.0), rtol=1e-6)


MINMAX = """\
kernel fm(x: f32[R, N], y: out f32[R, N], s: f32, t: f32):
    y[:, :] = x[:, :] * min(s, t) + max(s, t)
"""


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.cpu)])
@pytest.mark.parametrize("s, t", [(1.0, 2.0), (2.0, 1.0), (float("nan"), 2.0), (2.0, float("nan"))])
def test_min_and_max_of_float_scalars_keep_pythons_order(write_spec, backend, request, s, t):
    """min and max of float scalars mean Python's (the first argument unless the second is smaller,
    or larger): a NaN first argument is the answer, a NaN second one is not. The C++ spells them as
    helpers of its own (the NPU's device code calls no std::fmin), with that meaning."""
    if backend == "cpu":
        request.getfixturevalue("gxx")
    op = ptodsl.load(write_spec("fm", MINMAX, "op: fm\nschedule:\n  vec_tile: [1, 8]\n"))
    x = np.full((2, 8), 3.0, np.float32)
    want = np.float32(3.0 * min(s, t) + max(s, t))
    np.testing.assert_array_equal(op(x, s=s, t=t, backend=backend), np.full((2, 8), want, np.float32))
