"""Twin accumulations (passes/twins.py, fusion step 6c): a product a region accumulates twice is
accumulated once and stored from the one accumulator."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl.driver import compile_spec

BACKENDS = ["sim", pytest.param("cpu", marks=pytest.mark.cpu)]
SCHEDULE = "schedule: {cube_tile: {m: [32, 32], k: [32, 32], n: [32, 32]}}\n"


def _ops(compiled, name: str) -> list:
    return [op for op in compiled.stages["tile"].walk() if op.name == name]


@pytest.mark.slow  # (compiles bmm at three dtypes: README suite time)
def test_bmm_accumulates_its_product_once_and_stores_it_twice():
    c = compile_spec("specs/bmm.yaml")
    kernel = c.stages["tile"].funcs[0]
    accs = [op for op in kernel.walk() if op.name == "tile.matmul_acc"]
    starts = [op for op in kernel.walk() if op.name == "tile.matmul"]
    assert len(accs) == len(starts) == 1
    stores = [op for op in kernel.walk() if op.name == "tile.store"]
    assert {op.operands[0].name for op in stores} == {"c", "d"}
    assert len({op.operands[1].name for op in stores}) == 1  # both from the one accumulator


TWICE = """\
kernel k(a: f32[M, K], b: f32[K, N], b2: f32[K, N], c: out f32[M, N], d: out f32[M, N]):
    c[:] = matmul(a, b)
    d[:] = matmul(a, {second})
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_product_twice_computes_right(write_spec, backend):
    op = ptodsl.load(write_spec("k", TWICE.format(second="b"), "op: k\n" + SCHEDULE))
    assert len(_ops(op.compiled, "tile.matmul_acc")) == 1
    rng = np.random.default_rng(2)
    a, b, b2 = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((40, 96), (96, 48), (96, 48)))
    c, d = op(a, b, b2, backend=backend)
    want = a.astype(np.float64) @ b
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(c, d)


def test_products_of_other_operands_stay_apart(write_spec):
    op = ptodsl.load(write_spec("k", TWICE.format(second="b2"), "op: k\n" + SCHEDULE))
    assert len(_ops(op.compiled, "tile.matmul_acc")) == 2


def test_a_product_whose_operand_changes_in_between_is_computed_again(write_spec):
    # `b` is written between the two products: the second reads the new values
    pto = ("kernel k(a: f32[M, K], b: inout f32[K, N], c: out f32[M, N], d: out f32[M, N]):\n"
           "    c[:] = matmul(a, b)\n"
           "    b[:] = b * 2.0\n"
           "    d[:] = matmul(a, b)\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\n" + SCHEDULE))
    assert len(_ops(op.compiled, "tile.matmul_acc")) == 2
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, (40, 96)).astype(np.float32), rng.uniform(-1, 1, (96, 48)).astype(np.float32)
    c, d = op(a, b.copy(), backend="sim")[1:]
    np.testing.assert_allclose(2 * c, d, rtol=1e-5, atol=1e-5)
