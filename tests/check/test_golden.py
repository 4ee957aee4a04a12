"""Golden tests of the checker's rules: each folder in golden/ holds NAME.pto, NAME.yaml and the
exact diagnostics text (expected.txt) that compiling the spec produces.

A folder named after a code (``e0402_...``, ``n0507_...``) must report that code first; ``ok_...``
folders must compile silently. Set PTODSL_UPDATE_GOLDEN=1 to rewrite expected.txt after an
intended change, then review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.diagnostics.render import render_all
from ptodsl.driver import compile_spec

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
FIXTURES = sorted(p for p in GOLDEN.iterdir() if p.is_dir())
UPDATE = os.environ.get("PTODSL_UPDATE_GOLDEN") == "1"
FIRST_CODE = re.compile(r"^(?:error|warning|note)\[([EWN]\d{4})\]", re.M)


def render_fixture(folder: Path) -> str:
    diags = Diagnostics()
    # Relative to the repository root, so the expected text does not depend on the checkout's path.
    rel = (folder / f"{folder.name}.yaml").relative_to(REPO).as_posix()
    try:
        compile_spec(rel, diags)
    except CompileError as exc:
        return render_all(exc.diagnostics, color=False)
    return render_all(diags, color=False)


@pytest.mark.parametrize("folder", FIXTURES, ids=[f.name for f in FIXTURES])
def test_golden(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    got = render_fixture(folder)
    expected = folder / "expected.txt"
    if UPDATE:
        expected.write_text(got, encoding="utf-8")
    assert expected.exists(), f"no {expected.relative_to(REPO)}; run with PTODSL_UPDATE_GOLDEN=1"
    assert got == expected.read_text(encoding="utf-8")


@pytest.mark.parametrize("folder", FIXTURES, ids=[f.name for f in FIXTURES])
def test_fixture_is_complete_and_named_after_its_first_code(folder: Path) -> None:
    for suffix in (".pto", ".yaml"):
        assert (folder / f"{folder.name}{suffix}").is_file()
    text = (folder / "expected.txt").read_text(encoding="utf-8")
    if folder.name.startswith("ok_"):
        assert text == ""
        return
    m = re.match(r"([ewn]\d{4})_", folder.name)
    assert m is not None, f"name a fixture `<code>_what` or `ok_what`: {folder.name}"
    first = FIRST_CODE.search(text)
    assert first is not None and first.group(1) == m.group(1).upper(), folder.name


def test_every_rule_code_has_a_golden_fixture() -> None:
    rules = yaml.safe_load((REPO / "ptodsl" / "diagnostics" / "codes" / "rules.yaml").read_text("utf-8"))
    codes = {c for c, info in rules.items() if not info.get("retired")}
    retired = set(rules) - codes
    covered: set[str] = set()
    for folder in FIXTURES:
        covered |= set(FIRST_CODE.findall((folder / "expected.txt").read_text(encoding="utf-8")))
    assert codes - covered == set()
    assert not retired & covered, "a retired code is still reported"


def test_a_note_alone_does_not_fail_compilation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    diags = Diagnostics()
    compile_spec("tests/check/golden/n0507_unroll_one_added/n0507_unroll_one_added.yaml", diags)
    assert [d.code for d in diags] == ["N0507"]
