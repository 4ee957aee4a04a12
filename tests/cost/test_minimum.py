"""The compulsory GM traffic (cost/minimum.py) counts a tensor touched only through an index at the
slices the index names, and the chip model charges a gather's or scatter's bytes to the HBM: no
modelled kernel beats the roofline it is compared with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ptodsl
from ptodsl import cli
from ptodsl.cost.minimum import compulsory_bytes

ROOT = Path(__file__).resolve().parents[2]


def test_a_gather_source_counts_only_the_rows_it_reads():
    op = ptodsl.load(str(ROOT / "specs" / "gather_rows.yaml"))
    func = op.compiled.stages["tensor"].func("gather_rows_i32_bf16")
    v, d, n = 32000, 4096, 4096
    # ids read, n rows of the table read, n rows of out written; not the whole table
    assert compulsory_bytes(func, {"V": v, "D": d, "N": n}) == n * 4 + 2 * n * d * 2
    # an index of more rows than the table has reads each of them at most once
    assert compulsory_bytes(func, {"V": 10, "D": d, "N": n}) == n * 4 + 10 * d * 2 + n * d * 2


def test_a_scatter_destination_counts_only_the_rows_it_writes():
    op = ptodsl.load(str(ROOT / "specs" / "kv_cache_update.yaml"))
    func = op.compiled.stages["tensor"].func("kv_cache_update_f16")
    s, n, row = 131072, 4096, 2 * 64 * 2
    # slot_mapping, k and v read once, each of their rows written once into its cache
    assert compulsory_bytes(func, {"S": s, "N": n}) == n * 4 + 2 * n * row + 2 * n * row


def test_an_elementwise_op_counts_every_input_and_output_once():
    op = ptodsl.load(str(ROOT / "specs" / "add_one.yaml"))
    func = op.compiled.stages["tensor"].funcs[0]
    assert compulsory_bytes(func, {"M": 4, "N": 8}) == 2 * 4 * 8 * 4


@pytest.mark.parametrize("spec", ["gather_rows", "kv_cache_update"])
def test_an_indexed_op_is_not_modelled_below_its_roofline(capsys, spec: str):
    assert cli.main(["ir", f"specs/{spec}.yaml", "--stats", "--bench", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    chips = [c for s in doc["stats"] for c in s["chip"]]
    assert chips and all(c["roofline_ratio"] >= 1.0 for c in chips), chips


def test_no_schedule_of_a_matmul_beats_the_roofline_of_another(tmp_path: Path):
    """The chip's roofline counts the compute pipes' work and the compulsory HBM traffic, not the
    MTE2 loads a schedule's small tiles repeat: a matmul with larger tiles runs faster than the
    default schedule's MTE2 work spread over the cube cores, which the roofline once counted."""
    from ptodsl.cost.dryrun import REPORT_MAX_OPS, estimate
    from ptodsl.targets import load_target

    target = load_target("ascend910b")
    shapes = {"M": 2048, "K": 2048, "N": 2048}
    runs = []
    for tiles in ("{m: [64, 128], k: [64, 128], n: [64, 128]}", "{m: [256, 256], k: [64, 256], n: [128, 256]}"):
        (tmp_path / "matmul.pto").write_text((ROOT / "specs" / "matmul.pto").read_text())
        (tmp_path / "matmul.yaml").write_text(
            "op: matmul\ndtypes: {T: [f16]}\nschedule:\n  cube_tile: " + tiles + "\n")
        block = ptodsl.load(str(tmp_path / "matmul.yaml")).compiled.stages["block"]
        control = next(f.name for f in block.funcs if f.kind == "control")
        # (the small tiles' K loop of 32 steps runs in groups of five: fewer than the dry run
        # samples, so it walks them all, as `ptodsl ir --stats` does with its larger budget)
        runs.append(estimate(block, control, shapes, target, max_ops=REPORT_MAX_OPS).timeline.chip)
    small, large = runs
    assert large.time < small.time  # larger output tiles re-read less
    minimum = 2 * 2048 * 2048 * 2 + 2048 * 2048 * 4  # a and b read, c written
    for chip in runs:
        assert chip.roofline(minimum) <= large.time
    # (the cube work itself differs a little: each instruction has its fixed start-up cycles)
    assert small.roofline(minimum) == pytest.approx(large.roofline(minimum), rel=0.1)
