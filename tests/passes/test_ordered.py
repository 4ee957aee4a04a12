"""Row bands of a nondecreasing tensor (passes/ordered.py): with `nondecreasing: [cu]`, a kernel over
segments [cu[b], cu[b + 1]) that writes only inside each segment's rows shares out the row tiles of
every segment over all the cores (passes/blocks.py) and splits its vector work between both vector
cores of a block (passes/aivsplit.py); without the promise, or where a write leaves the segment,
it keeps to its heads. Results against numpy for segment layouts with empty, one-row and
several-tile segments (the cpu backend under -m slow)."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl.ir import Op

RNG = np.random.default_rng(71)
# varlen attention's shape, cut down: per segment and head, tiles of 16 rows through a product on
# the cube and an exponential on the vector cores, written back to the segment's rows
SEGMENTS = """kernel k(q: f32[T, HD], w: f32[D, D], cu: i32[C], y: inout f32[T, HD]):
    for b in loop(C - 1, name="segments"):
        start = cu[b]
        n = cu[b + 1] - start
        for h in loop(HD / D, name="heads"):
            for t in loop(cdiv(n, 16), name="tiles"):
                rows = min(n - t * 16, 16)
                x = view(q, [16, D], [start + t * 16, h * D], valid_shape=[rows, D])
                y[start + t * 16:start + t * 16 + 16, h * D:h * D + D] = exp(matmul(x, w) * 0.25)
"""


def _yaml(ordered: bool) -> str:
    return ("op: k\nsymbols: {D: 32}\n" + ("nondecreasing: [cu]\n" if ordered else "") +
            "schedule:\n  vec_tile: [16, 32]\n  cube_tile: {m: [16, 16], k: [32, 32], n: [32, 32]}\n")


def _launch(op) -> Op:
    (launch,) = [o for f in op.compiled.stages["block"].funcs if f.kind == "control" for o in f.walk()
                 if o.name == "launch"]
    return launch


def _split(op) -> bool:
    return any(o.attrs.get("aiv") == 1 for f in op.compiled.stages["block"].funcs for o in f.walk())


def _block_dim(op, **symbols: int) -> int:
    from ptodsl import sym

    return int(sym.evaluate(_launch(op).attrs["block_dim"], symbols))


def test_the_promise_shares_out_each_segments_tiles_over_every_core(write_spec):
    op = ptodsl.load(write_spec("k", SEGMENTS, _yaml(True)))
    cores = op.compiled.target.chip.cores("mixed")
    assert _block_dim(op, HD=64, C=4, T=100) == cores  # two heads, and the tiles of each on cores // 2 blocks
    assert _split(op)


def test_without_the_promise_the_kernel_keeps_to_its_heads(write_spec):
    op = ptodsl.load(write_spec("k", SEGMENTS, _yaml(False)))
    assert _block_dim(op, HD=64, C=4, T=100) == 2
    assert not _split(op)


def test_a_write_that_leaves_its_segment_keeps_the_kernel_to_its_heads(write_spec):
    # one row further down: the last tile of a segment reaches the first row of the next one
    pto = SEGMENTS.replace("y[start + t * 16:start + t * 16 + 16,", "y[start + t * 16 + 1:start + t * 16 + 17,")
    op = ptodsl.load(write_spec("k", pto, _yaml(True)))
    assert _block_dim(op, HD=64, C=4, T=100) == 2
    assert not _split(op)


def _want(q, w, cu, y0, d=32):
    y = y0.astype(np.float64)
    for b in range(len(cu) - 1):
        rows = slice(cu[b], cu[b + 1])
        for h in range(q.shape[1] // d):
            cols = slice(h * d, h * d + d)
            y[rows, cols] = np.exp(q[rows, cols].astype(np.float64) @ w * 0.25)
    return y


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=[pytest.mark.cpu, pytest.mark.slow])])
@pytest.mark.parametrize("cu", [[0, 40, 41, 41, 100], pytest.param([0, 100], marks=pytest.mark.slow),
                                [0, 0, 17, 99, 100], pytest.param([3, 3, 90], marks=pytest.mark.slow)],
                         ids=["empty-and-one-row", "one-segment", "tails", "rows-outside"])
def test_the_shared_segments_compute_right(write_spec, backend, cu):
    op = ptodsl.load(write_spec("k", SEGMENTS, _yaml(True)))
    q = (RNG.standard_normal((100, 64)) / 4).astype(np.float32)
    w = (RNG.standard_normal((32, 32)) / 4).astype(np.float32)
    y0 = RNG.standard_normal((100, 64)).astype(np.float32)
    y = op(q, w, np.array(cu, np.int32), y0.copy(), backend=backend)
    np.testing.assert_allclose(y, _want(q, w, cu, y0), rtol=1e-4, atol=1e-4)


def test_lengths_that_decrease_stop_the_call(write_spec):
    op = ptodsl.load(write_spec("k", SEGMENTS, _yaml(True)))
    q = np.zeros((100, 64), np.float32)
    y = np.zeros((100, 64), np.float32)
    with pytest.raises(ptodsl.ArgumentError) as info:
        op(q, np.zeros((32, 32), np.float32), np.array([0, 50, 40, 100], np.int32), y)
    assert info.value.diagnostic.code == "E0732"
    assert not y.any()


# rows of one tensor in the segments of two different nondecreasing tensors: segment b of `cv` may
# be segment b + 1 of `cu`, so iterations of the segment loop would race for them; in order, the
# later one wins
TWO_BANDS = """kernel k(x: f32[R, N], cu: i32[C], cv: i32[C], y: inout f32[R, N]):
    for b in loop(C - 1, name="segments"):
        s = cu[b]
        n = cu[b + 1] - s
        s2 = cv[b]
        n2 = cv[b + 1] - s2
        for t in loop(cdiv(n, 8), name="tiles"):
            y[s + t * 8:s + t * 8 + 8, :] = view(x, [8, N], [s + t * 8, 0], valid_shape=[min(n - t * 8, 8), N]) * 2.0
            y[s2 + t * 8:s2 + t * 8 + 8, :] = view(x, [8, N], [s2 + t * 8, 0], valid_shape=[min(n2 - t * 8, 8), N]) * 3.0
"""


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=[pytest.mark.cpu, pytest.mark.slow])])
def test_rows_in_the_segments_of_two_tensors_stay_in_order(write_spec, backend):
    op = ptodsl.load(write_spec("k", TWO_BANDS, "op: k\nnondecreasing: [cu, cv]\nschedule: {vec_tile: [8, 64]}\n"))
    assert "block_dim" not in _launch(op).attrs
    x = RNG.standard_normal((48, 64)).astype(np.float32)
    cu, cv = [0, 16, 32, 40], [16, 32, 40, 48]
    y = op(x, np.array(cu, np.int32), np.array(cv, np.int32), np.zeros((48, 64), np.float32), backend=backend)
    want = np.zeros((48, 64))
    for b in range(3):
        n, n2 = cu[b + 1] - cu[b], cv[b + 1] - cv[b]
        for t in range(-(-n // 8)):
            rows = slice(cu[b] + t * 8, cu[b] + t * 8 + min(n - t * 8, 8))
            want[rows] = 2 * x[rows]
            if n2 - t * 8 > 0:
                rows2 = slice(cv[b] + t * 8, cv[b] + t * 8 + min(n2 - t * 8, 8))
                want[rows2] = 3 * x[rows2]
    np.testing.assert_allclose(y, want, rtol=1e-6)


def _segment_loop(op):
    from ptodsl.passes.parallel import origins_of

    module = op.compiled.after["partition"]
    (kernel,) = [f for f in module.funcs if f.kind == "vector"]
    (loop,) = [o for o in kernel.walk() if o.name == "loop" and o.attrs.get("name") == "segments"]
    return module, kernel, loop, origins_of(kernel)


@pytest.mark.parametrize("second", [True, False], ids=["two-bands", "one-band"])
def test_a_tensor_is_banded_only_inside_one_band(write_spec, second):
    from ptodsl.passes.ordered import ordered_params, within_bands

    pto = TWO_BANDS if second else "\n".join(TWO_BANDS.splitlines()[:-1]) + "\n"
    op = ptodsl.load(write_spec("k", pto, "op: k\nnondecreasing: [cu, cv]\nschedule: {vec_tile: [8, 64]}\n"))
    module, kernel, loop, origins = _segment_loop(op)
    assert ordered_params(module, kernel) == {"cu", "cv"}
    # each write alone lies in a band (of cu, of cv); together they do not share one
    assert within_bands(loop, {"y"}, origins, ordered_params(module, kernel)) is not second


def _random_segments(rng: np.random.Generator, rows: int) -> list[int]:
    """Cumulative lengths from 0 to at most ``rows``: empty segments, one-row ones and long ones."""
    lengths = rng.choice([0, 1, 7, 16, 17, 33, 50], size=int(rng.integers(1, 7)))
    cu = np.minimum(np.concatenate([[int(rng.integers(0, 4))], lengths]).cumsum(), rows)
    return [int(x) for x in cu]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.cpu)])
def test_random_segment_layouts_compute_right_on_every_block(write_spec, backend):
    # the tiles of every segment shared over all the cores (and, on the cpu backend, run on the
    # machine's threads at once), for layouts and head counts drawn at random
    op = ptodsl.load(write_spec("k", SEGMENTS, _yaml(True)))
    rng = np.random.default_rng(2026)
    for _ in range(12):
        rows, heads = int(rng.integers(1, 160)), int(rng.integers(1, 4))
        cu = _random_segments(rng, rows)
        q = (rng.standard_normal((rows, 32 * heads)) / 4).astype(np.float32)
        w = (rng.standard_normal((32, 32)) / 4).astype(np.float32)
        y0 = rng.standard_normal((rows, 32 * heads)).astype(np.float32)
        y = op(q, w, np.array(cu, np.int32), y0.copy(), backend=backend)
        np.testing.assert_allclose(y, _want(q, w, cu, y0), rtol=1e-4, atol=1e-4, err_msg=f"cu={cu}")
