"""The simulator's batched loops (backends/sim/batch.py): a parallel loop -- of the control program,
inside a kernel, or shared out over a launch's blocks -- runs all its iterations at once, with the
same results, traffic and modelled cycles as the loop run iteration by iteration, poison included;
a loop that turns out not to batch (a failing guard among them) runs element-wise."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl import ir
from ptodsl.backends.sim import batch, batch_ops
from ptodsl.golden import case_id, run_case
from ptodsl.ir import TileType

# Specs whose rows loop is a parallel loop (run as blocks of one launch): the cases of three rows or
# more batch.
BATCHED_SPECS = ["softmax", "rmsnorm", "layernorm", "log_softmax", "softmax_bwd", "softmax_long"]


def both_ways(op, case, monkeypatch):
    """The case run batched, then element-wise: (result, batched loops) of each."""
    runs = []
    for enabled in (True, False):
        monkeypatch.setattr(batch, "ENABLED", enabled)
        before = batch.STATS.batched
        runs.append((run_case(op, case, poison=True), batch.STATS.batched - before))
    return runs


def assert_same(a, b) -> None:
    assert a.outputs.keys() == b.outputs.keys()
    for name in a.outputs:
        assert a.outputs[name].tobytes() == b.outputs[name].tobytes(), name
    assert a.traffic == b.traffic
    assert a.traffic_by_tensor == b.traffic_by_tensor
    assert a.timeline.estimate == pytest.approx(b.timeline.estimate, rel=1e-12)
    assert a.timeline.bound == pytest.approx(b.timeline.bound, rel=1e-12)
    assert a.timeline.busy.keys() == b.timeline.busy.keys()


@pytest.mark.parametrize("spec", BATCHED_SPECS)
def test_batched_loops_compute_and_count_as_the_element_wise_loop(spec, monkeypatch):
    op = ptodsl.load(f"specs/{spec}.yaml")
    batched_cases = 0
    for case in op.spec.tests:
        (batched, loops), (plain, none) = both_ways(op, case, monkeypatch)
        assert loops <= 1 and none == 0, case_id(op.spec, case)
        batched_cases += loops
        assert batched.ok, batched.report
        assert_same(batched, plain)
    assert batched_cases >= 2


# A case of each whose outer grid loop has at least one iteration per core (a nest with fewer outer
# trips runs on a grid of blocks that also splits its inner loop, passes/blocks.py: on the simulator
# those blocks run one by one, small by construction). A cube kernel's nest is shared out by output
# tiles (passes/blocks_flat.py), whose row bounds depend on the column: its blocks run one by one.
CHIP_WIDE = {"exp": {"M": 512, "N": 256}, "sum_cols": None}


@pytest.mark.parametrize("spec", sorted(CHIP_WIDE))
def test_a_grid_nest_shared_out_as_blocks_runs_batched(spec, monkeypatch, tmp_path):
    """A vector kernel that is one grid nest (an element-wise op's rows of tiles, a column
    reduction's columns) runs as blocks sharing its outermost grid loop: the blocks are one
    batched evaluation too. Single buffered: a nest flattened and paired by double buffering
    (passes/dbuf.py) and shared out as blocks runs block by block on the simulator (the batch
    does not follow the flattened index yet)."""
    for name in (f"{spec}.pto", "refs.py"):
        shutil.copy(f"specs/{name}", tmp_path / name)
    text = Path(f"specs/{spec}.yaml").read_text().replace("schedule:\n", "schedule:\n  pass_options: {double_buffer: false}\n", 1)
    (tmp_path / f"{spec}.yaml").write_text(text)
    op = ptodsl.load(str(tmp_path / f"{spec}.yaml"))
    cases = list(op.spec.tests)
    if CHIP_WIDE[spec] is not None:
        cases.append(dataclasses.replace(cases[0], shapes=CHIP_WIDE[spec]))
    batched_cases = 0
    for case in cases:
        (batched, loops), (plain, none) = both_ways(op, case, monkeypatch)
        assert loops <= 1 and none == 0, case_id(op.spec, case)
        batched_cases += loops
        assert batched.ok, batched.report
        assert_same(batched, plain)
    assert batched_cases >= 1


@pytest.mark.parametrize("rows", [50, 42])
def test_large_batches_are_cut_and_agree(rows, monkeypatch):
    """More iterations than one batch holds: several batches (42 rows: the last batch would be of
    one iteration, which runs alone), the same result."""
    op = ptodsl.load("specs/softmax.yaml")
    x = np.random.default_rng(0).standard_normal((rows, 1024)).astype(np.float32)
    kernels = {f.name: f for f in op.compiled.stages["block"].funcs}
    (rows_loop,) = [o for o in kernels["softmax_f32_k0"].walk() if o.attrs.get("parallel") == 1]
    per_row = sum(-(-b // 64) * 64 for b in batch.arena_bytes(kernels, rows_loop).values())
    monkeypatch.setattr(batch, "BUDGET_BYTES", 20 * per_row)  # 20 iterations per batch
    fallbacks = batch.STATS.fallbacks
    got = op(x)
    assert batch.STATS.fallbacks == fallbacks
    monkeypatch.setattr(batch, "ENABLED", False)
    want = op(x)
    assert got.tobytes() == want.tobytes()


def _read_padding(op):
    """rmsnorm's square x * x claims its tile's whole width as valid, so in a tail tile it reads the
    padding of the loaded row: a kernel bug that poison must show."""
    module = op.compiled.stages["block"]
    squares = {o.operands[0].name for o in module.walk() if o.name == "tile.mul" and len(o.operands) == 3
               and o.operands[1].name == o.operands[2].name}
    for o in module.walk():
        if o.name == "tile.alloc" and o.result.name in squares:
            t = o.result.type
            o.result.type = TileType(t.space, t.dtype, t.shape, t.shape)
    broken = ir.parse(str(module))
    ir.verify(broken)
    op.compiled.stages["block"] = broken
    return op


def test_poison_shows_a_kernel_reading_padding_in_a_batched_loop(monkeypatch):
    op = _read_padding(ptodsl.load("specs/rmsnorm.yaml"))
    tails = next(c for c in op.spec.tests if c.name == "tails" and c.dtypes["T"] == "f32")  # H = 1000
    (batched, loops), (plain, _) = both_ways(op, tails, monkeypatch)
    assert loops == 1
    assert not batched.ok and not plain.ok
    assert "NaN" in batched.report
    assert batched.outputs["y"].tobytes() == plain.outputs["y"].tobytes()


def test_a_loop_that_stops_batching_half_way_runs_element_wise(monkeypatch):
    """A batch that finds it cannot go on after it has stored results starts again element-wise,
    with the traffic and the timeline counted once."""
    op = ptodsl.load("specs/softmax.yaml")
    case = op.spec.tests[0]
    _, (plain, _) = both_ways(op, case, monkeypatch)
    monkeypatch.setattr(batch, "ENABLED", True)
    store = batch_ops.BATCHED["store"]
    calls = []

    def store_then_give_up(bm, o):
        store(bm, o)
        calls.append(o)
        raise batch.Unbatchable("for the test")

    monkeypatch.setitem(batch_ops.BATCHED, "store", store_then_give_up)
    fallbacks = batch.STATS.fallbacks
    result = run_case(op, case, poison=True)
    assert calls and batch.STATS.fallbacks == fallbacks + 1
    assert batch.STATS.reasons["for the test"] >= 1
    assert_same(result, plain)


def test_varying_offsets_must_be_affine():
    values = np.array([0, 3, 6, 9])
    assert batch.affine(values, "x") == (0, 3)
    with pytest.raises(batch.Unbatchable):
        batch.affine(np.array([0, 1, 3, 4]), "x")
    assert batch.uniform(np.array([5, 5, 5]), "x") == 5
    with pytest.raises(batch.Unbatchable):
        batch.uniform(np.array([5, 6, 5]), "x")


def _launches(op) -> list:
    """The launches of the op's Block IR (one per dtype variant)."""
    return [o for o in op.compiled.stages["block"].walk() if o.name == "launch"]


def _one_block(op) -> None:
    for launch in _launches(op):
        launch.attrs["block_dim"] = 1


def test_the_blocks_of_a_launch_are_one_batched_evaluation(monkeypatch):
    """softmax's rows are blocks of one launch; all the rows run as one batched evaluation."""
    op = ptodsl.load("specs/softmax.yaml")
    assert all("block_dim" in launch.attrs for launch in _launches(op))
    x = np.random.default_rng(1).standard_normal((100, 1024)).astype(np.float32)
    before = (batch.STATS.batched, batch.STATS.iterations)
    got = op(x)
    assert (batch.STATS.batched, batch.STATS.iterations) == (before[0] + 1, before[1] + 99)
    monkeypatch.setattr(batch, "ENABLED", False)
    assert got.tobytes() == op(x).tobytes()


def test_a_parallel_loop_inside_a_kernel_batches(monkeypatch):
    """The same loop launched as one block: the kernel's own loop runs batched."""
    op = ptodsl.load("specs/rmsnorm.yaml")
    _one_block(op)
    for case in op.spec.tests:
        (batched, loops), (plain, none) = both_ways(op, case, monkeypatch)
        assert loops == (1 if case.shapes["R"] >= 3 else 0) and none == 0, case_id(op.spec, case)
        assert batched.ok, batched.report
        assert_same(batched, plain)


SHIFT_PTO = """\
kernel shift_rows(x: f32[B, N], y: inout f32[R, N], off: i64):
    for b in loop(B, name="rows"):
        y[b + off, :] = x[b, :] * 2.0
"""
SHIFT_YAML = "op: shift_rows\ndoc: Doubles row b of x into row b + off of y.\nschedule:\n  vec_tile: [1, 256]\n"


@pytest.mark.parametrize("blocks", [True, False])
def test_a_failing_guard_in_a_batched_loop_reports_the_first_failing_iteration(blocks, write_spec, monkeypatch):
    op = ptodsl.load(write_spec("shift_rows", SHIFT_PTO, SHIFT_YAML))
    if not blocks:
        _one_block(op)
    assert any(o.name == "guard" for o in op.compiled.stages["block"].walk())
    x = np.random.default_rng(2).standard_normal((10, 300)).astype(np.float32)
    runs = []
    for enabled in (True, False):
        monkeypatch.setattr(batch, "ENABLED", enabled)
        y = np.zeros((15, 300), np.float32)
        before = batch.STATS.batched
        op(x, y=y, off=5)  # rows 5..14: every iteration passes its guard
        runs.append((y, batch.STATS.batched - before))
        fallbacks = batch.STATS.reasons.get("a guard fails", 0)
        with pytest.raises(ptodsl.GuardError) as info:
            op(x, y=np.zeros((13, 300), np.float32), off=5)  # iterations 8 and 9 would write rows 13, 14
        assert batch.STATS.reasons.get("a guard fails", 0) == fallbacks + enabled
        runs.append(str(info.value))
    (y_batched, loops), first, (y_plain, none), first_plain = runs
    assert (loops, none) == (1, 0)
    assert y_batched.tobytes() == y_plain.tobytes()
    assert first == first_plain and "[13, 14)" in first


HEADS_PTO = """\
kernel heads(x: f32[H, B, N], y: out f32[H, B, N], flag: i64):
    for h in loop(H, name="heads"):
        if flag > 0:
            for b in loop(B, name="rows"):
                y[h, b, :] = x[h, b, :] * 2.0
        else:
            for b in loop(B, name="rows2"):
                y[h, b, :] = x[h, b, :] * 3.0
"""
HEADS_YAML = "op: heads\ndoc: Scales every row by 2 or 3.\nschedule:\n  vec_tile: [1, 1, 256]\n"


def test_batched_loops_nest(write_spec, monkeypatch):
    """A parallel loop of the control program (kept there by its branch) launching kernels whose
    blocks share out a parallel loop: batched inside batched (the heads' last iteration runs alone,
    and its launch batches its blocks), with the element-wise run's results, traffic and cycles."""
    from ptodsl.api import run_kernel

    op = ptodsl.load(write_spec("heads", HEADS_PTO, HEADS_YAML))
    x = np.random.default_rng(3).standard_normal((4, 5, 300)).astype(np.float32)
    for flag in (1, 0):
        runs = []
        for enabled in (True, False):
            monkeypatch.setattr(batch, "ENABLED", enabled)
            y = np.zeros_like(x)
            before = batch.STATS.batched
            m = run_kernel(op.compiled, 0, {"x": x, "y": y}, {"flag": flag}, {"H": 4, "B": 5, "N": 300}, "sim",
                           poison=True)
            runs.append((y, m, batch.STATS.batched - before))
        (y, m, loops), (y_plain, plain, none) = runs
        assert (loops, none) == (2, 0)  # the heads, and the blocks of the last head's launch
        assert y.tobytes() == y_plain.tobytes() == (x * (2.0 if flag else 3.0)).tobytes()
        assert m.traffic == plain.traffic
        assert m.timeline.estimate == pytest.approx(plain.timeline.estimate, rel=1e-12)
        assert m.timeline.bound == pytest.approx(plain.timeline.bound, rel=1e-12)
        assert m.timeline.chip.time == pytest.approx(plain.timeline.chip.time, rel=1e-12)
        assert m.timeline.chip.launches == plain.timeline.chip.launches


def test_the_parts_of_an_unrolled_loop_batch_across_the_blocks(write_spec, monkeypatch):
    """softmax's rows unrolled by 4: each block runs its share of the loop by 4 and of the remainder
    (between synchronisations); each part is one batched evaluation across the blocks, an empty
    remainder none."""
    from ptodsl.api import run_kernel

    pto = open("specs/softmax.pto").read()
    yaml = ("op: softmax\ndoc: rows by 4.\ndtypes: {T: [f32]}\nsymbols: {N: 1024}\nschedule:\n"
            "  vec_tile: [4, 1024]\n  loops:\n    b_loop: {unroll: [4, 1], vec_tile: [1, 1024]}\n")
    op = ptodsl.load(write_spec("softmax", pto, yaml))
    for rows in (100, 11, 3):
        x = np.random.default_rng(rows).standard_normal((rows, 1024)).astype(np.float32)
        runs = []
        for enabled in (True, False):
            monkeypatch.setattr(batch, "ENABLED", enabled)
            y = np.zeros_like(x)
            before = batch.STATS.launches
            m = run_kernel(op.compiled, 0, {"x": x, "y": y}, {}, {"B": rows}, "sim", poison=True)
            runs.append((y, m, batch.STATS.launches - before))
        (y, m, loops), (y_plain, plain, none) = runs
        assert (loops, none) == (1, 0), rows
        assert y.tobytes() == y_plain.tobytes()
        assert m.traffic == plain.traffic
        assert m.timeline.estimate == pytest.approx(plain.timeline.estimate, rel=1e-12)
        assert m.timeline.bound == pytest.approx(plain.timeline.bound, rel=1e-12)


def test_batched_blocks_each_see_their_own_block_index(monkeypatch):
    """ffn's first matmul is shared out by output tiles (passes/blocks_flat.py) and its rows of
    tiles are double buffered: the paired loop's offsets read where the block's share starts in
    its column. A batch of every block's iterations evaluated them all with the last block's
    index (rows never written: NaN in poison mode); each iteration now sees its own block's."""
    op = ptodsl.load("specs/ffn.yaml")
    for case in op.spec.tests:
        (batched, _), (plain, _) = both_ways(op, case, monkeypatch)
        assert batched.ok, batched.report
        assert_same(batched, plain)


TWO_NESTS_PTO = """kernel two(x: f32[B, M, N], w: f32[M, 1], z: f32[M, N], y: out f32[B, M, N], c: out f32[M, N]):
    y[:] = x - w
    c.move(z)
"""
TWO_NESTS_YAML = "op: two\ndoc: Two independent nests in one launch.\nschedule:\n  vec_tile: [1, 1, 128]\n"


def test_a_lone_iteration_of_a_batch_sees_its_own_block_index(write_spec, monkeypatch):
    """Two independent nests share one launch's blocks (passes/blocks.py): with B = 2 the first
    nest's two iterations belong to blocks 0 and 1, so the batch before the last iteration holds
    one iteration, which runs alone on the last iteration's machine. It ran with that block's
    index (its share's bounds: nothing written, NaN in poison mode); it now sees its own. Found by
    `ptodsl fuzz --seed 7370110`."""
    from ptodsl.api import run_kernel

    op = ptodsl.load(write_spec("two", TWO_NESTS_PTO, TWO_NESTS_YAML))
    (launch,) = _launches(op)
    assert "block_dim" in launch.attrs
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 1, 4)).astype(np.float32)
    w = rng.standard_normal((1, 1)).astype(np.float32)
    z = rng.standard_normal((1, 4)).astype(np.float32)
    for enabled in (True, False):
        monkeypatch.setattr(batch, "ENABLED", enabled)
        before = batch.STATS.batched
        y, c = np.zeros_like(x), np.zeros_like(z)
        run_kernel(op.compiled, 0, {"x": x, "w": w, "z": z, "y": y, "c": c}, {}, {"B": 2, "M": 1, "N": 4}, "sim",
                   poison=True)
        np.testing.assert_array_equal(y, x - w)
        np.testing.assert_array_equal(c, z)
        assert (batch.STATS.batched > before) == enabled
