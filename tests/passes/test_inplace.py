"""A tensor rewritten from a copy of itself (passes/tile_fit.py, rewrite_of): where a whole row fits
one tile, the copy is dropped and each row block is read whole before it is written."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl.driver import compile_spec

BACKENDS = ["sim", pytest.param("cpu", marks=[pytest.mark.cpu, pytest.mark.slow])]
SPEC = "specs/swap_halves.yaml"


def _fit_and_rest(func):
    """The fit version's loop and the scheduled one, of the call-time choice between them."""
    branch = next(op for op in func.body if op.name == "if" and op.regions[0] and op.regions[0][0].attrs.get("fit"))
    return branch, branch.regions[0][0], branch.regions[1][0]


def test_the_fit_version_reads_and_writes_x_without_a_copy():
    func = compile_spec(SPEC).stages["tile"].funcs[0]
    branch, fit, rest = _fit_and_rest(func)
    assert str(branch.attrs["cond"]).startswith("D >= 2")  # a row of one column has no second half
    assert not [o for o in fit.walk() if o.name == "alloc"]  # neither the clone nor a joined temporary
    loads = [o.operands[1].name for o in fit.walk() if o.name == "tile.load"]
    views = {o.result.name: o.operands[0].name for o in fit.walk() if o.name == "view"}
    assert loads and all(views.get(n, n) == "x" for n in loads)
    assert [o.name for o in fit.walk() if o.name in ("tile.concat", "tile.store")] == ["tile.concat", "tile.store"]
    # the scheduled version still copies: it moves rows in tiles narrower than the row
    assert [o for o in rest.walk() if o.name == "alloc"]


def test_one_launch_moves_each_byte_once():
    op = ptodsl.load(SPEC)
    x = np.random.default_rng(0).uniform(-1, 1, (16, 128)).astype(np.float32)
    r = op.run(x, backend="sim") if hasattr(op, "run") else None
    c = compile_spec(SPEC)
    control = c.stages["block"].funcs[-1]
    assert control.kind == "control"
    fit = next(o for o in control.walk() if o.name == "if" and any(x.name == "launch" for x in o.regions[0][0].walk()))
    assert len([o for o in fit.regions[0][0].walk() if o.name == "launch"]) == 1
    del r


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cols", [1, 2, 3, 77, 128, 3100])  # no fit, the least, odd, tails, whole, over the cap
def test_swap_halves_computes_right_on_both_sides_of_the_fit(backend, cols):
    op = ptodsl.load(SPEC)
    x = np.random.default_rng(cols).uniform(-1, 1, (5, cols)).astype(np.float32)
    want = np.concatenate([x[:, cols // 2:], x[:, :cols // 2]], axis=-1)
    got = op(x.copy(), backend=backend)
    np.testing.assert_array_equal(got, want)


LATER = """\
kernel k(x: inout f32[R, D], z: out f32[R, D]):
    old = clone(x)
    x[:] = concat([old[:, 1:D], old[:, 0:1]], dim=-1)
    z[:] = old * 2.0
"""


def test_a_copy_read_again_later_is_kept_and_right(write_spec):
    op = ptodsl.load(write_spec("k", LATER, "op: k\nschedule: {vec_tile: [4, 64]}\n"))
    func = op.compiled.stages["tile"].funcs[0]
    assert not [o for o in func.walk() if o.name == "loop" and o.attrs.get("fit")]  # not the pattern
    x = np.random.default_rng(5).uniform(-1, 1, (6, 40)).astype(np.float32)
    got_x, got_z = op(x.copy(), backend="sim")
    np.testing.assert_array_equal(got_x, np.roll(x, -1, axis=-1))
    np.testing.assert_array_equal(got_z, x * 2.0)
