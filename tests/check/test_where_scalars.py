"""`where(cond, a, b)` with two scalar arms: a tensor of the condition's shape, whose dtype is a
typed arm's, else f32 for float literals (i32 for integer ones); computed on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl

BACKENDS = ["sim", pytest.param("cpu", marks=pytest.mark.cpu)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_literal_arms(write_spec, backend):
    pto = ("kernel k(x: f32[M, N], y: out f32[M, N]):\n"
           "    y[:] = where(x > 1.0, 2.0, -1.0)\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [4, 64]}\n"))
    x = np.random.default_rng(0).uniform(0, 2, (9, 70)).astype(np.float32)
    np.testing.assert_array_equal(op(x, backend=backend), np.where(x > 1.0, 2.0, -1.0).astype(np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_parameter_arm_and_a_cast_to_half(write_spec, backend):
    pto = ("kernel k(x: f16[M, N], y: out f16[M, N], z: out f32[M, N], s: f32 = 0.5):\n"
           "    for r in loop(M, name=\"rows\"):\n"
           "        y[r, :] = cast(where(x[r, :] < 0.25, s, 3.0), f16) + x[r, :]\n"
           "    z[:] = where(x >= 0.0, s, s * 2.0)\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [2, 64]}\n"))
    x = np.random.default_rng(1).uniform(-1, 1, (5, 40)).astype(np.float16)
    y, z = op(x, s=-1.5, backend=backend)
    want = (np.where(x < 0.25, -1.5, 3.0).astype(np.float16) + x).astype(np.float16)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(z, np.where(x >= 0, -1.5, -3.0).astype(np.float32))


def test_arms_of_two_dtypes_are_refused(compile_text):
    pto = ("kernel k(x: f32[M, N], y: out f32[M, N], a: f32, b: f16):\n"
           "    y[:] = where(x > 0.0, a, b)\n")
    assert compile_text(pto, "schedule: {vec_tile: [1, 64]}\n")[:1] == ["E0303"]


def test_the_select_of_literals_is_f32(compile_text):
    pto = ("kernel k(x: f32[M, N], y: out f16[M, N]):\n"
           "    y[:] = where(x > 0.0, 1.0, 0.0)\n")
    assert compile_text(pto, "schedule: {vec_tile: [1, 64]}\n")[:1] == ["E0303"]
