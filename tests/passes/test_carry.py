"""Accumulators carried through GM (passes/carry.py, a step of fuse): a user loop over rows whose
body updates one row of a workspace runs inside the grid over that row's tiles, the row in a tile
across the loop. Results against numpy on the simulator and the cpu backend, and the IR's shape."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl

RNG = np.random.default_rng(43)
PREFIX = """kernel k(x: f32[B, N], y: out f32[1, N], z: out f32[B, N]):
    acc = tensor([1, N], f32)
    for b in loop(B, name="rows"):
        if is_loop_begin(b):
            acc[:] = x[b, :]
        else:
            acc[:] = acc * 0.5 + x[b, :]
        z[b, :] = acc
        if is_loop_end(b):
            y[:] = acc
"""


def _load(write_spec, pto: str, options: str = ""):
    yaml = "op: k\nschedule:\n  vec_tile: [1, 128]\n" + (f"  pass_options: {{{options}}}\n" if options else "")
    return ptodsl.load(write_spec("k", pto, yaml))


def _user_loops_storing(op) -> list[str]:
    """The user loops of the fused tile IR whose body stores to a workspace (a GM round trip)."""
    fused = op.compiled.stages["block"]
    workspaces = {o.result.name for f in fused.funcs for o in f.walk() if o.name == "alloc"}
    out = []
    for f in fused.funcs:
        for o in f.walk():
            if o.name == "loop" and o.attrs.get("kind") is None:
                if any(s.name == "tile.store" and s.operands[0].name in workspaces
                       for s in (x for r in o.regions for y in r for x in y.walk())):
                    out.append(o.attrs["name"])
    return out


@pytest.mark.parametrize("split", [True, False])
def test_a_running_row_stays_in_a_tile_across_the_loop(write_spec, split):
    op = _load(write_spec, PREFIX, f"split_reduction: {str(split).lower()}")
    assert "rows" not in _user_loops_storing(op)
    x = RNG.standard_normal((37, 300)).astype(np.float32)
    want_z = np.empty_like(x)
    acc = x[0].astype(np.float64)
    want_z[0] = acc
    for b in range(1, len(x)):
        acc = acc * 0.5 + x[b]
        want_z[b] = acc
    for backend in ("sim", "cpu"):
        y, z = op(x, backend=backend)
        np.testing.assert_allclose(z, want_z, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(y[0], want_z[-1], rtol=1e-5, atol=1e-5)


def test_a_row_that_moves_with_the_loop_is_not_carried(write_spec):
    """y[b + 1] = y[b] + x[b]: each iteration reads the row the previous one wrote, at offsets the
    loop moves, so the loop keeps its order through GM."""
    pto = "kernel k(x: f32[B, N], y: inout f32[B, N]):\n    for b in loop(B - 1, name=\"rows\"):\n" \
          "        y[b + 1, :] = y[b, :] + x[b, :]\n"
    op = _load(write_spec, pto)
    x = RNG.standard_normal((9, 200)).astype(np.float32)
    y0 = RNG.standard_normal((9, 200)).astype(np.float32)
    want = y0.copy()
    for b in range(8):
        want[b + 1] = want[b] + x[b]
    for backend in ("sim", "cpu"):
        y = y0.copy()
        op(x, y, backend=backend)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


GRIDS = """module @m level tile attributes {target = "ascend910b"} {
  kernel @m(%x: tensor<f32 [M, 256]>, %y: tensor<f32 [M, 256]> inout, %t: tensor<f32 [M, 256]> out) {
    loop() {index = "g", lo = 0, hi = 4, step = 1, name = "g", kind = "grid"} region {
      %a = tile.alloc() : tile<ub f32 [1, 64] valid [1, 64]>
      tile.load(%a, %y) {offsets = [0, g * 64]}
      tile.store(%t, %a) {offsets = [0, g * 64]}
    }
    loop() {index = "h", lo = 0, hi = 4, step = 1, name = "h", kind = "grid"} region {
      %b = tile.alloc() : tile<ub f32 [1, 64] valid [1, 64]>
      tile.load(%b, %x) {offsets = [0, h * 64]}
      tile.store(%y, %b) {offsets = [0, STORE]}
    }
  }
}
"""


@pytest.mark.parametrize("store, merges", [("h * 64", True), ("h * 64 + 1", False), ("0", False)])
def test_a_grid_may_overwrite_in_the_same_iteration_only_the_tile_the_grid_before_it_loaded(store, merges):
    """Tile for tile, the second grid overwrites what the first loaded in the same iteration; a store
    one column further on (the next iteration would load a column already overwritten), or to one
    tile in every iteration, keeps the grids apart."""
    from ptodsl import ir
    from ptodsl.passes.merge import Access, can_merge

    a, b = ir.parse(GRIDS.replace("STORE", store)).funcs[0].body
    assert can_merge(a, b, Access.of([a], {}), Access.of([b], {})) == merges


def test_an_in_place_update_split_over_two_grids_fuses(write_spec):
    """`y[:] = y * 0.5 + x` splits into two grids, the second storing over what the first loaded,
    tile for tile: one grid loads and stores each tile once."""
    same = _load(write_spec, "kernel k(x: f32[M, N], y: inout f32[M, N]):\n    y[:] = y * 0.5 + x\n")
    tile = same.compiled.stages["tile"].funcs[0]
    assert sum(o.name == "tile.store" for o in tile.walk()) == 1
    x = RNG.standard_normal((5, 200)).astype(np.float32)
    y0 = RNG.standard_normal((5, 200)).astype(np.float32)
    for backend in ("sim", "cpu"):
        y = y0.copy()
        same(x, y, backend=backend)
        np.testing.assert_allclose(y, y0 * 0.5 + x, rtol=1e-6)


def test_a_load_through_a_view_of_what_the_grid_before_stores_keeps_the_grids_apart(write_spec):
    """The fuzzer's seed 7450028: `concat([a2[:, 2:N], ...])` loads a2 through a view two columns
    on. Its grid must not run in the iterations of the grid storing a2 (tile g of the view holds
    columns of a2's tile g + 1, not yet stored), whatever the views' names."""
    pto = """kernel k(x0: f16[M, N], x1: f16[M, N], rv: f16[N], cv: f16[M, 1], y2: out f16[M, N]):
    a2 = exp2((rv * cv))
    b2 = (x0 - (x1 + cv))
    y2[:] = concat([a2[:, 2:N], b2[:, 0:2]], dim=1)
"""
    op = ptodsl.load(write_spec("k", pto, "op: k\nsymbols: {N: 48}\nschedule:\n  vec_tile: [1, 32]\n"))
    x0, x1 = (RNG.standard_normal((3, 48)).astype(np.float16) for _ in range(2))
    rv = RNG.standard_normal(48).astype(np.float16)
    cv = RNG.standard_normal((3, 1)).astype(np.float16)
    f = np.float32
    a2 = np.exp2((rv * cv).astype(f)).astype(np.float16)
    b2 = x0 - (x1 + cv)
    want = np.concatenate([a2[:, 2:], b2[:, :2]], axis=1).astype(f)
    for backend in ("sim", "cpu"):
        np.testing.assert_allclose(op(x0, x1, rv, cv, backend=backend).astype(f), want, rtol=2e-3, atol=2e-3)
