"""The YAML spec: located nodes, schema validation, the model, span lookups, JSON Schema, fuzzing."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from ptodsl.diagnostics import CompileError, Diagnostics, Span
from ptodsl.diagnostics.render import render_all
from ptodsl.dtypes import DTYPE_NAMES, DTYPES, itemsize, numpy_dtype
from ptodsl.frontend.schema import json_schema, spec_schema
from ptodsl.frontend.spec import (
    PASS_OPTION_DEFAULTS,
    LoopSchedule,
    Reference,
    Spec,
    load_spec,
    parse_spec,
)
from ptodsl.yamlio.nodes import YMap, compose, to_python
from ptodsl.yamlio.schema import identifier_problem

REPO = Path(__file__).resolve().parents[2]


def language_md_example() -> str:
    """The softmax spec of docs/LANGUAGE.md §2, verbatim, so the test follows the document."""
    doc = (REPO / "docs" / "LANGUAGE.md").read_text(encoding="utf-8")
    m = re.search(r"```yaml\n(# specs/softmax\.yaml\n.*?)```", doc, re.S)
    assert m is not None, "LANGUAGE.md §2 no longer has the softmax.yaml example"
    return m.group(1)


SOFTMAX = language_md_example()


def parse(text: str, path: str = "spec/softmax.yaml") -> tuple[Spec | None, Diagnostics]:
    diags = Diagnostics()
    return parse_spec(text, path, diags), diags


def codes(diags: Diagnostics) -> list[str]:
    return [d.code for d in diags]


def only_error(text: str, path: str = "spec/softmax.yaml"):
    spec, diags = parse(text, path)
    assert spec is None
    assert len(diags.errors) == 1, render_all(diags)
    return diags.errors[0]


@pytest.fixture
def softmax_dir(tmp_path: Path) -> Path:
    (tmp_path / "softmax.yaml").write_text(SOFTMAX, encoding="utf-8")
    (tmp_path / "softmax.pto").write_text("kernel softmax(x: T[B, N], y: out T[B, N]):\n    y[:] = x\n")
    return tmp_path


# ------------------------------------------------------------------ the valid example


def test_language_md_example_loads(softmax_dir: Path) -> None:
    spec = load_spec(str(softmax_dir / "softmax.yaml"))
    assert spec.op == "softmax"
    assert spec.doc == "Row-wise softmax over the last axis."
    assert spec.folder == str(softmax_dir)
    assert spec.source == str(softmax_dir / "softmax.pto")
    assert spec.dtypes == {"T": ("f32", "f16", "bf16")}
    assert spec.symbols == {"N": 1024}
    assert spec.target == "ascend910b"
    assert spec.reference == Reference("softmax_ref.py", "softmax")
    s = spec.schedule
    assert s.vec_tile == (4, 1024)
    assert s.cube_tile == {"m": (128, 128), "k": (64, 256), "n": (128, 128)}
    assert s.loops == {"b_loop": LoopSchedule(unroll=(4, 2, 1), vec_tile=(1, 1024), submit_before_loop=False)}
    assert s.valid_shapes == {"row": (1, "N")}
    assert s.pass_options == {**PASS_OPTION_DEFAULTS, "cycle_upper_bound": 4000}
    t0, t1 = spec.tests
    assert (t0.index, t0.shapes, t0.dtypes, t0.rtol, t0.atol) == (0, {"B": 7}, {"T": "f32"}, None, None)
    assert (t1.index, t1.shapes, t1.dtypes) == (1, {"B": 33}, {"T": "bf16"})
    # `1e-2` is a float in YAML 1.2 (and to any reader) although YAML 1.1 calls it a string.
    assert t1.rtol == pytest.approx(1.6e-2) and t1.atol == pytest.approx(1e-2)
    assert isinstance(t1.atol, float)


def test_defaults_of_a_minimal_spec() -> None:
    spec, diags = parse("doc: adds one\n", "specs/add_one.yaml")
    assert spec is not None and not diags.items
    assert spec.op == "add_one"  # the file stem
    assert spec.source == "specs/add_one.pto"
    assert spec.folder == "specs"
    assert spec.target == "ascend910b"
    assert spec.schedule.pass_options == PASS_OPTION_DEFAULTS
    assert spec.schedule.vec_tile is None and spec.schedule.cube_tile is None
    assert spec.schedule.loops == {} and spec.schedule.valid_shapes == {}
    assert spec.reference is None and spec.tests == () and spec.dtypes == {} and spec.symbols == {}


def test_pass_option_defaults_are_ints() -> None:
    assert set(PASS_OPTION_DEFAULTS) == {"cycle_upper_bound", "max_paths", "double_buffer", "fused_ops",
                                         "multiply_add", "split_reduction", "row_interchange", "row_fusion", "aiv_split",
                                         "skew"}
    assert all(isinstance(v, int) for v in PASS_OPTION_DEFAULTS.values())
    assert PASS_OPTION_DEFAULTS["cycle_upper_bound"] > 0 and PASS_OPTION_DEFAULTS["max_paths"] > 0
    assert PASS_OPTION_DEFAULTS["double_buffer"] == 1  # a flag, on by default
    assert PASS_OPTION_DEFAULTS["fused_ops"] == 1  # a flag, on by default
    assert PASS_OPTION_DEFAULTS["multiply_add"] == 0  # a flag, opt-in
    assert PASS_OPTION_DEFAULTS["split_reduction"] == 1  # a flag, on by default
    assert PASS_OPTION_DEFAULTS["row_interchange"] == 0  # a flag, opt-in
    assert PASS_OPTION_DEFAULTS["row_fusion"] == 0  # a flag, opt-in
    assert PASS_OPTION_DEFAULTS["skew"] == 1  # a flag, on by default


def test_source_defaults_to_op_name_and_can_be_given() -> None:
    spec, _ = parse("op: rms\n", "specs/rmsnorm_v2.yaml")
    assert spec is not None and spec.source == "specs/rms.pto" and not spec.source_given
    spec, _ = parse("op: rms\nsource: kernels/rms.pto\n", "specs/x.yaml")
    assert spec is not None and spec.source == "specs/kernels/rms.pto" and spec.source_given
    spec, _ = parse("op: rms\n", "x.yaml")
    assert spec is not None and spec.folder == "." and spec.source == "rms.pto"


def test_small_conveniences() -> None:
    text = """
op: attn
dtypes: {T: f16}
symbols: {BL: 64}
schedule:
  loops:
    on: {unroll: [2, 1]}
  valid_shapes: {a0: [1, cur_seq, H], a1: [1, "S - 1", 4]}
target: ascend950
tests:
  - {shapes: {S: 128}, scalars: {scale: 0.125, causal: true, n: 3}, seed: 7, data_range: [-1, 1], name: small}
"""
    spec, diags = parse(text)
    assert spec is not None, render_all(diags)
    assert spec.dtypes == {"T": ("f16",)}  # a single dtype needs no list
    assert "on" in spec.schedule.loops  # a key is taken as written, not as YAML 1.1's boolean
    assert spec.schedule.valid_shapes == {"a0": (1, "cur_seq", "H"), "a1": (1, "S - 1", 4)}
    assert spec.target == "ascend950"
    t = spec.tests[0]
    assert t.scalars == {"scale": 0.125, "causal": True, "n": 3}
    assert isinstance(t.scalars["causal"], bool) and isinstance(t.scalars["n"], int)
    assert (t.seed, t.data_range, t.name) == (7, (-1.0, 1.0), "small")


# ------------------------------------------------------------------ span lookups


def test_span_lookups(softmax_dir: Path) -> None:
    path = str(softmax_dir / "softmax.yaml")
    spec = load_spec(path)
    sp = spec.spans
    line = {n + 1: text for n, text in enumerate(SOFTMAX.splitlines())}

    def text_at(span: Span) -> str:
        assert span.line == span.end_line
        return line[span.line][span.col - 1 : span.end_col - 1]

    unroll = ("schedule", "loops", "b_loop", "unroll")
    assert text_at(sp.key(unroll)) == "unroll"
    assert text_at(sp.value(unroll)) == "[4, 2, 1]"
    assert text_at(sp.at(unroll)) == "[4, 2, 1]"
    assert text_at(sp.value(("schedule", "vec_tile", 1))) == "1024"
    assert sp.key(("schedule", "vec_tile", 1)) is None  # list items have no key
    assert text_at(sp.value(("tests", 0, "shapes", "B"))) == "7"
    assert text_at(sp.key(("tests", 1, "atol"))) == "atol"
    assert text_at(sp.value(("tests", 1, "atol"))) == "1e-2"
    assert text_at(sp.value(("schedule", "cube_tile", "k", 0))) == "64"
    assert text_at(sp.key(("op",))) == "op" and sp.key(("op",)).line == 2
    assert sp.value(("schedule", "loops", "b_loop", "unroll")).file == path
    # Absent paths: key/value give None, `at` walks up to the nearest parent that exists.
    missing = ("schedule", "loops", "b_loop", "nope")
    assert sp.key(missing) is None and sp.value(missing) is None
    assert sp.at(missing) == sp.value(("schedule", "loops", "b_loop"))
    assert sp.at(("tests", 5, "rtol")) == sp.value(("tests",))
    assert sp.at(("nothing",)) == sp.value(())
    assert ("schedule", "valid_shapes", "row") in sp


def test_span_at_never_none() -> None:
    spec, _ = parse("op: x\n", "a/x.yaml")
    assert spec is not None
    assert spec.spans.at(("schedule", "loops", "l", "unroll", 0)) == spec.spans.value(())
    from ptodsl.frontend.spec import SpanMap

    assert SpanMap("f.yaml").at(("a", 1)) == Span("f.yaml", 1, 1)


def test_spans_cover_keys_with_list_indices() -> None:
    spec, _ = parse("op: x\nschedule:\n  vec_tile:\n    - 4\n    - 1024\n")
    assert spec is not None
    v = spec.spans.value(("schedule", "vec_tile", 1))
    assert (v.line, v.col, v.end_col) == (5, 7, 11)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("text", "key", "line", "col", "suggestion"),
    [
        ("op: x\ndtype: {T: [f32]}\n", "dtype", 2, 1, "dtypes"),
        ("op: x\nschedule:\n  vec_tiles: [1]\n", "vec_tiles", 3, 3, "vec_tile"),
        ("op: x\nschedule:\n  cube_tile: {m: [1, 1], k: [1, 1], n: [1, 1], nn: [1, 1]}\n", "nn", 3, 48, "n"),
        ("op: x\nschedule:\n  loops:\n    l: {unrol: [2]}\n", "unrol", 4, 9, "unroll"),
        ("op: x\nschedule:\n  loops:\n    l: {submit_before: true}\n", "submit_before", 4, 9,
         "submit_before_loop"),
        ("op: x\nschedule:\n  pass_options: {max_path: 3}\n", "max_path", 3, 18, "max_paths"),
        ("op: x\ntests:\n  - {shape: {B: 1}}\n", "shape", 3, 6, "shapes"),
        ("op: x\ntests:\n  - {shapes: {B: 1}}\n  - {seeds: 3}\n", "seeds", 4, 6, "seed"),
    ],
)
def test_unknown_key_with_did_you_mean_at_every_level(text: str, key: str, line: int, col: int,
                                                       suggestion: str) -> None:
    d = only_error(text)
    assert d.code == "E0206"
    assert f"`{key}`" in d.message
    assert (d.span.line, d.span.col) == (line, col)
    assert d.help == f"did you mean `{suggestion}`?"
    assert d.notes and d.notes[0].startswith("allowed keys here:")


def test_unknown_key_valid_elsewhere_says_where() -> None:
    d = only_error("op: x\nschedule:\n  submit_before_loop: true\n")
    assert d.code == "E0206" and "schedule.loops.<loop>" in d.help
    d = only_error("op: x\nschedule:\n  target: ascend910b\n")
    assert d.help == "did you mean `target`?" or "at the top level" in d.help


def test_unknown_key_without_any_match() -> None:
    d = only_error("op: x\nzzz: 1\n")
    assert d.code == "E0206" and d.help is None


def test_duplicate_key_points_at_both() -> None:
    spec, diags = parse("op: x\nschedule:\n  vec_tile: [1]\n  vec_tile: [2]\nop: y\n")
    assert spec is None
    dup = [d for d in diags if d.code == "E0202"]
    assert [(d.span.line, d.span.col) for d in dup] == [(4, 3), (5, 1)]
    assert [(d.secondary[0].span.line, d.secondary[0].span.col) for d in dup] == [(3, 3), (1, 1)]


@pytest.mark.parametrize(
    ("text", "code", "line", "at", "words"),
    [
        ("op: x\nsymbols: {N: 1.5}\n", "E0207", 2, "1.5", "must be an integer or a dim expression, found a number"),
        ("op: x\nsymbols: [N]\n", "E0207", 2, "[N]", "must be a mapping, found a list"),
        ("op: x\nschedule: [1]\n", "E0207", 2, "[1]", "must be a mapping, found a list"),
        ("op: x\nschedule:\n  vec_tile: {a: 1}\n", "E0207", 3, "{a: 1}", "must be a list of integers, found a mapping"),
        ("op: x\nschedule:\n  vec_tile: [1.5]\n", "E0207", 3, "1.5", "found a number `1.5`"),
        ("op: x\nschedule:\n  vec_tile: [true]\n", "E0207", 3, "true", "found a boolean `true`"),
        ("op: x\ndoc:\n", "E0207", 2, "", "must be a string, found nothing"),
        ("op: x\ntests:\n  - {rtol: [1]}\n", "E0207", 3, "[1]", "must be a number, found a list"),
        ("op: x\ntests: {a: 1}\n", "E0207", 2, "{a: 1}", "must be a list of mappings"),
        ("op: x\ntests:\n  - {scalars: {eps: abc}}\n", "E0207", 3, "abc", "must be a number or a boolean"),
        ("op: x\nschedule:\n  valid_shapes: {row: [1, 2.5]}\n", "E0207", 3, "2.5",
         "an integer or a symbol expression"),
        ("op: x\nschedule:\n  loops:\n    l: {submit_before_loop: 1}\n", "E0207", 4, "1", "`true` or `false`"),
        ("op: x\nsymbols: {N: -4}\n", "E0209", 2, "-4", "must be positive"),
        ("op: x\nschedule:\n  cube_tile: {m: [1, 2, 3], k: [1, 1], n: [1, 1]}\n", "E0209", 3, "[1, 2, 3]",
         "exactly 2 items"),
        ("op: x\nschedule:\n  vec_tile: []\n", "E0209", 3, "[]", "at least 1 item"),
        ("op: x\nschedule:\n  pass_options: {cycle_upper_bound: 0}\n", "E0209", 3, "0", "must be positive"),
        ("op: x\ntests:\n  - {atol: .inf}\n", "E0209", 3, ".inf", "finite"),
        ("op: x\ntests:\n  - {seed: -1}\n", "E0209", 3, "-1", "at least 0"),
        ("op: x\ntests:\n  - {data_range: [2, 2]}\n", "E0209", 3, "[2, 2]", "low < high"),
        ("op: x\ntests:\n  - {data_range: [2]}\n", "E0209", 3, "[2]", "exactly 2 items"),
        ("op: x\nsource: x.cpp\n", "E0209", 2, "x.cpp", "ending in `.pto`"),
        ("op: x\nschedule:\n  valid_shapes: {row: [1, \"N; x\"]}\n", "E0209", 3, '"N; x"',
         "expression over symbols"),
        ("op: x\ndtypes: {T: [f32, fp16]}\n", "E0212", 2, "fp16", "unknown dtype `fp16`"),
        ("op: x\ndtypes: {T: flot32}\n", "E0212", 2, "flot32", "unknown dtype `flot32`"),
        ("op: x\ndtypes: {T: [f32, 16]}\n", "E0212", 2, "16", "unknown dtype `16`"),
        ("op: x\ndtypes: {T: [f32]}\ntests:\n  - {dtypes: {T: f6}}\n", "E0212", 4, "f6", "unknown dtype `f6`"),
        ("op: x\nreference: ref.py\n", "E0213", 2, "ref.py", "`FILE.py:FUNCTION`"),
        ("op: x\nreference: ref.py:1fn\n", "E0213", 2, "ref.py:1fn", "`FILE.py:FUNCTION`"),
        ("op: x\nreference: ref:fn\n", "E0213", 2, "ref:fn", "`FILE.py:FUNCTION`"),
        ("op: x\ntarget: ascend310\n", "E0214", 2, "ascend310", "unknown target `ascend310`"),
        ("op: x\ndtypes: {T: [f32]}\ntests:\n  - {dtypes: {U: f32}}\n", "E0216", 4, "U", "binds `U`"),
        ("op: x\ntests:\n  - {dtypes: {U: f32}}\n", "E0216", 3, "U", "binds `U`"),
        ("op: x\ndtypes: {T: [f32]}\ntests:\n  - {dtypes: {T: f16}}\n", "E0217", 4, "f16", "`T = f16`"),
        ("op: x\nsymbols: {N: 8}\ntests:\n  - {shapes: {N: 9}}\n", "E0218", 4, "9", "`N = 9`"),
    ],
)
def test_error_paths(text: str, code: str, line: int, at: str, words: str) -> None:
    d = only_error(text)
    assert d.code == code, render_all([d])
    assert d.span.line == line, render_all([d])
    source_line = text.splitlines()[line - 1]
    if at:
        assert source_line[d.span.col - 1 : d.span.end_col - 1] == at, render_all([d])
    else:  # an empty value: the caret sits right after the key's colon
        assert source_line[: d.span.col - 1].endswith(":"), render_all([d])
    assert words in d.message


def test_duplicate_list_entry() -> None:
    d = only_error("op: x\ndtypes: {T: [f16, f32, f16]}\n")
    assert d.code == "E0210" and "lists `f16` twice" in d.message
    assert (d.span.line, d.span.col) == (2, 24)
    assert (d.secondary[0].span.line, d.secondary[0].span.col) == (2, 14)


def test_dtype_hints() -> None:
    assert only_error("op: x\ndtypes: {T: [float16]}\n").help == "ptodsl spells it `f16`"
    assert "64-bit" in only_error("op: x\ndtypes: {T: [double]}\n").help
    assert only_error("op: x\ndtypes: {T: [bf61]}\n").help == "did you mean `bf16`?"


def test_unknown_target_lists_targets() -> None:
    d = only_error("op: x\ntarget: ascend910c\n")
    assert d.help == "did you mean `ascend910b`?"
    assert "ascend950" in d.notes[0]


@pytest.mark.parametrize(
    ("text", "name", "why"),
    [
        ("op: 2x\n", "2x", "must start with a letter"),
        ("op: my-op\n", "my-op", "must start with a letter"),
        ("op: class\n", "class", "keyword in Python and C++"),
        ("op: template\n", "template", "C++ keyword"),
        ("op: lambda\n", "lambda", "Python keyword"),
        ("op: __x\n", "__x", "reserved in C++"),
        ("op: _Tmp\n", "_Tmp", "reserved in C++"),
        ("op: x\nsymbols: {namespace: 4}\n", "namespace", "C++ keyword"),
        ("op: x\ndtypes: {f32: [f32]}\n", "f32", "built-in dtype"),
        ("op: x\ndtypes: {\"T x\": [f32]}\n", "T x", "must start with a letter"),
        ("op: x\nschedule:\n  loops:\n    for: {unroll: [1]}\n", "for", "keyword in Python and C++"),
        ("op: x\nschedule:\n  valid_shapes: {new: [1]}\n", "new", "C++ keyword"),
        ("op: x\ntests:\n  - {shapes: {1B: 3}}\n", "1B", "must start with a letter"),
        ("op: x\ntests:\n  - {scalars: {def: 3}}\n", "def", "Python keyword"),
        ("op: 12\n", "12", "must start with a letter"),
    ],
)
def test_bad_identifiers(text: str, name: str, why: str) -> None:
    d = only_error(text)
    assert d.code == "E0211"
    assert f"`{name}`" in d.message and why in d.label
    assert d.help and d.help.startswith("rename it")
    suggestion = re.search(r"`(.*)`", d.help).group(1)
    assert identifier_problem(suggestion) is None


def test_bad_file_stem_as_default_op() -> None:
    d = only_error("doc: x\n", "specs/my-op.yaml")
    assert d.code == "E0211" and "`my-op`" in d.message and (d.span.line, d.span.col) == (1, 1)


def test_identifier_problem() -> None:
    assert identifier_problem("softmax") is None
    assert identifier_problem("_private") is None
    assert identifier_problem("b_loop2") is None
    for bad in ("", "a b", "x.y", "é", "None", "auto", "co_await", "and", "__init__", "_X"):
        assert identifier_problem(bad) is not None, bad


def test_yaml_syntax_error_at_mark() -> None:
    d = only_error("op: x\nschedule:\n  vec_tile: [1, 2\n  loops: {}\n")
    assert d.code == "E0200" and (d.span.line, d.span.col) == (4, 8)
    assert d.secondary and d.secondary[0].span.line == 3


def test_yaml_tab_and_control_character() -> None:
    d = only_error("op: x\n\tdoc: y\n")
    assert d.code == "E0200" and d.span.line == 2
    d = only_error("op: x\ndoc: a\x01b\n")
    assert d.code == "E0200" and (d.span.line, d.span.col) == (2, 7)


def test_multiple_documents_are_a_syntax_error() -> None:
    d = only_error("op: x\n---\nop: y\n")
    assert d.code == "E0200" and d.span.line == 2


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("a: &x 1\nb: 2\n", "anchors"),
        ("? [a, b]\n: 1\n", "mapping key"),
        ("op: !!str x\n", "tags"),
        ("op: !custom x\n", "tags"),
    ],
)
def test_unsupported_yaml(text: str, what: str) -> None:
    _, diags = parse(text)
    assert "E0201" in codes(diags) and any(what in d.message for d in diags)


def test_alias_stops_before_expansion() -> None:
    # The classic exponential alias bomb must come back quickly, as diagnostics.
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 12):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    spec, diags = parse("\n".join(lines) + "\n")
    assert spec is None and set(codes(diags)) == {"E0201"}


@pytest.mark.parametrize("text", ["", "\n\n", "# just a comment\n", "---\n", "~\n"])
def test_empty_file(text: str) -> None:
    d = only_error(text)
    assert d.code == "E0204" and (d.span.line, d.span.col) == (1, 1)


@pytest.mark.parametrize(("text", "found"), [("- a\n- b\n", "a list"), ("just words\n", "a single value"),
                                              ("42\n", "a single value")])
def test_non_mapping_document(text: str, found: str) -> None:
    d = only_error(text)
    assert d.code == "E0205" and found in d.message


def test_all_errors_are_reported() -> None:
    text = """op: x
dtype: {T: [f32]}
symbols: {N: [0]}
schedule:
  vec_tile: [a, b]
  loops:
    l: {unrol: [2]}
target: nowhere
tests:
  - {shapes: {B: x}}
  - {rtol: -1}
"""
    spec, diags = parse(text)
    assert spec is None
    assert codes(diags) == ["E0206", "E0207", "E0207", "E0207", "E0206", "E0214", "E0207", "E0209"]


def test_parse_spec_has_no_side_effects_on_other_errors() -> None:
    diags = Diagnostics()
    diags.error("E0204", "an earlier error", None)
    spec = parse_spec("op: fine\n", "fine.yaml", diags)
    assert spec is not None  # errors already in the collector are not this file's


# ------------------------------------------------------------------ load_spec and files


def test_missing_pto_default_points_at_op_key(tmp_path: Path) -> None:
    (tmp_path / "add.yaml").write_text("doc: hi\nop: add_one\n")
    with pytest.raises(CompileError) as err:
        load_spec(str(tmp_path / "add.yaml"))
    (d,) = err.value.diagnostics
    assert d.code == "E0215" and (d.span.line, d.span.col) == (2, 1)
    assert str(tmp_path / "add_one.pto") in d.help


def test_missing_pto_without_op_points_at_file_start(tmp_path: Path) -> None:
    (tmp_path / "add.yaml").write_text("doc: hi\n")
    with pytest.raises(CompileError) as err:
        load_spec(str(tmp_path / "add.yaml"))
    (d,) = err.value.diagnostics
    assert d.code == "E0215" and (d.span.line, d.span.col) == (1, 1)
    assert str(tmp_path / "add.pto") in d.help


def test_missing_pto_given_source_points_at_value(tmp_path: Path) -> None:
    (tmp_path / "add.yaml").write_text("op: add\nsource: k/add.pto\n")
    with pytest.raises(CompileError) as err:
        load_spec(str(tmp_path / "add.yaml"))
    (d,) = err.value.diagnostics
    assert d.code == "E0215" and (d.span.line, d.span.col) == (2, 9)
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "add.pto").write_text("")
    assert load_spec(str(tmp_path / "add.yaml")).source == str(tmp_path / "k" / "add.pto")


def test_pto_is_not_checked_when_the_spec_has_errors(tmp_path: Path) -> None:
    (tmp_path / "add.yaml").write_text("opp: add\n")
    with pytest.raises(CompileError) as err:
        load_spec(str(tmp_path / "add.yaml"))
    assert [d.code for d in err.value.diagnostics] == ["E0206"]


def test_missing_and_unreadable_yaml(tmp_path: Path) -> None:
    with pytest.raises(CompileError) as err:
        load_spec(str(tmp_path / "nope.yaml"))
    (d,) = err.value.diagnostics
    assert d.code == "E0203" and d.span is None and "nope.yaml" in d.message
    with pytest.raises(CompileError) as err:
        load_spec(str(tmp_path))  # a directory
    assert err.value.diagnostics[0].code == "E0203"
    (tmp_path / "bin.yaml").write_bytes(b"op: x\ndoc: \xff\xfe\n")
    with pytest.raises(CompileError) as err:
        load_spec(str(tmp_path / "bin.yaml"))
    (d,) = err.value.diagnostics
    assert d.code == "E0203" and (d.span.line, d.span.col) == (2, 6)
    assert "E0203" in err.value.render()


def test_compile_error_renders_the_yaml_line(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("op: s\nschedule:\n  loops:\n    l: {unrol: [2]}\n")
    with pytest.raises(CompileError) as err:
        load_spec(str(tmp_path / "s.yaml"))
    text = err.value.render()
    assert "    l: {unrol: [2]}" in text and "^^^^^" in text and "did you mean `unroll`?" in text
    assert str(err.value).startswith(f"{tmp_path / 's.yaml'}:4:9: E0206")


# ------------------------------------------------------------------ located nodes


def test_compose_keeps_spans_and_values() -> None:
    diags = Diagnostics()
    root = compose("a: 1\nb: [x, 'y', 2.5, 1e3, null, yes]\nc: {d: e}\n", "f.yaml", diags)
    assert isinstance(root, YMap) and not diags.items
    assert to_python(root) == {"a": 1, "b": ["x", "y", 2.5, 1000.0, None, True], "c": {"d": "e"}}
    b = root.get("b")
    assert b is not None and (b.key.span.line, b.key.span.col) == (2, 1)
    assert (b.value.span.line, b.value.span.col, b.value.span.end_col) == (2, 4, 33)
    assert root.get("zz") is None


@pytest.mark.parametrize("text", ["a: " + "[" * 5000 + "]" * 5000, "a: " + "[" * 5000, "a: " + "{a: " * 80 + "1" + "}" * 80])
def test_deep_nesting_is_a_diagnostic(text: str) -> None:
    d = only_error(text)
    assert d.code == "E0200" and "nested too deeply" in d.message


def test_yaml_11_number_surprises_are_avoided() -> None:
    spec, _ = parse("op: x\nsymbols: {A: 010, B: 0x10, C: 1_000}\n")
    assert spec is not None and spec.symbols == {"A": 10, "B": 16, "C": 1000}
    d = only_error("op: x\nsymbols: {N: 1:30}\n")  # base 60 in YAML 1.1: a string, and no dim expression
    assert d.code == "E0209" and "`1:30`" in d.message
    spec, _ = parse("op: x\ntests:\n  - {rtol: 1.0e5, atol: 2E-3}\n")
    assert spec is not None and (spec.tests[0].rtol, spec.tests[0].atol) == (1.0e5, 2e-3)


def test_quoted_numbers_stay_strings() -> None:
    root = compose("a: '1e3'\nb: \"12\"\n", "f.yaml", Diagnostics())
    assert to_python(root) == {"a": "1e3", "b": "12"}


# ------------------------------------------------------------------ dtypes module


def test_dtype_table() -> None:
    assert DTYPE_NAMES == ("bool", "i8", "i16", "i32", "i64", "u8", "f16", "bf16", "f32")
    assert [itemsize(n) for n in DTYPE_NAMES] == [1, 1, 2, 4, 8, 1, 2, 2, 4]
    for name in DTYPE_NAMES:
        assert numpy_dtype(name).itemsize == DTYPES[name].itemsize
    assert numpy_dtype("bf16").name == "bfloat16"
    from ptodsl.dtypes import from_numpy

    assert [from_numpy(numpy_dtype(n)) for n in DTYPE_NAMES] == list(DTYPE_NAMES)
    assert from_numpy("float64") is None


# ------------------------------------------------------------------ JSON Schema


def _check_closed_objects(schema: Any, data: Any, where: str = "$") -> list[str]:
    """A tiny structural check: every key of data must be allowed by the schema's properties."""
    problems: list[str] = []
    if isinstance(schema, dict) and "anyOf" in schema:
        results = [_check_closed_objects(alt, data, where) for alt in schema["anyOf"]]
        return [] if any(not r for r in results) else results[0]
    if isinstance(data, dict):
        if schema.get("type") != "object":
            return [f"{where}: object not allowed"]
        props = schema.get("properties")
        for k, v in data.items():
            if props is not None:
                if k not in props:
                    problems.append(f"{where}.{k}: not allowed")
                else:
                    problems += _check_closed_objects(props[k], v, f"{where}.{k}")
            else:
                problems += _check_closed_objects(schema["additionalProperties"], v, f"{where}.{k}")
        problems += [f"{where}: missing {r}" for r in schema.get("required", []) if r not in data]
    elif isinstance(data, list):
        if schema.get("type") != "array":
            return [f"{where}: array not allowed"]
        for i, item in enumerate(data):
            problems += _check_closed_objects(schema["items"], item, f"{where}[{i}]")
    return problems


def _as_data(text: str) -> Any:
    return to_python(compose(text, "x.yaml", Diagnostics()))


def test_json_schema_is_json_and_closed() -> None:
    schema = json_schema()
    again = json.loads(json.dumps(schema))
    assert again == schema
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "urn:ptodsl:schema:spec:1" and list(schema)[:2] == ["$schema", "$id"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(spec_schema().fields)
    sched = schema["properties"]["schedule"]
    assert sched["additionalProperties"] is False
    loop = sched["properties"]["loops"]["additionalProperties"]
    assert loop["additionalProperties"] is False and "description" in loop
    opts = sched["properties"]["pass_options"]["properties"]
    assert {k: v["default"] for k, v in opts.items()} == PASS_OPTION_DEFAULTS
    assert schema["properties"]["target"]["enum"] == ["ascend910b", "ascend950"]
    assert schema["properties"]["target"]["default"] == "ascend910b"


def test_json_schema_accepts_the_example_and_rejects_typos() -> None:
    schema = json_schema()
    assert _check_closed_objects(schema, _as_data(SOFTMAX)) == []
    bad = _as_data(SOFTMAX.replace("unroll:", "unrol:"))
    assert _check_closed_objects(schema, bad) == ["$.schedule.loops.b_loop.unrol: not allowed"]


def test_json_schema_with_jsonschema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert list(validator.iter_errors(_as_data(SOFTMAX))) == []
    for text in (
        SOFTMAX.replace("unroll:", "unrol:"),
        SOFTMAX.replace("op: softmax", "op: class"),
        SOFTMAX.replace("[f32, f16, bf16]", "[f32, f64]"),
        SOFTMAX.replace("{m: [128, 128],", "{m: [128],"),
        SOFTMAX.replace("target: ascend910b", "target: gpu"),
        SOFTMAX.replace("softmax_ref.py:softmax", "softmax_ref"),
        SOFTMAX.replace("{B: 7}", "{B: -7}"),
    ):
        assert list(validator.iter_errors(_as_data(text))), text


# ------------------------------------------------------------------ fuzzing


def _mutate(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    kind = rng.randrange(6)
    if kind == 0:  # delete a few characters
        for _ in range(rng.randint(1, 4)):
            if text:
                i = rng.randrange(len(text))
                text = text[:i] + text[i + rng.randint(1, 3):]
        return text
    if kind == 1:  # swap two lines
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return "".join(lines)
    if kind == 2:  # duplicate a line
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
        return "".join(lines)
    if kind == 3:  # insert YAML-significant characters
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(text) + 1)
            text = text[:i] + rng.choice(":{}[],-'\"\t#&*!|>?% \n@`") + text[i:]
        return text
    if kind == 4:  # change indentation
        i = rng.randrange(len(lines))
        lines[i] = (" " * rng.randint(0, 5)) + lines[i].lstrip(" ")
        return "".join(lines)
    # replace a word with another word of the file
    words = re.findall(r"[A-Za-z_0-9.\-]+", text)
    a, b = rng.choice(words), rng.choice(words)
    return text.replace(a, b, 1)


def test_fuzz_only_diagnostics_come_out() -> None:
    rng = random.Random(20240613)
    outcomes = {"ok": 0, "errors": 0}
    for case in range(300):
        text = SOFTMAX
        for _ in range(rng.randint(1, 3)):
            text = _mutate(text, rng)
        path = f"fuzz/case{case}.yaml"
        diags = Diagnostics()
        spec = parse_spec(text, path, diags)  # must never raise
        if spec is None:
            assert diags.has_errors, text
            outcomes["errors"] += 1
        else:
            assert not diags.has_errors, text
            outcomes["ok"] += 1
        n_lines = len(text.splitlines()) + 1
        for d in diags:
            if d.span is not None:
                assert d.span.file == path
                assert 1 <= d.span.line <= n_lines, (text, d)
        render_all(diags)  # and every diagnostic renders
    assert outcomes["ok"] > 10 and outcomes["errors"] > 100, outcomes
