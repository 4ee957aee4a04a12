"""The chip model: blocks of a launch spread over the cores of their kind, the HBM every core
shares limits each launch, launches cost time, and the dry run's sampled iterations stand for the
ones it skips. Hardware numbers come from the target files; nothing here times the machine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl import ir
from ptodsl.backends.sim import SimError, run_block
from ptodsl.cost.chip import Chip, spread
from ptodsl.cost.dryrun import estimate
from ptodsl.targets import load_target, load_target_file

ROOT = Path(__file__).resolve().parents[2]
TARGET = load_target("ascend910b")

# add_one's kernel, cut by hand into blocks: block `bi` of `bn` takes the row tiles bi, bi + bn, ...
# (the contract of ir/opdefs.py: `block_index` / `block_count` name the parameters each block gets).
BLOCKS = '''module @blocks level block attributes {target = "ascend910b"} {
  vector @blocks_k0(%x: tensor<f32 [M, N]>, %y: tensor<f32 [M, N]> out, M: i64, N: i64, bi: i64, bn: i64) attributes {block_index = "bi", block_count = "bn", ub_bytes = 16384} {
    loop() {index = "g", lo = bi, hi = cdiv(M, 8), step = bn, name = "g", kind = "grid"} region {
      sync.set() {src = "MTE3", dst = "V", event = 0}
      sync.set() {src = "V", dst = "MTE2", event = 0}
      loop() {index = "h", lo = 0, hi = cdiv(N, 256), step = 1, name = "h", kind = "grid"} region {
        %a = tile.alloc() {offset = 0, bytes = 8192, layout = "row", rows = 8, cols = 256} : tile<ub f32 [8, 256] valid [min(M - g * 8, 8), min(N - h * 256, 256)]>
        sync.wait() {src = "V", dst = "MTE2", event = 0}
        tile.load(%a, %x) {offsets = [g * 8, h * 256]}
        sync.set() {src = "MTE2", dst = "V", event = 0}
        %b = tile.alloc() {offset = 8192, bytes = 8192, layout = "row", rows = 8, cols = 256} : tile<ub f32 [8, 256] valid [min(M - g * 8, 8), min(N - h * 256, 256)]>
        sync.wait() {src = "MTE3", dst = "V", event = 0}
        sync.wait() {src = "MTE2", dst = "V", event = 0}
        tile.add(%b, %a) {scalar = 1.0}
        sync.set() {src = "V", dst = "MTE3", event = 0}
        sync.set() {src = "V", dst = "MTE2", event = 0}
        sync.wait() {src = "V", dst = "MTE3", event = 0}
        tile.store(%y, %b) {offsets = [g * 8, h * 256]}
        sync.set() {src = "MTE3", dst = "V", event = 0}
      }
      sync.wait() {src = "MTE3", dst = "V", event = 0}
      sync.wait() {src = "V", dst = "MTE2", event = 0}
    }
  }
  control @blocks(%x: tensor<f32 [M, N]>, %y: tensor<f32 [M, N]> out) {
    launch(%x, %y) {kernel = "blocks_k0", scalars = [M, N], block_dim = BLOCK_DIM}
  }
}
'''


def blocks_module(block_dim: int | str = 4) -> ir.Module:
    m = ir.parse(BLOCKS.replace("BLOCK_DIM", str(block_dim)))
    ir.verify(m)
    return m


def target_with(tmp_path: Path, **chip: object):
    """ascend910b with some `chip:` numbers replaced."""
    text = (ROOT / "ptodsl" / "targets" / "ascend910b.yaml").read_text()
    head, tail = text.split("\nchip:\n")
    fields = dict(line.strip().split(": ", 1) for line in tail.strip().splitlines())
    fields |= {k: str(v) for k, v in chip.items()}
    path = tmp_path / "chip.yaml"
    path.write_text(head + "\nchip:\n" + "".join(f"  {k}: {v}\n" for k, v in fields.items()))
    return load_target_file(str(path))


@pytest.fixture
def target_with_cores(tmp_path):
    """target_with_cores(n): ascend910b with n cores of each kind."""
    return lambda n: target_with(tmp_path, aiv_cores=n, aic_cores=n)


def run_blocks(target=TARGET, block_dim: int = 4, shape=(40, 300)):
    x = np.random.default_rng(0).random(shape, np.float32)
    y = np.zeros_like(x)
    m = run_block(blocks_module(block_dim), "blocks", {"x": x, "y": y}, {}, {"M": shape[0], "N": shape[1]},
                  target, poison=True)
    return x, y, m.timeline


def test_the_printed_block_contract_parses_back():
    assert str(blocks_module()) == BLOCKS.replace("BLOCK_DIM", "4")


@pytest.mark.parametrize("block_dim", [1, 4, 7])
def test_every_block_runs_the_kernel_with_its_own_index(block_dim):
    """40 rows are 5 row tiles: with 4 blocks block 0 takes tiles 0 and 4; with 7, two blocks idle."""
    x, y, _ = run_blocks(block_dim=block_dim)
    assert np.array_equal(y, x + 1)


def test_a_launch_spreads_its_blocks_over_the_cores(target_with_cores):
    _, _, tl = run_blocks()
    chip = tl.chip
    assert (chip.launches, chip.block_dim, chip.cores_used) == (1, 4, 4)
    # one core would run the blocks one after another: the one-core view is exactly that
    _, _, tl1 = run_blocks(target_with_cores(1))
    assert tl1.elapsed == pytest.approx(tl.elapsed)
    assert tl1.chip.time == pytest.approx(tl1.chip.launch_cycles + tl1.elapsed)
    # on 48 cores the launch lasts as long as its longest block (block 0: two row tiles)
    longest = tl.chip.time - tl.chip.launch_cycles
    assert longest < tl.elapsed
    _, _, single = run_blocks(block_dim=1, shape=(16, 300))  # one block of the same two row tiles
    assert longest == pytest.approx(single.elapsed)


def test_blocks_queue_on_fewer_cores(target_with_cores):
    """Two cores for blocks of 2, 1, 1 and 1 row tiles: core 0 takes block 0, core 1 blocks 1 and
    2, then block 3 goes to whichever frees first."""
    _, _, tl = run_blocks(target_with_cores(2))
    _, _, one_tile = run_blocks(block_dim=1, shape=(8, 300))
    _, _, two_tiles = run_blocks(block_dim=1, shape=(16, 300))
    t1, t2 = one_tile.elapsed, two_tiles.elapsed
    assert tl.chip.time - tl.chip.launch_cycles == pytest.approx(spread([[t2, 1], [t1, 3]], 2))
    # block 3 starts when the first core frees: after block 0, or after blocks 1 and 2
    assert spread([[t2, 1], [t1, 3]], 2) == pytest.approx(max(t2, 2 * t1, min(t2, 2 * t1) + t1))


def test_the_dry_run_models_blocks_as_the_simulator_runs_them():
    _, _, tl = run_blocks()
    e = estimate(blocks_module(), "blocks", {"M": 40, "N": 300}, TARGET)
    assert e.timeline.chip.time == pytest.approx(tl.chip.time)
    assert e.timeline.elapsed == pytest.approx(tl.elapsed)
    assert e.timeline.chip.hbm_bytes == pytest.approx(tl.chip.hbm_bytes) == 2 * 40 * 300 * 4
    assert (e.timeline.chip.block_dim, e.timeline.chip.cores_used) == (4, 4)


def test_many_alike_blocks_are_modelled_from_a_few():
    """A launch of 4096 blocks of one row tile each: the dry run walks a handful and multiplies."""
    shape = {"M": 4096 * 8, "N": 256}
    sampled = estimate(blocks_module(4096), "blocks", shape, TARGET)
    full = estimate(blocks_module(4096), "blocks", shape, TARGET, sample=False, max_ops=10**7)
    assert sampled.walked * 50 < full.walked
    for a, b in ((sampled.timeline.chip.time, full.timeline.chip.time), (sampled.timeline.elapsed, full.timeline.elapsed),
                 (sampled.gm_bytes, full.gm_bytes)):
        assert a == pytest.approx(b, rel=1e-9)
    chip = sampled.timeline.chip
    assert (chip.block_dim, chip.cores_used) == (4096, TARGET.chip.aiv_cores)
    # 4096 equal blocks on 48 cores: ceil(4096 / 48) = 86 rounds of one block
    one = full.timeline.elapsed / 4096
    assert chip.time - chip.launch_cycles == pytest.approx(max(86 * one, chip.hbm_bytes / chip.hbm_bytes_per_cycle))


def test_the_hbm_limits_a_launch(tmp_path):
    """With a slow enough HBM every launch lasts its bytes over the bandwidth, whatever the cores do."""
    slow = target_with(tmp_path, hbm_gib_per_s=0.01)
    _, _, tl = run_blocks(slow)
    chip = tl.chip
    hbm = chip.hbm_bytes / chip.hbm_bytes_per_cycle
    assert hbm > tl.elapsed
    assert chip.time == pytest.approx(chip.launch_cycles + hbm)
    assert chip.bound == "HBM" and chip.roofline() == pytest.approx(hbm)
    _, _, fast = run_blocks()
    assert fast.chip.bound != "HBM"


def test_launches_cost_time(tmp_path):
    """Each launch costs its fixed time: mha_sdpa launches kernels per iteration of its loops."""
    op = ptodsl.load(str(ROOT / "specs" / "mha_sdpa.yaml"))
    block = op.compiled.stages["block"]
    control = next(f.name for f in block.funcs if f.kind == "control")
    dims = {"B": 2, "H": 2, "S": 32, "L": 64, "D": 32}
    free = estimate(block, control, dims, target_with(tmp_path, launch_us=0), {"scale": 0.125})
    paid = estimate(block, control, dims, TARGET, {"scale": 0.125})
    launches = paid.timeline.chip.launches
    assert launches == free.timeline.chip.launches > 1
    assert paid.timeline.chip.time - free.timeline.chip.time == pytest.approx(
        launches * TARGET.chip.launch_us * 1e-6 * TARGET.timing.clock_hz)
    assert free.timeline.chip.roofline() == pytest.approx(paid.timeline.chip.roofline())  # launches are not work


def test_spread_places_each_block_on_the_core_that_frees_first():
    assert spread([[10.0, 96]], 48) == 20
    assert spread([[10.0, 97]], 48) == 30
    assert spread([[10.0, 5]], 4) == 20
    assert spread([[100.0, 1], [10.0, 10]], 2) == 100  # core 1 takes ten small blocks while core 0 runs the big one
    assert spread([[100.0, 1], [10.0, 20]], 2) == 150
    assert spread([[10.0, 3]], 1) == 30
    assert spread([], 48) == 0
    assert spread([[1.0, 10**9]], 48) == pytest.approx(-(-10**9 // 48))  # rounds, not one block at a time


def test_a_launch_of_no_blocks_is_refused_by_the_simulator():
    x = np.zeros((8, 256), np.float32)
    with pytest.raises(SimError) as info:
        run_block(blocks_module("M - M"), "blocks", {"x": x, "y": x.copy()}, {}, {"M": 8, "N": 256}, TARGET)
    assert info.value.diagnostic.code == "E0712" and "0 blocks" in info.value.diagnostic.message


# ------------------------------------------------------------------ sampled iterations


MID_SIZE = [  # (spec, control, shapes): a few hundred to a few thousand iterations, walked in full below
    ("matmul", "matmul_f16", {"M": 2000, "K": 1400, "N": 2060}),  # (256 x 128 output tiles; 11 paired K steps)
    ("softmax_long", "softmax_long_f32", {"B": 40, "N": 30000}),
    ("layernorm", "layernorm_f32", {"R": 300, "H": 4000}),
    ("flash_attn", "flash_attn_f16", {"S": 512, "D": 128, "L": 4096}),
    ("tensor_sum", "tensor_sum_f32", {"B": 300, "N": 5000}),
    # double buffering flattens its kernels' 2-D grids: offsets in `// cols` and `% cols`, each
    # column of tiles sampled on its own (alike.period)
    ("mha_sdpa", "mha_sdpa_f16", {"B": 1, "H": 8, "S": 512, "L": 512, "D": 64}),
]
TOLERANCE = 1e-3  # sampling must agree with walking every iteration to 0.1% (today it agrees exactly)


@pytest.mark.parametrize("name,control,shapes", MID_SIZE, ids=[m[0] for m in MID_SIZE])
def test_sampled_iterations_agree_with_the_full_walk(name, control, shapes):
    block = ptodsl.load(str(ROOT / "specs" / f"{name}.yaml")).compiled.stages["block"]
    sampled = estimate(block, control, shapes, TARGET, {"scale": 0.125})
    full = estimate(block, control, shapes, TARGET, {"scale": 0.125}, sample=False, max_ops=10**8)
    # (at least half the ops skipped: mha_sdpa's cube kernels share out 128 tiles, 6 a block, and
    # blocks starting at different rows of a column are walked each; the others skip far more)
    assert sampled.walked * 2 < full.walked
    s, f = sampled.timeline, full.timeline
    assert sampled.gm_bytes == full.gm_bytes
    assert s.busy == pytest.approx(f.busy, rel=1e-9)  # pipe work depends on the trace only: exact
    for a, b in ((s.estimate, f.estimate), (s.chip.time, f.chip.time), (s.chip.roofline(), f.chip.roofline())):
        assert a == pytest.approx(b, rel=TOLERANCE)
    assert s.chip.launches == f.chip.launches


@pytest.mark.parametrize("name,control,shapes", [
    ("softmax", "softmax_f32", {"B": 16384}),  # 16M elements, one launch per row
    ("add_one", "add_one", {"M": 4096, "N": 4096}),
    ("matmul", "matmul_f16", {"M": 4096, "K": 4096, "N": 4096}),
    ("flash_attn", "flash_attn_f16", {"S": 4096, "D": 128, "L": 4096}),
])
def test_chip_filling_shapes_are_modelled_from_a_few_ops(name, control, shapes):
    block = ptodsl.load(str(ROOT / "specs" / f"{name}.yaml")).compiled.stages["block"]
    e = estimate(block, control, shapes, TARGET, {"scale": 0.125})
    # (flash attention walks about 34000: its once-per-call kernels of several loops are one launch
    # per loop, each sampled on its own, and its first block of scores runs on a grid of blocks whose
    # columns are each sampled, cost/dryrun.py; the 4096^3 matmul about 83000: its K loop keeps five
    # sets of L1 tiles, five steps of ops per sampled iteration, and its blocks' shares of the output
    # tiles repeat with a period of 8 blocks, each walked once)
    assert e.walked < 100_000
    assert e.timeline.chip.time > e.timeline.chip.roofline() > 0


# A loop whose cost depends on its index at one point in the middle (i == 7): the traces of the
# iterations the sampling compares are equal, but the iterations between are not alike.
ODD_ONE_OUT = '''module @odd level block attributes {target = "ascend910b"} {
  vector @odd_k0(%x: tensor<f32 [1, 256]>, %y: tensor<f32 [1, 256]> out) attributes {ub_bytes = 2048} {
    loop() {index = "i", lo = 0, hi = 20, step = 1, name = "i"} region {
      %a = tile.alloc() {offset = 0, bytes = 1024, layout = "row", rows = 1, cols = 256} : tile<ub f32 [1, 256] valid [1, 256]>
      tile.load(%a, %x) {offsets = [0, 0]}
      sync.barrier() {pipe = "ALL"}
      if() {cond = i == 7} region {
        %b = tile.alloc() {offset = 1024, bytes = 1024, layout = "row", rows = 1, cols = 256} : tile<ub f32 [1, 256] valid [1, 256]>
        tile.exp(%b, %a)
        sync.barrier() {pipe = "ALL"}
        tile.store(%y, %b) {offsets = [0, 0]}
      } region {
      }
      sync.barrier() {pipe = "ALL"}
    }
  }
  control @odd(%x: tensor<f32 [1, 256]>, %y: tensor<f32 [1, 256]> out) {
    launch(%x, %y) {kernel = "odd_k0", scalars = []}
  }
}
'''


def test_a_loop_whose_cost_is_not_monotone_in_its_index_is_walked():
    m = ir.parse(ODD_ONE_OUT)
    ir.verify(m)
    sampled = estimate(m, "odd", {}, TARGET)
    full = estimate(m, "odd", {}, TARGET, sample=False)
    assert sampled.walked == full.walked
    assert sampled.timeline.busy == pytest.approx(full.timeline.busy)
    assert "V" in sampled.timeline.busy  # the one exp ran


def test_an_empty_chip_has_no_bound():
    chip = Chip(TARGET)
    assert chip.bound is None and chip.roofline() == 0 and chip.time == 0


def test_the_blocks_of_a_block_grid_are_sampled_column_by_column():
    """A grid nest shared out on 2 x 24 blocks (passes/blocks.py share_out_nest): block b runs row
    b // 24, column b % 24, not monotone in b; the dry run samples each column's blocks, and agrees
    with walking every block."""
    from ptodsl.cost.alike import direction

    block = ptodsl.load(str(ROOT / "specs" / "div_bcast.yaml")).compiled.stages["block"]
    shapes = {"R": 4096, "C": 1024}
    sampled = estimate(block, "div_bcast_f32", shapes, TARGET)
    full = estimate(block, "div_bcast_f32", shapes, TARGET, sample=False, max_ops=10**8)
    assert sampled.timeline.chip.block_dim == 48
    # (at least half the ops skipped: mha_sdpa's cube kernels share out 128 tiles, 6 a block, and
    # blocks starting at different rows of a column are walked each; the others skip far more)
    assert sampled.walked * 2 < full.walked
    assert sampled.gm_bytes == full.gm_bytes
    assert sampled.timeline.chip.time == pytest.approx(full.timeline.chip.time, rel=TOLERANCE)
    b = ptodsl.sym.Sym("b")
    assert direction(ptodsl.sym.mod(ptodsl.sym.add(ptodsl.sym.mul(b, 3), 1), 3), "b", {}) == 0
    assert direction(ptodsl.sym.mod(b, 3), "b", {}) is None


def test_a_remainder_is_monotone_where_it_cannot_wrap_and_periodic_where_it_does():
    """A flattened nest's column ``f % cols`` (passes/dbuf.py) moves monotonely over a range that
    stays in one row, and repeats every ``cols`` iterations over a longer one; a remainder of a
    non-linear dividend has no period the dry run can use."""
    from ptodsl.cost.alike import direction, period

    s = ptodsl.sym
    u, k = s.Sym("u"), s.Sym("r#k")
    col = s.mod(s.add(s.mul(u, 2), k), 8)  # copy 1 of a doubled loop: 2u + r, r its guard's trip
    assert direction(col, "u", {}) is None
    assert direction(col, "u", {}, {"u": (0, 3), "r#k": (0, 0)}) == 1  # 2u + r < 8: no wrap
    assert direction(col, "u", {}, {"u": (0, 4), "r#k": (0, 0)}) is None
    assert period([s.sub(64, s.mul(col, 8))], "u", {}, 1) == 4
    row_of_3d = s.mod(s.floordiv(s.mul(u, 2), 4), 3)  # the middle index of a flattened 3-D nest
    assert period([row_of_3d], "u", {}, 1) == 6
    # every sixth iteration from the second: u = 1 + 6 * row, the % no longer moves
    assert direction(s.substitute(row_of_3d, {"u": s.add(1, s.mul(s.Sym("row"), 6))}), "row", {}) == 0
    assert period([s.mod(s.mul(u, u), 3)], "u", {}, 1) is None
    # a factor that does not move keeps the product monotone when its sign is known
    row = s.Sym("row")
    width = s.max_(s.min_(11, s.sub(32, s.mul(s.mod(s.mul(row, 3), 3), 11))), 0)
    assert direction(s.mul(s.min_(s.sub(16, row), 1), width), "row", {}, {"row": (0, 15)}) == -1
    assert direction(s.floordiv(row, s.max_(width, 1)), "row", {}, {"row": (0, 15)}) == 1


def test_re_reads_of_tensors_that_fit_in_l2_pay_hbm_once(tmp_path):
    """A matmul's blocks re-read the A and B panels: with its tensors in L2 its HBM term is their
    bytes once (a slow HBM makes that term the launch's time), without L2 every byte it moves; the
    simulator tells the chip the same footprint as the dry run."""
    op = ptodsl.load(str(ROOT / "specs" / "matmul.yaml"))
    block = op.compiled.stages["block"]
    dims = {"M": 512, "K": 256, "N": 512}
    tensors = (512 * 256 + 256 * 512) * 2 + 512 * 512 * 4  # f16 a and b, f32 c
    with_l2 = estimate(block, "matmul_f16", dims, target_with(tmp_path, hbm_gib_per_s=0.01)).timeline.chip
    assert with_l2.hbm_bytes > 1.5 * tensors  # the blocks re-read their panels
    assert with_l2.time == pytest.approx(with_l2.launch_cycles + tensors / with_l2.hbm_bytes_per_cycle)
    no_l2 = estimate(block, "matmul_f16", dims, target_with(tmp_path, hbm_gib_per_s=0.01, l2_bytes=0)).timeline.chip
    assert no_l2.time == pytest.approx(no_l2.launch_cycles + no_l2.hbm_bytes / no_l2.hbm_bytes_per_cycle)
    small = estimate(block, "matmul_f16", dims, target_with(tmp_path, hbm_gib_per_s=0.01, l2_bytes=tensors - 1))
    assert small.timeline.chip.time == pytest.approx(no_l2.time)  # tensors that do not fit: every byte
    rng = np.random.default_rng(0)
    a, b = (rng.random(s).astype(np.float16) for s in ((512, 256), (256, 512)))
    m = run_block(block, "matmul_f16", {"a": a, "b": b, "c": np.zeros((512, 512), np.float32)}, {}, dims,
                  target_with(tmp_path, hbm_gib_per_s=0.01))
    assert m.timeline.chip.time == pytest.approx(with_l2.time)
