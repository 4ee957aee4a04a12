"""Every copy of a loop body (unroll lists, ``loop_unroll`` sub-loops, the peeled first and last
iterations of ``is_loop_begin``/``is_loop_end``) sees its own value of the loop index, wherever the
index is used: scalar reads, views, offsets, valid shapes, conditions, prints.

Each kernel below is run for every trip count from 0 up, under schedules that make the passes
clone the body in every way they can, and compared with a plain numpy loop."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl

# Every use of `b`: element reads (w, sl), a view offset and a data-dependent valid shape, write
# offsets, peeled first/last iterations and a runtime branch on a value read at `b`.
INDEXED = """
kernel indexed(x: f32[B, N], w: f32[B], sl: i32[B], y: out f32[B, N], z: inout f32[B, N]):
    for b in loop(B, name="b_loop"):
        s = w[b]
        n = sl[b]
        a = view(x, [1, N], [b, 0], valid_shape=[1, n])
        z[b, :] = a * s
        if is_loop_begin(b):
            y[b, :] = x[b, :] + s
        elif is_loop_end(b):
            y[b, :] = x[b, :] - s
        else:
            if s > 0.0:
                y[b, :] = x[b, :] * 2.0
            else:
                y[b, :] = x[b, :] * 3.0
"""

# A `loop_unroll` body: `k` rows per step, the scalar read at the block's first row; the peeled
# first and last iterations handle one row each.
BLOCKED = """
kernel blocked(x: f32[B, N], w: f32[B], y: out f32[B, N]):
    for i, k in loop_unroll(0, B, 1, name="u"):
        s = w[i]
        if is_loop_begin(i):
            y[i:i + k, :] = x[i:i + k, :] + s
        elif is_loop_end(i):
            y[i:i + k, :] = x[i:i + k, :] - s
        else:
            y[i:i + k, :] = x[i:i + k, :] * s
"""

SCHEDULES = {"none": "", "u21": "  loops: {b_loop: {unroll: [2, 1]}}\n",
             "u421": "  loops: {b_loop: {unroll: [4, 2, 1]}}\n"}


def indexed_reference(x, w, sl, z):
    y, z = np.empty_like(x), z.copy()
    last = len(x) - 1
    for b in range(len(x)):
        z[b, :sl[b]] = x[b, :sl[b]] * w[b]
        y[b] = x[b] + w[b] if b == 0 else x[b] - w[b] if b == last else x[b] * (2 if w[b] > 0 else 3)
    return y, z


def blocked_reference(x, w, factors=(4, 2, 1)):
    y = np.empty_like(x)
    n = len(x)
    if n:
        y[0] = x[0] + w[0]
    if n > 1:
        y[-1] = x[-1] - w[-1]
    i, left = 1, max(n - 2, 0)
    for f in factors:  # the middle iterations, in blocks of the descending factors
        for _ in range(left // f):
            y[i:i + f] = x[i:i + f] * w[i]
            i += f
        left %= f
    return y


def inputs(b: int, n: int = 70):
    rng = np.random.default_rng(b)
    return (rng.standard_normal((b, n)).astype(np.float32), rng.standard_normal(b).astype(np.float32),
            rng.integers(0, n + 1, b).astype(np.int32), rng.standard_normal((b, n)).astype(np.float32))


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_indexed_body_on_sim(write_spec, schedule):
    op = ptodsl.load(write_spec("indexed", INDEXED, "op: indexed\nschedule:\n  vec_tile: [1, 64]\n"
                                + SCHEDULES[schedule]))
    for b in range(10):
        x, w, sl, z0 = inputs(b)
        y, z = op(x, w, sl, z0.copy())
        want_y, want_z = indexed_reference(x, w, sl, z0)
        np.testing.assert_array_equal(y, want_y, err_msg=f"B={b}")
        np.testing.assert_array_equal(z, want_z, err_msg=f"B={b}")


@pytest.mark.cpu
def test_indexed_body_on_cpu(write_spec):
    op = ptodsl.load(write_spec("indexed", INDEXED, "op: indexed\nschedule:\n  vec_tile: [1, 64]\n"
                                + SCHEDULES["u421"]))
    for b in (0, 1, 2, 5, 7):
        x, w, sl, z0 = inputs(b)
        y, z = op(x, w, sl, z0.copy(), backend="cpu")
        want_y, want_z = indexed_reference(x, w, sl, z0)
        np.testing.assert_allclose(y, want_y, rtol=1e-6, err_msg=f"B={b}")
        np.testing.assert_allclose(z, want_z, rtol=1e-6, err_msg=f"B={b}")


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.cpu)])
def test_loop_unroll_with_peeled_iterations(write_spec, backend):
    op = ptodsl.load(write_spec("blocked", BLOCKED, "op: blocked\nschedule:\n  vec_tile: [4, 64]\n"
                                "  loops: {u: {unroll: [4, 2, 1]}}\n"))
    for b in range(12) if backend == "sim" else (0, 1, 3, 9):
        x, w, _, _ = inputs(b)
        np.testing.assert_allclose(op(x, w, backend=backend), blocked_reference(x, w), rtol=1e-6,
                                   err_msg=f"B={b}")


def test_prints_in_every_copy_show_their_own_index(write_spec, capsys):
    pto = ("kernel p(x: f32[B, N], w: i32[B], y: out f32[B, N]):\n"
           "    for b in loop(B, name=\"b_loop\"):\n"
           "        n = w[b]\n"
           "        if is_loop_end(b):\n"
           "            print(\"last {} {}\", b, n)\n"
           "        else:\n"
           "            print(\"row {} {}\", b, n)\n"
           "        y[b, :] = x[b, :]\n")
    op = ptodsl.load(write_spec("p", pto, "op: p\nschedule:\n  vec_tile: [1, 64]\n"
                                "  loops: {b_loop: {unroll: [2, 1]}}\n"))
    op(np.zeros((5, 8), np.float32), np.arange(10, 15, dtype=np.int32))
    assert capsys.readouterr().out.splitlines() == [
        "row 0 10", "row 1 11", "row 2 12", "row 3 13", "last 4 14"]
