"""The checker's typing of the layout builtins (check/layout.py): result shapes and valid shapes,
the diagnostics at the user's line, and the checks it leaves to the call."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptodsl import shapes, sym
from ptodsl.check import check
from ptodsl.check.types import TensorTy
from ptodsl.diagnostics import Diagnostics
from ptodsl.frontend import ast
from ptodsl.frontend.parser import parse_module
from ptodsl.frontend.spec import load_spec

S = sym.Sym


def typed(write_spec, pto: str, yaml: str = "schedule: {vec_tile: [1, 1, 8, 64]}\n"):
    """(diagnostics, {local name: its type}) of a kernel `k`, checker only."""
    diags = Diagnostics()
    spec = load_spec(write_spec("k", pto, "op: k\n" + yaml), diags)
    module = parse_module(Path(spec.source).read_text("utf-8"), spec.source, diags)
    checked = check(module, spec, diags) or []
    types: dict[str, TensorTy] = {}
    for ck in checked:
        for b in ck.typing.defines.values():
            if isinstance(b.ty, TensorTy):
                types[b.name] = b.ty
        return diags, types, ck
    return diags, types, None


def codes(diags: Diagnostics) -> list[str]:
    return [d.code for d in diags.items]


def text(shape) -> list[str]:
    return [sym.to_text(d) for d in shape]


# ------------------------------------------------------------------ shapes and groups


def test_reshape_groups_pair_runs_of_dims_with_equal_counts():
    hd = sym.mul(S("H"), S("D"))
    assert shapes.reshape_groups([S("B"), S("S"), hd], [S("B"), S("S"), S("H"), S("D")]) == [
        ((0,), (0,), True), ((1,), (1,), True), ((2,), (2, 3), True)]
    # three free symbols: the last group is left for the call to check
    assert shapes.reshape_groups([S("S"), S("E")], [S("S"), S("H"), S("D")])[-1] == ((1,), (1, 2), False)
    assert shapes.reshape_groups([6, 4], [1, 24, 1]) == [((), (0,), True), ((0, 1), (1,), True), ((), (2,), True)]


def test_reshape_strides_follow_numpy_and_refuse_a_window_cut_across_rows():
    # a [2, 3, 4] block of rows of a wider tensor (row stride 40): merging the last two dims is fine,
    # merging the first two crosses the cut
    assert shapes.reshape_strides([2, 3, 4], [12, 4, 1], [6, 4]) == (4, 1)
    assert shapes.reshape_strides([2, 3, 4], [40, 4, 1], [2, 12]) == (40, 1)
    assert shapes.reshape_strides([2, 3, 4], [40, 4, 1], [6, 4]) is None
    assert shapes.total([sym.sub(S("D"), sym.floordiv(S("D"), 2)), sym.floordiv(S("D"), 2)]) == S("D")


# ------------------------------------------------------------------ typing


def test_layout_results_and_their_valid_shapes(write_spec):
    pto = ("kernel k(x: f32[B, S, E], q: f32[B, S, H, D], lens: i32[B], y: out f32[B, S, E]):\n"
           "    r = reshape(x, [B, S, H, D])\n"
           "    p = permute(q, [0, 2, 1, 3])\n"
           "    t = transpose(q, 1, 3)\n"
           "    u = unsqueeze(x, 1)\n"
           "    s = squeeze(u, 1)\n"
           "    e = expand(x[:, 0:1, :], [B, S, -1])\n"
           "    c = concat([x, x * 2.0], dim=1)\n"
           "    for b in loop(B):\n"
           "        n = lens[b]\n"
           "        v = view(x, [1, S, E], [b, 0, 0], valid_shape=[1, n, E])\n"
           "        m = reshape(v, [S, E])\n"
           "        w = transpose(v, 1, 2)\n"
           "        f = concat([x[b:b + 1, :, :], v], dim=1)\n"
           "        y[b:b + 1, :, :] = v\n")
    diags, ty, _ = typed(write_spec, pto)
    assert not diags.errors, diags.items
    assert text(ty["r"].shape) == ["B", "S", "H", "D"] and ty["r"].valid is None
    assert text(ty["p"].shape) == ["B", "H", "S", "D"]
    assert text(ty["t"].shape) == ["B", "D", "H", "S"]
    assert text(ty["u"].shape) == ["B", "1", "S", "E"] and text(ty["s"].shape) == ["B", "S", "E"]
    assert text(ty["e"].shape) == ["B", "S", "E"]
    assert text(ty["c"].shape) == ["B", "S * 2", "E"]
    # a partial dim kept whole, merged as the outermost dim, transposed, or concatenated last
    n = "min(max(n, 0), S)"
    assert text(ty["m"].valid) == [n, "E"]
    assert text(ty["w"].valid) == ["1", "E", n]
    assert text(ty["f"].shape) == ["1", "S * 2", "E"] and text(ty["f"].valid) == ["1", f"S + {n}", "E"]


@pytest.mark.parametrize(("line", "code"), [
    ("y[:] = reshape(x, [S, E, 2])", "E0830"),
    ("y[:] = squeeze(x, 0)", "E0838"),
    ("y[:] = permute(x, [0, 0])", "E0834"),
    ("y[:] = transpose(x, 0, 2)", "E0308"),
    ("y[:] = concat([x, x[0:1, :]], dim=1)", "E0835"),
    ("y[:] = concat(x, dim=1)", "E0302"),
    ("y[:] = expand(x, [S, 2 * E])", "E0837"),
    ("y[:] = expand(x, [-1, S, E])", "E0837"),
    ("y[:] = clone(1.0)", "E0311"),
    ("y[:] = reshape(x, [S, E], 1)", "E0302"),
])
def test_layout_mistakes_are_reported_at_the_call(compile_text, line, code):
    got = compile_text(f"kernel k(x: f32[S, E], y: out f32[S, E]):\n    {line}\n")
    assert got and got[0] == code, got


def test_counts_and_extents_the_checker_cannot_prove_are_left_to_the_call(write_spec):
    pto = ("kernel k(x: f32[S, E], q: f32[S, H, D], y: out f32[S, H, D], z: out f32[S, E]):\n"
           "    y[:] = reshape(x, [S, H, D])\n"
           "    z[:] = concat([x[:, C:E], x[:, 0:C]], dim=-1)\n")
    diags, _, ck = typed(write_spec, pto, "symbols: {C: 3}\nschedule: {vec_tile: [1, 8, 64]}\n")
    assert not diags.errors, diags.items
    kinds = [(r.kind, sym.to_text(r.num), sym.to_text(r.den)) for r in ck.typing.requires]
    assert ("equal", "E", "H * D") in kinds
    # the part's valid extent min(max(E - 3, 0), E - 3) is E - 3 for every E; whether E - 3 is
    # negative only the call knows (E0839)
    assert ("whole", "E - 3", "E - 3") in kinds


def test_a_value_known_only_while_the_kernel_runs_cannot_be_left_to_the_call(compile_text):
    pto = ("kernel k(x: f32[S, E], lens: i32[1], y: out f32[S, E]):\n"
           "    n = lens[0]\n"
           "    v = view(x, [S, E], [0, 0], valid_shape=[n, E])\n"
           "    y[0:S, :] = concat([v[0:1, :], x[1:S, :]], dim=0)\n")
    assert compile_text(pto, "schedule: {vec_tile: [8, 64]}\n")[0] == "E0836"


def test_the_interpreter_and_the_checker_read_the_same_names():
    from ptodsl.check.layout import LAYOUT_BUILTINS
    from ptodsl.fuzz.interp_layout import NAMES
    from ptodsl.ops import STRUCTURE_BUILTINS

    assert set(LAYOUT_BUILTINS) == set(NAMES) and set(LAYOUT_BUILTINS) <= set(STRUCTURE_BUILTINS)
    assert isinstance(ast.ListExpr, type)
