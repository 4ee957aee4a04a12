"""The indexing builtins (docs/LANGUAGE.md §1.6) end to end: the guards over index data on both
backends, the semantics the library specs do not pin down (ties, infinities, NaN, repeated
scatter rows), the typing rules, explicit test inputs and refusals, and the tuple binding.

The cpu cases reuse the library specs' variants (built once into the cache) or one small spec
holding several ops, so the suite builds few C++ libraries."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl.cases import TestCase
from ptodsl.diagnostics import CompileError
from ptodsl.driver import compile_spec
from ptodsl.frontend.parser import parse_stmt
from ptodsl.golden import run_case
from ptodsl.ops import INDEXING
from ptodsl.runtime.golden import CaseError, make_inputs

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = (ROOT / "docs" / "LANGUAGE.md").read_text(encoding="utf-8")
BACKENDS = ["sim", pytest.param("cpu", marks=pytest.mark.skipif(shutil.which("g++") is None, reason="no g++"))]


def spec(tmp_path: Path, name: str, pto: str, yaml: str) -> str:
    (tmp_path / f"{name}.pto").write_text(pto)
    (tmp_path / f"{name}.yaml").write_text(f"op: {name}\n{yaml}")
    return str(tmp_path / f"{name}.yaml")


def diag_codes(path: str) -> list[str]:
    with pytest.raises(CompileError) as info:
        compile_spec(path)
    return [d.code for d in info.value.diagnostics]


# ------------------------------------------------------------------ guards over index data


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [10, -1, 2**31 + 3, -(2**40)])
def test_an_index_outside_the_table_stops_the_gather(backend: str, bad: int):
    op = ptodsl.load(str(ROOT / "specs/gather_rows.yaml"))
    table = np.arange(10 * 64, dtype=np.float32).reshape(10, 64)
    ids = np.array([1, bad, 2], np.int64)  # i64: values past i32 are refused, not narrowed into range
    with pytest.raises(ptodsl.GuardError) as info:
        op(table, ids, backend=backend)
    d = info.value.diagnostic
    assert d.code == "E0730" and f"holds {bad}" in d.label and "`ids`" in d.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_slot_outside_the_cache_stops_the_call_before_any_row_is_written(backend: str):
    op = ptodsl.load(str(ROOT / "specs/kv_cache_update.yaml"))
    k_cache = np.zeros((16, 2, 64), np.float32)
    v_cache = np.zeros((16, 2, 64), np.float32)
    new = np.ones((3, 2, 64), np.float32)
    with pytest.raises(ptodsl.GuardError):
        op(k_cache, v_cache, np.array([4, 5, 16], np.int32), new, new, backend=backend)
    assert not k_cache.any() and not v_cache.any()  # slots 4 and 5 were not written either


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeated_slots_are_refused_before_either_cache_is_written(backend: str):
    """The library's KV-cache write declares its slots unique (a slot mapping names each slot
    once): a repeat stops the call (E0731). Scatters that keep the later row are
    tests/passes/test_unique_scatter.py's."""
    op = ptodsl.load(str(ROOT / "specs/kv_cache_update.yaml"))
    k_cache = np.zeros((16, 2, 64), np.float32)
    v_cache = np.zeros((16, 2, 64), np.float32)
    new = np.arange(1, 5, dtype=np.float32)[:, None, None] + np.zeros((4, 2, 64), np.float32)
    with pytest.raises(ptodsl.GuardError) as info:
        op(k_cache, v_cache, np.array([7, 3, 7, 7], np.int32), new, new * 2, backend=backend)
    assert info.value.diagnostic.code == "E0731"
    assert not k_cache.any() and not v_cache.any()


def test_an_index_tensor_computed_in_the_kernel_is_guarded_too(tmp_path: Path):
    path = spec(tmp_path, "chain", "kernel chain(x: f32[M, N], t: f32[R, N], y: out f32[M, N]):\n"
                "    y[:] = index_select(t, 0, argmax(x, dim=-1))\n",
                "schedule: {vec_tile: [4, 64]}\n")
    op = ptodsl.load(path)
    x = np.zeros((3, 64), np.float32)
    x[:, 40] = 1.0  # each row's maximum is in column 40, past the 8 rows of t
    t = np.ones((8, 64), np.float32)
    with pytest.raises(ptodsl.GuardError):
        op(x, t)
    x[:, 40], x[:, 5] = 0.0, 1.0
    np.testing.assert_array_equal(op(x, t), t[[5, 5, 5]])


# ------------------------------------------------------------------ semantics on both backends

def _many(tmp_path: Path) -> str:
    pto = ("kernel many(x: f32[M, N], xi: i32[M, N], lo: out f32[M, N], top: out f32[M, 3], ids: out i32[M, 3],\n"
           "           order: out i32[M, N], pick: out i32[M, N]):\n"
           "    lo[:] = tril(x, -1)\n"
           "    v, i = topk(x, 3)\n"
           "    top[:] = v\n"
           "    ids[:] = i\n"
           "    order[:] = argsort(xi, descending=True)\n"
           "    pick[:] = where(xi > 1, 2147483000, xi)\n")
    return spec(tmp_path, "many", pto, "symbols: {N: 8}\nschedule: {vec_tile: [4, 8]}\n")


@pytest.mark.parametrize("backend", BACKENDS)
def test_ties_infinities_and_nan_on_every_backend(tmp_path: Path, backend: str):
    op = ptodsl.load(_many(tmp_path))
    inf, nan = np.inf, np.nan
    x = np.array([[1, 1, 1, 1, 1, 1, 1, 1],  # all equal: the lowest indices first
                  [-inf, -inf, -inf, 0, -inf, 0, 0, 0],  # ties among the top values, -inf ranked too
                  [-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf],
                  [5, inf, 3, inf, nan, 2, -1, 5]], np.float32)
    xi = np.array([[2, 0, 2, 1, 0, 3, 3, 0]] * 4, np.int32)
    lo, top, ids, order, pick = op(x, xi, backend=backend)
    np.testing.assert_array_equal(ids[:3], [[0, 1, 2], [3, 5, 6], [0, 1, 2]])
    np.testing.assert_array_equal(top[:3], [[1, 1, 1], [0, 0, 0], [-inf, -inf, -inf]])
    np.testing.assert_array_equal(order[0], [5, 6, 0, 2, 3, 1, 4, 7])  # stable: equal values in order
    # tril keeps what lies below the diagonal and zeroes the rest exactly, inf and NaN too
    np.testing.assert_array_equal(lo[3], [5, inf, 3, 0, 0, 0, 0, 0])
    assert lo[2, 1] == -inf and (np.triu(lo, 0) == 0).all()
    # integer selects keep every bit (the simulator selected through f32, which rounds past 2**24)
    np.testing.assert_array_equal(pick[0], [2147483000, 0, 2147483000, 1, 0, 2147483000, 2147483000, 0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_argmax_keeps_the_first_index_across_tiles(backend: str):
    op = ptodsl.load(str(ROOT / "specs/argmax_rows.yaml"))
    x = np.zeros((3, 300), np.int32)
    x[0, [130, 10, 299]] = 5  # equal maxima in three column tiles of 128: the first wins
    x[1, 255], x[1, 256] = 7, 7  # either side of a tile boundary
    x[2, :] = -3
    imax, imin = op(x, backend=backend)
    np.testing.assert_array_equal(imax, [10, 255, 0])
    np.testing.assert_array_equal(imin[:, 0], [0, 0, 0])


# ------------------------------------------------------------------ typing


@pytest.mark.parametrize("body, code", [
    ("    y[:] = index_select(x, 0, cast(ix, f32))\n", "E0850"),
    ("    y[:] = gather(x, 0, ix2)\n", "E0851"),
    ("    y[:] = argmax(x, dim=0)\n", "E0851"),
    ("    scatter_update(x, 0, ix, y)\n", "E0319"),  # an input cannot be updated
    ("    scatter_update(y, 0, ix, x)\n", "E0852"),  # K rows written by M source rows
    ("    a, b = exp(x)\n", "E0855"),
    ("    a, b, c = topk(x, 2)\n", "E0855"),
    ("    y[:] = topk(x, 2)\n", "E0855"),
    ("    a, b = topk(x, N)\n", "E0853"),  # a row length only the call knows
    ("    y[:] = scatter_update(y, 0, ix, x)\n", "E0311"),
    ("    for i in loop(M):\n        p = arange(i, 2 * i, i32)\n", "E0854"),
    ("    p = arange(5, 5, i32)\n", "E0854"),
])
def test_mistakes_are_reported_at_the_users_line(tmp_path: Path, body: str, code: str):
    pto = ("kernel bad(x: f32[M, N], ix: i32[K], ix2: i32[M, N], y: out f32[K, N]):\n" + body
           + "    y[:] = index_select(x, 0, ix)\n")
    codes = diag_codes(spec(tmp_path, "bad", pto, "schedule: {vec_tile: [8, 64]}\n"))
    assert codes[0] == code, codes


def test_a_failed_tuple_binding_reports_once(tmp_path: Path):
    pto = ("kernel bad(x: f32[M, 8], y: out f32[M, 9]):\n    a, b = topk(x, 9)\n    y[:] = a\n")
    assert diag_codes(spec(tmp_path, "bad", pto, "schedule: {vec_tile: [8, 8]}\n")) == ["E0853"]


def test_a_tuple_binding_parses_and_formats():
    s = parse_stmt("v, i = topk(x, 4, largest=False)")
    assert [t.id for t in s.targets] == ["v", "i"] and s.value.func_name == "topk"


def test_every_indexing_builtin_is_documented():
    for name, io in INDEXING.items():
        assert re.search(rf"`[^`]*\b{re.escape(name)}\(", LANGUAGE), f"LANGUAGE.md has no entry for `{name}`"
        for ins in io.pto:
            assert ins in LANGUAGE, f"LANGUAGE.md does not name {ins} for `{name}`"


# ------------------------------------------------------------------ explicit inputs and refusals


def test_explicit_inputs_are_used_as_given_and_the_rest_stay_random():
    op = ptodsl.load(str(ROOT / "specs/gather_rows.yaml"))
    case = op.spec.tests[0]
    inputs, _ = make_inputs(op, case)
    np.testing.assert_array_equal(inputs["ids"], case.inputs["ids"]["values"])
    assert inputs["ids"].dtype == np.int32 and inputs["table"].std() > 0
    again, _ = make_inputs(op, TestCase(case.index, case.shapes, case.dtypes, inputs={"ids": {"values": [0] * 12}}))
    np.testing.assert_array_equal(again["table"], inputs["table"])  # the same draw for the others


@pytest.mark.parametrize("values, code, why", [
    ([1, 2.5, 3], "E0862", "is not an integer"),
    ([1, 2**31, 3], "E0862", "outside the range of `i32`"),
    ([[1], [2], [3]], "E0861", "the list has shape [3, 1]"),
    ([1, [2], 3], "E0861", "ragged"),
])
def test_index_values_that_do_not_fit_are_refused_as_any_explicit_input(values, code: str, why: str):
    # index data goes through the inputs: machinery of every case (E0861 shape, E0862 dtype)
    op = ptodsl.load(str(ROOT / "specs/gather_rows.yaml"))
    case = TestCase(0, {"V": 10, "D": 64, "N": 3}, {"T": "f32", "I": "i32"}, inputs={"ids": {"values": values}})
    with pytest.raises(CaseError) as info:
        make_inputs(op, case)
    assert info.value.code == code and why in info.value.message


def test_a_case_that_must_be_refused_fails_when_the_call_runs():
    op = ptodsl.load(str(ROOT / "specs/gather_rows.yaml"))
    shapes, dtypes = {"V": 10, "D": 64, "N": 3}, {"T": "f32", "I": "i32"}
    ran = run_case(op, TestCase(0, shapes, dtypes, inputs={"ids": {"values": [0, 9, 1]}}, refuses="E0730"))
    assert not ran.ok and "ran to the end" in ran.report
    wrong = run_case(op, TestCase(0, shapes, dtypes, inputs={"ids": {"values": [0, 10, 1]}}, refuses="E0711"))
    assert not wrong.ok and "not the expected E0711" in wrong.report
    right = run_case(op, TestCase(0, shapes, dtypes, inputs={"ids": {"values": [0, 10, 1]}}, refuses="E0730"))
    assert right.ok


def test_the_cost_model_reads_the_explicit_index_values():
    from ptodsl.driver import search_cases

    c = compile_spec(str(ROOT / "specs/gather_rows.yaml"))
    cases = {k.control: k for k in search_cases(c.stages["tensor"], c.spec)}
    reads = cases["gather_rows_i32_f32"].reads  # the `repeats` case (the refused ones are left out)
    assert set(reads) == {"ids"}
    np.testing.assert_array_equal(reads["ids"], [3, 0, 9, 3, 3, 7, 1, 0, 9, 2, 5, 3])


# ------------------------------------------------------------------ what the passes must see


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_after_a_scatter_sees_the_scattered_rows(tmp_path: Path, backend: str):
    # fusion forwards a stored tile to a later load of the same region: a scatter in between
    # changes rows of that region, so the load must read GM again
    pto = ("kernel upd(x: f32[M, N], s: f32[K, N], ix: i32[K], y: out f32[M, N], z: out f32[M, N]):\n"
           "    y[:] = x\n"
           "    scatter_update(y, 0, ix, s)\n"
           "    z[:] = y * 2.0\n")
    op = ptodsl.load(spec(tmp_path, "upd", pto, "schedule: {vec_tile: [8, 64]}\n"))
    x, s = np.zeros((6, 64), np.float32), np.ones((2, 64), np.float32)
    y, z = op(x, s, np.array([4, 1], np.int32), backend=backend)
    want = x.copy()
    want[[4, 1]] = 1.0
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(z, want * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_made_among_top_level_work_is_seen_by_a_later_loop(tmp_path: Path, backend: str):
    # the view lands in the implicit one-trip loop of the work around it; the C++ control program
    # declares its pointer up front, where the loop after it can see it
    pto = ("kernel vb(x: f32[M, N], y: out f32[M, N], z: out f32[2, N]):\n"
           "    y[:] = x + 1.0\n"
           "    v = x[0:2, :]\n"
           "    for i in loop(1, 2):\n"
           "        z[:] = v\n")
    op = ptodsl.load(spec(tmp_path, "vb", pto, "schedule: {vec_tile: [8, 64]}\n"))
    x = np.random.default_rng(1).random((4, 64)).astype(np.float32)
    y, z = op(x, backend=backend)
    np.testing.assert_array_equal(z, x[:2])


# ------------------------------------------------------------------ per-chip rules


@pytest.mark.parametrize("dim, rejected", [(64, False), (100, True)])
def test_ascend950_row_gathers_need_whole_rows_in_a_tile(tmp_path: Path, dim: int, rejected: bool):
    # A5's MGATHER / MSCATTER step table rows by the columns moved: a [8, 64] tile of 100-wide rows
    # reads a column block of strided rows, which only the 910B form takes
    from ptodsl.backends.cpp.rules import spec_violations

    pto = ("kernel emb(t: f32[V, D], ids: i32[N], y: out f32[N, D], c: inout f32[V, D]):\n"
           "    y[:] = index_select(t, 0, ids)\n"
           "    scatter_update(c, 0, ids, y)\n")
    for target, want in (("ascend910b", False), ("ascend950", rejected)):
        path = spec(tmp_path, "emb", pto, f"symbols: {{D: {dim}}}\ntarget: {target}\nschedule: {{vec_tile: [8, 64]}}\n")
        found = spec_violations(compile_spec(path))
        assert bool(found) == want, [d.message for d in found]
        if found:
            assert {d.code for d in found} == {"E0810"}
            assert any("MGATHER" in d.message for d in found) and any("MSCATTER" in d.message for d in found)


# ------------------------------------------------------------------ the fuzzer finds what these tests guard


def test_the_fuzzer_catches_a_missing_index_guard_and_a_wrong_tie(monkeypatch, tmp_path: Path):
    """With a bug planted, some of the first programs of the indexing features fail: the generator
    and its oracle would have found it."""
    from ptodsl.backends.sim import SIM
    from ptodsl.fuzz.gen import generate
    from ptodsl.fuzz.run import run_programs
    from ptodsl.passes import tensorize_index

    def finds(features: str, failing: tuple[str, ...]) -> bool:
        feats = frozenset(features.split(","))
        for seed in range(40):
            p = generate(seed, feats, max_blocks=1)
            if run_programs([p], ("sim",), str(tmp_path / str(seed)))[0].kind in failing:
                return True
        return False

    failing = ("mismatch", "crash", "rejected")
    assert not finds("index_gather,scatter,argmax", failing)  # nothing to find without a bug
    with monkeypatch.context() as mp:  # no guards: the call runs (or the simulator's own check fails)
        mp.setattr(tensorize_index, "index_guards", lambda *a, **k: None)
        assert finds("index_gather,scatter", failing)

    def last_of_equals(m, op) -> None:  # the last index among equal values instead of the first
        dst, src = m.tiles[op.operands[0].name], m.tiles[op.operands[1].name]
        vals = src.data[src.region()][..., ::-1]
        pick = np.argmax(vals, axis=-1) if op.name == "tile.argmax" else np.argmin(vals, axis=-1)
        dst.data[dst.region()] = (vals.shape[-1] - 1 - pick)[..., None]

    monkeypatch.setitem(SIM.table, "argreduce_tile", last_of_equals)
    assert finds("argmax", ("mismatch",))


def test_cases_keep_their_explicit_inputs_and_refusals_through_json():
    # a generated package reads its cases back from op.json; a case using neither key keeps its form
    t = TestCase(1, {"N": 3}, inputs={"ids": {"values": [[1, 2], [3, 4]]}}, refuses="E0730")
    assert TestCase.from_json(t.to_json()) == t
    plain = TestCase(2, {"N": 3})
    assert {"inputs", "refuses"}.isdisjoint(plain.to_json()) and TestCase.from_json(plain.to_json()) == plain
