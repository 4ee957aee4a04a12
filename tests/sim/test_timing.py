"""The pipeline cost model: pipe times come from the target's table, and pipes overlap exactly as
far as the synchronisation the compiler placed allows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl.backends.sim import run_block
from ptodsl.diagnostics import CompileError
from ptodsl.targets import load_target, load_target_file

ROOT = Path(__file__).resolve().parents[2]
TARGET = load_target("ascend910b")


def run_add_one(strip_sync: bool = False):
    op = ptodsl.load(str(ROOT / "specs" / "add_one.yaml"))
    block = op.compiled.stages["block"].clone()
    if strip_sync:
        for f in block.funcs:
            _strip(f.body)
    x = np.ones((8, 256), np.float32)
    y = np.zeros_like(x)
    m = run_block(block, "add_one", {"x": x, "y": y}, {}, {"M": 8, "N": 256}, TARGET)
    assert (y == 2).all()
    return m.timeline


def _strip(ops) -> None:
    ops[:] = [o for o in ops if not o.name.startswith("sync.")]
    for o in ops:
        for region in o.regions:
            _strip(region)


def test_one_tile_runs_its_pipes_one_after_another():
    """add_one on one 8x256 f32 tile: load, add, store, each waiting for the one before."""
    t = TARGET.timing
    load = t.transfer_cycles("gm_to_ub", 8 * 256 * 4)
    add = t.vector_cycles("TADDS", 4, 8 * 256)
    store = t.transfer_cycles("ub_to_gm", 8 * 256 * 4)
    tl = run_add_one()
    assert tl.busy == pytest.approx({"MTE2": load, "V": add, "MTE3": store})
    assert tl.estimate == pytest.approx(load + add + store)
    assert tl.bound == pytest.approx(max(load, add, store))


def test_without_synchronisation_the_pipes_overlap_fully():
    tl = run_add_one(strip_sync=True)
    assert tl.estimate == pytest.approx(tl.bound)


def test_every_library_case_is_estimated_at_or_above_its_roofline():
    from ptodsl.golden import run_case

    for name in ("softmax", "matmul", "rmsnorm"):
        op = ptodsl.load(str(ROOT / "specs" / f"{name}.yaml"))
        for case in op.spec.tests:
            tl = run_case(op, case).timeline
            assert tl.bound > 0
            assert tl.bound - 1e-6 <= tl.estimate <= sum(tl.busy.values()) + 1e-6


def test_a_timing_table_without_a_default_row_is_refused(tmp_path):
    text = (ROOT / "ptodsl" / "targets" / "ascend910b.yaml").read_text()
    text = text.replace("    default: {b16: [0.0156, 43], b32: [0.0312, 43]}     # TMUL's rows\n", "")
    (tmp_path / "t.yaml").write_text(text)
    with pytest.raises(CompileError) as info:
        load_target_file(str(tmp_path / "t.yaml"))
    assert info.value.diagnostics[0].code == "E0208"


@pytest.mark.parametrize("name", ["add_one", "softmax", "matmul", "rmsnorm"])
def test_the_dry_run_models_what_the_simulator_runs(name):
    """The compiler's schedule search walks the Block IR without data; on kernels whose control flow
    does not depend on data it must account for exactly the ops the simulator executes."""
    from ptodsl.cost import estimate
    from ptodsl.golden import run_case

    op = ptodsl.load(str(ROOT / "specs" / f"{name}.yaml"))
    for case in op.spec.tests:
        sim = run_case(op, case)
        variant = {k: case.dtypes.get(k, v[0]) for k, v in op.spec.dtypes.items()}
        control = op.compiled.stages["tensor"].funcs[op.compiled.kernel_for(variant)].name
        dry = estimate(op.compiled.stages["block"], control, case.shapes, op.compiled.target, case.scalars)
        assert dry.timeline.estimate == pytest.approx(sim.timeline.estimate)
        assert dry.timeline.busy == pytest.approx(sim.timeline.busy)
        assert dry.gm_bytes == sim.traffic["load"] + sim.traffic["store"]
