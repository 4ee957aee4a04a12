"""The language server's answers, computed in-process from texts (the stdio test covers the wiring)."""

from __future__ import annotations

from ptodsl.lsp import analysis as a

YAML = a.norm("specs/layernorm.yaml")
PTO = a.norm("specs/layernorm.pto")


def test_a_yaml_mistake_is_reported_in_the_yaml_and_clears_the_pto() -> None:
    text = open(YAML).read().replace("vec_tile:", "vec_tlie:")
    found = a.diagnose(YAML, {YAML: text})
    assert [d.code for d in found[YAML]] == ["E0206"] and found[PTO] == []
    assert found[YAML][0].span.line == text.splitlines().index("  vec_tlie: [1, 1024]") + 1


def test_a_pto_without_spec_gets_its_syntax_checked(tmp_path) -> None:
    path = a.norm(str(tmp_path / "lone.pto"))
    found = a.diagnose(path, {path: "kernel f(x: f32[N]:\n    pass\n"})
    assert [d.code[:3] for d in found[path]] == ["E01"]


def test_spec_found_by_its_source_key(tmp_path) -> None:
    pto, spec = a.norm(str(tmp_path / "algo.pto")), a.norm(str(tmp_path / "op.yaml"))
    assert a.spec_of(pto, {spec: "op: scale\nsource: algo.pto\n"}) == spec
    assert a.spec_of(pto, {spec: "op: scale\n"}) is None


def test_yaml_key_paths_and_completions() -> None:
    text = "op: x\nschedule:\n  loops:\n    rows:\n      \ntests:\n  - shapes: {N: 1}\n    \n  - \ntarget: \n"
    assert a.yaml_path_at(text, 4, 6) == (["schedule", "loops", "rows"], None)
    assert [k.name for k in a.yaml_completions(text, 4, 6)] == ["unroll", "vec_tile", "submit_before_loop"]
    assert a.yaml_path_at(text, 7, 4) == (["tests", "[]"], None)
    assert a.yaml_path_at(text, 8, 4) == (["tests", "[]"], None)
    assert "atol" in {k.name for k in a.yaml_completions(text, 8, 4)}
    assert [k.name for k in a.yaml_completions(text, 9, 8)] == ["ascend910b", "ascend950"]
    assert "op" in {k.name for k in a.yaml_completions(text, 9, 0)}
    assert a.yaml_key_doc(text, 1, 3).startswith("`schedule`: how the kernel is tiled")


def test_definitions_of_params_locals_and_loop_indices() -> None:
    text = open(PTO).read()
    lines = text.splitlines()
    use = next(i for i, s in enumerate(lines) if s.strip().startswith("y[r, :] ="))
    col = lines[use].index("eps")
    span = a.definition(PTO, text, use, col)
    assert (span.line, span.col) == (2, lines[1].index("eps: f32") + 1)
    span = a.definition(PTO, text, use, lines[use].index("r,"))
    assert (span.line, span.col) == (3, lines[2].index("r in") + 1)
    span = a.definition(PTO, text, use, lines[use].index("var"))
    assert lines[span.line - 1].strip().startswith("var =")
    assert a.definition(PTO, text, use, lines[use].index("rsqrt")) is None  # a builtin
