"""The target's timing table says where its numbers come from; these are the numbers, read by hand
from pto-isa (commit 3186c381) and written here with the file each is in, so that the table cannot
drift from its source. docs/COST-MODEL.md explains where ptodsl's model differs from pto-isa's."""

from __future__ import annotations

import pytest

from ptodsl.targets import load_target, target_names

FORMULA = "include/pto/costmodel/a2a3/formula_costmodel/formula_params.csv"
ARCH = "include/pto/costmodel/arch_config.hpp"
CUBE = "include/pto/costmodel/a2a3/cce_costmodel/cce_costmodel_cube.hpp"

# (instruction, width) -> (slope, bias, pto-isa file, the row read: dtype and cols)
VECTOR = {
    ("TMUL", "b16"): (0.0156, 43, FORMULA, "TMUL,fp16,656"),
    ("TMUL", "b32"): (0.0312, 43, FORMULA, "TMUL,fp32,336"),
    ("TDIVS", "b16"): (0.0703, 62, FORMULA, "TDIVS,fp16,784"),
    ("TDIVS", "b32"): (0.0781, 62, FORMULA, "TDIVS,fp32,304"),
    ("TADDS", "b16"): (0.0078, 42, FORMULA, "TADDS,fp16,1008"),
    ("TADDS", "b32"): (0.0156, 42, FORMULA, "TADDS,fp32,336"),
    ("TMULS", "b16"): (0.0079, 43, FORMULA, "TMULS,fp16,816"),
    ("TMULS", "b32"): (0.0156, 43, FORMULA, "TMULS,fp32,464"),
    ("TMINS", "b16"): (0.0078, 40, FORMULA, "TMINS,fp16,192"),
    ("TMINS", "b32"): (0.0156, 40, FORMULA, "TMINS,fp32,144"),
    ("TSUB", "b16"): (0.0156, 42, FORMULA, "TSUB,fp16,656"),
    ("TSUB", "b32"): (0.0312, 42, FORMULA, "TSUB,fp32,336"),
    ("TEXP", "b16"): (0.0314, 30.1, FORMULA, "TEXP,any,*"),
    ("TEXP", "b32"): (0.0314, 30.1, FORMULA, "TEXP,any,*"),
    ("TSQRT", "b16"): (0.0314, 31.1, FORMULA, "TSQRT,any,*"),
    ("TSQRT", "b32"): (0.0314, 31.1, FORMULA, "TSQRT,any,*"),
    ("TROWSUM", "b16"): (0.0213, 126, FORMULA, "TROWSUM,fp16,656"),
    ("TROWSUM", "b32"): (0.0419, 121, FORMULA, "TROWSUM,fp32,336"),
    ("TROWMAX", "b16"): (0.0224, 125, FORMULA, "TROWMAX,fp16,656"),
    ("TROWMAX", "b32"): (0.0418, 131, FORMULA, "TROWMAX,fp32,336"),
    ("TCOLSUM", "b16"): (0.0431, 34, FORMULA, "TCOLSUM,fp16,656"),
    ("TCOLSUM", "b32"): (0.0833, 34, FORMULA, "TCOLSUM,fp32,336"),
    ("TCOLMAX", "b16"): (0.1823, 2.3325, FORMULA, "TCOLMAX,fp16,192"),
    ("TCOLMAX", "b32"): (0.1571, 10, FORMULA, "TCOLMAX,fp32,128"),
    ("TROWEXPAND", "b16"): (0.0781, 37, FORMULA, "TROWEXPAND,fp16,192"),
    ("TROWEXPAND", "b32"): (0.1176, 34.5, FORMULA, "TROWEXPAND,fp32,128"),
}
# Rows of the table that are not pto-isa measurements of their own instruction, and what they are.
BORROWED = {
    "default": "TMUL",  # instructions pto-isa's formula table lacks cost as TMUL
    "TDIV": "TDIVS",  # pto-isa measured TDIVS only
}
# Per-core transfer bandwidths (GiB/s) and the clock: kA2A3ArchConfig in arch_config.hpp.
BANDWIDTH = {"gm_to_ub": 100.9, "gm_to_l1": 135.0, "ub_to_gm": 188.46, "l0c_to_gm": 70.0, "l1_to_l0a": 441.0,
             "l1_to_l0b": 220.5, "l1_to_bt": 32.0, "l0c_to_l1": 128.0, "ub_to_ub": 1024.0}
CLOCK_HZ = 1.85e9  # kMainFrequencyHz, arch_config.hpp
# mad(): kDefaultHeadCycles = 6, one cycle per 16 x (32 B of k) x 16 fractal, kCyclePerRepeatForFloat = 2
CUBE_HEAD, CUBE_FRACTAL = 6, {"b16": 1, "b32": 2}


@pytest.mark.parametrize("name", target_names())
def test_the_vector_rows_are_pto_isas(name):
    vector = load_target(name).timing.vector
    for (ins, width), (slope, bias, _file, _row) in VECTOR.items():
        if ins in vector:  # TMUL is the `default` row
            assert vector[ins][width] == (slope, bias), (ins, width)
    for ins, source in BORROWED.items():
        assert vector[ins] == {w: VECTOR[(source, w)][:2] for w in ("b16", "b32")}, ins
    unread = set(vector) - {ins for ins, _ in VECTOR} - set(BORROWED)
    assert not unread, f"rows with no pto-isa number here: {sorted(unread)}"


@pytest.mark.parametrize("name", target_names())
def test_the_transfers_clock_and_cube_are_pto_isas(name):
    t = load_target(name).timing
    assert t.gib_per_s == BANDWIDTH
    assert t.clock_hz == CLOCK_HZ
    assert t.cube_head_cycles == CUBE_HEAD
    assert {w: t.cube_fractal_cycles[w] for w in CUBE_FRACTAL} == CUBE_FRACTAL
