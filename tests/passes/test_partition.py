"""Partitioning a loop launched per iteration: its body is cut into kernels by kind of core only
where no tile lives across the cut (passes/partition.py)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import ptodsl
from ptodsl.backends.cpp.emit import emit_npu_variant
from ptodsl.golden import import_file
from ptodsl.ir import Op, TensorType, TileType, Value
from ptodsl.passes import syncheck
from ptodsl.passes.partition import _sink_into
from ptodsl.targets import load_target

TARGET = load_target("ascend910b")
SPECS = pathlib.Path(__file__).parents[2] / "specs"

# `acc` is written by vector work, multiplied on the cube, then read again by vector work: fusion
# forwards the tile it stored to that read, across the product (passes/fuse.py). The print keeps
# the loop in the control program, so its body is partitioned on its own.
FORWARDED = ("kernel fwd(x: f32[16, 16], w: f32[R, 16], y: out f32[Y, 16]):\n"
             "    for j in loop(J, name=\"steps\"):\n"
             "        print(\"step\", j)\n"
             "        wj = view(w, [16, 16], [j * 16, 0])\n"
             "        acc = tensor([16, 16], f32)\n"
             "        acc[:] = x * 2.0\n"
             "        y[j * 16:j * 16 + 16, :] = acc * 3.0 + matmul(x, wj)\n")
YAML = ("op: fwd\nsymbols: {Y: 16*J, R: 16*J}\n"
        "schedule: {vec_tile: [16, 16], cube_tile: {m: [16, 16], k: [16, 16], n: [16, 16]}}\n")


@pytest.fixture(scope="module")
def forwarded(tmp_path_factory) -> ptodsl.Operator:
    d = tmp_path_factory.mktemp("fwd")
    (d / "fwd.pto").write_text(FORWARDED)
    (d / "fwd.yaml").write_text(YAML)
    return ptodsl.load(str(d / "fwd.yaml"))


def test_a_tile_living_across_the_product_keeps_the_body_one_mixed_kernel(forwarded):
    block = forwarded.compiled.stages["block"]
    assert [f.kind for f in block.funcs if f.kind != "control"] == ["mixed"]
    (control,) = [f for f in block.funcs if f.kind == "control"]
    (loop,) = [o for o in control.body if o.name == "loop"]
    assert [o.name for o in loop.regions[0] if o.name == "launch"] == ["launch"]
    assert syncheck.check(block, TARGET.max_event_ids, TARGET.cross_core_flags) == []
    # on the NPU, a cube part and a vector part handing the product over by cross-core flags
    (text,) = [t for kind, t in emit_npu_variant(forwarded.compiled, 0).kernels.values() if kind == "mixed"]
    npu = text.split("#else", 2)[2]
    assert "#if defined(__DAV_CUBE__)" in npu and "#if defined(__DAV_VEC__)" in npu
    assert "ffts_cross_core_sync" in npu and "wait_flag_dev" in npu


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_it_computes(forwarded, backend: str, capfd):
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (16, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (48, 16)).astype(np.float32)
    a = x.astype(np.float64) * 2.0
    want = np.concatenate([a * 3.0 + x.astype(np.float64) @ w[16 * j:16 * j + 16] for j in range(3)])
    np.testing.assert_allclose(forwarded(x, w, backend=backend), want, rtol=1e-5, atol=1e-5)
    assert capfd.readouterr().out.split() == ["step", "0", "step", "1", "step", "2"]


# Attention over KV blocks of 256 keys (specs/online_softmax_attn.pto). The KV loop's mixed kernel
# needs more UB than one vector core has, unless its vector work is shared by the two vector cores
# of its block (passes/aivsplit.py): each then holds half of every vector tile in its own UB. The
# q tile of the second unrolled KV block is hoisted out of its grid loop behind a guard on the
# block having keys (passes/licm.py). Partitioning once refused that guard's loop (a loop of 0 or
# 1 trips, launched per iteration) to fit the rest, which left the q tile defined in one kernel and
# used in the next: an internal compiler error (E0990).
BIG_BLOCKS = ("op: attn\nsource: attn.pto\ndtypes: {T: [f16]}\nsymbols: {BL: 256}\n"
              "schedule:\n  pass_options: {row_interchange: true%s}\n  vec_tile: [64, 256]\n"
              "  cube_tile: {m: [64, 64], k: [128, 128], n: [128, 128]}\n"
              "  loops: {kv_loop: {unroll: [2, 1]}}\n")


def _big_blocks(tmp_path, options: str = "") -> str:
    source = (SPECS / "online_softmax_attn.pto").read_text()
    (tmp_path / "attn.pto").write_text(source)
    (tmp_path / "attn.yaml").write_text(BIG_BLOCKS % options)
    return str(tmp_path / "attn.yaml")


def _attention(op: ptodsl.Operator, backend: str) -> None:
    rng = np.random.default_rng(5)
    q, k, v = (rng.uniform(-1, 1, s).astype(np.float16) for s in ((64, 64), (600, 64), (600, 64)))
    want = import_file(str(SPECS / "refs.py")).attention(q, k, v, scale=0.125)
    np.testing.assert_allclose(op(q, k, v, scale=0.125, backend=backend).astype(np.float64), want,
                               rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_a_tile_made_before_a_loop_launched_per_iteration_is_not_stranded(tmp_path, backend: str):
    # over cycle_upper_bound, the KV loop launches its body's kernels per iteration
    _attention(ptodsl.load(_big_blocks(tmp_path)), backend)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_a_kernel_that_fits_once_its_vector_work_is_split_stays_one_kernel(tmp_path, backend: str):
    op = ptodsl.load(_big_blocks(tmp_path, ", cycle_upper_bound: 40000"))
    block = op.compiled.stages["block"]
    (control,) = [f for f in block.funcs if f.kind == "control"]
    # the KV loop runs inside the row blocks' mixed kernels: no launch inside a loop of the control program
    assert not [o for top in control.body if top.name == "loop" for o in top.walk() if o.name == "launch"]
    assert any(o.attrs.get("aiv") == 1 for f in block.funcs if f.kind == "mixed" for o in f.walk())
    _attention(op, backend)


def test_without_the_split_it_reports_what_does_not_fit(tmp_path):
    with pytest.raises(ptodsl.CompileError) as e:
        ptodsl.load(_big_blocks(tmp_path, ", aiv_split: false"))
    codes = {d.code for d in e.value.diagnostics if d.is_error}
    assert codes == {"E0611"}, codes


# A loop launched per iteration (kept in the control program) between a tile's making and its
# uses: the making is done again inside the loop and after it, or, where the loop writes the tile
# (its value after the loop is the loop's), not at all.
def _tile_program(loop_writes: bool):
    x = Value("x", TensorType("f32", (16, 16)))
    y = Value("y", TensorType("f32", (16, 16)))
    t = Value("t", TileType("ub", "f32", (16, 16), (16, 16)))
    make = [Op("tile.alloc", [], {}, [t]), Op("tile.load", [t, x], {"offsets": (0, 0)})]
    body = [Op("tile.add", [t, t, t]) if loop_writes else Op("tile.store", [y, t], {"offsets": (0, 0)})]
    loop = Op("loop", [], {"index": "i", "lo": 0, "hi": 3, "step": 1, "name": "steps"}, [], [body])
    after = [Op("tile.store", [y, t], {"offsets": (0, 0)})]
    return [*make, loop, *after], loop


def test_a_tile_read_inside_and_after_a_refused_loop_is_made_again_in_both():
    chunk, loop = _tile_program(loop_writes=False)
    sunk = _sink_into(chunk, [loop])
    names = [op.name for op in sunk]
    assert names == ["loop", "tile.alloc", "tile.load", "tile.store"]  # made again after it, not before
    assert [op.name for op in loop.regions[0]] == ["tile.alloc", "tile.load", "tile.store"]


def test_a_tile_the_refused_loop_writes_is_not_made_again():
    chunk, writer = _tile_program(loop_writes=True)
    _, reader = _tile_program(loop_writes=False)
    chunk.insert(chunk.index(writer), reader)  # a loop that only reads it first
    bodies = [list(loop.regions[0]) for loop in (reader, writer)]
    assert _sink_into(chunk, [reader, writer]) is None
    assert [list(loop.regions[0]) for loop in (reader, writer)] == bodies  # left as they were
