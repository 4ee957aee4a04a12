"""The cube path of tiling (passes/cube.py): batched matmuls as grid loops over 2-D cube products,
out_dtype rounded once on the way out of L0C, the bias in the cube, int8 products exact in i32,
and split-K partial products that sum to the unsplit product. Numbers on the simulator (the
library specs run the same forms on the cpu backend)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ptodsl

RNG = np.random.default_rng(23)
# a vec_tile given: no search for one (the split-K sums are vector work)
CUBE = "  vec_tile: [8, 64]\n  cube_tile: {m: [16, 32], k: [32, 64], n: [32, 64]SPLIT}\n"
_LOADED: dict[tuple, object] = {}


def _load(write_spec, name: str, params: str, body: str, split: int = 1):
    """The op, compiled once per text for the whole module (its dims are bound at each call)."""
    pto = f"kernel {name}({params}):\n    {body}\n"
    yaml = f"op: {name}\nschedule:\n" + CUBE.replace("SPLIT", f", split_k: {split}" if split > 1 else "")
    if (pto, yaml) not in _LOADED:
        _LOADED[pto, yaml] = ptodsl.load(write_spec(name, pto, yaml))
    return _LOADED[pto, yaml]


def _ops(op, stage: str = "tile") -> list:
    return list(op.compiled.stages[stage].walk())


@pytest.mark.parametrize("a_shape, b_shape, ta, tb", [
    ((2, 3, 20, 40), (3, 40, 17), False, False),       # b has no batch dim of its own
    ((2, 1, 20, 40), (2, 3, 40, 17), False, False),    # a's head dim of 1 repeats over b's heads
    ((20, 40), (2, 3, 40, 17), False, False),          # one left matrix for every entry
    ((3, 40, 20), (3, 17, 40), True, True),            # both transposed, with a batch
    ((1, 20, 70), (2, 70, 33), False, False),          # k and n over one tile: tails
])
def test_batched_matmul_is_torch_matmul(write_spec, a_shape, b_shape, ta, tb):
    def dims(shape):
        return ", ".join(str(d) for d in shape)

    out = np.matmul(np.swapaxes(np.zeros(a_shape), -1, -2) if ta else np.zeros(a_shape),
                    np.swapaxes(np.zeros(b_shape), -1, -2) if tb else np.zeros(b_shape)).shape
    flags = (", trans_a=True" if ta else "") + (", trans_b=True" if tb else "")
    op = _load(write_spec, "bm", f"a: f32[{dims(a_shape)}], b: f32[{dims(b_shape)}], c: out f32[{dims(out)}]",
               f"c[:] = matmul(a, b{flags})")
    a = RNG.uniform(-1, 1, a_shape).astype(np.float32)
    b = RNG.uniform(-1, 1, b_shape).astype(np.float32)
    want = np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b)
    np.testing.assert_allclose(op(a, b), want, rtol=1e-5, atol=1e-5)


def test_the_batch_becomes_grid_loops_around_2d_cube_products(write_spec):
    op = _load(write_spec, "bm", "a: f16[B, H, S, D], b: f16[H, D, L], c: out f32[B, H, S, L]", "c[:] = matmul(a, b)")
    ops = _ops(op)
    batch = [o for o in ops if o.name == "loop" and str(o.attrs["hi"]) in ("B", "H")]
    assert [str(o.attrs["hi"]) for o in batch] == ["B", "H"] and all(o.attrs["kind"] == "grid" for o in batch)
    b_index, h_index = (o.attrs["index"] for o in batch)
    loads = {o.operands[1].name: [str(x) for x in o.attrs["offsets"]] for o in ops if o.name == "tile.load"}
    assert loads["a"][:2] == [b_index, h_index] and loads["b"][0] == h_index  # each operand at its own batch entry
    for o in ops:
        if o.name in ("tile.matmul", "tile.matmul_acc"):
            assert all(t.type.shape[:-2] == (1,) * (t.type.rank - 2) for t in o.operands)  # 2-D products


def test_out_dtype_rounds_the_accumulator_once_at_the_store(write_spec):
    """Integers whose f32 sums are exact but need more bits than f16 has: the result must be the
    exact sum rounded to nearest even, once (a second rounding, or an f16 accumulation, differs)."""
    op = _load(write_spec, "mo", "a: f16[M, K], b: f16[K, N], c: out f16[M, N]", "c[:] = matmul(a, b, out_dtype=f16)")
    stores = [o for o in _ops(op) if o.name == "tile.store"]
    assert [(o.operands[1].type.space, o.operands[1].type.dtype, o.operands[0].type.dtype) for o in stores] \
        == [("l0c", "f32", "f16")]
    assert not any(o.name == "tile.cast" for o in _ops(op))  # the fixpipe converts, no vector kernel
    a = RNG.integers(-16, 17, (37, 150)).astype(np.float16)
    b = RNG.integers(-16, 17, (150, 45)).astype(np.float16)
    exact = a.astype(np.int64) @ b.astype(np.int64)
    assert np.abs(exact).max() > 2048  # sums f16 cannot hold exactly
    np.testing.assert_array_equal(op(a, b), exact.astype(np.float32).astype(np.float16))


def test_bf16_out_rounds_to_nearest_even(write_spec):
    op = _load(write_spec, "mo", "a: bf16[M, K], b: bf16[K, N], c: out bf16[M, N]", "c[:] = matmul(a, b, out_dtype=bf16)")
    a = RNG.integers(-16, 17, (20, 64)).astype(ml_dtypes.bfloat16)
    b = RNG.integers(-16, 17, (64, 20)).astype(ml_dtypes.bfloat16)
    exact = a.astype(np.int64) @ b.astype(np.int64)
    got = op(a, b)
    np.testing.assert_array_equal(got.view(np.uint16), exact.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16))


@pytest.mark.parametrize("bias_dtype", ["f32", "f16"])
def test_the_bias_is_added_in_the_cube(write_spec, bias_dtype):
    op = _load(write_spec, "mb", f"x: f16[M, K], w: f16[N, K], v: {bias_dtype}[N], y: out f32[M, N]",
               "y[:] = matmul(x, w, trans_b=True, bias=v)")
    block = op.compiled.stages["block"]
    assert [f.kind for f in block.funcs if f.kind != "control"] == ["cube"]  # no vector kernel
    ops = list(block.walk())
    assert any(o.name == "tile.matmul_bias" for o in ops)
    bt = [o.result.type for o in ops if o.name == "tile.alloc" and o.result.type.space == "bt"]
    assert bt and all(t.dtype == "f32" for t in bt)  # an f16 row is widened into the bias table
    x = RNG.uniform(-1, 1, (40, 100)).astype(np.float16)
    w = RNG.uniform(-1, 1, (70, 100)).astype(np.float16)
    v = RNG.uniform(-4, 4, 70).astype(np.float16 if bias_dtype == "f16" else np.float32)
    want = x.astype(np.float64) @ w.astype(np.float64).T + v.astype(np.float64)
    np.testing.assert_allclose(op(x, w, v), want, rtol=1e-5, atol=1e-4)


def test_int8_products_are_exact_in_i32(write_spec):
    op = _load(write_spec, "mi", "a: i8[M, K], b: i8[K, N], v: i32[N], c: out i32[M, N]", "c[:] = matmul(a, b, bias=v)")
    a = RNG.integers(-128, 128, (33, 300)).astype(np.int8)
    b = RNG.integers(-128, 128, (300, 40)).astype(np.int8)
    a[0], b[:, 0] = -128, -128  # the largest products, 300 of them: 4915200
    v = RNG.integers(-1000, 1000, 40).astype(np.int32)
    got = op(a, b, v)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64) + v)


# (K, split_k): fewer k tiles than partials, one tile each, uneven ranges, many partials; the k
# tile is 32, so K = 300 is 10 tiles: 3 partials of 4, 4 and 2
SPLIT_CASES = [(1, 2), (31, 2), (64, 3), (65, 4), (300, 3), (300, 8), (1000, 64)]


@pytest.mark.parametrize("split", sorted({s for _, s in SPLIT_CASES}))
def test_split_k_sums_to_the_unsplit_product(write_spec, split):
    params, body = "a: f32[M, K], b: f32[K, N], v: f32[N], c: out f16[M, N]", "c[:] = matmul(a, b, bias=v, out_dtype=f16)"
    whole = _load(write_spec, "sk", params, body)
    parts = _load(write_spec, "skp", params, body, split)
    for k in (k for k, s in SPLIT_CASES if s == split):
        a = RNG.uniform(-1, 1, (20, k)).astype(np.float32)
        b = RNG.uniform(-1, 1, (k, 45)).astype(np.float32)
        v = RNG.uniform(-1, 1, 45).astype(np.float32)
        want = (a.astype(np.float64) @ b.astype(np.float64) + v).astype(np.float16)
        got = parts(a, b, v).astype(np.float64)
        np.testing.assert_allclose(got, whole(a, b, v).astype(np.float64), rtol=2e-3, atol=2e-3)
        np.testing.assert_allclose(got, want.astype(np.float64), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("split", sorted({s for _, s in SPLIT_CASES}))
def test_split_k_of_int8_is_exact(write_spec, split):
    op = _load(write_spec, "ski", "a: i8[B, M, K], b: i8[K, N], c: out i32[B, M, N]", "c[:] = matmul(a, b)", split)
    for k in (k for k, s in SPLIT_CASES if s == split):
        a = RNG.integers(-128, 128, (2, 20, k)).astype(np.int8)
        b = RNG.integers(-128, 128, (k, 45)).astype(np.int8)
        np.testing.assert_array_equal(op(a, b), np.matmul(a.astype(np.int64), b.astype(np.int64)))


def test_split_k_partials_are_independent_slices_of_a_workspace(write_spec):
    """The partials are one split loop, shared out as blocks of one launch over the cube cores;
    the vector grid that sums them adds the bias to the first and rounds the sum once."""
    op = _load(write_spec, "skp", "a: f16[M, K], b: f16[K, N], v: f32[N], c: out bf16[M, N]",
               "c[:] = matmul(a, b, bias=v, out_dtype=bf16)", 4)
    block = op.compiled.stages["block"]
    kinds = [f.kind for f in block.funcs if f.kind != "control"]
    assert kinds == ["cube", "vector"]  # the partials, then their sum
    cube = next(f for f in block.funcs if f.kind == "cube")
    assert "block_index" in cube.attrs  # the partials run as blocks
    split = [o for o in cube.walk() if o.name == "loop" and o.attrs.get("kind") == "split"]
    assert len(split) == 1 and split[0].attrs.get("parallel") == 1
    assert not any(o.name == "tile.matmul_bias" for o in cube.walk())
    # each partial stores its own slice: at the partial's index times M (whole tiles) along the first dim
    stores = [o for o in split[0].walk() if o.name == "tile.store"]
    assert stores and all(split[0].attrs["index"] in str(o.attrs["offsets"][0]) for o in stores)
    vector = next(f for f in block.funcs if f.kind == "vector")
    assert any(o.name == "tile.load" and o.operands[1].name == "v" for o in vector.walk())  # the bias, once
    assert any(o.name == "tile.cast" and o.attrs["to"] == "bf16" for o in vector.walk())  # rounded once, at the end


STATIC = """
kernel st(a: f16[20, 40], b: f16[17, 40], v: f16[17], q: i8[3, 20, 50], w: i8[50, 9], c: out f16[20, 17], d: out i32[3, 20, 9]):
    c[:] = matmul(a, b, trans_b=True, bias=v, out_dtype=f16)
    d[:] = matmul(q, w)
"""


@pytest.mark.cpu
def test_static_dims_off_the_fractal_grid_build_and_compute(write_spec):
    """A static dim that is no whole number of cube fractals (20 rows, 17 columns, k of 40 or 50)
    keeps its tiles whole fractals, the tail in their valid extents: pto-isa's layouts reject a
    20 x 17 TileAcc, so clipping the tile to the dim would not build."""
    op = ptodsl.load(write_spec("st", STATIC, "op: st\nschedule:\n" + CUBE.replace("SPLIT", "")))
    a = RNG.uniform(-1, 1, (20, 40)).astype(np.float16)
    b = RNG.uniform(-1, 1, (17, 40)).astype(np.float16)
    v = RNG.uniform(-1, 1, 17).astype(np.float16)
    q = RNG.integers(-128, 128, (3, 20, 50)).astype(np.int8)
    w = RNG.integers(-128, 128, (50, 9)).astype(np.int8)
    c, d = op(a, b, v, q, w, backend="cpu")
    np.testing.assert_allclose(c.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64).T + v,
                               rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(d, np.matmul(q.astype(np.int64), w.astype(np.int64)))


def test_a_bf16_bias_needs_a_target_that_widens_it(write_spec):
    """The A5 bias table widens bf16 rows (ascend950's bias_moves); the 910B's does not (E0608,
    tests/golden_codes/fixtures/e0608_bf16_bias_on_910b)."""
    pto = "kernel bb(x: bf16[M, K], w: bf16[K, N], v: bf16[N], y: out f32[M, N]):\n    y[:] = matmul(x, w, bias=v)\n"
    yaml = "op: bb\ntarget: ascend950\nschedule:\n" + CUBE.replace("SPLIT", "")
    op = ptodsl.load(write_spec("bb", pto, yaml))
    from ptodsl.backends.cpp.rules import spec_violations

    assert spec_violations(op.compiled) == []
    x, w, v = (RNG.uniform(-1, 1, s).astype(ml_dtypes.bfloat16) for s in ((20, 40), (40, 33), (33,)))
    want = x.astype(np.float64) @ w.astype(np.float64) + v.astype(np.float64)
    np.testing.assert_allclose(op(x, w, v), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=[pytest.mark.cpu, pytest.mark.slow])])
@pytest.mark.parametrize("tb", [False, True])
def test_the_product_sums_over_the_k_both_operands_hold(write_spec, backend, tb):
    # b through a view with fewer valid k than a has columns (flash attention's last, partial KV
    # block of v against the whole probability row): the sum leaves the rest of a's columns out,
    # and nothing is loaded past b's valid rows (the tile loads of b once read past the tensor)
    b_shape = "N, K" if tb else "K, N"
    view = ("view(b, [N, K], [0, 0], valid_shape=[N, w])" if tb
            else "view(b, [K, N], [0, 0], valid_shape=[w, N])")
    flags = ", trans_b=True" if tb else ""
    op = _load(write_spec, "pk", f"a: f32[M, K], b: f32[{b_shape}], c: out f32[M, N], w: i32",
               f"bv = {view}\n    c[:] = matmul(a, bv{flags})")
    for m, k, n, w in ((20, 70, 17, 45), (33, 64, 40, 1), (8, 40, 9, 40)):
        a = RNG.uniform(-1, 1, (m, k)).astype(np.float32)
        b = RNG.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
        bt = b.T if tb else b
        got = op(a, b, w=w, backend=backend)
        want = a[:, :w].astype(np.float64) @ bt[:w].astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
