"""The simulator's broadcast of a full operand against a view with a data-dependent valid shape."""

import numpy as np

import ptodsl

PTO = """kernel k(x: f32[M, N], rv: f32[N], idx: i32[M], y: inout f32[M, N]):
    for r in loop(M, name="rows"):
        n = idx[r]
        w = view(x, [1, N], [r, 0], valid_shape=[1, n])
        y[r, :] = w + rv
"""


def test_row_vector_added_to_a_view_shorter_than_its_tile(write_spec):
    # rv's tile holds 32 valid columns, the result only n of them (found by the fuzzer: the
    # simulator failed to broadcast (1, 32) into (1, n)).
    op = ptodsl.load(write_spec("k", PTO, "op: k\nschedule:\n  vec_tile: [1, 32]\n"))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 40)).astype(np.float32)
    rv = rng.standard_normal(40).astype(np.float32)
    idx = np.array([5, 0, 40], np.int32)
    y = np.full((3, 40), 7.0, np.float32)
    op(x, rv, idx, y=y)
    want = np.full((3, 40), 7.0, np.float32)
    for r, n in enumerate(idx):
        want[r, :n] = x[r, :n] + rv[:n]
    np.testing.assert_allclose(y, want, rtol=1e-6)
