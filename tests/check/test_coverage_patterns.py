"""Coverage of locals and outputs in the patterns ported kernels use: a local assembled block by
block then read whole, an offset clamped with a scalar `maximum`, and nested loops each with
their own is_loop_begin/is_loop_end. Each computes right on sim and cpu; the analysis stays sound
(a region really read before it is written is still E0402, a read an overlapping write follows
is still E0403)."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl

BACKENDS = ["sim", pytest.param("cpu", marks=pytest.mark.cpu)]


def errors(compile_text, pto: str, yaml: str) -> list[str]:
    return [c for c in compile_text(pto, yaml) if c[0] in "EW"]


ASSEMBLE = """\
kernel k(x: f32[R, BL, D], y: out f32[R, BL, D]):
    for r in loop(R, name="reps"):
        kj = tensor([1, BL, D], f32)
        kj[:, 0:32, :] = x[r, 0:32, :] * 2.0
        kj[:, 32:64, :] = x[r, 32:64, :] * 3.0
        y[r, :, :] = kj + 1.0
"""
YAML = "op: k\nsymbols: {BL: 64, D: 64}\nschedule: {vec_tile: [1, 16, 64]}\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_local_assembled_by_blocks_then_read_whole(write_spec, backend):
    op = ptodsl.load(write_spec("k", ASSEMBLE, YAML))
    assert not op.compiled.diagnostics.items
    x = np.random.default_rng(0).standard_normal((2, 64, 64)).astype(np.float32)
    want = np.concatenate([x[:, :32] * 2, x[:, 32:] * 3], axis=1) + 1
    np.testing.assert_allclose(op(x, backend=backend), want, rtol=1e-6)


def test_assembled_in_a_loop_of_blocks(compile_text):
    pto = ("kernel k(x: f32[BL, D], y: out f32[BL, D]):\n"
           "    kj = tensor([BL, D], f32)\n"
           "    for i in loop(BL // 16, name=\"parts\"):\n"
           "        kj[i*16:(i+1)*16, :] = x[i*16:(i+1)*16, :] * 2.0\n"
           "    y[:] = kj + 1.0\n")
    assert errors(compile_text, pto, "symbols: {BL: 64, D: 64}\nschedule: {vec_tile: [16, 64]}\n") == []
    # three blocks of 16 leave rows 48 to 63 unwritten: still a read before write
    short = pto.replace("loop(BL // 16", "loop(3")
    assert errors(compile_text, short, "symbols: {BL: 64, D: 64}\nschedule: {vec_tile: [16, 64]}\n")[:1] == ["E0402"]


def test_a_read_an_overlapping_write_follows_is_still_a_cycle(compile_text):
    pto = ASSEMBLE.replace("        y[r, :, :] = kj + 1.0\n",
                           "        y[r, :, :] = kj + 1.0\n        kj[:, 16:48, :] = x[r, 16:48, :]\n")
    assert errors(compile_text, pto, YAML.removeprefix("op: k\n"))[:1] == ["E0403"]


CLAMPED = """\
kernel k(x: f32[N, D], y: out f32[B, D], z: out f32[B, D], w: out f32[B, D]):
    for b in loop(B, name="bl"):
        a1 = tensor([1, D], f32)
        a2 = tensor([1, D], f32)
        a3 = tensor([1, D], f32)
        for j in loop(4, name="inner"):
            blk = b + j - 2
            off = maximum(blk, 0)
            row = x[off, :]
            if is_loop_begin(j):
                a1[:] = row
                a2[:] = row * 2.0
                a3[:] = row * 3.0
            else:
                a1[:] = a1 + row
                a2[:] = a2 + row
                a3[:] = a3 + row
        y[b, :] = a1
        z[b, :] = a2
        w[b, :] = a3
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_offset_clamped_by_a_scalar_maximum(write_spec, backend):
    # the rows read reach b + 1: x has two more rows than y (B is solved from N at the call)
    op = ptodsl.load(write_spec("k", CLAMPED, "op: k\nsymbols: {D: 64, N: B + 2}\nschedule: {vec_tile: [1, 64]}\n"))
    assert not op.compiled.diagnostics.items
    x = np.random.default_rng(1).standard_normal((7, 64)).astype(np.float32)
    got = op(x, backend=backend)
    for mul, out in zip((1.0, 2.0, 3.0), got):
        want = np.stack([x[max(b - 2, 0)] * mul + sum(x[max(b + j - 2, 0)] for j in range(1, 4))
                         for b in range(5)])
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_scalar_max_and_min_fold_and_other_ops_want_tensors(compile_text):
    pto = ("kernel k(x: f32[N, D], y: out f32[1, D]):\n"
           "    y[:] = x[minimum(maximum(N - 9, 0), 3), :]\n")
    assert errors(compile_text, pto, "symbols: {D: 64}\nschedule: {vec_tile: [1, 64]}\n") == []
    assert errors(compile_text, pto.replace("minimum(", "exp(").replace(", 3)", ")"),
                  "symbols: {D: 64}\nschedule: {vec_tile: [1, 64]}\n")[:1] == ["E0311"]


def test_an_accumulator_the_first_iteration_does_not_write_is_still_unwritten(compile_text):
    pto = CLAMPED.replace("                a3[:] = row * 3.0\n", "")
    assert errors(compile_text, pto, "symbols: {D: 64}\nschedule: {vec_tile: [1, 64]}\n")[:1] == ["E0402"]


NESTED = """\
kernel k(x: f32[M, N, D], y: out f32[1, 1, D], z: out f32[M, 1, D]):
    tot = tensor([1, 1, D], f32)
    for i in loop(M, name="outer"):
        acc = tensor([1, 1, D], f32)
        for j in loop(N, name="inner"):
            row = x[i, j, :]
            if is_loop_begin(j):
                acc[:] = row
            else:
                acc[:] = acc + row
            if is_loop_end(j):
                z[i, :, :] = acc
                if is_loop_begin(i):
                    tot[:] = acc
                else:
                    tot[:] = tot + acc
        if is_loop_end(i):
            y[:] = tot
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_loops_with_their_own_begin_and_end(write_spec, backend):
    """Both loops peel a first and last copy; the outer copies hold the inner copies."""
    op = ptodsl.load(write_spec("k", NESTED, "op: k\nsymbols: {D: 64}\nschedule: {vec_tile: [1, 1, 64]}\n"))
    assert not op.compiled.diagnostics.items
    for m, n in ((3, 4), (1, 1), (2, 1), (1, 3)):
        x = np.random.default_rng(m * 10 + n).standard_normal((m, n, 64)).astype(np.float32)
        y, z = op(x, backend=backend)
        np.testing.assert_allclose(z, x.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y, x.sum(axis=(0, 1), keepdims=True), rtol=1e-5, atol=1e-5)


def test_an_inner_end_branch_does_not_initialise_the_accumulator(compile_text):
    bad = NESTED.replace("            if is_loop_begin(j):\n                acc[:] = row\n            else:\n"
                         "                acc[:] = acc + row\n", "            acc[:] = acc + row\n")
    assert errors(compile_text, bad, "symbols: {D: 64}\nschedule: {vec_tile: [1, 1, 64]}\n")[:1] == ["E0402"]


NARROW = """\
kernel k(x: f32[BL, D], y: out f32[BL, D]):
    xv = view(x, [BL, D], [0, 0], valid_shape=[12, D])
    t = tensor([BL, D], f32)
    t[:] = xv * 2.0
    y[:] = {read} + 1.0
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_of_a_narrower_value_initialises_only_its_valid_rows(compile_text, write_spec, backend):
    # the value has 12 valid rows, so `t[:] = ...` stores 12 rows of 32: reading `t` whole reads
    # 20 rows nothing wrote (before, it checked clean and read whatever the local held)
    yaml = "symbols: {BL: 32, D: 16}\nschedule: {vec_tile: [32, 16]}\n"
    assert errors(compile_text, NARROW.format(read="t"), yaml)[:1] == ["E0402"]
    # so does an output: rows 12 to 31 of `y` would keep whatever its memory held
    out = "kernel k(x: f32[BL, D], y: out f32[BL, D]):\n    y[:] = view(x, [BL, D], [0, 0], valid_shape=[12, D])\n"
    assert errors(compile_text, out, yaml)[:1] == ["E0401"]
    # reading through a view of the same valid rows reads only what was written
    pto = NARROW.format(read="view(t, [BL, D], [0, 0], valid_shape=[12, D])").replace("y: out", "y: inout")
    op = ptodsl.load(write_spec("k", pto, "op: k\n" + yaml))
    assert not op.compiled.diagnostics.items
    x, y = np.random.default_rng(1).standard_normal((2, 32, 16)).astype(np.float32)
    want = y.copy()
    want[:12] = x[:12] * 2 + 1
    np.testing.assert_allclose(op(x, y, backend=backend), want, rtol=1e-6)
