"""Golden tests of rendered syntax errors.

Each ``golden/parse/NAME.pto`` is parsed with :func:`parse_file` (from the repository root, with a
relative path, so the output does not depend on where the checkout lives) and the rendered
diagnostics are compared with ``NAME.expected``. Set ``PTODSL_UPDATE_GOLDEN=1`` to rewrite the
expected files instead, then review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.diagnostics.render import render_all
from ptodsl.frontend.parser import parse_file, parse_module

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden" / "parse"
CASES = sorted(GOLDEN.glob("*.pto"))
UPDATE = os.environ.get("PTODSL_UPDATE_GOLDEN") == "1"


def _render(case: Path) -> str:
    try:
        parse_file(case.relative_to(ROOT).as_posix())
    except CompileError as err:
        return render_all(err.diagnostics, color=False)
    return ""


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_golden(case: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(ROOT)
    got = _render(case)
    assert got, f"{case.name} parses without errors; a golden case must fail"
    expected = case.with_suffix(".expected")
    if UPDATE:
        expected.write_text(got, encoding="utf-8")
        return
    assert expected.exists(), f"missing {expected.name}; run with PTODSL_UPDATE_GOLDEN=1 to create it"
    assert got == expected.read_text(encoding="utf-8")


def test_golden_case_names_match_their_first_code():
    """A case named eNNNN_... must report error ENNNN first, so the names stay honest."""
    for case in CASES:
        expected = case.with_suffix(".expected")
        if not expected.exists():
            continue
        first = re.search(r"error\[(E\d{4})\]", expected.read_text(encoding="utf-8"))
        assert first and first.group(1).lower() == case.stem.split("_", 1)[0], case.name


def test_every_syntax_code_has_a_golden_case():
    registered = yaml.safe_load((ROOT / "ptodsl" / "diagnostics" / "codes" / "syntax.yaml").read_text("utf-8"))
    covered = set()
    for expected in GOLDEN.glob("*.expected"):
        covered |= set(re.findall(r"error\[(E\d{4})\]", expected.read_text(encoding="utf-8")))
    assert set(registered) <= covered


def test_syntax_codes_are_in_range_and_documented():
    registered = yaml.safe_load((ROOT / "ptodsl" / "diagnostics" / "codes" / "syntax.yaml").read_text("utf-8"))
    for code, info in registered.items():
        assert re.fullmatch(r"E01[0-2]\d", code), code
        assert info["title"].strip() and len(info["explain"].split()) >= 20, code


def test_missing_file_is_reported_without_a_span(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(CompileError) as err:
        parse_file("tests/frontend/golden/parse/does_not_exist.pto")
    text = render_all(err.value.diagnostics, color=False)
    assert text.startswith("error[E0118]: cannot read tests/frontend/golden/parse/does_not_exist.pto: no such file\n")
    assert "= help: " in text


@pytest.mark.parametrize("source, code, line, col", [
    ("kernel k(x: f32[M]):\n    y = f(x\n    z = 1\n", "E0102", 2, 10),
    ("kernel k(x: f32[M]):\n    y = f(x,\n          2\n", "E0102", 2, 10),
    ("kernel k(x: f32[M]):\n    y = [f(x)\n", "E0102", 2, 9),
    ("kernel k(x: f32[M]):\n    y = f(x]\n", "E0103", 2, 12),
    ("kernel k(x: f32[M]):\n    y = x]\n", "E0103", 2, 10),
    ("kernel k(x: f32[M]):\n    y = f(x 1)\n", "E0100", 2, 13),
    ("kernel k(x: f32[M]):\n    y = x +\n", "E0101", 2, 12),
    ("kernel k(x: f32[M]):\n    y = x +  # comment\n\n# another\n", "E0101", 2, 12),
    ("kernel k(x: f32[M]):\n", "E0106", 1, 21),
    ("kernel k(x: f32[M]):\n    if x:\nkernel j():\n    pass\n", "E0106", 3, 1),
    ("kernel k(x: f32[M]):\n    y = 1\n   z = 2\n", "E0105", 3, 4),
    ("kernel k(x: f32[M]):\n    y = 1\n\tz = 2\n", "E0107", 3, 1),
    ("kernel k(x: f32[M]):\n    y = 'abc\n", "E0109", 2, 9),
    ("kernel k(x: f32[M]):\n    y = x ; z = 1\n", "E0108", 2, 11),
    ("kernel k(x: f32[M]):\n    for i, in loop(M):\n        pass\n", "E0100", 2, 12),
])
def test_error_positions(source: str, code: str, line: int, col: int):
    diags = Diagnostics()
    assert parse_module(source, "pos.pto", diags) is None
    first = diags.errors[0]
    assert (first.code, first.span.line, first.span.col) == (code, line, col), render_all(diags)


def test_unclosed_bracket_points_at_the_opener_and_where_parsing_stopped():
    diags = Diagnostics()
    parse_module("kernel k(x: f32[M]):\n    y = exp(x\n    for i in loop(M):\n        pass\n", "open.pto", diags)
    (diag,) = diags.errors
    assert diag.code == "E0102" and diag.message == 'unclosed "("'
    assert (diag.span.line, diag.span.col) == (2, 12)
    (where,) = diag.secondary
    assert (where.span.line, where.span.col) == (3, 5)
    assert diag.help == 'close it with ")"'


def test_no_lark_wording_in_messages():
    diags = Diagnostics()
    for i, source in enumerate(["kernel k(:\n", "kernel\n", "kernel k():\n  x = = 1\n", "(((\n", "]\n", "kernel k():\n"]):
        parse_module(source, f"lark{i}.pto", diags)
    text = render_all(diags)
    for word in ("Token", "Expected one of", "__ANON", "$END", "_NL", "LPAR", "RSQB", "Previous tokens"):
        assert word not in text
