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
