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


# ---- bounds: a write never stores outside its tensor, whatever the inputs

SEQ = """\
kernel seq(inp: f32[B, S, H], act: i32[B], out: inout f32[B, S, H]):
    for b in loop(B, name="b_loop"):
        n = act[b]
        a0 = view(inp, [1, S, H], [b, 0, 0], valid_shape=[1, n, H])
        out[b, :, :] = a0 + 1.0
"""


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.cpu)])
def test_runtime_valid_shape_is_clamped_to_its_view(write_spec, backend, request):
    """act[b] beyond S (or below 0) is refused at the call (E0711); the kernels themselves, which on
    the NPU cannot see the data first, write the batch's S rows (or none), never the next batch's."""
    if backend == "cpu":
        request.getfixturevalue("gxx")
    op = ptodsl.load(write_spec("seq", SEQ, "op: seq\nschedule:\n  vec_tile: [1, 4, 64]\n"))
    inp = np.ones((3, 4, 64), np.float32)
    act = np.array([6, 1, -2], np.int32)
    out = np.zeros_like(inp)
    with pytest.raises(ptodsl.ArgumentValueError) as info:
        op(inp, act, out=out, backend=backend)
    assert info.value.diagnostic.code == "E0711" and not out.any()
    index, arrays, symbols = op.resolve({"inp": inp, "act": act, "out": out})
    if backend == "sim":
        from ptodsl.backends import sim

        control = op.compiled.stages["tensor"].funcs[index].name
        sim.run_block(op.compiled.stages["block"], control, arrays, {}, symbols, op.compiled.target)
    else:
        from ptodsl.backends.cpp.run import run_variant

        run_variant(op.compiled, index, arrays, {}, symbols)
    want = np.zeros_like(inp)
    want[0] = 2.0
    want[1, :1] = 2.0
    np.testing.assert_array_equal(arrays["out"], want)


SCATTER = """\
kernel scatter(x: f32[B, N], ids: i32[B], y: inout f32[R, N], off: i32):
    for b in loop(B, name="rows"):
        i = ids[b]
        y[i, :] = x[b, :] * 2.0
    y.assemble(x[0:1, :], [off, 0])
"""


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.cpu)])
def test_dynamic_offsets_outside_the_tensor_stop_the_call(write_spec, backend, request):
    if backend == "cpu":
        request.getfixturevalue("gxx")
    op = ptodsl.load(write_spec("scatter", SCATTER, "op: scatter\nschedule:\n  vec_tile: [1, 64]\n"))
    x = np.ones((3, 64), np.float32)
    y = np.zeros((5, 64), np.float32)
    op(x, np.array([0, 2, 4], np.int32), y=y, off=1, backend=backend)
    np.testing.assert_array_equal(y[:, 0], [2, 1, 2, 0, 2])
    for ids, off, region in [([0, 5, 1], 0, "[5, 6)"), ([0, -1, 2], 0, "[-1, 0)"), ([0, 1, 2], 5, "[5, 6)")]:
        y = np.zeros((5, 64), np.float32)
        with pytest.raises(ptodsl.GuardError) as info:
            op(x, np.array(ids, np.int32), y=y, off=off, backend=backend)
        d = info.value.diagnostic
        assert d.code == "E0730" and f"the region is {region} on dim 0" in d.label
        assert (d.span.line == 5) == (off == 5)
        # the call stopped before the bad write: only the rows before it were stored
        assert y[:, 0].tolist() == ([2, 0, 0, 0, 0] if off == 0 else [2, 2, 2, 0, 0])


def test_regions_that_provably_leave_the_tensor_are_check_time_errors(write_spec):
    pto = ("kernel ob(x: f32[4, 64], y: out f32[8, 64], z: out f32[B, 64]):\n"
           "    y.assemble(x, [6, 0])\n"
           "    z.assemble(x, [B, 0])\n")
    with pytest.raises(ptodsl.CompileError) as info:
        ptodsl.load(write_spec("ob", pto, "op: ob\n"))
    assert [d.code for d in info.value.diagnostics] == ["E0310", "E0310"]


def test_provable_writes_get_no_guard():
    for spec in ("specs/seq_add.yaml", "specs/softmax.yaml", "specs/add_bcast.yaml"):
        assert not [o for o in ptodsl.load(spec).compiled.stages["tensor"].walk() if o.name == "guard"]


UNROLLED = """\
kernel blocks(x: f32[R, N], z: out f32[R, N]):
    for i, k in loop_unroll(0, R, 1, name="blocks"):
        z[i:i + k, :] = x[i:i + k, :] * 3.0
"""


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.cpu)])
def test_loop_unroll_body_covering_k_steps_writes_every_row(write_spec, backend, request):
    if backend == "cpu":
        request.getfixturevalue("gxx")
    op = ptodsl.load(write_spec("blocks", UNROLLED, "op: blocks\nschedule:\n  vec_tile: [4, 64]\n"
                                "  loops:\n    blocks: {unroll: [4, 2, 1]}\n"))
    for rows in (1, 3, 7):
        x = np.random.default_rng(rows).standard_normal((rows, 70)).astype(np.float32)
        np.testing.assert_allclose(op(x, backend=backend), x * 3)
