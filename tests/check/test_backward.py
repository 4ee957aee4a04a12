"""`backward:`: the parameter map of each library backward spec, and the rules on made-up pairs.

The golden fixtures (tests/golden_codes/fixtures/e023[6-9]_*) show one rendered mistake per code;
here each rule of docs/LANGUAGE.md §2.1 is broken once and the map of a correct pair is checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ptodsl.check.backward import BackwardMap, load_backward, match_backward
from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.driver import compile_spec
from ptodsl.frontend.parser import parse_module
from ptodsl.frontend.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
WITH_BACKWARD = sorted(p for p in (ROOT / "specs").glob("*.yaml") if load_spec(str(p)).backward is not None)


def signatures(path: str):
    spec = load_spec(path)
    kernel = parse_module(Path(spec.source).read_text(encoding="utf-8"), spec.source, Diagnostics()).kernel(spec.op)
    bwd = load_backward(spec, Diagnostics())
    assert bwd is not None
    return spec, kernel, *bwd


def test_the_library_names_six_backward_specs():
    assert [p.stem for p in WITH_BACKWARD] == ["gelu", "layernorm", "matmul", "rmsnorm", "silu", "softmax"]


@pytest.mark.parametrize("path", WITH_BACKWARD, ids=lambda p: p.stem)
def test_every_backward_spec_follows_the_convention(path: Path):
    spec, kernel, bwd, bwd_kernel = signatures(str(path))
    mapping, problems = match_backward(spec, kernel, bwd, bwd_kernel)
    assert problems == []
    assert bwd.op == f"{spec.op}_bwd"
    assert set(mapping.inputs) | set(mapping.outputs) | set(mapping.scalars) == {p.name for p in bwd_kernel.params}


def test_the_maps_part_2_reads():
    def of(name: str) -> BackwardMap:
        mapping, problems = match_backward(*signatures(f"specs/{name}.yaml"))
        assert problems == []
        return mapping

    assert of("softmax") == BackwardMap({"y": ("saved", "y"), "dy": ("grad", "y")}, {"dx": "x"}, {})
    assert of("rmsnorm") == BackwardMap({"x": ("saved", "x"), "gamma": ("saved", "gamma"), "dy": ("grad", "y")},
                                        {"dx": "x", "dgamma": "gamma"}, {"eps": "eps"})
    assert of("layernorm").outputs == {"dx": "x", "dgamma": "gamma", "dbeta": "beta"}
    assert of("matmul") == BackwardMap({"a": ("saved", "a"), "b": ("saved", "b"), "dc": ("grad", "c")},
                                       {"da": "a", "db": "b"}, {})


FORWARD = """kernel f(x: T[M, N], w: T[N], y: out T[M, N], eps: f32 = 1e-6):
    y[:] = x * w + eps
"""


def codes(write_spec, tmp_path, bwd_pto: str, saves: str = "[x, w]", fwd_extra: str = "",
          bwd_extra: str = "", bwd_dtypes: str = "{T: [f32, f16]}") -> list[str]:
    (tmp_path / "b.pto").write_text(bwd_pto)
    (tmp_path / "b.yaml").write_text(f"dtypes: {bwd_dtypes}\nschedule: {{vec_tile: [8, 256]}}\n{bwd_extra}")
    path = write_spec("f", FORWARD, "dtypes: {T: [f32, f16]}\nschedule: {vec_tile: [8, 256]}\n"
                      f"backward: {{spec: b.yaml, saves: {saves}}}\n{fwd_extra}")
    diags = Diagnostics()
    try:
        compile_spec(path, diags)
    except CompileError as exc:
        return [d.code for d in exc.diagnostics if d.is_error]
    return [d.code for d in diags.errors]


GOOD = "kernel b(x: T[M, N], w: T[N], dy: T[M, N], dx: out T[M, N], dw: out T[N], eps: f32):\n    pass\n"


@pytest.mark.parametrize(("bwd_pto", "saves", "fwd_extra", "bwd_extra", "want"), [
    (GOOD, "[x, w]", "", "", []),
    # a forward input without a gradient output gets none: fine
    ("kernel b(w: T[N], dy: T[M, N], dx: out T[M, N]):\n    dx[:] = dy * w\n", "[w]", "", "", []),
    ("kernel b(w: T[N], dy: T[M, N], dx: out T[M, N]):\n    dx[:] = dy * w\n", "[w, eps]", "", "", ["E0237"]),
    ("kernel b(w: T[N], dy: T[M, N], dx: out T[M, N]):\n    dx[:] = dy * w\n", "[w, x]", "", "", ["E0237"]),
    ("kernel b(w: T[N], dy: T[M, N], dx: out T[M, N]):\n    dx[:] = dy * w\n", "[w, z]", "", "", ["E0237"]),
    ("kernel b(w: T[N], x: T[M, N], dy: T[M, N], dx: out T[M, N]):\n    dx[:] = dy * w\n", "[w]", "", "",
     ["E0238"]),  # x not saved
    ("kernel b(w: T[N], dy: f32[M, N], dx: out T[M, N]):\n    pass\n", "[w]", "", "", ["E0238"]),  # dtype
    ("kernel b(w: T[N], dy: T[N, M], dx: out T[M, N]):\n    pass\n", "[w]", "", "", ["E0238"]),  # dims
    ("kernel b(w: T[N], dy: T[M, N], dz: out T[M, N]):\n    pass\n", "[w]", "", "", ["E0238"]),  # no input z
    ("kernel b(w: T[N], dy: T[M, N], dy2: out T[M, N]):\n    pass\n", "[w]", "", "", ["E0238"]),
    ("kernel b(w: T[N], dy: T[M, N], dx: inout T[M, N]):\n    pass\n", "[w]", "", "", ["E0238", "E0238"]),
    ("kernel b(w: T[N], dy: T[M, N], dx: out T[M, N], eps: f16):\n    pass\n", "[w]", "", "", ["E0238"]),
    ("kernel b(w: T[N], dy: T[M, N], dx: out T[M, N], alpha: f32):\n    pass\n", "[w]", "", "", ["E0238"]),
    ("kernel b(w: T[N], dy: T[M, N], dx: out T[M, N]):\n    pass\n", "[w]", "symbols: {N: 256}\n", "", ["E0239"]),
    ("kernel b(w: T[N], dy: T[M, N], dx: out T[M, N]):\n    pass\n", "[w]", "", "backward: {spec: f.yaml}\n",
     ["E0239"]),
    ("kernel c(w: T[N]):\n    pass\n", "[w]", "", "", ["E0236"]),
    ("kernel b(w: T[N]:\n    pass\n", "[w]", "", "", ["E0236"]),
    ("kernel b(w: T[N]):\n    pass\n", "[w]", "", "unknown: 1\n", ["E0236"]),
], ids=["good", "no-grad-for-x", "save-scalar", "saved-unread", "save-unknown", "input-not-saved", "grad-dtype",
        "grad-dims", "output-of-no-input", "output-misnamed", "inout", "scalar-dtype", "scalar-unknown",
        "symbol-fixed-once", "double-backward", "no-kernel", "pto-syntax", "yaml-error"])
def test_each_rule(write_spec, tmp_path, bwd_pto, saves, fwd_extra, bwd_extra, want):
    assert codes(write_spec, tmp_path, bwd_pto, saves, fwd_extra, bwd_extra) == want


@pytest.mark.parametrize("bwd_dtypes", ["{T: [f32]}", "{T: [f32, f16, bf16]}", "{U: [f32, f16]}"])
def test_the_dtype_variants_must_be_the_forwards(write_spec, tmp_path, bwd_dtypes):
    assert codes(write_spec, tmp_path, GOOD, bwd_dtypes=bwd_dtypes)[-1:] == ["E0239"]


def test_a_missing_backward_spec(write_spec):
    path = write_spec("f", FORWARD, "dtypes: {T: [f32]}\nbackward: {spec: nowhere.yaml}\n")
    with pytest.raises(CompileError) as info:
        compile_spec(path)
    assert [d.code for d in info.value.diagnostics] == ["E0236"]


def test_editors_complete_the_key_from_the_schema():
    from ptodsl.lsp import analysis

    text = "op: x\nbackward:\n  \n"
    assert "backward" in {k.name for k in analysis.yaml_completions(text, 1, 0)}
    assert [k.name for k in analysis.yaml_completions(text, 2, 2)] == ["spec", "saves"]
