"""Fusion: an elementwise chain on one grid loads each input tile once, stores each output tile
once, and keeps its intermediates in UB (no GM workspace)."""

import numpy as np

import ptodsl


def _ops(op, name):
    return [o for o in op.compiled.stages["tile"].walk() if o.name == name]


def test_softmax_row_is_loaded_once_and_stored_once():
    op = ptodsl.load("specs/softmax.yaml")
    per_variant = len(op.compiled.stages["tile"].funcs)
    assert len(_ops(op, "tile.load")) == per_variant
    assert len(_ops(op, "tile.store")) == per_variant
    assert not _ops(op, "alloc"), "no intermediate goes to a GM workspace"


def test_gelu_chain_fused_over_a_multi_tile_grid():
    op = ptodsl.load("specs/gelu.yaml")
    f = op.compiled.stages["tile"].funcs[0]
    loads = [o for o in f.walk() if o.name == "tile.load"]
    stores = [o for o in f.walk() if o.name == "tile.store"]
    assert len(loads) == 1 and len(stores) == 1


def test_unfused_input_is_kept_when_the_grid_differs(write_spec):
    # the reduction's grid differs from the elementwise grid: the partial result goes through GM
    pto = ("kernel colnorm(x: f32[R, C], y: out f32[R, C]):\n"
           "    y[:] = x - amax(x, dim=0, keepdim=True)\n")
    op = ptodsl.load(write_spec("colnorm", pto, "op: colnorm\nschedule:\n  vec_tile: [8, 64]\n"))
    assert _ops(op, "alloc"), "the column max is a workspace between two grids"
    x = np.random.default_rng(1).standard_normal((19, 70)).astype(np.float32)
    np.testing.assert_allclose(op(x), x - x.max(0, keepdims=True))


def test_fusion_preserves_results_on_the_whole_library():
    from ptodsl.golden import run_case

    for spec in ("specs/rmsnorm.yaml", "specs/layernorm.yaml", "specs/online_softmax_attn.yaml"):
        op = ptodsl.load(spec)
        for case in op.spec.tests:
            r = run_case(op, case)
            assert r.ok, r.report
