"""Golden cases that give their inputs: literal lists, generators, .npy files (docs/LANGUAGE.md §2).

The values reach the kernel, the reference and the cost model unchanged; every malformed entry is
a diagnostic at its YAML line, from `ptodsl check`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ptodsl.cases import TestCase, build_input
from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.driver import compile_spec, search_cases
from ptodsl.golden import case_id, load, run_case

BACKENDS = ["sim", pytest.param("cpu", marks=pytest.mark.cpu)]

PTO = """\
kernel seg(x: f32[T, H], cu: i32[B1], p: i32[1, P], y: inout f32[T, H], z: out f32[1, P]):
    for b in loop(B1 - 1, name="segs"):
        lo = cu[b]
        hi = cu[b + 1]
        for t in loop(lo, hi, name="toks"):
            y[t, :] = x[t, :] * 2.0
    z[:] = cast(p, f32) * 0.5
"""
REF = """\
import numpy as np
def seg(x, cu, p, y):
    y = y.copy()
    for b in range(len(cu) - 1):
        y[cu[b]:cu[b + 1]] = x[cu[b]:cu[b + 1]] * 2
    return y, p.astype(np.float32) * 0.5
"""
HEAD = "op: seg\nschedule: {vec_tile: [1, 64]}\nreference: ref.py:seg\ntests:\n"
SHAPES = "{T: 41, H: 64, B1: 4, P: 5}"


@pytest.fixture
def spec(tmp_path: Path):
    def write(cases: str) -> str:
        (tmp_path / "seg.pto").write_text(PTO)
        (tmp_path / "ref.py").write_text(REF)
        (tmp_path / "data").mkdir(exist_ok=True)
        (tmp_path / "seg.yaml").write_text(HEAD + cases)
        return str(tmp_path / "seg.yaml")
    return write


def codes(path: str) -> list[tuple[str, int]]:
    try:
        compile_spec(path, Diagnostics())
    except CompileError as exc:
        return [(d.code, d.span.line if d.span else 0) for d in exc.diagnostics if d.code.startswith("E")]
    return []


@pytest.mark.parametrize("backend", BACKENDS)
def test_explicit_values_reach_the_kernel_and_the_reference(spec, tmp_path, backend):
    path = spec(f"  - shapes: {SHAPES}\n"
                "    inputs: {cu: [0, 17, 40, 41], p: [[4, 0, 3, 1, 2]]}\n"
                "  - shapes: {T: 41, H: 64, B1: 6, P: 41}\n"
                "    inputs: {cu: {cumsum: {total: T}}, p: {permutation: 41}, x: data/x.npy}\n"
                "  - shapes: {T: 41, H: 64, B1: 3, P: 2}\n"
                "    inputs: {cu: {cumsum: {range: [0, 20]}}, p: {randint: [-3, 3]}, y: {full: 7}}\n")
    x = np.arange(41 * 64, dtype=np.float64).reshape(41, 64) / 100
    np.save(tmp_path / "data" / "x.npy", x)
    op = load(path)
    results = [run_case(op, c, backend) for c in op.spec.tests]
    assert all(r.ok for r in results), [r.report for r in results]
    first, second, third = (r.inputs for r in results)
    assert first["cu"].tolist() == [0, 17, 40, 41] and first["cu"].dtype == np.int32
    assert first["p"].tolist() == [[4, 0, 3, 1, 2]]
    # the rows outside every segment keep the inout's input; the segments are doubled
    np.testing.assert_array_equal(results[0].outputs["y"][17:40], first["x"][17:40] * 2)
    assert sorted(second["p"][0].tolist()) == list(range(41))
    assert second["cu"][0] == 0 and second["cu"][-1] == 41 and (np.diff(second["cu"]) >= 0).all()
    np.testing.assert_array_equal(second["x"], x.astype(np.float32))
    assert third["cu"][0] == 0 and ((np.diff(third["cu"]) >= 0) & (np.diff(third["cu"]) <= 20)).all()
    assert (third["y"] == 7).all() and -3 <= third["p"].min() and third["p"].max() <= 3
    # seeded: the same case makes the same values, and the other inputs stay random
    again = run_case(op, op.spec.tests[2], backend).inputs
    assert all((again[k] == v).all() for k, v in third.items())
    assert len(np.unique(first["x"])) > 100


def test_ids_tell_cases_of_one_shape_apart(spec):
    path = spec(f"  - {{shapes: {SHAPES}, inputs: {{cu: [0, 1, 2, 3]}}}}\n  - {{shapes: {SHAPES}}}\n")
    op = load(path)
    ids = [case_id(op.spec, c) for c in op.spec.tests]
    assert ids == ["seg[T41-H64-B14-P5-cu]", "seg[T41-H64-B14-P5]"]


@pytest.mark.parametrize(("inputs", "code"), [
    ("{cuu: [0, 1, 2, 3]}", "E0860"),          # no such parameter (did you mean `cu`?)
    ("{z: [[1, 2, 3, 4, 5]]}", "E0860"),       # an output
    ("{cu: [0, 1, 2]}", "E0861"),              # 3 values for [4]
    ("{cu: [0, 1, [2], 3]}", "E0861"),         # ragged
    ("{cu: [0, 1, 2, 3000000000]}", "E0862"),  # beyond i32
    ("{cu: [0, 1.5, 2, 3]}", "E0862"),         # not an integer
    ("{p: {permutation: 3}}", "E0863"),        # 3 values for 5 elements
    ("{p: {randint: [5, 1]}}", "E0863"),       # low > high
    ("{p: {permutation: Q}}", "E0863"),        # a dim the case does not give
    ("{p: {arange: [0, 1000000000]}}", "E0863"),  # leaves i32
    ("{x: {cumsum: {total: T}}}", "E0863"),    # not 1-D
    ("{cu: {cumsum: {total: T, range: [0, 2]}}}", "E0863"),
    ("{p: {full: 1, arange: 0}}", "E0863"),    # two generators
    ("{p: {permutatoin: 5}}", "E0206"),        # misspelled, with a did-you-mean
    ("{x: data/missing.npy}", "E0864"),
    ("{x: data/x.txt}", "E0864"),
    ("{x: data/obj.npy}", "E0864"),            # pickled objects are never loaded
    ("{x: data/big.npy}", "E0864"),            # over the size cap
    ("{x: data/small.npy}", "E0861"),          # another shape
    ("{x: ../x.npy}", "E0219"),                # outside the spec's folder
])
def test_malformed_entries_are_diagnostics_at_their_line(spec, tmp_path, inputs, code, monkeypatch):
    path = spec(f"  - shapes: {SHAPES}\n    inputs: {inputs}\n")
    np.save(tmp_path / "data" / "obj.npy", np.array([{}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "data" / "small.npy", np.zeros((2, 2)))
    (tmp_path / "data" / "x.txt").write_text("1 2 3")
    monkeypatch.setattr("ptodsl.cases.MAX_INPUT_FILE_BYTES", 1024)
    np.save(tmp_path / "data" / "big.npy", np.zeros((41, 64)))
    got = codes(path)
    assert got[:1] == [(code, 6)], got


def test_values_past_the_dtype_of_the_variant(spec):
    """The dtype is the one of the case's variant: 300 fits f16's range, 70000 does not."""
    ok = build_input("a", {"values": [300.0]}, (1,), "f16", 0, {}, ".")
    assert ok.dtype == np.float16 and ok[0] == 300
    with pytest.raises(ValueError, match="outside the range of `f16`"):
        build_input("a", {"values": [70000.0]}, (1,), "f16", 0, {}, ".")
    with pytest.raises(ValueError, match="not a boolean"):
        build_input("a", {"values": [2]}, (1,), "bool", 0, {}, ".")


def test_cases_round_trip_through_json():
    case = TestCase(0, {"B": 2}, inputs={"a": {"values": [[1, 2]]}, "b": {"cumsum": {"total": "S"}},
                                         "c": {"file": "data/c.npy"}})
    assert TestCase.from_json(case.to_json()) == case
    assert "inputs" not in TestCase(1).to_json()  # cases without explicit inputs keep their form
    assert case.files() == ["data/c.npy"]


def test_the_cost_model_reads_the_explicit_values(spec):
    from ptodsl.cost.dryrun import estimate

    path = spec(f"  - shapes: {SHAPES}\n    inputs: {{cu: [0, 17, 40, 41]}}\n"
                f"  - shapes: {SHAPES}\n    ranges: {{cu: [0, 41]}}\n")
    c = compile_spec(path)
    explicit, bounded = search_cases(c.stages["tensor"], c.spec)[:1] + [None]
    assert isinstance(explicit.reads["cu"], np.ndarray) and explicit.reads["cu"].tolist() == [0, 17, 40, 41]
    block = c.stages["block"]
    with_values = estimate(block, explicit.control, explicit.symbols, c.target, {}, explicit.reads)
    at_the_top = estimate(block, explicit.control, explicit.symbols, c.target, {}, {"cu": 41})
    # 41 rows doubled (17 + 23 + 1), against none when every offset reads 41
    assert with_values.gm_bytes > at_the_top.gm_bytes
    assert with_values.gm_bytes - at_the_top.gm_bytes == 41 * 64 * 4 * 2


def test_inputs_for_a_parameter_of_an_unbound_dtype_variable_are_left_to_the_typer(tmp_path):
    """A parameter typed by a name the spec does not bind (a misspelt dtype) gets E0305 at the
    .pto, and its case's `inputs:` no array: an unknown dtype once reached the input builder and
    stopped `ptodsl check` with an internal error (found by ptodsl.fuzz.mutate)."""
    (tmp_path / "seg.pto").write_text(PTO.replace("cu: i32[B1]", "cu: set_flag[B1]"))
    (tmp_path / "ref.py").write_text(REF)
    (tmp_path / "seg.yaml").write_text(HEAD + f"  - {{shapes: {SHAPES}, inputs: {{cu: [0, 10, 20, 41]}}}}\n")
    assert ("E0305", 1) in codes(str(tmp_path / "seg.yaml"))
