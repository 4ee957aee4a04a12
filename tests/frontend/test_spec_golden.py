"""Golden tests: each fixture spec in golden/spec/ and the exact diagnostics text it produces.

Set PTODSL_UPDATE_GOLDEN=1 to rewrite the .expected files after an intended change, then review
the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.diagnostics.render import render_all
from ptodsl.frontend.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden" / "spec"
FIXTURES = sorted(GOLDEN.glob("*.yaml"))
UPDATE = os.environ.get("PTODSL_UPDATE_GOLDEN") == "1"


def render_fixture(fixture: Path) -> str:
    diags = Diagnostics()
    # Relative to the repository root, so the expected text does not depend on the checkout's path.
    rel = fixture.relative_to(REPO).as_posix()
    try:
        load_spec(rel, diags)
    except CompileError as exc:
        return render_all(exc.diagnostics, color=False)
    return render_all(diags, color=False)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_golden(fixture: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    got = render_fixture(fixture)
    expected_file = fixture.with_suffix(".expected")
    if UPDATE:
        expected_file.write_text(got, encoding="utf-8")
    assert expected_file.exists(), f"no {expected_file.name}; run with PTODSL_UPDATE_GOLDEN=1"
    assert got == expected_file.read_text(encoding="utf-8")


def test_fixture_name_matches_its_first_code() -> None:
    """A fixture named eNNNN_* must report that code first, so the golden set stays meaningful."""
    for fixture in FIXTURES:
        m = re.match(r"e(\d{4})_", fixture.name)
        if m is None:
            continue
        expected = fixture.with_suffix(".expected").read_text(encoding="utf-8")
        first = re.search(r"^error\[(E\d{4})\]", expected, re.M)
        assert first is not None and first.group(1) == f"E{m.group(1)}", fixture.name


def test_every_spec_code_has_a_golden_fixture() -> None:
    """Here, or in tests/golden_codes/fixtures for the codes that need the kernels' signatures
    (a spec's `backward:` is checked against its own and its backward spec's .pto)."""
    codes_file = REPO / "ptodsl" / "diagnostics" / "codes" / "spec.yaml"
    codes = set(yaml.safe_load(codes_file.read_text(encoding="utf-8")))
    covered = set()
    compiled = (REPO / "tests" / "golden_codes" / "fixtures").glob("*/expected.txt")
    for expected in [*GOLDEN.glob("*.expected"), *compiled]:
        covered |= set(re.findall(r"^error\[(E\d{4})\]", expected.read_text(encoding="utf-8"), re.M))
    assert codes - covered == set()


def test_valid_fixture_is_silent() -> None:
    assert (GOLDEN / "valid.expected").read_text(encoding="utf-8") == ""
