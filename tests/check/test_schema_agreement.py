"""The JSON Schema `ptodsl schema` prints for editors agrees with the checker on integer fields.

Each bad value below is refused by the checker with its own code and by the JSON Schema (through
jsonschema); each good boundary value is accepted by both. Some bounds are the checker's to
report (``checked_by`` in the schema: E0602 for a tile dim, E0504/E0510 for an unroll factor...),
so the YAML validation leaves them alone, yet the JSON Schema states them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.driver import compile_spec
from ptodsl.frontend.schema import json_schema, spec_schema
from ptodsl.yamlio.nodes import compose, to_python
from ptodsl.yamlio.schema import Int, ListOf, MapOf, Obj, OneOf

jsonschema = pytest.importorskip("jsonschema")

VEC = ("kernel vec(x: f32[R, C], y: out f32[R, C]):\n"
       "    for r in loop(R, name=\"rows\"):\n"
       "        y[r, :] = x[r, :] + 1.0\n")
CUBE = ("kernel mm(a: f16[M, K], b: f16[K, N], c: out f32[M, N]):\n"
        "    c[:] = matmul(a, b, out_dtype=f32)\n")


def vec_yaml(vec_tile: str = "[1, 256]", unroll: str = "[2, 1]", loop_tile: str = "[1, 256]",
             options: str = "{cycle_upper_bound: 4000}", test: str = "{shapes: {R: 2, C: 256}}",
             symbols: str = "{}") -> str:
    return (f"op: vec\nsymbols: {symbols}\nschedule:\n  vec_tile: {vec_tile}\n"
            f"  loops:\n    rows: {{unroll: {unroll}, vec_tile: {loop_tile}}}\n  pass_options: {options}\n"
            f"tests:\n  - {test}\n")


def cube_yaml(m: str = "[64, 128]") -> str:
    return f"op: mm\nschedule:\n  cube_tile: {{m: {m}, k: [64, 128], n: [64, 128]}}\n"


# (what, pto, yaml, the checker's first error code)
BAD = [
    ("vec_tile [1, -4]", VEC, vec_yaml(vec_tile="[1, -4]"), "E0602"),
    ("vec_tile [0, 256]", VEC, vec_yaml(vec_tile="[0, 256]"), "E0602"),
    ("loop vec_tile [1, 0]", VEC, vec_yaml(loop_tile="[1, 0]"), "E0602"),
    ("loop vec_tile [-1, 256]", VEC, vec_yaml(loop_tile="[-1, 256]"), "E0602"),
    ("unroll [0]", VEC, vec_yaml(unroll="[0]"), "E0504"),
    ("unroll [4, -2, 1]", VEC, vec_yaml(unroll="[4, -2, 1]"), "E0504"),
    ("unroll [257, 1]", VEC, vec_yaml(unroll="[257, 1]"), "E0510"),
    ("unroll [10**12]", VEC, vec_yaml(unroll="[1000000000000]"), "E0510"),
    ("unroll [2, 2, 1]", VEC, vec_yaml(unroll="[2, 2, 1]"), "E0505"),
    ("cube m [0, 128]", CUBE, cube_yaml("[0, 128]"), "E0604"),
    ("cube m [-64, 128]", CUBE, cube_yaml("[-64, 128]"), "E0604"),
    ("cube m [64, -128]", CUBE, cube_yaml("[64, -128]"), "E0604"),
    ("cycle_upper_bound 0", VEC, vec_yaml(options="{cycle_upper_bound: 0}"), "E0209"),
    ("max_paths -1", VEC, vec_yaml(options="{max_paths: -1}"), "E0209"),
    ("double_buffer 1", VEC, vec_yaml(options="{double_buffer: 1}"), "E0207"),
    ("symbols C: 0", VEC, vec_yaml(symbols="{C: 0}"), "E0209"),
    ("test shape -1", VEC, vec_yaml(test="{shapes: {R: -1, C: 256}}"), "E0209"),
    ("test seed -1", VEC, vec_yaml(test="{shapes: {R: 2, C: 256}, seed: -1}"), "E0209"),
    ("test atol -1e-3", VEC, vec_yaml(test="{shapes: {R: 2, C: 256}, atol: -1e-3}"), "E0209"),
]

GOOD = [
    ("defaults", VEC, vec_yaml()),
    ("vec_tile [1, 8]", VEC, vec_yaml(vec_tile="[1, 8]", loop_tile="[1, 8]")),
    # 256 copies of the body in one kernel pass the stack budget (E0613): a low cycle bound cuts them
    ("unroll [256, 1]", VEC, vec_yaml(unroll="[256, 1]", options="{cycle_upper_bound: 100}")),
    ("unroll [1]", VEC, vec_yaml(unroll="[1]")),
    ("cycle_upper_bound 1", VEC, vec_yaml(options="{cycle_upper_bound: 1, max_paths: 1}")),
    ("test shape 0, seed 0", VEC, vec_yaml(test="{shapes: {R: 0, C: 256}, seed: 0, atol: 0}")),
    ("cube m [16, 16]", CUBE, cube_yaml("[16, 16]")),
]


def _checker_errors(tmp_path: Path, pto: str, yml: str) -> list[str]:
    name = yml.split("\n", 1)[0].removeprefix("op: ")
    (tmp_path / f"{name}.pto").write_text(pto, encoding="utf-8")
    (tmp_path / f"{name}.yaml").write_text(yml, encoding="utf-8")
    try:
        compile_spec(str(tmp_path / f"{name}.yaml"), Diagnostics())
    except CompileError as exc:
        return [d.code for d in exc.diagnostics if d.is_error]
    return []


def _schema_errors(yml: str) -> list[str]:
    validator = jsonschema.Draft202012Validator(json_schema())
    return [e.message for e in validator.iter_errors(to_python(compose(yml, "x.yaml", Diagnostics())))]


@pytest.mark.parametrize(("what", "pto", "yml", "code"), BAD, ids=[b[0] for b in BAD])
def test_bad_values_are_refused_by_both(what: str, pto: str, yml: str, code: str, tmp_path: Path) -> None:
    got = _checker_errors(tmp_path, pto, yml)
    assert got and got[0] == code, (what, got)
    assert _schema_errors(yml), f"the JSON Schema accepts {what}, which the checker refuses ({code})"


@pytest.mark.parametrize(("what", "pto", "yml"), GOOD, ids=[g[0] for g in GOOD])
def test_good_values_are_accepted_by_both(what: str, pto: str, yml: str, tmp_path: Path) -> None:
    assert _checker_errors(tmp_path, pto, yml) == []
    assert _schema_errors(yml) == []


def _ints(schema: Any, path: str) -> list[tuple[str, Int]]:
    """Every Int of the spec format, by its place (scalar parameter values excluded: any number)."""
    if isinstance(schema, Int):
        return [(path, schema)]
    if isinstance(schema, Obj):
        return [x for k, v in schema.fields.items() for x in _ints(v, f"{path}.{k}")]
    if isinstance(schema, MapOf):
        return [] if path.endswith(".scalars") else _ints(schema.value, f"{path}.*")
    if isinstance(schema, ListOf):
        return _ints(schema.item, f"{path}[]")
    if isinstance(schema, OneOf):
        return [x for alt in schema.alts for x in _ints(alt, path)]
    return []


def test_every_integer_field_has_a_lower_bound() -> None:
    ints = _ints(spec_schema(), "$")
    assert len(ints) >= 10
    assert [p for p, i in ints if i.min is None] == []
    # a bound the checker reports names codes that exist, and the JSON Schema still states it
    from ptodsl.diagnostics import code_registry

    assert all(c in code_registry() for _, i in ints for c in i.checked_by)
    assert all(i.to_json().get("minimum") == i.min for _, i in ints)
