"""One path model: the checker's count of compiled paths (E0509) is the count of the compiled IR.

Each kernel below is compiled through every pass; the paths the checker predicts from the source
must equal the paths ``ptodsl ir --stats`` reads off the control program, and E0509 must fire
exactly when that count passes ``max_paths``.
"""

from __future__ import annotations

import pytest

from ptodsl.check.loops import compiled_paths
from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.driver import compile_spec
from ptodsl.stats import max_body_paths

HEAD = "kernel k(x: f32[B, N], n: i32[B], y: inout f32[B, N]):\n"  # inout: coverage is not the point here
ROWS = "    for b in loop(B, name=\"rows\"):\n"
IF = "        if s > 0:\n            y[b, :] = x[b, :] + 1.0\n"
SPREAD = {
    "one_if_unrolled_8421": (ROWS + "        s = n[b]\n        y[b, :] = x[b, :]\n" + IF, [8, 4, 2, 1], 256),
    "one_if_unrolled_16": (ROWS + "        s = n[b]\n        y[b, :] = x[b, :]\n" + IF, [16, 1], 2 ** 16),
    "three_ifs_unrolled_421": (ROWS + "        s = n[b]\n        y[b, :] = x[b, :]\n" + IF * 3, [4, 2, 1], 8 ** 4),
    "elif_chain_unrolled": (ROWS + "        s = n[b]\n        if s > 0:\n            y[b, :] = x[b, :]\n"
                            "        elif s > 1:\n            y[b, :] = x[b, :] + 1.0\n"
                            "        else:\n            y[b, :] = x[b, :] + 2.0\n", [2, 1], 9),
    "nested_if": (ROWS + "        s = n[b]\n        y[b, :] = x[b, :]\n        if s > 0:\n"
                  "            if s > 1:\n                y[b, :] = x[b, :] + 1.0\n", None, 3),
    "begin_peeled_and_unrolled": (ROWS + "        y[b, :] = x[b, :]\n        if is_loop_begin(b):\n"
                                  "            y[b, :] = x[b, :] + 1.0\n", [4, 1], 4),
    "begin_end_and_runtime_if": (ROWS + "        s = n[b]\n        y[b, :] = x[b, :]\n        if is_loop_end(b):\n"
                                 "            y[b, :] = x[b, :] + 1.0\n" + IF, [2, 1], 4),
    "static_trips_peeled": ("    for b in loop(4, name=\"rows\"):\n        y[b, :] = x[b, :]\n"
                            "        if is_loop_begin(b):\n            y[b, :] = x[b, :] + 1.0\n"
                            "        if is_loop_end(b):\n            y[b, :] = x[b, :] + 2.0\n", None, 1),
    "outer_begin_in_inner_body": ("    for b in loop(B, name=\"rows\"):\n        for c in loop(4, name=\"cols\"):\n"
                                  "            y[b, :] = x[c, :]\n            if is_loop_begin(b):\n"
                                  "                y[b, :] = x[c, :] + 1.0\n", None, 4),
    "static_condition": (ROWS + "        y[b, :] = x[b, :]\n        if 2 > 1:\n            y[b, :] = x[b, :] + 1.0\n"
                         "        if b == 0:\n            y[b, :] = x[b, :] + 2.0\n", [2, 1], 4),
    "top_level_loops_merge": ("    s = n[0]\n    if s > 0:\n        y[0, :] = x[0, :]\n    for b in loop(1):\n"
                              "        if s > 1:\n            y[1, :] = x[0, :]\n    if s > 2:\n"
                              "        y[0, :] = x[1, :]\n", None, 8),
    # a scalar read stays at the top level, so the ifs around it are in separate implicit loops
    "top_level_reads_split_bodies": ("    s = n[0]\n    if s > 0:\n        y[0, :] = x[0, :]\n    t = n[1]\n"
                                     "    if t > 0:\n        y[1, :] = x[1, :]\n", None, 2),
    "step_two": ("    for b in loop(0, B, 2, name=\"rows\"):\n        s = n[b]\n        y[b, :] = x[b, :]\n" + IF,
                 [2, 1], 4),
    # trip counts read from data: an inline `if` on data is a runtime branch, unroll lists split a
    # runtime trip count, and first/last peeling sits behind guards on it (LANGUAGE.md §3.4)
    "data_trips_inline_if_unrolled_8421": (
        "    for b in loop(B, name=\"outer\"):\n        for j in loop(cdiv(n[b], 16), name=\"rows\"):\n"
        "            y[b, :] = x[b, :]\n            if x[b, j] > 0.0:\n                y[b, :] = x[b, :] + 1.0\n",
        [8, 4, 2, 1], 256),
    "data_trips_peeled_and_unrolled": (
        "    for b in loop(B, name=\"outer\"):\n        for j in loop(n[b] - n[0], name=\"rows\"):\n"
        "            y[b, :] = x[b, :]\n            if is_loop_begin(j):\n                y[b, :] = x[b, :] + 1.0\n"
        "            if is_loop_end(j) and n[j] > 2:\n                y[b, :] = x[b, :] + 2.0\n", [4, 2, 1], 2 ** 4),
    "top_level_data_loop_after_work": (
        "    y[0, :] = x[0, :]\n    if n[1] > 0:\n        y[1, :] = x[1, :]\n"
        "    for j in loop(n[0], name=\"rows\"):\n        if n[j] > 0:\n            y[j, :] = x[j, :]\n",
        [2, 1], 4),
    "loop_unroll": ("    for b, kk in loop_unroll(B, name=\"rows\"):\n        s = n[b]\n"
                    "        y[b:b + kk, :] = x[b:b + kk, :]\n        if s > 0:\n"
                    "            y[b:b + kk, :] = x[b:b + kk, :] + 1.0\n", [4, 2, 1], 2),
}


def _compile(tmp_path, body: str, unroll: list[int] | None, max_paths: int):
    sched = f"schedule:\n  vec_tile: [1, 256]\n  pass_options: {{max_paths: {max_paths}}}\n"
    if unroll is not None:
        sched += f"  loops:\n    rows: {{unroll: {unroll}}}\n"
    (tmp_path / "k.pto").write_text(HEAD + body, encoding="utf-8")
    (tmp_path / "k.yaml").write_text("op: k\n" + sched, encoding="utf-8")
    diags = Diagnostics()
    try:
        return compile_spec(str(tmp_path / "k.yaml"), diags), [d.code for d in diags]
    except CompileError as exc:
        return None, [d.code for d in exc.diagnostics]


@pytest.mark.parametrize("name", list(SPREAD))
def test_checker_and_compiled_ir_count_the_same_paths(tmp_path, name: str) -> None:
    body, unroll, expected = SPREAD[name]
    c, codes = _compile(tmp_path, body, unroll, 2 ** 31 - 1)
    assert c is not None, codes
    tile = c.stages["tile"].funcs[0]  # before partitioning moves branches into kernels
    assert compiled_paths(c.checked[0], c.spec) == max_body_paths(tile.body) == expected


@pytest.mark.parametrize("name", ["one_if_unrolled_8421", "elif_chain_unrolled", "top_level_loops_merge",
                                  "outer_begin_in_inner_body"])
def test_e0509_fires_exactly_past_the_limit(tmp_path, name: str) -> None:
    body, unroll, expected = SPREAD[name]
    _, at_limit = _compile(tmp_path, body, unroll, expected)
    assert "E0509" not in at_limit
    _, past = _compile(tmp_path, body, unroll, expected - 1)
    assert past.count("E0509") == 1
