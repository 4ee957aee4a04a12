"""The AIV split (passes/aivsplit.py): a mixed kernel's row-wise vector work shared by the two
vector cores of its block, each on half of every tile's rows."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl import stats
from ptodsl.backends.cpp.emit import emit_npu_variant
from ptodsl.driver import compile_spec
from ptodsl.ir.queues import buffer_of, core_of
from ptodsl.passes import syncheck
from ptodsl.targets import load_target

ROOT = Path(__file__).resolve().parents[2]
TARGET = load_target("ascend910b")


def _mixed(block):
    return [f for f in block.funcs if f.kind == "mixed"]


def _vec_ops(func):
    return [op for op in func.walk() if core_of(op) == "vec" and not op.regions]


@pytest.fixture(scope="module")
def flash(tmp_path_factory) -> tuple[ptodsl.Operator, ptodsl.Operator]:
    """flash_attn as the library has it, and with the split turned off; each with a bench case."""
    spec = (ROOT / "specs" / "flash_attn.yaml").read_text().split("\nreference:")[0]
    spec += "\nbench:\n  - {shapes: {S: 512, D: 64, L: 512}, dtypes: {T: f16}, scalars: {scale: 0.125}}\n"
    off = spec.replace("pass_options: {row_interchange: true,", "pass_options: {row_interchange: true, aiv_split: false,")
    assert off != spec
    ops = []
    for name, text in (("split", spec), ("unsplit", off)):
        d = tmp_path_factory.mktemp(name)
        shutil.copy(ROOT / "specs" / "flash_attn.pto", d / "flash_attn.pto")
        (d / "flash_attn.yaml").write_text(text)
        ops.append(ptodsl.load(str(d / "flash_attn.yaml")))
    return ops[0], ops[1]


def test_flash_attention_shares_its_vector_work_between_both_vector_cores(flash):
    split, unsplit = flash
    (kernel, *_) = _mixed(split.compiled.stages["block"])
    ops = _vec_ops(kernel)
    tiles = {op.result.type.shape for op in ops if op.name == "tile.alloc"}
    assert {rows for rows, _ in tiles} == {32}  # the 64-row tiles, in halves
    work = [op for op in ops if op.name not in ("tile.alloc", "sync.barrier")]
    assert work and all(op.attrs.get("aiv") in (0, 1) for op in work)
    assert sum(op.attrs["aiv"] == 1 for op in work) == sum(op.attrs["aiv"] == 0 for op in work)
    for kernel in _mixed(unsplit.compiled.stages["block"]):
        assert not [op for op in kernel.walk() if "aiv" in op.attrs]
    assert syncheck.check(split.compiled.stages["block"], TARGET.max_event_ids, TARGET.cross_core_flags) == []


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_the_halves_compute_what_one_core_did(flash, backend: str):
    """Bit for bit, whatever the query rows: a second half that is empty (17 rows), partial (40, and
    100 = 64 + 36) or whole (128); every op is row-wise, so the halves round as the whole did."""
    split, unsplit = flash
    rng = np.random.default_rng(3)
    for s in (17, 40, 100, 128):
        q, k, v = (rng.uniform(-1, 1, (n, 64)).astype(np.float16) for n in (s, 192, 192))
        got = split(q, k, v, scale=0.125, backend=backend)
        want = unsplit(q, k, v, scale=0.125, backend=backend)
        np.testing.assert_array_equal(got, want)


def test_the_second_core_runs_its_half_under_its_own_condition(flash):
    split, _ = flash
    (text, *_) = [t for kind, t in emit_npu_variant(split.compiled, 0).kernels.values() if kind == "mixed"]
    npu = text.split("#else", 2)[2]
    vec = npu.split("#if defined(__DAV_VEC__)")[1]
    cube = npu.split("#if defined(__DAV_CUBE__)")[1].split("#if defined(__DAV_VEC__)")[0]
    assert "if (ptodsl_aiv0) {" in vec and "if (!ptodsl_aiv0) {" in vec
    assert "ptodsl_aiv0" not in cube


def test_each_vector_core_plans_its_own_ub(flash):
    """Blocks of 64 x 128 f32 scores: both halves of every tile would not fit one UB (with the
    instructions' scratch), each core's half fits its own; the plans overlap in offsets."""
    split, _ = flash
    for kernel in _mixed(split.compiled.stages["block"]):
        allocs = [op for op in kernel.walk() if op.name == "tile.alloc" and op.result.type.space == "ub"]
        second = [op for op in allocs if op.attrs.get("aiv") == 1]
        assert second and all(buffer_of(op) == "ub@1" for op in second)
        first = [op for op in allocs if op.attrs.get("aiv") != 1]
        ends = [max(op.attrs["offset"] + op.attrs["bytes"] for op in ops) for ops in (first, second)]
        assert kernel.attrs["ub_bytes"] == max(ends) <= TARGET.ub_bytes
        assert min(op.attrs["offset"] for op in second) < ends[0]  # inside the first core's range
    sums = [sum(op.attrs["bytes"] for op in k.walk() if op.name == "tile.alloc" and op.result.type.space == "ub")
            for k in _mixed(split.compiled.stages["block"])]
    assert max(sums) > TARGET.ub_bytes  # what one UB for both would have had to hold, at least


def test_the_cpu_build_holds_the_second_ub_after_the_first(flash):
    split, _ = flash
    texts = [t for kind, t in emit_npu_variant(split.compiled, 0).kernels.values() if kind == "mixed"]
    assert texts
    for text in texts:
        _, cpu, npu = text.split("#else", 2)  # (the first: a block's locals, NPU only)
        vec = npu.split("#if defined(__DAV_VEC__)")[1]
        assert f"constexpr int64_t ptodsl_aiv1_ub = {TARGET.ub_bytes};" in cpu
        assert "constexpr int64_t ptodsl_aiv1_ub = 0;" in vec
        assert re.search(r"TASSIGN\(\w+_aiv1, ptodsl_aiv1_ub \+ \d+\);", cpu)
        assert not re.search(r"TASSIGN\(\w+_aiv0, ptodsl_aiv1_ub", text)


def test_the_model_halves_the_vector_time_and_keeps_the_roofline(flash):
    split, unsplit = flash
    (a,), (b,) = ([c for vs in stats.collect(op, bench=True) for c in vs.chip] for op in flash)
    assert a.chip_roofline_us == pytest.approx(b.chip_roofline_us, rel=1e-9)
    assert a.modelled_us < 0.9 * b.modelled_us


@pytest.mark.parametrize("spec", ["specs/paged_attention.yaml", "specs/varlen_attention.yaml"])
def test_a_kernel_whose_halves_could_meet_in_gm_is_not_split(spec, tmp_path):
    # each stores its output at rows read from data or at a head group's offset, which are not
    # provably multiples of the tile's rows: one core's half could overlap the other's. Varlen
    # attention's rows of one sequence are its own only by its promise that cu_seqlens never
    # decreases (`nondecreasing:`, passes/ordered.py): without it, it is not split either
    text = Path(spec).read_text()
    if "nondecreasing:" in text:
        for name in ("varlen_attention.pto", "refs.py"):
            shutil.copy(Path(spec).parent / name, tmp_path / name)
        spec = tmp_path / Path(spec).name
        spec.write_text("".join(line for line in text.splitlines(True) if not line.startswith("nondecreasing:")))
    block = compile_spec(str(spec)).stages["block"]
    assert _mixed(block)
    assert not [op for f in _mixed(block) for op in f.walk() if "aiv" in op.attrs]


def test_varlen_attention_is_split_by_its_promise():
    block = compile_spec("specs/varlen_attention.yaml").stages["block"]
    assert [op for f in _mixed(block) for op in f.walk() if op.attrs.get("aiv") == 1]


# per head a block of 16 rows, written 5 rows (the rows of y past 16 * H) below a multiple of 16:
# the halves of the stores are not aligned to the tile's rows, but the heads write rows apart
APART = ("kernel apart(x: f32[16, 16], w: f32[R, 16], pick: i32[H, J], y: inout f32[Y, 16]):\n"
         "    for h in loop(H, name=\"heads\"):\n"
         "        acc = tensor([16, 16], f32)\n"
         "        for j in loop(J, name=\"steps\"):\n"
         "            wj = view(w, [16, 16], [pick[h, j] * 16, 0])\n"
         "            if is_loop_begin(j):\n"
         "                acc[:] = exp(matmul(x, wj) * 0.125)\n"
         "            else:\n"
         "                acc[:] = acc + exp(matmul(x, wj) * 0.125)\n"
         "            if is_loop_end(j):\n"
         "                rows = h * 16 + (Y - 16 * H)\n"
         "                y[rows:rows + 16, :] = acc\n")


@pytest.fixture(scope="module")
def apart(tmp_path_factory) -> ptodsl.Operator:
    d = tmp_path_factory.mktemp("apart")
    (d / "apart.pto").write_text(APART)
    (d / "apart.yaml").write_text("op: apart\nschedule: {vec_tile: [16, 16], cube_tile: {m: [16, 16], k: [16, 16], "
                                  "n: [16, 16]}}\n")
    return ptodsl.load(str(d / "apart.yaml"))


def test_stores_whose_rows_are_apart_are_split_though_not_aligned(apart):
    (kernel,) = _mixed(apart.compiled.stages["block"])
    stores = [op for op in kernel.walk() if op.name == "tile.store" and op.operands[0].name == "y"]
    assert {op.attrs["aiv"] for op in stores} == {0, 1}


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_stores_apart_compute_what_the_program_says(apart, backend: str):
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (16, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (16 * 4, 16)).astype(np.float32)
    pick = np.array([[3, 0], [1, 1], [2, 3]], np.int32)
    y = rng.uniform(-1, 1, (16 * 3 + 5, 16)).astype(np.float32)
    want = y.copy()
    for h, row in enumerate(pick):
        want[5 + 16 * h:21 + 16 * h] = sum(np.exp(x.astype(np.float64) @ w[16 * p:16 * p + 16] * 0.125) for p in row)
    np.testing.assert_allclose(apart(x, w, pick, y, backend=backend), want, rtol=1e-5, atol=1e-5)


def test_stores_that_may_overlap_partly_are_not_split(tmp_path):
    # heads 8 rows apart with blocks of 16: a later head overwrites half of the one before, so the
    # second core's half of one head would race the first core's half of the next
    (tmp_path / "apart.pto").write_text(APART.replace("rows = h * 16 +", "rows = h * 8 +"))
    (tmp_path / "apart.yaml").write_text("op: apart\nschedule: {vec_tile: [16, 16], cube_tile: {m: [16, 16], "
                                         "k: [16, 16], n: [16, 16]}}\n")
    block = ptodsl.load(str(tmp_path / "apart.yaml")).compiled.stages["block"]
    assert _mixed(block) and not [op for f in _mixed(block) for op in f.walk() if "aiv" in op.attrs]


# rows of x past 12 are not data (a static valid shape): the second core's half of every op on
# them has no rows and must not run, while `acc`'s own rows 12..31 (zeros) are split as usual
SHORT = ("kernel short_rows(x: f32[32, 16], w: f32[R, 16], pick: i32[H, J], y: inout f32[Y, 16]):\n"
         "    for h in loop(H, name=\"heads\"):\n"
         "        acc = zeros([32, 16], f32)\n"
         "        xv = view(x, [32, 16], [0, 0], valid_shape=[12, 16])\n"
         "        for j in loop(J, name=\"steps\"):\n"
         "            wj = view(w, [16, 16], [pick[h, j] * 16, 0])\n"
         "            acc[:] = acc + exp(matmul(xv, wj) * 0.125)\n"
         "            if is_loop_end(j):\n"
         "                y[h * 32:h * 32 + 32, :] = acc\n")


@pytest.fixture(scope="module")
def short_rows(tmp_path_factory) -> tuple[ptodsl.Operator, ptodsl.Operator]:
    ops = []
    for split in ("true", "false"):
        d = tmp_path_factory.mktemp(f"short_{split}")
        (d / "short_rows.pto").write_text(SHORT)
        (d / "short_rows.yaml").write_text(
            "op: short_rows\nschedule: {vec_tile: [32, 16], cube_tile: {m: [32, 32], k: [16, 16], n: [16, 16]}, "
            f"pass_options: {{aiv_split: {split}}}}}\n")
        ops.append(ptodsl.load(str(d / "short_rows.yaml")))
    return ops[0], ops[1]


def test_a_half_without_rows_is_dropped(short_rows):
    (kernel,) = _mixed(short_rows[0].compiled.stages["block"])
    exps = [op for op in kernel.walk() if op.name == "tile.exp"]
    assert exps and {op.attrs["aiv"] for op in exps} == {0}  # 12 valid rows: all in the first half
    stores = [op for op in kernel.walk() if op.name == "tile.store" and op.operands[0].name == "y"]
    assert {op.attrs["aiv"] for op in stores} == {0, 1}


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_a_short_static_tile_computes_only_its_rows(short_rows, backend: str):
    split, unsplit = short_rows
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (32, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (16 * 4, 16)).astype(np.float32)
    pick = np.array([[3, 0, 2], [1, 1, 0]], np.int32)
    y = rng.uniform(-1, 1, (32 * 2 + 3, 16)).astype(np.float32)
    want = y.copy()
    for h, row in enumerate(pick):
        want[32 * h:32 * h + 32] = 0.0
        want[32 * h:32 * h + 12] = sum(np.exp(x[:12].astype(np.float64) @ w[16 * p:16 * p + 16] * 0.125) for p in row)
    got = split(x, w, pick, y.copy(), backend=backend)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, unsplit(x, w, pick, y.copy(), backend=backend))
