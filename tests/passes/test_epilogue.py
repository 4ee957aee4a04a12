"""Matmul epilogues (passes/epilogue.py): a bias add and a relu after a matmul are done by the cube
(the bias table, the fixpipe's relu) where that computes the same, and stay vector work where it
would not. Numbers on the simulator and the cpu backend against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl

RNG = np.random.default_rng(31)
SCHEDULE = "schedule:\n  vec_tile: [8, 64]\n  cube_tile: {m: [16, 32], k: [32, 64], n: [32, 64]SPLIT}\n"
PARAMS = "a: f16[M, K], b: f16[K, N], bias: f32[N], c: out f32[M, N]"


def _load(write_spec, body: str, params: str = PARAMS, split: int = 1, options: str = ""):
    pto = f"kernel ep({params}):\n" + "".join(f"    {line}\n" for line in body.split("\n"))
    yaml = "op: ep\n" + SCHEDULE.replace("SPLIT", f", split_k: {split}" if split > 1 else "") + options
    return ptodsl.load(write_spec("ep", pto, yaml))


def _kinds(op) -> list[str]:
    return sorted(f.kind for f in op.compiled.stages["block"].funcs if f.kind != "control")


def _relu_stores(op) -> int:
    return sum(1 for o in op.compiled.stages["tile"].walk() if o.name == "tile.store" and o.attrs.get("relu"))


def _inputs(m: int = 40, k: int = 70, n: int = 45):
    a = RNG.uniform(-1, 1, (m, k)).astype(np.float16)
    b = RNG.uniform(-1, 1, (k, n)).astype(np.float16)
    bias = RNG.uniform(-2, 2, n).astype(np.float32)
    return a, b, bias


def _product(a, b):
    return a.astype(np.float32) @ b.astype(np.float32)


@pytest.mark.parametrize("body", ["c[:] = relu(matmul(a, b, out_dtype=f32) + bias)",
                                  "c[:] = relu(bias + matmul(a, b, out_dtype=f32))"])
def test_bias_and_relu_leave_with_the_product_from_one_cube_kernel(write_spec, body):
    op = _load(write_spec, body)
    assert _kinds(op) == ["cube"] and _relu_stores(op) == 1
    assert any(o.name == "tile.matmul_bias" for o in op.compiled.stages["tile"].walk())
    a, b, bias = _inputs()
    want = np.maximum(_product(a, b) + bias, 0)
    assert (want == 0).mean() > 0.2  # the relu has work to do
    for backend in ("sim", "cpu"):
        np.testing.assert_allclose(op(a, b, bias, backend=backend), want, rtol=1e-4, atol=1e-4)


def test_a_relu_rounds_to_the_output_dtype_after_it(write_spec):
    """relu commutes with the fixpipe's rounding to f16, so it folds into an f16 product too."""
    op = _load(write_spec, "c[:] = relu(matmul(a, b, out_dtype=f16))", "a: f16[M, K], b: f16[K, N], c: out f16[M, N]")
    assert _kinds(op) == ["cube"] and _relu_stores(op) == 1
    a, b, _ = _inputs()
    want = np.maximum(_product(a, b), 0).astype(np.float16)
    for backend in ("sim", "cpu"):
        got = op(a, b, backend=backend)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("body, params, why", [
    # rounded to f16 before the add: the bias cannot be the accumulation's first term
    ("c[:] = matmul(a, b, out_dtype=f16) + bias", "a: f16[M, K], b: f16[K, N], bias: f16[N], c: out f16[M, N]", "rounded"),
    # the bias comes after the relu
    ("c[:] = relu(matmul(a, b, out_dtype=f32)) + bias", PARAMS, "after relu"),
    # the product has another reader
    ("t = matmul(a, b, out_dtype=f32)\nc[:] = relu(t + bias) + t", PARAMS, "read twice"),
    # the bias is written between the product and the add
    ("t = matmul(a, b, out_dtype=f32)\nbias[:] = bias * 2.0\nc[:] = t + bias",
     "a: f16[M, K], b: f16[K, N], bias: inout f32[N], c: out f32[M, N]", "written between"),
])
def test_what_the_cube_would_compute_differently_stays_vector_work(write_spec, body, params, why):
    op = _load(write_spec, body, params)
    assert "vector" in _kinds(op), why
    assert not any(o.name == "tile.matmul_bias" for o in op.compiled.stages["tile"].walk()), why
    a, b, bias = _inputs()
    out_dt = np.float16 if "out f16" in params else np.float32
    p = _product(a, b)
    args = [a, b, bias.astype(out_dt) if "bias: f16" in params else bias.copy()]
    if why == "rounded":
        want = p.astype(np.float16).astype(np.float32) + bias.astype(np.float16).astype(np.float32)
    elif why == "after relu":
        want = np.maximum(p, 0) + bias
    elif why == "read twice":
        want = np.maximum(p + bias, 0) + p
    else:
        want = p + bias * 2
    got = op(*args)
    got = got[-1] if isinstance(got, tuple) else got
    np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=2e-3, atol=2e-3)


def test_split_k_applies_the_relu_to_the_sum_of_the_partials(write_spec):
    op = _load(write_spec, "c[:] = relu(matmul(a, b, out_dtype=f32) + bias)", split=3)
    assert _relu_stores(op) == 0
    assert any(o.name == "tile.relu" for o in op.compiled.stages["tile"].walk())
    a, b, bias = _inputs(k=200)
    want = np.maximum(_product(a, b) + bias, 0)
    for backend in ("sim", "cpu"):
        np.testing.assert_allclose(op(a, b, bias, backend=backend), want, rtol=1e-4, atol=1e-4)


def test_fused_ops_off_keeps_the_epilogue_in_a_vector_kernel(write_spec):
    op = _load(write_spec, "c[:] = relu(matmul(a, b, out_dtype=f32) + bias)",
               options="  pass_options: {fused_ops: false}\n")
    assert _kinds(op) == ["cube", "vector"] and _relu_stores(op) == 0


def test_a_store_with_relu_moves_an_accumulator() -> None:
    from ptodsl.ir import Op, TensorType, TileType, Value
    from ptodsl.ir.opdefs import IR_OPS

    gm = Value("y", TensorType("f32", (8, 8)))
    ub = Value("t", TileType("ub", "f32", (8, 8), (8, 8)))
    acc = Value("c", TileType("l0c", "f32", (8, 8), (8, 8)))
    rule = next(r for r in IR_OPS["tile.store"].rules if "relu" in r.text)
    assert rule.check(Op("tile.store", [gm, acc], {"offsets": (0, 0), "relu": True}), {"src": acc}) is None
    assert rule.check(Op("tile.store", [gm, ub], {"offsets": (0, 0), "relu": True}), {"src": ub}) == "src is in ub"
