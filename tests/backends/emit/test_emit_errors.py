"""What the emitter cannot express is a diagnostic naming it (E0800), never a crash; scratch tiles
that would not fit in UB are E0611."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl.backends.cpp.emit import emit_variant
from ptodsl.diagnostics import CompileError
from ptodsl.driver import compile_spec
from ptodsl.ir import TileType


def _first(compiled, kernel: str, op_name: str):
    return next(op for op in compiled.stages["block"].func(kernel).walk() if op.name == op_name)


def _code(exc: CompileError) -> str:
    return exc.diagnostics[0].code


def test_an_unknown_tile_op_is_e0800_naming_it():
    # (sigmoid keeps a plain tile.exp; softmax's is fused into TROWEXPANDEXPDIF)
    compiled = compile_spec("specs/sigmoid.yaml")
    _first(compiled, "sigmoid_f32_k0", "tile.exp").name = "tile.erf"
    with pytest.raises(CompileError) as info:
        emit_variant(compiled, 0)
    assert _code(info.value) == "E0800"
    diag = info.value.diagnostics[0]
    assert "tile.erf" in diag.message and diag.span is not None and diag.span.file.endswith("sigmoid.pto")


def test_tiles_the_emitter_cannot_map_are_e0800():
    compiled = compile_spec("specs/softmax.yaml")
    kernel = compiled.stages["block"].func("softmax_f32_k0")
    op = _first(compiled, "softmax_f32_k0", "tile.amax")
    op.attrs["axis"] = 0
    src = op.operands[1]
    alloc = next(a for a in kernel.walk() if a.name == "tile.alloc" and a.result is src)
    alloc.attrs.update(rows=2, cols=512)  # the same 4 KiB seen as a [2, 1, 512] tile
    src.type = TileType("ub", "f32", (2, 1, 512), (2, 1, 512))
    with pytest.raises(CompileError) as info:
        emit_variant(compiled, 0)
    assert _code(info.value) == "E0800" and "rank-3 tile" in info.value.diagnostics[0].message


def test_an_unknown_control_op_is_e0800():
    compiled = compile_spec("specs/softmax.yaml")
    _first(compiled, "softmax_f32", "view").name = "gather"
    with pytest.raises(CompileError) as info:
        emit_variant(compiled, 0)
    assert _code(info.value) == "E0800" and "gather" in info.value.diagnostics[0].message


def test_scratch_beyond_ub_is_e0611():
    compiled = compile_spec("specs/softmax.yaml")
    kernel = compiled.stages["block"].func("softmax_f32_k0")
    kernel.attrs["ub_bytes"] = compiled.target.ub_bytes - 64  # TROWMAX's 4 KiB scratch cannot fit
    with pytest.raises(CompileError) as info:
        emit_variant(compiled, 0)
    diag = info.value.diagnostics[0]
    assert diag.code == "E0611" and "softmax_f32_k0" in diag.message and diag.span is not None


def test_the_cpu_backend_reports_instead_of_crashing(monkeypatch):
    op = ptodsl.load("specs/sigmoid.yaml")
    _first(op.compiled, "sigmoid_f32_k0", "tile.exp").name = "tile.erf"
    with pytest.raises(CompileError) as info:
        op(np.zeros((2, 1024), np.float32), backend="cpu")
    assert _code(info.value) == "E0800"


def test_a_mask_stored_to_a_bool_output_is_e0800(write_spec):
    pto = "kernel positive(x: f32[M, N], y: out bool[M, N]):\n    y[:] = x > 0.0\n"
    compiled = compile_spec(write_spec("positive", pto, "op: positive\nschedule:\n  vec_tile: [8, 256]\n"))
    with pytest.raises(CompileError) as info:
        emit_variant(compiled, 0)
    diag = info.value.diagnostics[0]
    assert diag.code == "E0800" and "bool tensor `y`" in diag.message


def test_a_mask_through_a_workspace_is_fine():
    # where_relu stores the comparison to a workspace and selects with it after loading it back
    emitted = emit_variant(compile_spec("specs/where_relu.yaml"), 0)
    kernel = emitted.sources[f"{emitted.kernels[0]}.cpp"]
    assert "TCMPS(" in kernel and "TSEL(" in kernel


def test_a_top_level_workspace_sized_by_a_read_that_a_later_loop_reads_is_e0800(write_spec):
    # It cannot be declared before the read that sizes it, and inside its implicit loop(1) it
    # would be gone by the later loop: E0800 (it was a C++ build failure, E0901)
    pto = ("kernel k(x: f32[M, N], lens: i32[1], y: out f32[M, N]):\n"
           "    n = lens[0]\n"
           "    t = x[0:n, :] * 2.0\n"
           "    for r in loop(2, name=\"l\"):\n"
           "        y[0:n, :] = t + 1.0\n")
    compiled = compile_spec(write_spec("k", pto, "op: k\n"))
    with pytest.raises(CompileError) as info:
        emit_variant(compiled, 0)
    assert _code(info.value) == "E0800" and "(`%t`) that a later loop reads" in info.value.diagnostics[0].message
