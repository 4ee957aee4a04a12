"""The memory plan's one on-chip capacity check (passes/memplan.py) covers what the C++ emitter
places above the plan, its instructions' scratch tiles: a kernel the emitter would refuse is
refused at compile time, so `ptodsl check` says it."""

from __future__ import annotations

import pytest

import ptodsl
from ptodsl.passes.memplan import scratch_bytes, trans_scratch
from ptodsl.targets import load_target

TARGET = load_target("ascend910b")

# A one-row tile of 4096 columns, transposed: TTRANS writes through a scratch tile of a row per
# source column (4096 rows of a block each), far more than its operands (found by the fuzzer's
# ub_pressure programs: the compile passed, the cpu emitter refused the kernel)
PERMUTE = ("kernel k(x: f32[B, M, N], y: out f32[N, B, M]):\n"
           "    y[:] = permute(x * x, [2, 0, 1])\n")


def test_a_transposes_scratch_is_its_own_shape():
    from ptodsl.ir import TileType

    t = TileType("ub", "f32", (1, 1, 4096), (1, 1, 4096))
    rows, cols = trans_scratch(t, TARGET.ub_block_bytes)
    assert (rows, cols) == (4096, 32)


def test_a_kernel_whose_scratch_does_not_fit_is_refused_at_compile_time(write_spec):
    path = write_spec("k", PERMUTE, "op: k\nschedule: {vec_tile: [1, 1, 4096]}\n")
    with pytest.raises(ptodsl.CompileError) as e:
        ptodsl.load(path)
    (d,) = [d for d in e.value.diagnostics if d.is_error]
    assert d.code == "E0611" and "scratch" in d.message and d.span.line == 2


def test_the_same_kernel_with_a_tile_that_fits_compiles(write_spec):
    op = ptodsl.load(write_spec("k", PERMUTE, "op: k\nschedule: {vec_tile: [1, 1, 256]}\n"))
    for f in op.compiled.stages["block"].funcs:
        if f.kind == "vector":
            assert f.attrs["ub_bytes"] + scratch_bytes(f.body, TARGET.ub_block_bytes) <= TARGET.ub_bytes
