"""Scalars read from tensors are ordinary values (docs/LANGUAGE.md §1.2, §3.2, §3.4, §3.7).

A read may sit in a loop bound, a condition, an offset, a valid shape, a slice bound, a write's
value or a print, mixed with loop indices and other reads, at any loop depth: each is lowered to a
`read` of the control program before the op that uses it, checked where it is used, and computes
the same on the simulator and the CPU backend as the numpy model below.
"""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl.backends.guards import GuardError

BACKENDS = ["sim", pytest.param("cpu", marks=pytest.mark.cpu)]

# A trip count, a condition, a valid extent (`min`) and a filled value read from tensors, and the
# same read (`lens[b]`) at two loop depths.
DATA_LOOP = """\
kernel dc(x: f32[B, N], lens: i32[B], s: f32[B], y: inout f32[B, N], c: out i32[B, 1]):
    for b in loop(B, name="b_loop"):
        c[b, 0] = lens[b]
        for j in loop(cdiv(lens[b], 16), name="j_loop"):
            w = min(lens[b] - j * 16, 16)
            v = view(x, [1, 16], [b, j * 16], valid_shape=[1, w])
            if s[b] > 0.0:
                y[b:b + 1, j * 16:j * 16 + 16] = v * s[b]
            else:
                y[b:b + 1, j * 16:j * 16 + 16] = v + 1.0
"""


def data_loop_ref(x, lens, s, y):
    y = y.copy()
    for b, n in enumerate(lens.tolist()):
        for j in range(max(-(-n // 16), 0)):
            w = min(n - j * 16, 16)
            cols = slice(j * 16, min(j * 16 + w, x.shape[1]))
            y[b, cols] = x[b, cols] * s[b] if s[b] > 0 else x[b, cols] + 1.0
    return y, lens.reshape(-1, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_trip_counts_conditions_and_extents_read_from_data(write_spec, backend):
    op = ptodsl.load(write_spec("dc", DATA_LOOP, "op: dc\nschedule: {vec_tile: [1, 16]}\n"))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 40)).astype(np.float32)
    s = np.array([0.5, -1.0, 2.0, 1.0, -0.5], np.float32)
    # empty, negative (an empty loop), one element, a partial last block, the whole row
    lens = np.array([0, -7, 1, 33, 40], np.int32)
    y0 = np.full((5, 40), 7.0, np.float32)
    y, c = op(x, lens, s, y=y0.copy(), backend=backend)
    want_y, want_c = data_loop_ref(x, lens, s, y0)
    np.testing.assert_allclose(y, want_y, rtol=1e-6)
    np.testing.assert_array_equal(c, want_c)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_huge_trip_count_stops_the_call_before_the_loop(write_spec, backend):
    op = ptodsl.load(write_spec("dc", DATA_LOOP, "op: dc\nschedule: {vec_tile: [1, 16]}\n"))
    x = np.ones((2, 40), np.float32)
    lens = np.array([3, 2**31 - 1], np.int32)  # a corrupt length: 134217728 blocks
    with pytest.raises(GuardError) as info:
        op(x, lens, np.ones(2, np.float32), y=np.zeros((2, 40), np.float32), backend=backend)
    d = info.value.diagnostic
    assert d.code == "E0870" and "134217728 times" in d.message and "is 40" in d.label
    assert d.span.line == 4


def test_a_bound_clamped_to_a_dim_needs_no_trip_check(write_spec):
    clamped = DATA_LOOP.replace("loop(cdiv(lens[b], 16)", "loop(cdiv(min(lens[b], N), 16)")
    ir = ptodsl.load(write_spec("dc", clamped, "op: dc\nschedule: {vec_tile: [1, 16]}\n")).ir("tensor")
    assert 'access = "trips"' not in ir
    ir = ptodsl.load(write_spec("dc", DATA_LOOP, "op: dc\nschedule: {vec_tile: [1, 16]}\n")).ir("tensor")
    assert ir.count('access = "trips"') == 1


# Varlen: an outer read (`cu[b]`) used in an inner loop's bound, its offsets and slice bounds; the
# same read written twice in one slice is one value, so the region is 8 rows.
VARLEN = """\
kernel vl(x: f32[T, D], cu: i32[C], y: inout f32[T, D]):
    for b in loop(C - 1, name="b_loop"):
        for q in loop(cdiv(cu[b + 1] - cu[b], 8), name="q_loop"):
            n = min(cu[b + 1] - cu[b] - q * 8, 8)
            v = view(x, [8, D], [cu[b] + q * 8, 0], valid_shape=[n, D])
            y[cu[b] + q * 8:cu[b] + q * 8 + 8, :] = v * (b + 1.0)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_of_an_outer_loop_drive_an_inner_loop(write_spec, backend):
    op = ptodsl.load(write_spec("vl", VARLEN, "op: vl\nschedule: {vec_tile: [8, 32]}\n"))
    x = np.random.default_rng(1).standard_normal((41, 32)).astype(np.float32)
    cu = np.array([0, 17, 40, 41], np.int32)
    y = op(x, cu, y=np.zeros((41, 32), np.float32), backend=backend)
    want = np.zeros_like(x)
    for b in range(3):
        want[cu[b]:cu[b + 1]] = x[cu[b]:cu[b + 1]] * (b + 1)
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_one_read_per_element_and_evaluation_point(write_spec):
    ir = ptodsl.load(write_spec("vl", VARLEN, "op: vl\nschedule: {vec_tile: [8, 32]}\n")).ir("tensor")
    reads = [line.strip() for line in ir.splitlines() if line.strip().startswith("read(")]
    # cu[b + 1] and cu[b], read once in the outer body, before the inner loop that uses them
    assert len(reads) == 2 and "index = [b + 1]" in reads[0] and "index = [b]" in reads[1]


def test_reads_in_both_arms_are_separate_evaluation_points(write_spec):
    pto = ("kernel k(x: f32[B, N], s: f32[B], y: out f32[B, N]):\n"
           "    for b in loop(B, name=\"b_loop\"):\n"
           "        if b > 0:\n"
           "            y[b, :] = x[b, :] * s[b]\n"
           "        else:\n"
           "            y[b, :] = x[b, :] + s[b]\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [1, 16]}\n"))
    assert op.ir("tensor").count("read(%s)") == 2
    x = np.ones((3, 16), np.float32)
    np.testing.assert_allclose(op(x, np.array([3, 4, 5], np.float32)), [[4] * 16, [4] * 16, [5] * 16])


@pytest.mark.parametrize(("expr", "code"), [
    ("min(lens[b] - j, 4)", None),
    ("max(lens[b], 0) + min(j, 1, 2)", None),
    ("min(lens[b])", "E0302"),
    ("min(x, 4)", "E0311"),          # tensors take `minimum`
    ("max(s[b], 1)", "E0302"),       # a float is no loop bound
])
def test_scalar_min_and_max(compile_text, expr, code):
    pto = ("kernel k(x: f32[B, N], lens: i32[B], s: f32[B], y: out f32[B, N]):\n"
           "    for b in loop(B, name=\"b_loop\"):\n"
           "        y[b, :] = x[b, :]\n"
           "        for j in loop(2, name=\"j_loop\"):\n"
           f"            for i in loop({expr}, name=\"i_loop\"):\n"
           "                y[b, :] = x[b, :] * 2.0\n")
    errors = [c for c in compile_text(pto, "schedule: {vec_tile: [1, 16]}\n") if c.startswith("E")]
    assert errors[:1] == ([code] if code else [])


@pytest.mark.parametrize("body", [
    # a scalar read in a loop, used after it
    "    for b in loop(B, name=\"b_loop\"):\n        n = lens[b]\n    y[0, 0:n] = x[0, 0:n]\n",
    # a tensor bound in a loop, used after it
    "    for b in loop(B, name=\"b_loop\"):\n        v = x[b, :] * 2.0\n    y[0, :] = v\n",
    # a scalar bound in both arms of an `if`, used after it
    "    for b in loop(B, name=\"b_loop\"):\n        if b > 1:\n            t = s[b]\n        else:\n"
    "            t = s[0]\n        y[b, :] = x[b, :] + t\n",
    # a tensor rebound in one arm, used after the `if`
    "    for b in loop(B, name=\"b_loop\"):\n        v = x[b, :]\n        if s[b] > 0.0:\n"
    "            v = v * 2.0\n        y[b, :] = v\n",
    # loop-carried: the body reads `t`, then rebinds it
    "    t = s[0]\n    for b in loop(B, name=\"b_loop\"):\n        y[b, :] = x[b, :] + t\n        t = s[b] * 2.0\n",
])
def test_names_stay_in_the_loop_or_arm_that_binds_them(compile_text, body):
    pto = "kernel k(x: f32[B, N], lens: i32[B], s: f32[B], y: out f32[B, N]):\n" + body
    assert "E0871" in compile_text(pto, "schedule: {vec_tile: [1, 16]}\n")


def test_rebinding_after_the_last_use_in_a_body_is_fine(compile_text):
    pto = ("kernel k(x: f32[B, N], s: f32[B], y: out f32[B, N]):\n"
           "    for b in loop(B, name=\"b_loop\"):\n"
           "        v = x[b, :] + s[b]\n"
           "        v = v * 2.0\n"
           "        y[b, :] = v\n")
    assert [c for c in compile_text(pto, "schedule: {vec_tile: [1, 16]}\n") if c.startswith("E")] == []


def test_an_output_written_only_in_a_data_loop_may_be_unwritten(compile_text):
    """A loop over a length read from a tensor may run zero times: the writes in it prove nothing
    (W0404), where a loop over a dim runs at least once."""
    pto = ("kernel k(x: f32[B, N], lens: i32[B], y: out f32[B, N]):\n"
           "    for b in loop(B, name=\"b_loop\"):\n"
           "        for j in loop(lens[b], name=\"j_loop\"):\n"
           "            y[b, :] = x[b, :] * 2.0\n")
    assert compile_text(pto, "schedule: {vec_tile: [1, 16]}\n") == ["W0404"]
    assert compile_text(pto.replace("loop(lens[b]", "loop(max(lens[b], 1)"),
                        "schedule: {vec_tile: [1, 16]}\n") == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_is_never_named_like_a_loop_index(write_spec, backend):
    """Unbound reads are named s0, s1, ...; a loop index of that name must not be taken for one."""
    pto = ("kernel k(x: f32[B, N], w: f32[B], y: out f32[B, N]):\n"
           "    for s0 in loop(B, name=\"rows\"):\n"
           "        y[s0, :] = x[s0, :] * w[s0]\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [1, 16]}\n"))
    x = np.arange(48, dtype=np.float32).reshape(3, 16)
    w = np.array([2.0, -5.0, 0.5], np.float32)
    np.testing.assert_allclose(op(x, w, backend=backend), x * w[:, None])
    pto = ("kernel k(x: f32[B, N], w: i32[B], y: out f32[B, N]):\n"
           "    for s0 in loop(B, name=\"rows\"):\n"
           "        y[s0:s0 + 1, :] = x[max(w[s0], 0):max(w[s0], 0) + 1, :] * 2.0\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [1, 16]}\n"))
    np.testing.assert_allclose(op(x, np.array([2, -5, 1], np.int32), backend=backend), x[[2, 0, 1]] * 2.0)


def test_a_local_of_the_body_written_in_parts_and_read_whole_is_no_cycle(compile_text, write_spec):
    """PyPTO's paged attention assembles a tile of keys from blocks into a local, then reads it
    whole: the read sees only what this iteration's writes stored, so it is an edge of the body's
    graph, not a cycle, wherever the local is declared. Reading it before the writes cover it (a
    value from an earlier iteration enters the body) is a cycle (E0403)."""
    body = ("    for b in loop(B, name=\"b_loop\"):\n"
            "        y[b, :] = x[b, :]\n"
            "        for j in loop(cdiv(lens[b], 2), name=\"j_loop\"):\n"
            "{decl}"
            "            t[0:1, :] = x[max(ids[b, j * 2], 0), :]\n"
            "            t[1:2, :] = x[max(ids[b, j * 2 + 1], 0), :]\n"
            "            y[b, :] = y[b, :] + sum(t, dim=0, keepdim=True)\n")
    head = "kernel k(x: f32[B, N], lens: i32[B], ids: i32[B, M], y: out f32[B, N]):\n"
    inside = head + body.format(decl="            t = tensor([2, N], f32)\n")
    assert compile_text(inside, "schedule: {vec_tile: [1, 16]}\n") == []
    outside = head + "    t = tensor([2, N], f32)\n" + body.format(decl="")
    assert compile_text(outside, "schedule: {vec_tile: [1, 16]}\n") == []
    partly = outside.replace("            t[1:2, :] = x[max(ids[b, j * 2 + 1], 0), :]\n", "")
    assert "E0403" in compile_text(partly, "schedule: {vec_tile: [1, 16]}\n")
    op = ptodsl.load(write_spec("k", inside, "op: k\nschedule: {vec_tile: [1, 16]}\n"))
    x = np.arange(48, dtype=np.float32).reshape(3, 16)
    ids = np.array([[2, 1, 0, -1], [1, 1, 1, 1], [0, 0, 0, 0]], np.int32)
    lens = np.array([3, 0, 4], np.int32)
    want = x.copy()
    for b in range(3):
        for j in range(-(-lens[b] // 2)):
            want[b] += x[max(ids[b, 2 * j], 0)] + x[max(ids[b, 2 * j + 1], 0)]
    np.testing.assert_allclose(op(x, lens, ids), want)


BEGIN_END = """\
kernel k(x: f32[L, N], lens: i32[1], y: inout f32[1, N]):
    acc = tensor([1, N], f32)
    for j in loop(lens[0], name="j_loop"):
        if is_loop_begin(j):
            if is_loop_end(j):
                y[:] = x[j, :]
            else:
                {first}
        else:
            acc[:] = acc + x[j, :]
            if is_loop_end(j):
                y[:] = acc
"""


def test_accumulators_written_where_the_first_iteration_is_not_the_last(compile_text, write_spec):
    """PyPTO's varlen attention: a first iteration that is also the last writes the output at once,
    else it starts the accumulators, which the later iterations read."""
    good = BEGIN_END.replace("{first}", "acc[:] = x[j, :]")
    assert compile_text(good, "schedule: {vec_tile: [1, 16]}\n") == []
    bad = BEGIN_END.replace("{first}", "y[:] = x[j, :]")
    assert "E0402" in compile_text(bad, "schedule: {vec_tile: [1, 16]}\n")
    op = ptodsl.load(write_spec("k", good, "op: k\nschedule: {vec_tile: [1, 16]}\n"))
    x = np.arange(64, dtype=np.float32).reshape(4, 16)
    for n in (1, 2, 4):
        np.testing.assert_allclose(op(x, np.array([n], np.int32), y=np.zeros((1, 16), np.float32)),
                                   x[:n].sum(axis=0, keepdims=True))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_view_holding_nothing_times_a_column_writes_nothing(write_spec, backend):
    """A view at row R (a row index read from a tensor may point at the end) holds no row; an
    elementwise result of it and a one-element operand holds none either, so the write stores
    nothing and the row keeps its values (found by `ptodsl fuzz --count 300 --seed 23`)."""
    pto = ("kernel k(x: f32[R, N], c: f32[R, 1], y: inout f32[R, N], ids: i32[R]):\n"
           "    for r in loop(R, name=\"rows\"):\n"
           "        v = x[ids[r], :]\n"
           "        y[r, :] = c[r, :] * v\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [1, 64]}\n"))
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    c = np.full((5, 1), 2.0, np.float32)
    ids = np.array([0, 1, 2, 5, 4], np.int32)
    y = op(x, c, y=np.full((5, 4), 7.0, np.float32), ids=ids, backend=backend)
    want = x[[0, 1, 2, 0, 4]] * 2.0
    want[3] = 7.0
    np.testing.assert_allclose(y, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_integer_written_into_a_narrower_tensor_wraps_on_every_backend(write_spec, backend):
    """The control program computes integers in int64 and the fill takes the element type: both
    wrap, as the C++ kernels do (the simulator saturated)."""
    pto = ("kernel k(lens: i32[B], c: out i32[B, 1]):\n"
           "    for b in loop(B, name=\"rows\"):\n"
           "        c[b, 0] = lens[b] * 2 + 1\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [1, 8]}\n"))
    lens = np.array([3, 2**31 - 1, -(2**31)], np.int32)
    np.testing.assert_array_equal(op(lens, backend=backend)[:, 0], [7, -1, 1])
