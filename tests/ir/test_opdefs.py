"""The IR op table (``ptodsl/ir/opdefs.py``) is the one list of IR ops.

Every op the compiler builds is defined there (a typo in a pass would otherwise produce an op that
only the verifier, at run time, would reject), and every structural op it defines is produced by
some library spec, so the golden cases run it through the simulator and the emitted C++."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ptodsl.driver import compile_spec
from ptodsl.ir.opdefs import IR_OPS, Arg, IROp
from ptodsl.ops import OPS

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {p: p.read_text(encoding="utf-8") for p in sorted((ROOT / "ptodsl").rglob("*.py"))}
# `Op("name", ...)` constructions and literal "tile.x"/"sync.x" names anywhere in the compiler.
BUILT = re.compile(r'\bOp\(\s*"([a-z_.]+)"|"((?:tile|sync)\.[a-z_]+)"')
# Registered ops no library spec produces, each with the tests that run it on sim and cpu instead.
NOT_IN_LIBRARY: dict[str, str] = {
    "print": "library kernels do not print; tests/check/test_scalar_semantics.py runs prints on every backend",
    "guard": "library offsets are provably in bounds; tests/backends/emit/test_write_rules.py "
             "(dynamic offsets outside the tensor) and the E0730 golden run guards",
    "fill": "tests/backends/emit/test_write_rules.py runs scalar broadcast writes on sim and cpu",
    "broadcast": "tests/backends/emit/test_write_rules.py runs broadcast writes on sim and cpu",
}
# The fused instructions no library kernel happens to need (the library's own are selected: softmax's
# rowexpand_expdif and rowexpand_div...): tests/passes/test_fusedops.py selects each from a kernel
# of its own and runs it against its unfused form on sim and cpu.
NOT_IN_LIBRARY |= {name: "tests/passes/test_fusedops.py selects it and runs it against the unfused form"
                   for name in ("tile.rowexpand_add", "tile.rowexpand_maximum", "tile.rowexpand_minimum",
                                "tile.colexpand_maximum", "tile.colexpand_expdif", "tile.muladddst",
                                "tile.fusedmuladd")}


def test_every_op_the_compiler_builds_is_defined():
    unknown = {}
    for path, text in SOURCES.items():
        for m in BUILT.finditer(text):
            name = m.group(1) or m.group(2)
            if name not in IR_OPS and name != "tile.hpp":  # the CPU header's file name, not an op
                unknown.setdefault(name, path.relative_to(ROOT))
    assert not unknown, f"ops built but not in ptodsl/ir/opdefs.py: {unknown}"


@pytest.fixture(scope="module")
def library_ir_ops() -> set[str]:
    used: set[str] = set()
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        c = compile_spec(path.relative_to(ROOT).as_posix())  # as the other tests name it: compiled once
        for module in c.after.values():
            used |= {op.name for op in module.walk()}
    return used


@pytest.mark.parametrize("d", [d for d in IR_OPS.values() if d.name.removeprefix("tile.") not in OPS],
                         ids=lambda d: d.name)
def test_every_structural_op_runs_in_the_library(d: IROp, library_ir_ops: set[str]):
    if d.name in NOT_IN_LIBRARY:
        pytest.skip(NOT_IN_LIBRARY[d.name])
    assert d.name in library_ir_ops, f"no library spec produces `{d.name}`: its sim and C++ meaning are untested"


def test_a_row_that_contradicts_itself_is_refused():
    with pytest.raises(ValueError, match="at most one destination"):
        IROp("tile.bad", ("tile",), "unary", (Arg("a", "tile", "dst"), Arg("b", "tile", "acc")))
    with pytest.raises(ValueError, match="only the last operand may repeat"):
        IROp("tile.bad", ("tile",), "unary", (Arg("a", "tile", many=True), Arg("b", "tile")))
    with pytest.raises(ValueError, match="follows an optional one"):
        IROp("tile.bad", ("tile",), "unary", (Arg("a", "tile", optional=True), Arg("b", "tile")))
    with pytest.raises(ValueError, match="unknown levels"):
        IROp("tile.bad", ("tiles",), "unary")
