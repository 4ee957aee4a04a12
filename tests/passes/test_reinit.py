"""Reduction set-up folding (passes/reinit.py, a step of fuse): where a row's reduction covers one
column tile and its column loop provably runs once, the reduction writes the result directly, with
no identity fill and no combine. Where the loop may run no times the fill stays. Results against
numpy on the simulator (and the cpu backend under -m slow)."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl.ir import Op

RNG = np.random.default_rng(47)
PTO = """kernel k(x: f32[R, L], mx: out f32[R, 1], sm: out f32[R, 1]):
    for j in loop(cdiv(L, BL), name="blocks"):
        xj = view(x, [R, BL], [0, j * BL])
        if is_loop_begin(j):
            mx[:] = amax(xj, dim=-1, keepdim=True)
            sm[:] = sum(xj, dim=-1, keepdim=True)
        else:
            mx[:] = maximum(mx, amax(xj, dim=-1, keepdim=True))
            sm[:] = sm + sum(xj, dim=-1, keepdim=True)
"""
YAML = "op: k\nsymbols: {BL: 64}\nschedule:\n  vec_tile: [8, 64]\n"


def _fills(ops: list[Op]) -> list[object]:
    return [o.attrs["scalar"] for op in ops for o in op.walk() if o.name == "tile.fill"]


def _loops(op: Op, kind: str | None) -> list[Op]:
    return [o for f in op.compiled.stages["tile"].funcs for o in f.walk()
            if o.name == "loop" and o.attrs.get("kind") == kind and o.attrs.get("name") == "blocks"]


def test_a_block_one_tile_wide_reduces_without_a_fill(write_spec):
    op = ptodsl.load(write_spec("k", PTO, YAML))
    middle = _loops(op, None)
    assert middle and all(not _fills(loop.regions[0]) for loop in middle)
    # the first block's column loop runs cdiv(min(L, 64), 64) times: none when L is 0, so its
    # fills (the result of a reduction over nothing) stay
    first = _loops(op, "peeled")
    assert first and any(_fills(loop.regions[0]) for loop in first)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=[pytest.mark.cpu, pytest.mark.slow])])
@pytest.mark.parametrize("rows,cols", [(5, 64), (9, 200), (16, 257), (3, 1)])
def test_the_folded_reductions_compute_right(write_spec, backend, rows, cols):
    op = ptodsl.load(write_spec("k", PTO, YAML))
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    x[0, :] = -np.inf if cols > 1 else x[0, :]  # a row whose max is -inf: the fill's value itself
    mx, sm = op(x, backend=backend)
    np.testing.assert_array_equal(mx[:, 0], x.max(axis=1))
    finite = np.isfinite(x).all(axis=1)
    np.testing.assert_allclose(sm[finite, 0], x[finite].astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def _fold(body: str) -> tuple[int, str]:
    from ptodsl.ir import parse
    from ptodsl.ir.printer import print_module
    from ptodsl.passes.reinit import fold_reduction_inits

    text = ('module @m level tile attributes {target = "ascend910b"} {\n'
            '  kernel @m(%x: tensor<f32 [8, 64]>, %y: tensor<f32 [8, 1]> out, %z: tensor<f32 [8, 1]> out) {\n'
            '    %a = tile.alloc() : tile<ub f32 [8, 64] valid [8, 64]>\n'
            '    tile.load(%a, %x) {offsets = [0, 0]}\n'
            '    %acc = tile.alloc() : tile<ub f32 [8, 1] valid [8, 1]>\n'
            f'{body}'
            '    tile.store(%y, %acc) {offsets = [0, 0]}\n'
            '  }\n}\n')
    module = parse(text)
    n = fold_reduction_inits(module.funcs[0])
    return n, print_module(module)


def test_the_fold_applies_when_part_is_made_between_fill_and_combine():
    n, text = _fold('    tile.fill(%acc) {scalar = -inf}\n'
                    '    %p = tile.alloc() : tile<ub f32 [8, 1] valid [8, 1]>\n'
                    '    tile.amax(%p, %a) {axis = 1}\n'
                    '    tile.maximum(%acc, %acc, %p)\n')
    assert n == 1 and "tile.amax(%acc, %a)" in text and "tile.fill" not in text


def test_a_part_made_before_the_fill_is_not_moved_over_a_read_of_acc():
    # acc's old value is stored to z between part's producer and the fill: writing acc in the
    # producer's place would store the new value there
    n, text = _fold('    tile.fill(%acc) {scalar = 1.0}\n'
                    '    %p = tile.alloc() : tile<ub f32 [8, 1] valid [8, 1]>\n'
                    '    tile.amax(%p, %a) {axis = 1}\n'
                    '    tile.store(%z, %acc) {offsets = [0, 0]}\n'
                    '    tile.fill(%acc) {scalar = -inf}\n'
                    '    tile.maximum(%acc, %acc, %p)\n')
    assert n == 0 and "tile.amax(%p, %a)" in text


def test_a_part_allocated_outside_the_loop_that_combines_it_stays():
    # p lives on after the loop that runs once, where it is read: the fold looks only inside
    n, text = _fold('    %p = tile.alloc() : tile<ub f32 [8, 1] valid [8, 1]>\n'
                    '    tile.fill(%acc) {scalar = -inf}\n'
                    '    loop() {index = "k", lo = 0, hi = 1, step = 1, name = "k", kind = "grid"} region {\n'
                    '      tile.amax(%p, %a) {axis = 1}\n'
                    '      tile.maximum(%acc, %acc, %p)\n'
                    '    }\n'
                    '    tile.store(%z, %p) {offsets = [0, 0]}\n')
    assert n == 0 and "tile.amax(%p, %a)" in text
