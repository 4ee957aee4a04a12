"""Blocks (passes/blocks.py): a kernel that is one loop of independent iterations runs as blocks on
every core of its kind, so the launches of a call do not grow with the batch."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl.backends.sim import run_block
from ptodsl.ir.gm import launches, walk_ops
from ptodsl.targets import load_target

ROOT = Path(__file__).resolve().parents[2]
TARGET = load_target("ascend910b")
HAS_CXX = shutil.which("g++") is not None
BACKENDS = ["sim", "cpu"] if HAS_CXX else ["sim"]


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _rmsnorm(x: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * gamma


ROW_OPS = [  # (spec, control, batch dim, inputs(rows) -> (tensors, reference))
    ("softmax", "softmax_f32", "B",
     lambda rng, rows: ({"x": (x := rng.standard_normal((rows, 1024)).astype(np.float32))}, _softmax(x))),
    ("rmsnorm", "rmsnorm_f32", "R",
     lambda rng, rows: ({"x": (x := rng.standard_normal((rows, 1024)).astype(np.float32)),
                         "gamma": (g := rng.standard_normal(1024).astype(np.float32))}, _rmsnorm(x, g))),
]


@pytest.mark.parametrize("name,control,dim,make", ROW_OPS, ids=[r[0] for r in ROW_OPS])
def test_launches_per_call_do_not_grow_with_the_batch(name: str, control: str, dim: str, make):
    """A row op over 3 rows and over 100 rows is one launch, of as many blocks as the vector cores
    allow with no block idle: 100 rows on 48 cores are 34 blocks of 3 rows (the last of 1). (rmsnorm
    has two launches, its one-pass and its multi-pass version, of which a call runs one.)"""
    block = ptodsl.load(str(ROOT / "specs" / f"{name}.yaml")).compiled.stages["block"]
    assert all("block_dim" in launch.attrs for launch in launches(block.func(control)))
    assert not any(op.name == "loop" for op in walk_ops(block.func(control).body))  # no loop around it
    rng = np.random.default_rng(5)
    seen = []
    for rows in (3, 100):
        tensors, want = make(rng, rows)
        tensors["y"] = np.zeros_like(want)
        m = run_block(block, control, tensors, {"eps": 1e-6}, {dim: rows, "H": 1024, "N": 1024}, TARGET)
        np.testing.assert_allclose(tensors["y"], want, rtol=2e-5, atol=2e-6)
        seen.append((m.timeline.chip.launches, m.timeline.chip.block_dim))
    per = -(-100 // TARGET.chip.aiv_cores)
    assert seen == [(1, 3), (1, -(-100 // per))]


def test_the_block_count_comes_from_the_target():
    block = ptodsl.load(str(ROOT / "specs" / "softmax.yaml")).compiled.stages["block"]
    (launch,) = launches(block.func("softmax_f32"))
    assert f"cdiv(B, {TARGET.chip.aiv_cores})" in ptodsl.sym.to_text(launch.attrs["block_dim"])
    kernel = block.func(launch.attrs["kernel"])
    assert {"block_index", "block_count"} <= set(kernel.attrs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_guard_in_a_kernel_of_several_blocks_stops_the_call_with_its_diagnostic(backend: str):
    """Rows 3 and 5 read outside `x`; each of the six rows is a block of its own. The call stops
    at row 3's guard, the first in loop order, as a run of one block would."""
    op = ptodsl.load("tests/golden_codes/ops/pick_elements.yaml")
    block = op.compiled.stages["block"]
    (launch,) = launches(block.func("pick_elements"))
    assert "block_dim" in launch.attrs
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    with pytest.raises(ptodsl.GuardError) as info:
        op(x, np.array([0, 1, 2, 7, 0, -4], np.int32), backend=backend)
    assert info.value.diagnostic.code == "E0730"
    assert "the index is 7 on dim 0, but `x` has 3 there" in str(info.value)
    ids = np.array([2, 0, 1, 1, 0, 2], np.int32)
    np.testing.assert_array_equal(op(x, ids, backend=backend), 2.0 * x[ids])


FZ11 = """kernel fz11(x0: T[M, N], y3: inout T[M, N], lens: i32[M], c3: out i32[M, 1], xf: f32[M, N]):
    for r in loop(M, name="L3"):
        n3 = lens[r]
        c3[r, 0] = n3 * 2 + 1
        for j in loop(cdiv(min(n3, N), 4), name="L3j"):
            w3 = min(n3 - j * 4, 4)
            v3 = view(x0, [1, 4], [r, j * 4], valid_shape=[1, w3])
            y3[r:r + 1, j * 4:j * 4 + 4] = (v3 + cast(xf[r:r + 1, j * 4:j * 4 + 4], T))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_workspace_whose_valid_shape_an_inner_loop_binds_stays_in_that_loop(tmp_path: Path, backend: str):
    """The fuzzer's seed 11: the workspace of `cast(xf[...])` has a valid shape in `j`; the loop over
    `r` moved into a kernel hoisted it before the launch, out of reach of `j` (E0990)."""
    (tmp_path / "fz11.pto").write_text(FZ11)
    (tmp_path / "fz11.yaml").write_text("op: fz11\ndtypes: {T: [f32]}\nschedule:\n  vec_tile: [1, 32]\n")
    op = ptodsl.load(str(tmp_path / "fz11.yaml"))
    rng = np.random.default_rng(3)
    x0, xf = (rng.standard_normal((3, 16)).astype(np.float32) for _ in range(2))
    lens = np.array([8, 0, 16], np.int32)
    y3 = np.full((3, 16), -1.0, np.float32)
    *_, c3 = op(x0, y3, lens, xf, backend=backend)  # y3 is updated in place
    np.testing.assert_array_equal(c3[:, 0], 2 * lens + 1)
    want = np.full((3, 16), -1.0, np.float32)
    for r, n in enumerate(lens):
        want[r, :n] = x0[r, :n] + xf[r, :n]
    np.testing.assert_allclose(y3, want, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_elementwise_grid_and_a_matmul_run_as_blocks(backend: str):
    """With no loop of the user's, the outermost grid loop is shared out when its iterations are
    independent: exp's rows of tiles on the vector cores, matmul's output columns on the cube cores."""
    rng = np.random.default_rng(7)
    exp = ptodsl.load(str(ROOT / "specs" / "exp.yaml"))
    (launch,) = launches(exp.compiled.stages["block"].func("exp_f32"))
    big = {"M": 4096, "N": 4096}
    rows = 4096 // 8  # row blocks of the [8, 256] tiles: the fewest blocks of at most cdiv(rows, cores)
    assert ptodsl.sym.evaluate(launch.attrs["block_dim"], big) == -(-rows // -(-rows // TARGET.chip.aiv_cores))
    x = rng.standard_normal((50, 300)).astype(np.float32)
    np.testing.assert_allclose(exp(x, backend=backend), np.exp(x), rtol=2e-6)
    matmul = ptodsl.load(str(ROOT / "specs" / "matmul.yaml"))
    (launch,) = launches(matmul.compiled.stages["block"].func("matmul_f32"))
    blocks = ptodsl.sym.evaluate(launch.attrs["block_dim"], {"M": 4096, "K": 4096, "N": 4096})
    assert TARGET.chip.aic_cores // 2 < blocks <= TARGET.chip.aic_cores  # the cube cores, not the vector ones
    a = rng.standard_normal((70, 64)).astype(np.float32)
    b = rng.standard_normal((64, 200)).astype(np.float32)
    np.testing.assert_allclose(matmul(a, b, backend=backend), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kernel_of_grid_nests_in_turn_runs_each_nest_as_blocks(backend: str):
    """amax over rows, dropping the axis, is two grid nests in one kernel: the rows' maxima into a
    workspace of the call, then their copy to the rank-1 output. Each nest becomes a kernel of its
    own, launched in turn with blocks on every vector core (the first one's blocks share the
    workspace: each writes its own rows of it), and the call still computes right."""
    op = ptodsl.load(str(ROOT / "specs" / "amax_rows.yaml"))
    block = op.compiled.stages["block"]
    got = list(launches(block.func("amax_rows_f32")))
    assert len(got) == 2 and all("block_dim" in launch.attrs for launch in got)
    assert len({launch.attrs["kernel"] for launch in got}) == 2
    for launch in got:
        kernel = block.func(launch.attrs["kernel"])
        assert sum(1 for o in kernel.body if o.name == "loop") == 1
    m = run_block(block, "amax_rows_f32", {"x": np.zeros((400, 600), np.float32), "y": np.zeros(400, np.float32)},
                  {}, {"R": 400, "C": 600}, TARGET)
    assert m.timeline.chip.launches == 2 and m.timeline.chip.block_dim > 1
    x = np.random.default_rng(11).standard_normal((400, 600)).astype(np.float32)
    np.testing.assert_array_equal(op(x, backend=backend), x.max(axis=-1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_grid_nest_with_few_outer_trips_shares_its_inner_loop_too(backend: str):
    """div_bcast loads the row of divisors once per column block, so its outer grid loop runs over
    the 2 column blocks of a 600-wide tensor: the blocks also split the 100 row blocks inside, 2 x 20
    blocks, and the call still computes right."""
    op = ptodsl.load(str(ROOT / "specs" / "div_bcast.yaml"))
    block = op.compiled.stages["block"]
    (launch,) = launches(block.func("div_bcast_f32"))
    rng = np.random.default_rng(13)
    x = rng.standard_normal((400, 600)).astype(np.float32)
    d = (rng.random((1, 600)) + 0.5).astype(np.float32)
    m = run_block(block, "div_bcast_f32", {"x": x, "d": d, "y": np.zeros_like(x)}, {}, {"R": 400, "C": 600}, TARGET)
    assert m.timeline.chip.block_dim == 40
    np.testing.assert_allclose(op(x, d, backend=backend), x / d, rtol=1e-6)


def test_a_concat_of_a_rows_halves_written_in_place_runs_as_blocks():
    """swap_halves writes concat([old[:, D // 2:D], old[:, 0:D // 2]]) over x: the checker proves
    the width fits D (the min of the clamped slice end is at most D // 2), so no guard stays between
    the kernel's nests, which then run as kernels of blocks; the golden cases (odd widths) pass."""
    from ptodsl.golden import run_case

    op = ptodsl.load(str(ROOT / "specs" / "swap_halves.yaml"))
    block = op.compiled.stages["block"]
    assert not any(o.name == "guard" for f in block.funcs for o in f.walk())
    got = list(launches(block.func("swap_halves_f32")))
    assert got and all("block_dim" in launch.attrs for launch in got)
    results = [run_case(op, case) for case in op.spec.tests]
    assert results and all(r.ok for r in results), [r.report for r in results]


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_a_grid_loop_fused_beside_a_reduction_gets_blocks_of_its_own(write_spec, backend: str):
    """Fusion puts mean(w, dim=[-1, 1, 2])'s last step over P and sum(w, dim=[0, 1])'s P x R x S
    nest in one loop over P, which alone gives P blocks. Distributed (passes/distribute.py), the
    nest is a kernel of its own whose blocks also split its loop over R: every kernel that reads w
    runs on more than P blocks, and the call still computes right."""
    from ptodsl import sym

    pto = ("kernel k(w: f32[P, Q, R, S], v: out f32[P, 1, 1, 1], s: out f32[R, S]):\n"
           "    v[:] = mean(w, dim=[-1, 1, 2], keepdim=True)\n"
           "    s[:] = sum(w, dim=[0, 1])\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [1, 2, 4, 32]}\n"))
    block = op.compiled.stages["block"]
    env = {"P": 4, "Q": 8, "R": 64, "S": 64}
    readers = [launch for launch in launches(block.func("k"))
               if any(o.name == "tile.load" and o.operands[1].name == "w" for o in block.func(launch.attrs["kernel"]).walk())]
    assert readers and all(sym.evaluate(launch.attrs.get("block_dim", 1), env) > env["P"] for launch in readers)
    w = np.random.default_rng(17).standard_normal((3, 5, 7, 40)).astype(np.float32)
    v, s = op(w, backend=backend)
    np.testing.assert_allclose(v, w.mean(axis=(1, 2, 3), keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s, w.sum(axis=(0, 1)), rtol=1e-5, atol=1e-5)


def test_views_between_the_loops_go_with_every_part_of_a_split_kernel():
    """rope's kernel runs its angle nest, then views of x's halves, then the rotation nests: each
    nest becomes a kernel of its own (holding the views) and runs as blocks, and the golden cases
    still pass."""
    from ptodsl.golden import run_case

    op = ptodsl.load(str(ROOT / "specs" / "rope.yaml"))
    block = op.compiled.stages["block"]
    got = list(launches(block.func("rope_f32")))
    assert len(got) > 1 and all("block_dim" in launch.attrs for launch in got)
    assert any(o.name == "view" for launch in got for o in block.func(launch.attrs["kernel"]).walk())
    results = [run_case(op, case) for case in op.spec.tests]
    assert results and all(r.ok for r in results), [r.report for r in results]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_matmuls_output_tiles_are_shared_out_one_by_one_over_every_cube_core(backend: str):
    """32 columns of 16 output tiles fill all 24 cube cores, 22 tiles each at most, not 16 blocks of
    two whole columns; a block's share starts and ends inside columns (9 columns of 3 tiles over 14
    blocks of 2, the last column and row tiles partial), and the call still computes right."""
    matmul = ptodsl.load(str(ROOT / "specs" / "matmul.yaml"))
    block = matmul.compiled.stages["block"]
    (launch,) = launches(block.func("matmul_f16"))
    assert ptodsl.sym.evaluate(launch.attrs["block_dim"], {"M": 4096, "K": 4096, "N": 4096}) == TARGET.chip.aic_cores
    rng = np.random.default_rng(17)
    a = rng.standard_normal((700, 40)).astype(np.float32)
    b = rng.standard_normal((40, 1100)).astype(np.float32)
    m = run_block(block, "matmul_f32", {"a": a, "b": b, "c": np.zeros((700, 1100), np.float32)},
                  {}, {"M": 700, "K": 40, "N": 1100}, TARGET)
    assert m.timeline.chip.block_dim == 14
    np.testing.assert_allclose(m.tensors["c"], a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(matmul(a, b, backend=backend), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_batch_of_products_is_shared_out_by_output_tiles_across_its_entries(backend: str):
    """bmm's batch loops join its columns and rows of output tiles in one flattened order: 2 x 3
    entries of 2 x 2 tiles (the last column and row partial) are 24 tiles on 24 cube cores, one
    each, not 6 blocks of an entry; shares cross from one entry into the next, and the call
    still computes both outputs right."""
    op = ptodsl.load(str(ROOT / "specs" / "bmm.yaml"))
    block = op.compiled.stages["block"]
    (launch,) = launches(block.func("bmm_f32"))
    tm, tn = op.spec.schedule.cube_tile["m"][0], op.spec.schedule.cube_tile["n"][0]
    shapes = {"B": 2, "H": 3, "M": tm + 5, "K": 40, "N": tn + 7}
    assert ptodsl.sym.evaluate(launch.attrs["block_dim"], shapes) == TARGET.chip.aic_cores
    rng = np.random.default_rng(19)
    a = rng.standard_normal((2, 3, shapes["M"], 40)).astype(np.float32)
    b = rng.standard_normal((3, 40, shapes["N"])).astype(np.float32)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    shapes_out = (2, 3, shapes["M"], shapes["N"])
    m = run_block(block, "bmm_f32", {"a": a, "b": b, "c": np.zeros(shapes_out, np.float32),
                                     "d": np.zeros(shapes_out, np.float32)}, {}, shapes, TARGET)
    assert m.timeline.chip.block_dim == 24
    np.testing.assert_allclose(m.tensors["c"], want, rtol=1e-4, atol=1e-4)
    c, d = op(a, b, backend=backend)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(d, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_independent_nests_of_one_kernel_share_one_launch(backend: str):
    """reshape_heads's two nests (split = reshape(x) + h, merged = reshape(h)) touch no tensor the
    other writes: one launch, each block running its share of each nest in turn. The launch passes
    h and a reshape of h, so it says the bytes it touches once each (the L2 term)."""
    from ptodsl.cost.chip import launch_footprint

    op = ptodsl.load(str(ROOT / "specs" / "reshape_heads.yaml"))
    block = op.compiled.stages["block"]
    (launch,) = launches(block.func("reshape_heads_f16"))
    dims = {"B": 2, "S": 3, "H": 4, "D": 8, "E": 32}
    assert ptodsl.sym.evaluate(launch.attrs["block_dim"], dims) > 1
    assert launch_footprint(launch, lambda d: ptodsl.sym.evaluate(d, dims)) == 4 * 2 * 3 * 32 * 2
    rng = np.random.default_rng(23)
    x = rng.standard_normal((2, 3, 32)).astype(np.float16)
    h = rng.standard_normal((2, 3, 4, 8)).astype(np.float16)
    split, merged = op(x, h, backend=backend)
    np.testing.assert_array_equal(split, x.reshape(2, 3, 4, 8) + h)
    np.testing.assert_array_equal(merged, h.reshape(2, 3, 32))


def test_nests_that_hand_data_over_through_a_view_stay_separate_launches():
    """mean_rows's reduction writes a workspace its copy-out reads through a reshape (another
    parameter of the kernel, the same tensor of the call): in one launch a block would read rows
    another block has not written yet, so the nests stay two launches."""
    block = ptodsl.load(str(ROOT / "specs" / "mean_rows.yaml")).compiled.stages["block"]
    assert len(list(launches(block.func("mean_rows_f32")))) == 2
