"""The target's instruction rules applied to emitted kernels (``ptodsl check --target-rules``)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ptodsl.backends.cpp.rules import spec_violations
from ptodsl.cli import main
from ptodsl.diagnostics import Diagnostics
from ptodsl.diagnostics.render import render_all
from ptodsl.driver import compile_spec
from ptodsl.targets import load_target

REPO = Path(__file__).resolve().parents[3]
SPECS = sorted((REPO / "specs").glob("*.yaml"))
HERE = Path(__file__).resolve().parent


def _without(instr: str, dtype: str):
    """ascend910b with ``dtype`` struck from ``instr``'s rule."""
    t = load_target("ascend910b")
    rules = dict(t.vector_instructions)
    rules[instr] = dataclasses.replace(rules[instr], dtypes=rules[instr].dtypes - {dtype})
    return dataclasses.replace(t, vector_instructions=rules)


# That the whole library passes these rules is checked with the library itself:
# tests/cli/test_cli.py::test_check_library_passes runs `ptodsl check specs --target-rules`.


def test_a_rejected_dtype_is_reported_at_the_users_line() -> None:
    c = compile_spec("specs/add_one.yaml", Diagnostics())
    found = spec_violations(c, _without("TADDS", "f32"))
    assert [d.code for d in found] == ["E0810"]
    (d,) = found
    assert d.span is not None and d.span.file.endswith("add_one.pto")
    assert "TADDS does not take f32" in d.label and "add_one_k0" in d.notes[-1]
    expected = HERE / "e0810_tadds_without_f32.expected"
    got = render_all(found, color=False)
    if os.environ.get("PTODSL_UPDATE_GOLDEN") == "1":
        expected.write_text(got, encoding="utf-8")
    assert got == expected.read_text(encoding="utf-8")


def test_matmul_dtypes_come_from_cube_dtypes() -> None:
    c = compile_spec("specs/matmul.yaml", Diagnostics())
    t = load_target("ascend910b")
    assert spec_violations(c, t) == [] or all("operand" in d.label for d in spec_violations(c, t))
    narrow = dataclasses.replace(t, cube_dtypes=(("f32", "f32", "f32"),))
    labels = [d.label for d in spec_violations(c, narrow)]
    assert any("TMATMUL takes no (f32, f16, f16)" in label for label in labels)


def test_check_target_rules_flag(capsys) -> None:
    assert main(["check", "--target-rules", "specs/add_one.yaml"]) == 0
    assert "E0810" not in capsys.readouterr().err


def test_the_cube_stores_and_bias_moves_come_from_the_target() -> None:
    """TSTORE out of L0C converts only `cube_stores` pairs, TMOV into the bias table only
    `bias_moves` pairs, and TMATMUL_BIAS needs a Bias tile of the accumulator's dtype."""
    t = load_target("ascend910b")
    bias = compile_spec("specs/matmul_bias.yaml", Diagnostics())  # f16 out, an f16 bias widened to f32
    assert spec_violations(bias, t) == []
    no_f16_out = dataclasses.replace(t, cube_stores=tuple(p for p in t.cube_stores if p != ("f32", "f16")))
    labels = [d.label for d in spec_violations(bias, no_f16_out)]
    assert any("TSTORE does not write a f32 accumulator as f16" in label for label in labels), labels
    no_widening = dataclasses.replace(t, bias_moves=(("f32", "f32"), ("i32", "i32")))
    found = spec_violations(bias, no_widening)
    assert [d.code for d in found] and all(d.code == "E0810" for d in found)
    assert any("TMOV does not move a f16 row into a f32 bias table" in d.label for d in found)
    assert all(d.span is not None and d.span.file.endswith("matmul_bias.pto") for d in found)
    i8 = compile_spec("specs/matmul_i8.yaml", Diagnostics())
    no_int = dataclasses.replace(t, cube_dtypes=tuple(c for c in t.cube_dtypes if c[0] != "i32"))
    assert any("TMATMUL takes no (i32, i8, i8)" in d.label for d in spec_violations(i8, no_int))
