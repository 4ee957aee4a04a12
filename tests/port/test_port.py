"""`ptodsl port`: every construct the translator handles and every diagnostic it gives, each with
a golden output (tests/port/cases/NAME.py in, tests/port/expected/NAME/ and NAME.expected out;
PTODSL_UPDATE_GOLDEN=1 rewrites them), and the translated specs checked and run."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from ptodsl import cli
from ptodsl.diagnostics import Diagnostics
from ptodsl.diagnostics.render import render_all
from ptodsl.driver import compile_spec
from ptodsl.ops import OPS, STRUCTURE_BUILTINS, OpDef
from ptodsl.port import mapping, port_source
from ptodsl.port.emit import files_of

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CASES = sorted(p.stem for p in (HERE / "cases").glob("*.py"))
EXPECTED = HERE / "expected"
UPDATE = os.environ.get("PTODSL_UPDATE_GOLDEN") == "1"
DIAG = re.compile(r"e\d{4}_")


def golden(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path.relative_to(REPO)}: run with PTODSL_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{path.relative_to(REPO)} differs"


def ported(name: str):
    rel = f"tests/port/cases/{name}.py"
    return port_source((REPO / rel).read_text(encoding="utf-8"), rel)


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # diagnostics render the Python lines by their relative path


@pytest.mark.parametrize("name", CASES)
def test_golden(name: str) -> None:
    result = ported(name)
    text = render_all(result.diags.items, color=False)
    if DIAG.match(name):  # a diagnostic case: its code comes first
        assert result.diags.items and result.diags.items[0].code == name[:5].upper()
        golden(EXPECTED / f"{name}.expected", text)
    else:
        assert (not result.diags.items) == (not name.startswith("partial_")), text
        if text:
            golden(EXPECTED / f"{name}.expected", text)
    if result.ok or name.startswith("partial_"):
        files = files_of(result)
        for fname, content in files.items():
            golden(EXPECTED / name / fname, content)
        if not UPDATE:
            assert sorted(p.name for p in (EXPECTED / name).iterdir()) == sorted(files)


def write(name: str, dest: Path, *args: str) -> int:
    return cli.main(["port", f"tests/port/cases/{name}.py", "-o", str(dest), "-q", *args])


def check_text(folder: Path, yaml_name: str, capsys) -> str:
    """What `ptodsl check` prints for the spec, run in its folder (so paths are relative)."""
    cwd = os.getcwd()
    os.chdir(folder)
    capsys.readouterr()
    try:
        code = cli.main(["check", yaml_name, "--color", "never", "-q"])
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err
    return err if code else ""


@pytest.mark.parametrize("name", [c for c in CASES if not DIAG.match(c) and not c.startswith(("partial_", "traps"))])
def test_translations_check_clean(name: str, tmp_path: Path) -> None:
    assert write(name, tmp_path) == 0
    for yml in sorted(tmp_path.glob("*.yaml")):
        diags = Diagnostics()
        compile_spec(str(yml), diags)
        assert not diags.has_errors, render_all(diags.items)


def test_rebound_output_is_e0400_with_the_pypto_line(tmp_path: Path, capsys) -> None:
    assert write("traps", tmp_path) == 0
    golden(EXPECTED / "traps.check.expected", check_text(tmp_path, "add_one.yaml", capsys))
    assert check_text(tmp_path, "first_rows.yaml", capsys) == ""


def test_partial_writes_todo_lines_that_check_rejects(tmp_path: Path, capsys) -> None:
    assert write("partial_unknown_op", tmp_path) == 1  # nothing without --partial
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    assert write("partial_unknown_op", tmp_path, "--partial") == 1
    text = (tmp_path / "half_.pto").read_text()
    assert "# TODO(port): t = pypto.cumsum(t, 1)" in text
    golden(EXPECTED / "partial_unknown_op.check.expected", check_text(tmp_path, "half_.yaml", capsys))


REFS = {
    "elementwise": ("scale_clip", "import numpy as np\n\ndef scale_clip(x, lo, *, alpha):\n"
                                  "    t = np.exp(x * alpha + 1.0) + x\n    return np.minimum(np.maximum(t, lo), 4.0)\n"),
    "dynamic_loop": ("rows_plus", "def rows_plus(x):\n    return x + 1.0\n"),
    "conditions": ("edges", "def edges(x):\n    y = x * 3.0 * 2.0\n    y[:3] = x[:3] * 3.0\n"
                            "    y[0] = x[0] * 3.0 + 1.0\n    y[-1] = x[-1] * 3.0 - 1.0\n    return y\n"),
    "composites": ("soft", "import numpy as np\nimport math\n\ndef soft(x):\n"
                           "    e = np.exp(x - x.max(-1, keepdims=True))\n"
                           "    return e / e.sum(-1, keepdims=True), 1.0 - np.vectorize(math.erf)(x)\n"),
    "helpers": ("norm", "import numpy as np\n\ndef norm(x):\n    c = x - x.mean(-1, keepdims=True)\n"
                        "    return c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-6)\n"),
    # float64 products: the f32 kernel's 512 roundings must fit the atol the port wrote
    "long_k": ("scores", "import numpy as np\n\ndef scores(q, keys):\n"
                        "    return q.astype(np.float64) @ keys.astype(np.float64).T\n"),
    "wrapped": ("halve", "def halve(x):\n    return x * 0.5\n"),  # the size from the tensor the file makes
    "no_call": ("shift", "def shift(x):\n    return x - 1.0\n"),  # the port's default size
    # top-level work read by the loop only through a reshape and a transpose of it
    # a kernel inside a wrapper: the axis and keepdim of the wrapper's first call
    "enclosing": ("peak", "def peak(t):\n    return t.max(axis=1, keepdims=True) * 2.0\n"),
    # dims from variables the port cannot evaluate: a symbol sized by the call
    "unknown_dims": ("scaled", "def scaled(x, w, bias):\n    return x * 3.0 + w.T + bias\n"),
    "clamp_min": ("chunks", "import numpy as np\n\ndef chunks(x):\n    return np.abs(x) * 0.25\n"),
    "transpose_axes": ("flip", "def flip(x):\n    return x.T + 1.0\n"),  # axes from int parameters
    "heads": ("heads", "import numpy as np\n\ndef heads(x, w):\n    b, s, _ = x.shape\n"
                       "    return np.swapaxes((x @ w).reshape(b, s, 4, 16), 1, 2) * 2.0\n"),
}


ON_CPU = ("conditions", "dynamic_loop", "long_k", "wrapped", "heads", "enclosing", "unknown_dims", "transpose_axes",
          "clamp_min")
RUNS = [(name, "sim") for name in sorted(REFS)] + [  # a few specs on cpu keep the suite fast
    pytest.param(name, "cpu", marks=pytest.mark.cpu) for name in ON_CPU]


@pytest.mark.parametrize(("name", "backend"), RUNS)
def test_translations_compute_right(name: str, backend: str, tmp_path: Path) -> None:
    assert write(name, tmp_path, "--function", {"dynamic_loop": "rows_plus"}.get(name, REFS[name][0])) == 0
    op, ref = REFS[name]
    (tmp_path / f"{op}_ref.py").write_text(ref)
    assert cli.main(["test", str(tmp_path), "--backend", backend, "-q"]) == 0


def test_output_is_deterministic_and_keeps_a_written_reference(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert write("dynamic_loop", a) == 0 and write("dynamic_loop", b) == 0
    files = sorted(p.name for p in a.iterdir())
    assert files == sorted(p.name for p in b.iterdir())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    (a / "rows_plus_ref.py").write_text("def rows_plus(x):\n    return x + 1.0\n")
    assert write("dynamic_loop", a) == 0
    assert (a / "rows_plus_ref.py").read_text().startswith("def rows_plus(x)")
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files if not f.endswith("_ref.py"))


def test_a_failed_run_leaves_the_output_as_it_was(tmp_path: Path) -> None:
    assert write("elementwise", tmp_path) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert write("e1002_unknown_op", tmp_path) == 1
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert not [p for p in tmp_path.parent.iterdir() if p.name.startswith(".ptodsl-port-")]


def test_an_output_that_is_a_file_is_e1009(tmp_path: Path, capsys) -> None:
    target = tmp_path / "taken"
    target.write_text("not a folder")
    assert cli.main(["port", "tests/port/cases/helpers.py", "-o", str(target), "--color", "never"]) == 1
    err = capsys.readouterr().err.replace(str(tmp_path), "<tmp>")
    golden(EXPECTED / "e1009_output_is_a_file.expected", err)
    assert target.read_text() == "not a folder"


def test_json_document(tmp_path: Path, capsys) -> None:
    assert cli.main(["port", "tests/port/cases/matmul.py", "-o", str(tmp_path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "port" and doc["exit_code"] == 0 and doc["diagnostics"] == []
    assert [k["name"] for k in doc["kernels"]] == ["proj", "reduce_cast"]
    assert "proj.pto" in doc["written"] and "reduce_cast.portmap.json" in doc["written"]
    assert cli.main(["port", "tests/port/cases/e1003_while.py", "-o", str(tmp_path / "x"), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [d["code"] for d in doc["diagnostics"]] == ["E1003"] and doc["written"] == []


def test_every_ptodsl_op_maps_by_default() -> None:
    for name in [*OPS, *STRUCTURE_BUILTINS]:
        if name not in mapping.NOT_DEFAULT:
            assert mapping.form_of(name) is not None, name


def test_a_new_op_needs_no_table_row(monkeypatch) -> None:
    src = ("import pypto\n\n@pypto.frontend.jit\ndef k(x: pypto.Tensor([8, 64], pypto.DT_FP32),"
           " y: pypto.Tensor([8, 64], pypto.DT_FP32)):\n    y[:] = pypto.softplus(x)\n")
    assert not port_source(src, "k.py").ok
    monkeypatch.setitem(OPS, "softplus", OpDef("softplus", "unary", 1, "log(1 + exp(x))", "TSOFTPLUS",
                                               sim=lambda x: x))
    result = port_source(src, "k.py")
    assert result.ok and "y[:] = softplus(x)" in files_of(result)["k.pto"]


def test_the_source_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    src = (f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\nimport pypto\n\n"
           "@pypto.frontend.jit\ndef k(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32)):\n"
           "    y[:] = x\n")
    assert port_source(src, "k.py").ok
    assert not marker.exists()


def test_function_selects_one_kernel(tmp_path: Path) -> None:
    assert write("matmul", tmp_path, "--function", "reduce_cast") == 0
    assert sorted(p.name for p in tmp_path.glob("*.pto")) == ["reduce_cast.pto"]
    assert write("matmul", tmp_path / "none", "--function", "nope") == 1


def test_portmap_note_needs_the_line_unedited(tmp_path: Path, capsys) -> None:
    assert write("traps", tmp_path) == 0
    pto = tmp_path / "add_one.pto"
    pto.write_text(pto.read_text().replace("  # from traps.py:9", ""))
    text = check_text(tmp_path, "add_one.yaml", capsys)
    assert "E0400" in text and "ported from" not in text
    shutil.rmtree(tmp_path)


def _blocks(doc: str, after: str) -> list[str]:
    text = (REPO / doc).read_text(encoding="utf-8")
    text = text[text.index(after):]
    return re.findall(r"```(?:python|yaml)\n(.*?)```", text, re.S)


def test_the_readme_example_is_what_port_writes() -> None:
    pypto_src, pto = _blocks("README.md", "## Porting a PyPTO kernel")[:2]
    result = port_source("import pypto\n" + pypto_src, "kernels.py")
    assert result.ok
    written = files_of(result)
    assert pto in written["add_one.pto"]
    assert "vec_tile: [8, 64]" in written["add_one.yaml"]


def test_the_porting_doc_example_is_the_golden_output() -> None:
    blocks = _blocks("docs/PORTING.md", "## A kernel and its translation")
    pto, yml = blocks[1], blocks[2]
    assert pto in (EXPECTED / "dynamic_loop" / "rows_plus.pto").read_text()
    assert yml in (EXPECTED / "dynamic_loop" / "rows_plus.yaml").read_text()


def test_the_porting_doc_lists_every_table_row() -> None:
    doc = (REPO / "docs" / "PORTING.md").read_text(encoding="utf-8")
    missing = [name for name in mapping.TABLE if f"`{name}" not in doc]
    assert not missing, f"rows of ptodsl/port/mapping.py not in docs/PORTING.md: {missing}"


@pytest.mark.parametrize("body", [
    "    y[:] = x * (10 ** 10 ** 9)\n",          # a power the port must not compute
    "    t = [0] * 10 ** 9\n    y[:] = x\n",     # a list it must not build
    "    y[:] = x * 1e999\n",                    # not a finite number
    "    y[:] = x" + " + x" * 3000 + "\n",       # deep nesting
])
def test_hostile_sources_are_diagnostics(body: str) -> None:
    src = ("import pypto\n\n@pypto.frontend.jit\ndef k(x: pypto.Tensor([8, 64], pypto.DT_FP32),"
           " y: pypto.Tensor([8, 64], pypto.DT_FP32)):\n" + body)
    result = port_source(src, "k.py")
    assert not result.ok and all(d.code.startswith("E10") for d in result.diags.items)
