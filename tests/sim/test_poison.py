"""Poison mode: a kernel that stores outside the valid region fails its golden test, and the report
points at the tail; the same kernel can pass by luck without poison."""

import pytest

import ptodsl
from ptodsl import ir
from ptodsl.golden import run_case
from ptodsl.ir import TileType


def _break_tail_stores(op):
    """Make every computed tile claim its full static extent as valid: the store then ignores the
    valid shape, as a kernel with a forgotten tail would. Loads keep their valid shapes."""
    module = op.compiled.stages["tile"]
    computed = {o.operands[0].name for o in module.walk() if o.name == "tile.add"}
    for o in module.walk():
        if o.name == "tile.alloc" and o.result.name in computed:
            t = o.result.type
            o.result.type = TileType(t.space, t.dtype, t.shape, t.shape)
    broken = ir.parse(str(module))
    ir.verify(broken)
    op.compiled.stages["tile"] = broken
    return op


def test_tail_store_ignoring_valid_shape_fails_in_poison_mode():
    op = _break_tail_stores(ptodsl.load("specs/seq_add.yaml"))
    case = op.spec.tests[0]
    result = run_case(op, case, poison=True, level="tile")
    assert not result.ok
    assert "NaN" in result.report
    assert "worst abs error" in result.report
    assert "mismatches span" in result.report  # the rows past act_seqs[b]: the data-dependent tail


def test_the_same_kernel_is_correct_when_not_broken():
    op = ptodsl.load("specs/seq_add.yaml")
    for case in op.spec.tests:
        assert run_case(op, case, poison=True).ok


@pytest.mark.parametrize("spec", ["specs/add_one.yaml", "specs/softmax.yaml"])
def test_library_specs_pass_in_poison_mode(spec):
    op = ptodsl.load(spec)
    for case in op.spec.tests:
        r = run_case(op, case, poison=True)
        assert r.ok, r.report


def test_report_counts_mismatches_in_tail_tiles():
    import numpy as np

    from ptodsl.golden import compare

    want = np.zeros((4, 300), np.float32)
    got = want.copy()
    got[:, 256:] = np.nan
    text = compare("y", got, want, 1e-5, 1e-6, (4, 256))
    assert "1.2 of" not in text
    assert "176 of 1200 elements differ" in text
    assert "all of the mismatches lie in tail tiles (dim 1 from 256" in text
    assert "176 NaN" in text


def test_tile_level_still_passes_every_library_case(spec_path):
    """The Tile IR, before partitioning and memory planning, computes the same answers."""
    op = ptodsl.load(spec_path)
    for case in op.spec.tests:
        r = run_case(op, case, poison=True, level="tile")
        assert r.ok, r.report


def test_overlapping_memory_plan_is_caught_by_the_block_simulator():
    """Put every UB tile at offset 0: live tiles alias and the golden test fails."""
    op = ptodsl.load("specs/softmax.yaml")
    block = op.compiled.stages["block"]
    for o in block.walk():
        if o.name == "tile.alloc":
            o.attrs["offset"] = 0
    assert not all(run_case(op, c).ok for c in op.spec.tests)
