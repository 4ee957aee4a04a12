"""`ptodsl fmt`: idempotent, comment-preserving, and never a change of meaning."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ptodsl import cli, fmt
from ptodsl.diagnostics import Diagnostics
from ptodsl.frontend.parser import parse_module

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out
    return code, out.out, out.err


def golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.expected"
    if os.environ.get("PTODSL_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with PTODSL_UPDATE_GOLDEN=1"
    assert text == path.read_text()
SPECS = sorted((REPO / "specs").glob("*.pto"))

MESSY = """\


# header comment
kernel  m( x:T[R,H] ,gamma : T[ H ], y :out T[R,H],eps:f32=-1e-5 ):
  for r   in loop(R,name = "rows"):
      # inside
      xf=cast(x[r,:],f32)*-2   # trailing, aligned by hand



      d = xf-mean(xf,dim=-1,keepdim=True)
      if r>0 and not(r==1):
         y[r , 1:H//2] = cast(d*(  xf+eps ),   # in brackets
                              T)[ :, 1:H//2]
      else :
         pass
# end
"""

TIDY = """\
# header comment
kernel m(x: T[R, H], gamma: T[H], y: out T[R, H], eps: f32 = -1e-5):
    for r in loop(R, name="rows"):
        # inside
        xf = cast(x[r, :], f32) * -2   # trailing, aligned by hand

        d = xf - mean(xf, dim=-1, keepdim=True)
        if r > 0 and not (r == 1):
            y[r, 1:H // 2] = cast(d * (xf + eps),   # in brackets
                                 T)[:, 1:H // 2]
        else:
            pass
# end
"""


def formatted(text: str, path: str = "m.pto") -> str:
    diags = Diagnostics()
    new = fmt.format_source(text, path, diags)
    assert new is not None, [d.message for d in diags]
    return new


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_library_specs_are_formatted_and_formatting_is_idempotent(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    once = formatted(text, str(path))
    assert formatted(once, str(path)) == once
    assert once == text, f"run `ptodsl fmt {path.relative_to(REPO)}`"


def test_layout_normalised_and_comments_kept() -> None:
    assert formatted(MESSY) == TIDY
    assert formatted(TIDY) == TIDY
    assert fmt._comments(TIDY) == fmt._comments(MESSY)
    assert parse_module(TIDY, "a", Diagnostics()) == parse_module(MESSY, "b", Diagnostics())


def test_check_exit_code_and_write(capsys, tmp_path: Path) -> None:
    messy, tidy = tmp_path / "messy.pto", tmp_path / "tidy.pto"
    messy.write_text(MESSY)
    tidy.write_text(TIDY)
    assert run(capsys, "fmt", "--check", str(tidy))[0] == 0
    code, _, err = run(capsys, "fmt", "--check", "--color", "never", str(messy))
    assert code == 1 and "E0253" in err and messy.read_text() == MESSY  # --check writes nothing
    code, out, _ = run(capsys, "fmt", "--format", "json", str(messy))
    doc = json.loads(out)
    assert code == 0 and doc["changed"] == [str(messy)] and messy.read_text() == TIDY


def test_check_reports_first_changed_line(capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("scale.pto").write_text("kernel scale(x: f32[N], y: out f32[N]):\n    y[:] = x*2.0  \n")
    code, _, err = run(capsys, "fmt", "--check", "--color", "never", "scale.pto")
    assert code == 1
    golden("e0253_fmt_check_unformatted", err)


def test_unparsable_file_is_reported_and_left_alone(capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pto"
    text = "kernel f(x: f32[N], y: out f32[N]):\n    y[:] = x  +* 2\n"
    bad.write_text(text)
    code, _, err = run(capsys, "fmt", "--color", "never", str(bad))
    assert code == 1 and "error[E01" in err and bad.read_text() == text


def test_a_layout_that_changes_meaning_is_refused(capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The guard, not the layout rules, is under test: a layout that drops a sign must be caught.
    monkeypatch.chdir(tmp_path)
    text = "kernel neg(x: f32[N], y: out f32[N]):\n    y[:] = -x\n"
    Path("neg.pto").write_text(text)
    real = fmt.layout
    monkeypatch.setattr(fmt, "layout", lambda t: real(t).replace("-x", "x"))
    code, _, err = run(capsys, "fmt", "--color", "never", "neg.pto")
    assert code == 1 and Path("neg.pto").read_text() == text
    golden("e0252_fmt_would_change_meaning", err)
    monkeypatch.setattr(fmt, "layout", lambda t: real(t).replace("# c", "# d"))
    Path("neg.pto").write_text(text.replace("-x\n", "-x  # c\n"))
    assert run(capsys, "fmt", "neg.pto")[0] == 1


def test_fmt_is_a_command() -> None:
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert "fmt" in sub.choices


def test_a_folder_formats_every_pto_file_under_it(capsys, tmp_path: Path) -> None:
    """As check/test/gen take folders: every .pto file below, the YAML and other files untouched,
    and a summary worded like ruff's."""
    (tmp_path / "sub").mkdir()
    messy, tidy, nested = tmp_path / "messy.pto", tmp_path / "tidy.pto", tmp_path / "sub" / "deep.pto"
    messy.write_text(MESSY)
    tidy.write_text(TIDY)
    nested.write_text(MESSY)
    spec = tmp_path / "messy.yaml"
    spec.write_text("op:   m\n")  # not .pto: never formatted, never a syntax error
    code, out, err = run(capsys, "fmt", "--check", str(tmp_path))
    assert code == 1 and messy.read_text() == MESSY and "E0253" in err
    assert out.splitlines() == [f"would reformat {messy}", f"would reformat {nested}",
                                "2 files would be reformatted, 1 file already formatted"]
    code, out, _ = run(capsys, "fmt", str(tmp_path))
    assert code == 0 and out.splitlines() == [f"reformatted {messy}", f"reformatted {nested}",
                                              "2 files reformatted, 1 file left unchanged"]
    assert messy.read_text() == nested.read_text() == TIDY and spec.read_text() == "op:   m\n"
    code, out, _ = run(capsys, "fmt", "--format", "json", str(tmp_path))
    doc = json.loads(out)
    assert code == 0 and doc["changed"] == [] and doc["checked"] == doc["unchanged"] == 3 and doc["failed"] == 0


def test_the_library_folder_is_formatted(capsys) -> None:
    code, out, err = run(capsys, "fmt", "--check", "specs")
    assert code == 0, err
    assert out == f"{len(SPECS)} files already formatted\n"


def test_a_yaml_named_explicitly_is_refused_with_a_diagnostic(capsys, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("scale.yaml").write_text("op: scale\n")
    Path("scale.pto").write_text("kernel scale(x: f32[N], y: out f32[N]):\n    y[:] = x*2.0\n")
    code, out, err = run(capsys, "fmt", "--color", "never", "scale.yaml")
    assert code == 1 and Path("scale.yaml").read_text() == "op: scale\n"
    assert out == "1 file could not be formatted\n"
    golden("e0255_fmt_not_a_pto_file", err)
    Path("notes.txt").write_text("kernel\n")
    code, _, err = run(capsys, "fmt", "--color", "never", "notes.txt", "scale.pto")
    assert code == 1 and "E0255" in err and "`notes.txt` is not one" in err and "error[E01" not in err
    assert "x * 2.0" in Path("scale.pto").read_text()  # the other paths are still formatted
