"""The command line: exit codes, no tracebacks for user errors, a banner for internal ones, and
golden text for call-time argument errors."""

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from ptodsl import cli
from ptodsl.diagnostics import code_registry

GOLDEN = Path(__file__).parent / "golden"
ROOT = Path(__file__).resolve().parents[2]
CLI_JSON = ROOT / "docs" / "CLI-JSON.md"


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out or "--debug" in argv
    return code, out.out, out.err


def golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.expected"
    if os.environ.get("PTODSL_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with PTODSL_UPDATE_GOLDEN=1"
    assert text == path.read_text()


@pytest.mark.slow  # every library spec compiled again through the CLI (the goldens compile each)
def test_check_library_passes(capsys):
    """Every spec checks clean, and every variant of every spec, bf16 included, emits only
    instructions whose dtypes, layouts (and casts, and matmul dtype triples) pto-isa's A2/A3
    headers accept (the library's target is the 910B)."""
    code, _, err = run(capsys, "check", "specs", "--target-rules")
    assert code == 0, err
    assert "0 with errors" in err


def test_check_missing_path(capsys):
    code, _, err = run(capsys, "check", "no/such/dir")
    assert code == 1
    assert "error[E0203]" in err and "help:" in err


def test_an_algorithm_file_is_taken_through_the_spec_beside_it(capsys, tmp_path):
    code, out, _ = run(capsys, "ir", "specs/softmax.pto", "--stage", "tensor", "--variant", "T=f16")
    assert code == 0 and out.startswith("module @softmax level tensor")
    (tmp_path / "lone.pto").write_text("kernel lone(x: f32[N], y: out f32[N]):\n    y[:] = x\n")
    code, _, err = run(capsys, "check", str(tmp_path / "lone.pto"))
    assert code == 1 and "error[E0203]" in err and "no spec" in err and "help:" in err
    (tmp_path / "lone.yaml").write_text("op: lone\nsource: other.pto\n")
    (tmp_path / "other.pto").write_text("kernel lone(x: f32[N], y: out f32[N]):\n    y[:] = x\n")
    code, _, err = run(capsys, "check", str(tmp_path / "lone.pto"))
    assert code == 1 and "error[E0203]" in err and "compiles" in err


def test_test_command_runs_cases(capsys):
    code, out, _ = run(capsys, "test", "specs", "-k", "add_one")
    assert code == 0
    assert "3 passed, 0 failed" in out


@pytest.mark.parametrize("stage", ["tensor", "tile"])
def test_ir_stages(capsys, stage):
    code, out, _ = run(capsys, "ir", "specs/softmax.yaml", "--stage", stage, "--variant", "T=f16")
    assert code == 0
    assert out.startswith(f"module @softmax level {stage}")
    assert "f16" in out and "bf16" not in out


def test_ir_after_pass_and_unknown_pass(capsys):
    code, out, _ = run(capsys, "ir", "specs/add_one.yaml", "--after", "tensorize")
    assert code == 0 and "level tensor" in out
    code, _, err = run(capsys, "ir", "specs/add_one.yaml", "--after", "nope")
    assert code == 1 and "no pass named `nope`" in err


def test_explain_every_code(capsys):
    for c in code_registry():
        code, out, _ = run(capsys, "explain", c)
        assert code == 0 and out.startswith(c)
    code, _, err = run(capsys, "explain", "E9999")
    assert code == 1 and "no diagnostic code" in err


def test_schema_is_json(capsys):
    code, out, _ = run(capsys, "schema")
    assert code == 0
    schema = json.loads(out)
    assert schema["additionalProperties"] is False
    assert "schedule" in schema["properties"]


def test_json_format(capsys, write_spec):
    path = write_spec("bad", "kernel bad(x: f32[N], y: out f32[N]):\n    y = x + 1.0\n", "op: bad\n")
    code, out, _ = run(capsys, "check", path, "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["version"] == cli.JSON_VERSION and doc["command"] == "check" and doc["exit_code"] == 1
    diags = doc["diagnostics"]
    assert diags[0]["code"] == "E0400" and diags[0]["span"]["line"] == 2 and diags[0]["help"]
    assert doc["specs"] == [{"path": path, "ok": False, "variants": []}]


def _json_commands(tmp: Path) -> list[tuple[list[str], int | None]]:
    """One cheap invocation of every sub-command (sim backend), with its expected exit code (None:
    whatever the program finds)."""
    np.save(tmp / "x.npy", np.ones((2, 3), np.float32))
    lib = tmp / "lib"
    lib.mkdir()
    for name in ("add_one.yaml", "add_one.pto", "refs.py"):
        (lib / name).write_bytes((ROOT / "specs" / name).read_bytes())
    return [
        (["check", "specs/add_one.yaml"], 0),
        (["check", "no/such/spec.yaml"], 1),
        (["test", "specs/add_one.yaml", "-k", "add_one"], 0),
        (["ir", "specs/add_one.yaml"], 0),
        (["ir", "specs/add_one.yaml", "--stats"], 0),
        (["ir"], 1),
        (["ir", str(lib)], 1),
        (["ir", str(lib), "--stats"], 0),
        (["ir", str(lib), "--stats", "--bench"], 0),
        (["explain", "E0700"], 0),
        (["explain", "add"], 0),
        (["explain", "E9999"], 1),
        (["schema"], 0),
        (["run", "specs/add_one.yaml", f"x={tmp / 'x.npy'}", "-o", str(tmp)], 0),
        (["run", "specs/add_one.yaml", "x=1"], 1),
        (["bench", "specs/add_one.yaml", "--backend", "sim", "-k", "add_one"], 0),
        (["gen", "specs/add_one.yaml", "-o", str(tmp / "pkg")], 0),
        (["fuzz", "--count", "1", "--backend", "sim", "--features", "safe", "--out", str(tmp / "fuzz")], None),
        (["fuzz", "--features", "nope"], 1),
        (["tune", "specs/amin_cols.yaml", "--jobs", "1"], 0),
        (["tune", "no/such/spec.yaml"], 1),
        (["fmt", "--check", "specs/add_one.pto"], 0),
        (["fmt", "--check", "no/such/file.pto"], 1),
        (["port", "tests/port/cases/helpers.py", "-o", str(tmp / "ported")], 0),
        (["port", "tests/port/cases/e1003_while.py", "-o", str(tmp / "ported")], 1),
        (["fmt", "--check", "specs"], 0),
        (["fmt", "--check", "specs/add_one.yaml"], 1),
    ]


# Sub-commands that cannot write one JSON document, each with the reason.
NO_JSON = {
    # stdout is the Language Server Protocol stream for as long as the editor runs
    "lsp": "speaks LSP over stdin/stdout until the client exits (tested in tests/lsp)",
}


def _doc_sections() -> dict[str, str]:
    """docs/CLI-JSON.md's "Fields per command" paragraphs, by command."""
    text = CLI_JSON.read_text("utf-8").split("## Fields per command", 1)[1]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\*\*(\w+)\*\*:(.*?)(?=^\*\*\w+\*\*:|\Z)", text, re.M | re.S)}


COMMON_FIELDS = {"version", "command", "ptodsl", "exit_code", "diagnostics", "internal_error", "interrupted"}
# fields whose keys are data (dtype names, buffer names, a JSON Schema), not names the doc can list
DATA_KEYED = {"schema", "peak_bytes", "stack_bytes", "variants", "worst_ratio"}


def _keys(value, top: bool = True) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if top and k in COMMON_FIELDS:
                continue
            found.add(k)
            if k not in DATA_KEYED:
                found |= _keys(v, False)
    elif isinstance(value, list):
        for v in value:
            found |= _keys(v, False)
    return found


def test_every_command_writes_one_json_document(capsys, tmp_path):
    """... and docs/CLI-JSON.md names every field, at any depth, of the documents written."""
    sections = _doc_sections()
    seen = set()
    for argv, want in _json_commands(tmp_path):
        code, out, _ = run(capsys, *argv, "--format", "json")
        doc = json.loads(out)  # exactly one document: trailing text would not parse
        assert code == doc["exit_code"] and code == (code if want is None else want), (argv, doc)
        assert doc["version"] == cli.JSON_VERSION and doc["command"] == argv[0]
        assert isinstance(doc["diagnostics"], list)
        if code:
            assert doc["diagnostics"], argv  # a failure always says why
        section = sections.get(argv[0], "")
        missing = {k for k in _keys(doc) if f"`{k}`" not in section and f'"{k}"' not in section}
        assert not missing, f"docs/CLI-JSON.md's **{argv[0]}** section does not name {sorted(missing)} ({argv})"
        seen.add(argv[0])
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert seen | set(NO_JSON) == set(sub.choices), "every sub-command is run with --format json here"
    assert not seen & set(NO_JSON)


def test_cli_json_doc_lists_exactly_the_commands_with_format_json() -> None:
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    with_json = {name for name, p in sub.choices.items()
                 if any("--format" in a.option_strings for a in p._actions)}
    assert with_json == set(sub.choices) - set(NO_JSON)
    text = CLI_JSON.read_text("utf-8")
    listed = re.search(r"Every sub-command \((.*?)\)\s+but", text, re.S)
    assert listed is not None
    assert set(re.findall(r"`(\w+)`", listed.group(1))) == with_json
    assert set(_doc_sections()) == with_json
    for name in NO_JSON:  # the doc says why, and the command really refuses the flag
        assert f"`{name}`" in text.split("## Fields every document has")[0]
        with pytest.raises(SystemExit) as exc:
            cli.main([name, "--format", "json"])
        assert exc.value.code == 2


def test_json_payloads(capsys, tmp_path):
    code, out, _ = run(capsys, "test", "specs/add_one.yaml", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["summary"]["passed"] == len(doc["cases"]) > 0
    assert {c["status"] for c in doc["cases"]} == {"pass"}
    assert all(c["seconds"] >= 0 and c["error"] is None and c["id"].startswith("add_one[") for c in doc["cases"])
    code, out, _ = run(capsys, "ir", "specs/add_one.yaml", "--stats", "--format", "json")
    stats = json.loads(out)["stats"]
    assert stats and all(t["moved"] >= t["minimum"] > 0 for v in stats for t in v["traffic"])
    assert all(v["stack_limit_bytes"] == 32768 and v["stack_bytes"] for v in stats)
    assert all(k.startswith("add_one_k") and 0 < n < 32768 for v in stats for k, n in v["stack_bytes"].items())
    code, out, _ = run(capsys, "explain", "E0700", "--format", "json")
    assert json.loads(out)["title"] == code_registry()["E0700"].title


def test_run_writes_outputs(capsys, tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    code, out, _ = run(capsys, "run", "specs/add_one.yaml", f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path))
    assert code == 0, out
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), x + 1)


@pytest.mark.parametrize("name, array", [
    ("run_wrong_dtype", np.zeros((2, 3), np.float16)),
    ("run_wrong_rank", np.zeros((2, 3, 4), np.float32)),
])
def test_call_time_errors_are_diagnostics(capsys, tmp_path, name, array):
    np.save(tmp_path / "x.npy", array)
    code, _, err = run(capsys, "run", "--color", "never", "specs/add_one.yaml", f"x={tmp_path / 'x.npy'}",
                       "-o", str(tmp_path))
    assert code == 1
    golden(name, err)


def test_run_stopped_by_a_bounds_guard_is_a_diagnostic(capsys, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((2, 256), np.float32))
    np.save(tmp_path / "ids.npy", np.array([0, 7], np.int32))  # row 7 of a 4-row y
    np.save(tmp_path / "y.npy", np.zeros((4, 256), np.float32))
    code, _, err = run(capsys, "run", "--color", "never", "tests/golden_codes/ops/scatter_rows.yaml",
                       *(f"{n}={tmp_path / n}.npy" for n in ("x", "ids", "y")), "-o", str(tmp_path))
    assert code == 1 and "error[E0730]" in err and "internal compiler error" not in err


def test_internal_error_banner(capsys, monkeypatch):
    import ptodsl.driver

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(ptodsl.driver, "compile_spec", boom)
    code, _, err = run(capsys, "check", "specs/add_one.yaml")
    assert code == 2
    assert "internal compiler error: RuntimeError: kaboom" in err and "--debug" in err
    code = cli.main(["check", "specs/add_one.yaml", "--debug"])
    assert code == 2
    assert "Traceback" in capsys.readouterr().err


def test_no_color_is_honoured(monkeypatch, capsys, write_spec):
    path = write_spec("bad", "kernel bad(x: f32[N], y: out f32[N]):\n    y = x + 1.0\n", "op: bad\n")
    code, _, err = run(capsys, "check", path, "--color", "always")
    assert "\x1b[" in err
    monkeypatch.setenv("NO_COLOR", "1")
    code, _, err = run(capsys, "check", path)
    assert "\x1b[" not in err


@pytest.mark.parametrize("pto, code", [
    ("tests/frontend/golden/parse/e0100_missing_paren_in_call.pto", "E0100"),
    ("tests/frontend/golden/parse/e0102_unclosed_across_lines.pto", "E0102"),
])
def test_check_syntax_errors_exit_1(capsys, tmp_path, pto, code):
    """A spec whose .pto has a syntax error: exit 1, the code, file:line:col, a help line."""
    import shutil

    shutil.copy(pto, tmp_path / "k.pto")
    (tmp_path / "k.yaml").write_text("op: k\n")
    status, _, err = run(capsys, "check", str(tmp_path / "k.yaml"))
    assert status == 1
    assert f"error[{code}]" in err and "k.pto:" in err and "help:" in err


@pytest.mark.parametrize("yaml_file, code", [
    ("tests/frontend/golden/spec/e0206_unknown_key.yaml", "E0206"),
    ("tests/frontend/golden/spec/e0215_missing_pto.yaml", "E0215"),
])
def test_check_spec_errors_exit_1(capsys, yaml_file, code):
    status, _, err = run(capsys, "check", yaml_file)
    assert status == 1
    assert f"error[{code}]" in err and "help:" in err
    if code == "E0206":
        assert "did you mean" in err


@pytest.mark.parametrize("name, argv", [
    ("e0250_explain_unknown_name", ["explain", "E9999"]),
    ("e0250_ir_without_spec", ["ir"]),
    ("e0250_fuzz_negative_count", ["fuzz", "--count", "-1"]),
])
def test_command_line_mistakes_are_diagnostics(capsys, name, argv):
    code, out, err = run(capsys, *argv, "--color", "never")
    assert code == 1 and out == ""
    golden(name, err)


def test_gen_over_a_folder_it_did_not_write(capsys, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    code, _, err = run(capsys, "gen", "specs/add_one.yaml", "-o", str(tmp_path / "mine"), "--color", "never")
    assert code == 1 and (tmp_path / "mine" / "notes.txt").read_text() == "precious"
    golden("e0251_gen_over_a_foreign_folder", err.replace(str(tmp_path), "<tmp>"))


def test_json_stdout_holds_the_document_alone(capfd, monkeypatch):
    """Text written to file descriptor 1 below Python (a cpu kernel's printf) goes to stderr too."""
    import ctypes

    def noisy(args, out):
        print("from python")
        os.write(1, b"from fd 1\n")
        ctypes.CDLL(None).printf(b"from buffered C stdio\n")  # flushed before stdout is restored
        out.result(noisy=True)
        return 0

    monkeypatch.setattr(cli, "cmd_schema", noisy)
    assert cli.main(["schema", "--format", "json"]) == 0
    captured = capfd.readouterr()
    assert json.loads(captured.out)["noisy"] is True
    for text in ("from python", "from fd 1", "from buffered C stdio"):
        assert text in captured.err


def test_test_command_reports_every_case_when_builds_fail(capsys, monkeypatch, tmp_path):
    # A checkout that every kernel fails against: each case is reported, each variant's build
    # error is shown once, and the next spec still runs.
    header = tmp_path / "pto-isa" / "include" / "pto" / "pto-inst.hpp"
    header.parent.mkdir(parents=True)
    header.write_text('#error "a stand-in checkout"\n')
    monkeypatch.setenv("PTO_ISA_ROOT", str(tmp_path / "pto-isa"))
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(tmp_path / "cache"))
    code, out, err = run(capsys, "test", "specs/add_one.yaml", "specs/sqrt.yaml", "--backend", "cpu")
    assert code == 1
    cases = [line for line in out.splitlines() if line.startswith(("PASS ", "FAIL ", "SKIP "))]
    assert {c.split()[1].split("[")[0] for c in cases} == {"add_one", "sqrt"}
    assert not any(c.startswith("PASS ") for c in cases)
    assert "the C++ of this case's variant does not build" in out
    shown = [line for line in err.splitlines() if line.startswith("error[E0902]")]
    assert shown and len(shown) == len(set(shown))  # one diagnostic per variant, not per case
