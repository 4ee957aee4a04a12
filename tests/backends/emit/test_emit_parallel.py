"""Which control-program loops run their iterations on several cores: only the ones the parallel pass
proved independent (``parallel = 1``, ptodsl/passes/parallel.py)."""

from __future__ import annotations

import pytest

from ptodsl.backends.cpp.control import openmp_loops
from ptodsl.backends.cpp.emit import control_of, emit_variant
from ptodsl.driver import compile_spec

PRAGMA = "#pragma omp parallel for"


def _openmp_loops(compiled, index: int) -> list:
    return openmp_loops(control_of(compiled, index), {f.name: f for f in compiled.stages["block"].funcs})


def _parallel(path: str, index: int = 0) -> tuple[list[str], str]:
    compiled = compile_spec(path)
    loops = _openmp_loops(compiled, index)
    emitted = emit_variant(compiled, index)
    return [op.attrs["name"] for op in loops], emitted.sources[f"{emitted.entry}.cpp"]


@pytest.mark.parametrize("path, launches", [("specs/softmax.yaml", 1), ("specs/softmax_long.yaml", 2),
                                            ("specs/rmsnorm.yaml", 2), ("specs/seq_add.yaml", 1),
                                            ("specs/add_bcast.yaml", 1)])
def test_rows_written_by_their_own_iteration_run_in_parallel(path: str, launches: int):
    # the row loop runs inside its kernel as blocks (passes/blocks.py), which the control program
    # shares out over the threads (a row loop with a one-pass version, passes/tile_fit.py, is two
    # such kernels, one of them launched per call)
    names, program = _parallel(path)
    assert names == [] and program.count(PRAGMA) == launches
    # the pragma sits right above the loop over the blocks
    lines = program.splitlines()
    at = next(i for i, line in enumerate(lines) if PRAGMA in line)
    assert lines[at + 1].lstrip().startswith("for (int64_t ") and "_block < " in lines[at + 1]


def test_softmax_shares_out_the_blocks_of_its_batch_loop():
    names, program = _parallel("specs/softmax.yaml")
    assert names == []
    assert (f"{PRAGMA} schedule(static)\n        for (int64_t softmax_f32_k0_block = 0; softmax_f32_k0_block < "
            "softmax_f32_k0_blocks; ++softmax_f32_k0_block) {") in program
    assert "softmax_f32_k0(x, y, B, softmax_f32_k0_block, softmax_f32_k0_blocks);" in program


def _control_pragmas(program: str) -> list[str]:
    """The loops of the control program under an OpenMP pragma, other than a launch's blocks."""
    lines = program.splitlines()
    return [lines[i + 1] for i, line in enumerate(lines) if PRAGMA in line and "_block = 0;" not in lines[i + 1]]


def test_a_loop_carrying_an_accumulator_stays_sequential(write_spec):
    # every row multiplies into one workspace allocated before the loop (a product is not split
    # into partial accumulations, passes/splitred.py)
    pto = ("kernel prod(x: f32[B, N], y: out f32[1, N]):\n"
           "    acc = ones([1, N], f32)\n"
           "    for b in loop(B, name=\"b_loop\"):\n"
           "        acc[:] = acc * x[b, :]\n"
           "    y[:] = acc\n")
    names, program = _parallel(write_spec("prod", pto, "op: prod\nschedule:\n  vec_tile: [1, 64]\n"))
    assert names == [] and _control_pragmas(program) == []


@pytest.mark.slow  # attention's cpu kernels emitted: about 11 s
def test_attention_kv_loop_stays_sequential():
    # the running max, sum and accumulator (m, l, acc) are read and written by every KV block
    compiled = compile_spec("specs/online_softmax_attn.yaml")
    for index in range(len(compiled.checked)):
        assert _openmp_loops(compiled, index) == []
        program = emit_variant(compiled, index).sources[f"{compiled.stages['tensor'].funcs[index].name}.cpp"]
        assert _control_pragmas(program) == []


def test_single_launch_programs_have_nothing_to_share_out():
    # matmul's control program is one implicit iteration; its grid loops live in the kernel
    names, _ = _parallel("specs/matmul.yaml")
    assert names == []


def test_overlapping_writes_stay_sequential(write_spec):
    # every iteration writes rows b and b + 1: neighbours overlap
    pto = ("kernel pairs(x: f32[B, N], y: out f32[B, N]):\n"
           "    for b in loop(B - 1, name=\"b_loop\"):\n"
           "        y[b:b + 2, :] = x[b:b + 2, :] * 2.0\n")
    names, program = _parallel(write_spec("pairs", pto, "op: pairs\nschedule:\n  vec_tile: [2, 64]\n"))
    assert names == [] and PRAGMA not in program


def test_reading_what_other_iterations_write_stays_sequential(write_spec):
    # iteration b reads row b + 1, which iteration b + 1 overwrites: in parallel, b could see the
    # new row. The writes alone (one row each) are disjoint, so only the read decides.
    pto = ("kernel shift(x: f32[B, N], y: inout f32[B, N]):\n"
           "    for b in loop(B - 1, name=\"b_loop\"):\n"
           "        y[b, :] = y[b + 1, :] + x[b, :]\n")
    path = write_spec("shift", pto, "op: shift\nschedule:\n  vec_tile: [1, 64]\n")
    names, program = _parallel(path)
    assert names == [] and PRAGMA not in program


def test_a_written_tensor_read_only_in_each_iterations_own_row_is_shared_out(write_spec):
    # Each iteration reads and writes only its own row: the proof compares the read and written
    # bands (ptodsl/passes/parallel.py), so the loop runs as blocks, shared out over the threads
    pto = ("kernel accumulate(x: f32[B, N], y: inout f32[B, N]):\n"
           "    for b in loop(B, name=\"b_loop\"):\n"
           "        y[b, :] = y[b, :] + x[b, :]\n")
    path = write_spec("accumulate", pto, "op: accumulate\nschedule:\n  vec_tile: [1, 64]\n")
    names, program = _parallel(path)
    assert names == [] and program.count(PRAGMA) == 1
