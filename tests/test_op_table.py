"""The op table is complete: every language op is implemented everywhere it must be.

Adding an op is one row of ``ptodsl/ops.py`` plus what these tests ask for, and each of them fails
while a piece is missing: a C++ function for each instruction the row names (in ptodsl's CPU subset
of pto-isa), a composite's template built only from known ops, a library spec that uses the op
(whose golden cases then run it on sim and cpu against an independent numpy reference), a line in
LANGUAGE.md, and a torch equivalent of that spec for ``ptodsl bench``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ptodsl.backends.cpp.build import HEADER_DIR
from ptodsl.bench import torch_table
from ptodsl.driver import compile_spec
from ptodsl.frontend.spec import load_spec
from ptodsl.ops import BINARY_SPELLING, OPS, OpDef

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "specs").glob("*.yaml"))
HEADER = "\n".join(p.read_text(encoding="utf-8") for p in sorted((HEADER_DIR / "pto").rglob("*.hpp")))
LANGUAGE = (ROOT / "docs" / "LANGUAGE.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def library_ops() -> dict[str, str]:
    """Language op -> a library spec whose Tensor IR uses it."""
    used: dict[str, str] = {}
    for path in SPECS:
        for op in compile_spec(str(path)).after["tensorize"].walk():
            used.setdefault(op.name, path.name)
    return used


def template_ops(node) -> set[str]:
    if not isinstance(node, tuple):
        return set()
    name, *args = node
    if name == "let":
        return template_ops(args[1]) | template_ops(args[2])
    return {name}.union(*(template_ops(a) for a in args))


@pytest.mark.parametrize("od", OPS.values(), ids=list(OPS))
def test_every_instruction_has_a_cpu_implementation(od: OpDef):
    for ins in (od.pto, od.pto_scalar, od.row_pto, od.col_pto, od.acc_pto):
        if ins is not None:
            assert re.search(rf"\b{ins}\s*\(", HEADER), f"`{od.name}` emits {ins}, which the CPU subset lacks"


@pytest.mark.parametrize("od", [o for o in OPS.values() if o.expand is not None], ids=lambda o: o.name)
def test_every_composite_expands_into_known_ops(od: OpDef):
    unknown = template_ops(od.expand) - set(OPS)
    assert not unknown, f"`{od.name}` expands into unknown ops {unknown}"


@pytest.mark.parametrize("name", list(OPS))
def test_every_op_is_used_by_a_library_spec(library_ops, name):
    assert name in library_ops, f"no spec in specs/ uses `{name}`: add one with a reference and test cases"


@pytest.mark.parametrize("od", OPS.values(), ids=list(OPS))
def test_every_op_has_a_line_in_the_language_doc(od: OpDef):
    spelling = {v: k for k, v in BINARY_SPELLING.items()}.get(od.name)
    if od.name == "cmp":
        assert "comparisons" in LANGUAGE
    elif spelling is not None:
        assert f"`{spelling}" in LANGUAGE or f" {spelling} " in LANGUAGE
    else:
        assert re.search(rf"[` ]{od.name}[` (]", LANGUAGE), f"LANGUAGE.md does not mention `{od.name}`"


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_every_library_spec_has_a_torch_equivalent_for_bench(path):
    table = torch_table()
    if table is None:
        pytest.skip("torch is not installed")
    assert load_spec(str(path)).op in table, f"bench has no torch equivalent of {path.name}"


def test_an_inconsistent_row_is_rejected():
    with pytest.raises(ValueError, match="reduction needs"):
        OpDef("prod", "reduce", 1, "product over one axis")
    with pytest.raises(ValueError, match="takes 2 operands"):
        OpDef("hypot", "binary", 1, "sqrt(x^2 + y^2)", "THYPOT")
