"""Typing of `matmul` (docs/LANGUAGE.md §1.4): batch dims broadcast as torch.matmul's, the output
dtypes the cube produces, the bias row, and the split_k schedule option, each mistake reported at
the user's line (or YAML key) with its code."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptodsl.check import check
from ptodsl.check.types import TensorTy
from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.frontend import ast
from ptodsl.frontend.parser import parse_module
from ptodsl.frontend.spec import load_spec

CUBE = "schedule:\n  cube_tile: {m: [32, 64], k: [32, 64], n: [32, 64]}\n"


def _check(tmp_path: Path, params: str, body: str, yaml: str = CUBE):
    (tmp_path / "k.pto").write_text(f"kernel k({params}):\n    {body}\n", encoding="utf-8")
    (tmp_path / "k.yaml").write_text(yaml, encoding="utf-8")
    diags = Diagnostics()
    try:
        spec = load_spec(str(tmp_path / "k.yaml"), diags)
    except CompileError as exc:
        return exc.diagnostics, []
    module = None
    if spec is not None:
        module = parse_module((tmp_path / "k.pto").read_text("utf-8"), spec.source, diags)
    checked = check(module, spec, diags) if module is not None else []
    return diags.items, checked


def _matmul_type(checked) -> TensorTy:
    ck = checked[0]
    call = next(n for n in ast.walk(ck.kernel) if isinstance(n, ast.Call) and n.func_name == "matmul")
    return ck.typing.ty[id(call)]


def _text(shape) -> list[str]:
    return [str(s) for s in shape]


@pytest.mark.parametrize("a, b, flags, want", [
    ("f16[B, H, S, D]", "f16[H, D, L]", "", ["B", "H", "S", "L"]),          # a missing batch dim
    ("f16[B, 1, S, D]", "f16[B, H, D, L]", "", ["B", "H", "S", "L"]),       # a batch dim of 1
    ("f16[S, D]", "f16[B, H, D, L]", "", ["B", "H", "S", "L"]),             # one matrix for every entry
    ("f16[B, H, S, D]", "f16[B, H, L, D]", ", trans_b=True", ["B", "H", "S", "L"]),
    ("f16[B, D, S]", "f16[D, L]", ", trans_a=True", ["B", "S", "L"]),
])
def test_batch_dims_broadcast_as_torch_matmul(tmp_path, a, b, flags, want):
    diags, checked = _check(tmp_path, f"a: {a}, b: {b}, c: out f32[{', '.join(want)}]",
                            f"c[:] = matmul(a, b{flags})")
    assert not [d for d in diags if d.severity == "error"], diags
    t = _matmul_type(checked)
    assert _text(t.shape) == want and t.dtype == "f32"


def test_batch_dims_that_do_not_broadcast_are_e0304_at_the_call(tmp_path):
    diags, _ = _check(tmp_path, "a: f16[B, S, D], b: f16[H, D, L], c: out f32[B, S, L]", "c[:] = matmul(a, b)")
    (d,) = diags
    assert d.code == "E0304" and "batch dims do not broadcast: B and H" in d.message
    assert d.span.line == 2 and [lab.message for lab in d.secondary] == ["shape [B, S, D]", "shape [H, D, L]"]


@pytest.mark.parametrize("a", ["f16[D]", "f16[A, B, C, S, D]"])
def test_operands_of_rank_1_or_5_are_e0314(tmp_path, a):
    diags, _ = _check(tmp_path, f"a: {a}, b: f16[D, L], c: out f32[L]", "c[:] = matmul(a, b)")
    assert diags[0].code == "E0314" and "rank 2 to 4" in diags[0].message


def test_int8_accumulates_in_i32_by_default(tmp_path):
    diags, checked = _check(tmp_path, "a: i8[M, K], b: i8[K, N], c: out i32[M, N]", "c[:] = matmul(a, b)")
    assert not diags
    assert _matmul_type(checked).dtype == "i32"


@pytest.mark.parametrize("dtype, out, ok", [
    ("f16", "f16", True), ("bf16", "bf16", True), ("f32", "bf16", True), ("f16", "f32", True),
    ("i8", "i32", True), ("i8", "f16", False), ("i8", "f32", False), ("f16", "i32", False), ("f32", "i8", False),
])
def test_out_dtype_is_what_the_cube_writes(tmp_path, dtype, out, ok):
    diags, checked = _check(tmp_path, f"a: {dtype}[M, K], b: {dtype}[K, N], c: out {out}[M, N]",
                            f"c[:] = matmul(a, b, out_dtype={out})")
    if ok:
        assert not diags and _matmul_type(checked).dtype == out
    else:
        (d,) = diags
        assert d.code == "E0820" and d.span.col == len("    c[:] = matmul(a, b, out_dtype=") + 1


@pytest.mark.parametrize("dtype, bias, ok", [
    ("f16", "f32[N]", True), ("f16", "f16[N]", True), ("bf16", "bf16[N]", True), ("i8", "i32[N]", True),
    ("f16", "f32[M]", False), ("f16", "f32[1, N]", False), ("i8", "i8[N]", False), ("f32", "f16[N]", False),
    ("f16", "bf16[N]", False),
])
def test_the_bias_is_a_row_of_the_accumulator_or_input_dtype(tmp_path, dtype, bias, ok):
    acc = "i32" if dtype == "i8" else "f32"
    diags, _ = _check(tmp_path, f"a: {dtype}[M, K], b: {dtype}[K, N], v: {bias}, c: out {acc}[M, N]",
                      "c[:] = matmul(a, b, bias=v)")
    if ok:
        assert not diags, diags
    else:
        assert [d.code for d in diags] == ["E0821"] and diags[0].span.col == len("    c[:] = matmul(a, b, bias=") + 1


def test_a_bias_keyword_is_known_and_a_misspelt_one_is_not(tmp_path):
    diags, _ = _check(tmp_path, "a: f16[M, K], b: f16[K, N], v: f32[N], c: out f32[M, N]",
                      "c[:] = matmul(a, b, baias=v)")
    assert diags[0].code == "E0302" and "did you mean `bias`" in diags[0].help


@pytest.mark.parametrize("value, code", [("0", "E0209"), ("65", "E0209"), ("2.5", "E0207"), ("[2]", "E0207")])
def test_split_k_out_of_range_is_reported_at_its_yaml_key(tmp_path, value, code):
    yaml = f"schedule:\n  cube_tile: {{m: [32, 64], k: [32, 64], n: [32, 64], split_k: {value}}}\n"
    diags, _ = _check(tmp_path, "a: f16[M, K], b: f16[K, N], c: out f32[M, N]", "c[:] = matmul(a, b)", yaml)
    assert diags and diags[0].code == code, diags
    assert diags[0].span.file.endswith("k.yaml") and diags[0].span.line == 2
    assert diags[0].span.col == len("  cube_tile: {m: [32, 64], k: [32, 64], n: [32, 64], split_k: ") + 1


def test_split_k_above_the_k_tiles_of_a_fixed_k_is_e0822(tmp_path):
    yaml = "symbols: {K: 100}\nschedule:\n  cube_tile: {m: [32, 64], k: [32, 64], n: [32, 64], split_k: 5}\n"
    diags, _ = _check(tmp_path, "a: f16[M, K], b: f16[K, N], c: out f32[M, N]", "c[:] = matmul(a, b)", yaml)
    (d,) = diags
    assert d.code == "E0822" and "the 4 k tiles" in d.message and d.span.file.endswith("k.yaml")
    ok, _ = _check(tmp_path, "a: f16[M, K], b: f16[K, N], c: out f32[M, N]", "c[:] = matmul(a, b)",
                   yaml.replace("split_k: 5", "split_k: 4"))
    assert not ok
    runtime_k, _ = _check(tmp_path, "a: f16[M, K], b: f16[K, N], c: out f32[M, N]", "c[:] = matmul(a, b)",
                          yaml.replace("symbols: {K: 100}\n", ""))
    assert not runtime_k  # a K known at run time uses as many partials as it has k tiles


def test_a_bias_row_over_the_bias_table_is_e0605(tmp_path):
    yaml = "schedule:\n  cube_tile: {m: [32, 64], k: [32, 64], n: [512, 512]}\n"
    diags, _ = _check(tmp_path, "a: f16[M, K], b: f16[K, N], v: f32[N], c: out f32[M, N]",
                      "c[:] = matmul(a, b, bias=v)", yaml)
    assert [d.code for d in diags] == ["E0605"] and "bias table" in diags[0].message
    assert "at most 256" in diags[0].help  # 1 KiB of f32 on the 910B


@pytest.mark.parametrize("axis, l0", [("m", 8), ("m", 24), ("k", 8), ("n", 40)])
def test_cube_tiles_are_whole_fractals(tmp_path, axis, l0):
    """Every L0 extent is a whole number of 16-row fractals (pto-isa's tile layouts), also where a
    32-byte row would allow less (f32: 8 elements)."""
    tile = {"m": 32, "k": 32, "n": 32} | {axis: l0}
    yaml = "schedule:\n  cube_tile: {" + ", ".join(f"{a}: [{t}, {t}]" for a, t in tile.items()) + "}\n"
    diags, _ = _check(tmp_path, "a: f32[M, K], b: f32[K, N], c: out f32[M, N]", "c[:] = matmul(a, b)", yaml)
    (d,) = diags
    assert d.code == "E0604" and "16-row cube fractals" in d.message and d.span.file.endswith("k.yaml")
