"""Linear dim expressions simplify, and a spec may define dims by others (`symbols: {D: 2*H}`):
the checker substitutes the definition, every call checks it on the argument shapes (or solves
the one dim it lacks), and a generated package does the same."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl import sym
from ptodsl.api import ArgumentValueError
from ptodsl.runtime.program import load_program

BACKENDS = ["sim", pytest.param("cpu", marks=pytest.mark.cpu)]


@pytest.mark.parametrize(("text", "want"), [
    ("2*H - H", "H"),
    ("(i + e) - i", "e"),
    ("H*2 + H - 3*H", "0"),
    ("(a + b)*2 - a", "a + b * 2"),
    ("(j + 1)*64 - j*64", "64"),
    ("H*W - W*H", "0"),
    ("min(H, 2*H - H)", "H"),
    ("x // 2 + x // 2", "x // 2 * 2"),
    # nothing cancels: the expression stays as written
    ("j*64 + 64", "j * 64 + 64"),
    ("(a + b)*2", "(a + b) * 2"),
    ("1.5*H - H", "H * 1.5 - H"),
])
def test_linear_forms_cancel(text, want):
    e = sym.parse(text)
    assert sym.to_text(e) == want
    assert sym.to_text(sym.parse(sym.to_text(e))) == want  # printed forms parse back to themselves


def test_a_definition_is_bound_or_solved():
    defined = {"D": sym.parse("2*H"), "S": sym.parse("Q + K")}
    values = {"D": 16, "K": 3, "S": 10}
    assert sym.bind_defined(defined, values) is None and values["H"] == 8 and values["Q"] == 7
    broken = sym.bind_defined(defined, {"D": 9, "H": 4})
    assert broken is not None and broken.message() == "`D` is 9, but `D = H * 2` makes it 8 (H = 4)"
    assert "no solution in whole dims" in sym.bind_defined(defined, {"D": 7}).message()


HALVES = ("kernel halves(x: f32[B, D], y: out f32[B, H]):\n"
          "    y[:] = x[:, 0:H] + x[:, H:2*H]\n")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_slice_by_a_defined_dim_checks_and_computes(write_spec, backend):
    op = ptodsl.load(write_spec("halves", HALVES, "op: halves\nsymbols: {D: 2*H}\nschedule: {vec_tile: [1, 64]}\n"))
    x = np.random.default_rng(0).standard_normal((3, 200)).astype(np.float32)
    np.testing.assert_array_equal(op(x, backend=backend), x[:, :100] + x[:, 100:])
    with pytest.raises(ArgumentValueError) as info:
        op(np.ones((2, 7), np.float32), backend=backend)
    d = info.value.diagnostic
    assert d.code == "E0866" and "`D` is 7" in d.message and d.span.line == 1
    with pytest.raises(ArgumentValueError) as info:
        op(x, y=np.zeros((3, 64), np.float32), backend=backend)
    assert info.value.diagnostic.code == "E0866" and "makes it 128 (H = 64)" in info.value.diagnostic.message


SWAP = ("kernel k(x: f32[B, D], y: out f32[B, D]):\n"
        "    y[:, 0:H] = x[:, H:2*H]\n"
        "    y[:, H:2*H] = x[:, 0:H]\n")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dim_only_the_definition_names_is_solved_at_the_call(write_spec, backend):
    """H is no parameter's dim: D gives it, and the two halves provably cover `y`."""
    op = ptodsl.load(write_spec("k", SWAP, "op: k\nsymbols: {D: 2*H}\nschedule: {vec_tile: [1, 64]}\n"))
    assert not op.compiled.diagnostics.items
    x = np.arange(2 * 70, dtype=np.float32).reshape(2, 70)
    np.testing.assert_array_equal(op(x, backend=backend), np.concatenate([x[:, 35:], x[:, :35]], axis=1))


def test_without_the_definition_the_dim_is_unknown(compile_text):
    assert compile_text(SWAP, "schedule: {vec_tile: [1, 64]}\n")[:1] == ["E0300"]


def test_the_program_carries_the_definitions(write_spec, tmp_path):
    import json

    from ptodsl.api import program_of
    from ptodsl.runtime.program import program_json

    op = ptodsl.load(write_spec("halves", HALVES, "op: halves\nsymbols: {D: 2*H}\nschedule: {vec_tile: [1, 64]}\n"))
    data = program_json(program_of(op.compiled), lambda p: p, {0: {"tensor": "t", "block": "b"}},
                        {0: {}})
    assert data["defined"] == {"D": "H * 2"}
    assert sym.to_text(load_program.__globals__["sym"].parse(data["defined"]["D"])) == "H * 2"
    assert "defined" not in json.dumps(program_json(
        program_of(ptodsl.load("specs/softmax.yaml").compiled), lambda p: p,
        {i: {"tensor": "t", "block": "b"} for i in range(3)}, {i: {} for i in range(3)}))


@pytest.mark.parametrize(("symbols", "code"), [
    ("{D: 2*H*H}", "E0865"),        # not linear
    ("{D: D / 2}", "E0865"),        # a division
    ("{D: 2*H, H: D - 1}", "E0865"),  # a cycle
    ("{D: H + 1}", None),           # H solved from D: accepted
    ("{D: 2*H + Z}", "E0865"),      # two dims no parameter binds, one definition to solve them
    ("{D: 2*H, Y: Z + Q}", "E0865"),  # two dims no parameter binds
    ("{D: 2*H, N: 4, M: N * 2}", "E0865"),  # a constant: fix it instead
    ("{D: 2}", None),               # an integer fixes D (a quoted expression would define it)
])
def test_definitions_are_validated_at_their_key(compile_text, symbols, code):
    pto = "kernel k(x: f32[B, D], y: out f32[B, D]):\n    y[:] = x + 1.0\n"
    got = [c for c in compile_text(pto, f"symbols: {symbols}\nschedule: {{vec_tile: [1, 64]}}\n") if c[0] == "E"]
    assert got[:1] == ([code] if code else [])


def test_cases_must_satisfy_the_definitions(compile_text):
    pto = "kernel k(x: f32[B, D], y: out f32[B, D]):\n    y[:] = x + 1.0\n"
    spec = "symbols: {D: 2*H}\nschedule: {vec_tile: [1, 64]}\ntests:\n  - {shapes: {B: 2, H: 4, D: 9}}\n"
    assert compile_text(pto, spec)[:1] == ["E0866"]
