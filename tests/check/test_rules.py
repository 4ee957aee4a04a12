"""The checker's rules on programs that are right: the documented examples, the library's specs, and
the edge cases each rule must leave alone (golden/ holds one failing fixture per code)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ptodsl import cli
from ptodsl.check import check, paths
from ptodsl.check.loops import skeleton, unroll_factors
from ptodsl.check.schedule import tile_dims
from ptodsl.diagnostics import Diagnostic, Diagnostics, code_registry
from ptodsl.frontend.parser import parse_module
from ptodsl.frontend.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
# the codes the checker reports (a retired code's explanation says what replaced it instead)
RULE_CODES = sorted(code for code, info in
                    yaml.safe_load((ROOT / "ptodsl" / "diagnostics" / "codes" / "rules.yaml").read_text("utf-8")).items()
                    if not info.get("retired"))


# ------------------------------------------------------------------ helpers


def check_only(yaml_path: str) -> list[Diagnostic]:
    """Front end and checker only, so later passes cannot make these tests fail."""
    diags = Diagnostics()
    spec = load_spec(yaml_path, diags)
    module = parse_module(Path(spec.source).read_text("utf-8"), spec.source, diags)
    assert module is not None, diags.items
    check(module, spec, diags)
    return diags.items




# ------------------------------------------------------------------ the documentation and the library


def _doc_blocks() -> tuple[dict[str, str], str]:
    doc = (ROOT / "docs" / "LANGUAGE.md").read_text(encoding="utf-8")
    section1 = doc.split("\n## 1.", 1)[1].split("\n## 2.", 1)[0]
    section2 = doc.split("\n## 2.", 1)[1].split("\n## 3.", 1)[0]
    examples = {}
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", section1, re.S | re.M):
        m = re.match(r"# specs/(\w+)\.pto", block)
        if m:
            examples[m.group(1)] = block
    spec = re.search(r"^```yaml\n(.*?)^```", section2, re.S | re.M).group(1)
    return examples, spec


EXAMPLES, DOC_SPEC = _doc_blocks()

# A schedule for each documented example; the softmax one is the YAML of LANGUAGE.md §2 itself.
EXAMPLE_SPECS = {
    "add_one": "op: add_one\nschedule: {vec_tile: [8, 256]}\n",
    "softmax": DOC_SPEC,
    "seq_add": "op: seq_add\nschedule: {vec_tile: [1, 8, 256]}\n",
    "rmsnorm": "op: rmsnorm\ndtypes: {T: [f32, f16, bf16]}\nschedule: {vec_tile: [1, 1024]}\n",
    "matmul": "op: matmul\ndtypes: {T: [f16, bf16, f32]}\n"
              "schedule: {cube_tile: {m: [128, 128], k: [64, 256], n: [128, 128]}}\n",
    "online_softmax_attn": "op: attn\nsource: online_softmax_attn.pto\ndtypes: {T: [f16, bf16]}\n"
                           "symbols: {BL: 128, D: 128}\nschedule:\n  vec_tile: [16, 128]\n"
                           "  cube_tile: {m: [128, 128], k: [64, 128], n: [128, 128]}\n"
                           "  loops: {kv_loop: {unroll: [2, 1]}}\n",
}


def test_every_documented_example_has_a_schedule() -> None:
    assert set(EXAMPLES) == set(EXAMPLE_SPECS)


@pytest.mark.parametrize("name", sorted(EXAMPLE_SPECS))
def test_documented_examples_pass_the_checker(name: str, tmp_path: Path) -> None:
    (tmp_path / f"{name}.pto").write_text(EXAMPLES[name], encoding="utf-8")
    (tmp_path / f"{name}.yaml").write_text(EXAMPLE_SPECS[name], encoding="utf-8")
    diags = check_only(str(tmp_path / f"{name}.yaml"))
    assert [d.code for d in diags] == [], diags


@pytest.mark.parametrize("code", [c for c in RULE_CODES if c not in ("E0502", "E0601", "E0607")])
def test_rule_explanations_cite_pyPTO(code: str) -> None:
    info = code_registry()[code]
    assert "PyPTO" in info.explain and info.title


# ------------------------------------------------------------------ data flow


def test_written_outputs_and_initialised_locals_are_fine(compile_text) -> None:
    assert compile_text(
        "kernel k(x: f32[B, N], y: out f32[B, N], z: out f32[B, N]):\n"
        "    acc = zeros([1, N], f32)\n"
        "    for b in loop(B, name=\"rows\"):\n"
        "        acc[:] = acc + x[b, :]\n"
        "        y[b, :] = x[b, :]\n"
        "    z.move(x * 2.0)\n") == []


def test_a_write_in_both_branches_initialises(compile_text) -> None:
    assert compile_text(
        "kernel k(x: f32[B, N], y: out f32[B, N]):\n"
        "    t = tensor([1, N], f32)\n"
        "    for b in loop(B, name=\"rows\"):\n"
        "        if b > 2:\n"
        "            t[:] = x[b, :]\n"
        "        else:\n"
        "            t[:] = x[b, :] * 2.0\n"
        "        y[b, :] = t\n") == []


def test_a_write_in_a_loop_counts_after_it(compile_text) -> None:
    assert compile_text(
        "kernel k(x: f32[B, N], y: out f32[1, N]):\n"
        "    t = tensor([1, N], f32)\n"
        "    for b in loop(B, name=\"rows\"):\n"
        "        t[:] = x[b, :]\n"
        "    y[:] = t\n") == []  # B >= 1 whenever a kernel runs: a zero dim never reaches one (E0710)
    assert compile_text(
        "kernel k(x: f32[B, N], n: i32[1], y: out f32[1, N]):\n"
        "    t = tensor([1, N], f32)\n"
        "    s = n[0]\n"
        "    for b in loop(s, name=\"rows\"):\n"
        "        t[:] = x[b, :]\n"
        "    y[:] = t\n") == ["W0404"]  # a trip count read from a tensor may be 0
    assert compile_text(
        "kernel k(x: f32[B, N], y: out f32[1, N]):\n"
        "    t = tensor([1, N], f32)\n"
        "    for b in loop(4, name=\"rows\"):\n"
        "        t[:] = x[b, :]\n"
        "    y[:] = t\n") == []


def test_reading_a_view_of_an_uninitialised_local_is_a_read(compile_text) -> None:
    assert compile_text(
        "kernel k(x: f32[4, N], y: out f32[1, N]):\n"
        "    t = tensor([4, N], f32)\n"
        "    row = t[0, :]\n"
        "    y[:] = row + 1.0\n") == ["E0402"]


def test_a_view_made_before_the_write_and_read_after_it_is_fine(compile_text) -> None:
    assert compile_text(
        "kernel k(x: f32[4, N], y: out f32[1, N]):\n"
        "    t = tensor([4, N], f32)\n"
        "    row = t[0, :]\n"
        "    t[:] = x\n"
        "    for i in loop(1, name=\"once\"):\n"
        "        y[:] = row + 1.0\n") == []


def test_is_loop_begin_initialises_for_the_else_branch_only_for_outer_locals(compile_text) -> None:
    template = (
        "kernel k(x: f32[L, N], y: out f32[L, N]):\n"
        "{outer}"
        "    for j in loop(L, name=\"steps\"):\n"
        "{inner}"
        "        if is_loop_begin(j):\n"
        "            m[:] = x[j, :]\n"
        "        else:\n"
        "            m[:] = maximum(m, x[j, :])\n"
        "        y[j, :] = m\n")
    decl = "m = tensor([1, N], f32)\n"
    assert compile_text(template.format(outer="    " + decl, inner="")) == []
    # declared in the body, the local is a new tensor on every iteration
    assert compile_text(template.format(outer="", inner="        " + decl)) == ["E0402"]


def test_an_ordinary_first_iteration_test_is_not_special(compile_text) -> None:
    assert compile_text(
        "kernel k(x: f32[L, N], y: out f32[L, N]):\n"
        "    m = tensor([1, N], f32)\n"
        "    for j in loop(L, name=\"steps\"):\n"
        "        if j == 0:\n"
        "            m[:] = x[j, :]\n"
        "        else:\n"
        "            m[:] = maximum(m, x[j, :])\n"
        "        y[j, :] = m\n") == ["E0402"]


def test_inout_may_be_read_first_and_updated_in_place(compile_text) -> None:
    assert compile_text(
        "kernel k(y: inout f32[B, N]):\n"
        "    for b in loop(B, name=\"rows\"):\n"
        "        y[b, :] = y[b, :] + 1.0\n"
        "        y[b, :] = exp(y[b, :])\n") == []


def test_provably_disjoint_regions_are_no_cycle(compile_text) -> None:
    assert compile_text(
        "kernel k(h: inout f32[B, N]):\n"
        "    for b in loop(B - 1, name=\"shift\"):\n"
        "        h[b + 1, :] = h[b, :] * 0.5\n"
        "    for i in loop(B, name=\"halves\"):\n"
        "        h[i, 0:128] = h[i, 128:256]\n",
        "symbols: {N: 256}\nschedule: {vec_tile: [1, 128]}\n") == []


def test_regions_in_exclusive_branches_are_no_cycle(compile_text) -> None:
    assert compile_text(
        "kernel k(h: inout f32[B, N]):\n"
        "    for b in loop(B - 1, name=\"shift\"):\n"
        "        v = h[b:b + 2, :] * 0.5\n"
        "        if b > 0:\n"
        "            h[b, :] = h[b + 1, :]\n"
        "        else:\n"
        "            h[b + 1, :] = h[b, :] + 1.0\n") == ["E0403"]  # the first read overlaps both writes
    assert compile_text(
        "kernel k(h: inout f32[B, N], z: out f32[B, N]):\n"
        "    for b in loop(B, name=\"rows\"):\n"
        "        if b > 0:\n"
        "            z[b, :] = h[b, :]\n"
        "        else:\n"
        "            h[0:2, :] = h[0:2, :] + 1.0\n"
        "            z[b, :] = h[b, :]\n") == ["E0403"]
    assert compile_text(
        "kernel k(h: inout f32[B, N], z: inout f32[B, N]):\n"
        "    for b in loop(B, name=\"rows\"):\n"
        "        if b > 0:\n"
        "            z[b, :] = h[b, :]\n"
        "        else:\n"
        "            h[0:2, :] = h[0:2, :] + 1.0\n") == []


def test_a_read_in_an_inner_loop_is_another_body(compile_text) -> None:
    assert compile_text(
        "kernel k(h: inout f32[B, N], z: out f32[B, N]):\n"
        "    for b in loop(B, name=\"rows\"):\n"
        "        for c in loop(B, name=\"cols\"):\n"
        "            z[c, :] = h[c, :]\n"
        "        h[b, :] = z[b, :]\n") == []


# ------------------------------------------------------------------ loops and paths


def test_default_loop_names_may_repeat_until_the_yaml_names_them(compile_text) -> None:
    pto = ("kernel k(x: f32[B, N], y: out f32[B, N], z: out f32[B, N]):\n"
           "    for b in loop(B):\n"
           "        y[b, :] = x[b, :]\n"
           "    for b in loop(B):\n"
           "        z[b, :] = x[b, :]\n")
    assert compile_text(pto) == []
    assert compile_text(pto, "schedule:\n  vec_tile: [1, 256]\n  loops: {b_loop: {unroll: [2, 1]}}\n") == ["E0501"]


def test_unroll_lists_with_one_give_no_note(compile_text) -> None:
    pto = ("kernel k(x: f32[B, N], y: out f32[B, N]):\n"
           "    for b in loop(B, name=\"rows\"):\n"
           "        y[b, :] = x[b, :]\n")
    assert compile_text(pto, "schedule:\n  vec_tile: [1, 256]\n  loops: {rows: {unroll: [8, 2, 1]}}\n") == []
    assert compile_text(pto, "schedule:\n  vec_tile: [1, 256]\n  loops: {rows: {unroll: [2]}}\n") == ["N0507"]


def test_a_huge_unroll_factor_is_refused_without_unrolling_it(compile_text) -> None:
    """E0510 stops the check before the path count, which unrolls by the factors: a factor of 10**12
    once made the checker build 10**12 copies of the body (a hang) after reporting it."""
    import signal

    if not hasattr(signal, "SIGALRM"):
        pytest.skip("needs SIGALRM to bound the time")

    def expire(signum, frame):
        raise TimeoutError("checking took more than 20 s")

    pto = ("kernel k(x: f32[B, N], y: out f32[B, N]):\n"
           "    for b in loop(B, name=\"rows\"):\n"
           "        y[b, :] = x[b, :]\n")
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    try:
        got = compile_text(pto, "schedule:\n  vec_tile: [1, 256]\n  loops: {rows: {unroll: [1000000000000]}}\n")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert got == ["E0510"]


def test_unroll_factors() -> None:
    assert unroll_factors([4, 2]) == [4, 2, 1]
    assert unroll_factors([1, 4, 4, 0, -2]) == [4, 1]


def _paths(pto: str) -> int:
    """Paths of the first loop's body in the model, before any unrolling."""
    diags = Diagnostics()
    module = parse_module(pto, "<paths>", diags)
    assert module is not None, diags.items
    kernel = module.kernels[0]
    from ptodsl.check.typer import Typer  # the annotations tell static conditions apart

    ck = Typer(kernel, {}, {}, {}, Diagnostics()).run()
    compiled = paths.peel(paths.wrap_and_merge(skeleton(kernel.body, ck, {}), lambda name: None))
    return max(paths.paths(body) for loop, body in paths.bodies(compiled) if loop is not None)


@pytest.mark.parametrize("branches, count", [
    ("        if s > 0:\n            y[b, :] = x[b, :]\n", 2),
    ("        if s > 0:\n            y[b, :] = x[b, :]\n        elif s > 1:\n            y[b, :] = x[b, :]\n"
     "        else:\n            y[b, :] = x[b, :]\n", 3),
    ("        if s > 0:\n            y[b, :] = x[b, :]\n        if s > 1:\n            y[b, :] = x[b, :]\n", 4),
    ("        if is_loop_begin(b):\n            y[b, :] = x[b, :]\n        if is_loop_end(b):\n"
     "            y[b, :] = x[b, :]\n", 2),  # the first copy still asks at run time whether it is also the last
    ("        if 2 > 1:\n            y[b, :] = x[b, :]\n", 1),
])
def test_path_counts(branches: str, count: int) -> None:
    pto = ("kernel k(x: f32[B, N], n: i32[B], y: out f32[B, N]):\n"
           "    for b in loop(B, name=\"rows\"):\n"
           "        s = n[b]\n" + branches)
    assert _paths(pto) == count


def test_an_outer_loops_first_iteration_is_peeled_out_of_the_inner_body() -> None:
    pto = ("kernel k(x: f32[B, N], y: out f32[B, N]):\n"
           "    for b in loop(B, name=\"rows\"):\n"
           "        for c in loop(4, name=\"cols\"):\n"
           "            if is_loop_begin(b):\n"
           "                y[b, :] = x[c, :]\n")
    # the outer loop is peeled, so every copy of the inner body has the branch decided; the
    # enclosing body keeps the two guards around the first and last copies
    assert _paths(pto) == 1


def test_path_limit_comes_from_pass_options(compile_text) -> None:
    pto = ("kernel k(x: f32[B, N], n: i32[B], y: out f32[B, N]):\n"
           "    for b in loop(B, name=\"rows\"):\n"
           "        s = n[b]\n"
           "        y[b, :] = x[b, :]\n"
           "        if s > 0:\n"
           "            y[b, :] = x[b, :] + 1.0\n")
    sched = "schedule:\n  vec_tile: [1, 256]\n  loops: {rows: {unroll: [4, 2, 1]}}\n"
    assert compile_text(pto, sched) == []
    assert compile_text(pto, sched + "  pass_options: {max_paths: 5}\n") == ["E0509"]


# ------------------------------------------------------------------ schedule


def test_tile_dims_take_the_last_dims_and_clip_static_ones() -> None:
    assert tile_dims((7, 100), (4, 64)) == [4, 64]
    assert tile_dims((2, 16), (4, 64)) == [2, 16]
    assert tile_dims((8,), (4, 64)) == [8]
    assert tile_dims((3, 5, 9), (64,)) == [1, 1, 9]


def test_alignment_is_per_dtype_variant(compile_text) -> None:
    pto = ("kernel k(x: T[B, N], y: out T[B, N]):\n"
           "    y[:] = x * 2.0\n")
    assert compile_text(pto, "dtypes: {T: [f32]}\nschedule: {vec_tile: [1, 8]}\n") == []
    assert compile_text(pto, "dtypes: {T: [f32, f16]}\nschedule: {vec_tile: [1, 8]}\n") == ["E0603"]


def test_a_row_clipped_by_a_small_static_dim_is_not_the_tiles_row(compile_text) -> None:
    # keepdim reductions have a last dim of 1: their row is one element whatever the tile says
    pto = ("kernel k(x: f32[B, N], y: out f32[B, 1]):\n"
           "    y[:] = sum(x, dim=-1, keepdim=True)\n")
    assert compile_text(pto, "schedule: {vec_tile: [1, 64]}\n") == []


def test_cube_tiles_are_checked_only_for_kernels_with_a_matmul(compile_text) -> None:
    pto = "kernel k(x: f32[B, N], y: out f32[B, N]):\n    y[:] = x\n"
    assert compile_text(pto, "schedule:\n  vec_tile: [1, 256]\n"
                        "  cube_tile: {m: [128, 100], k: [3, 5], n: [128, 99999]}\n") == []


def test_ub_is_checked_by_the_memory_plan_not_an_all_live_estimate(compile_text) -> None:
    # rows * rows + 1.0 keeps the loaded row and one result tile live at once (the add reuses
    # nothing else): at [16, 1536] f32 that is 2 x 96 KiB, exactly the UB; the retired estimate
    # counted three tiles (the mul's and the add's results apart) and refused it at 288 KiB
    pto = ("kernel k(x: f32[B, N], y: out f32[B, N]):\n"
           "    for b in loop(B / 16, name=\"blocks\"):\n"
           "        rows = x[b * 16:b * 16 + 16, :]\n"
           "        y[b * 16:b * 16 + 16, :] = rows * rows + 1.0\n")
    assert compile_text(pto, "symbols: {N: 1536, B: 64}\nschedule: {vec_tile: [16, 1536]}\n") == []
    assert compile_text(pto, "symbols: {N: 1600, B: 64}\nschedule: {vec_tile: [16, 1600]}\n") == ["E0611"]


def test_rules_wait_for_clean_types(compile_text) -> None:
    """After a type error no data-flow rule guesses: one mistake, one message."""
    assert compile_text(
        "kernel k(x: f32[B, N], y: out f32[B, N]):\n"
        "    y[:] = x + undefined_name\n") == ["E0300"]


# ------------------------------------------------------------------ output and read coverage

H = "kernel k(x: f32[8, N], n: i32[8], y: out f32[8, N]):\n    s = n[0]\n"


@pytest.mark.parametrize("body, expected", [
    ("    if s > 0:\n        y[:] = x\n", ["E0401"]),  # one arm writes nothing
    ("    if s > 0:\n        y[:] = x\n    else:\n        y[:] = x + 1.0\n", []),
    ("    if s > 0:\n        y[:] = x\n    else:\n        y[0:4, :] = x[0:4, :]\n", ["E0401"]),  # rows 4..7
    ("    if 2 > 1:\n        y[:] = x\n", []),  # a static condition takes one arm
    ("    y[0:4, :] = x[0:4, :]\n    y[4:8, :] = x[4:8, :]\n", []),  # adjacent rectangles
    ("    y[0:4, :] = x[0:4, :]\n    y[5:8, :] = x[5:8, :]\n", ["E0401"]),  # row 4 missing
    ("    for b in loop(8):\n        y[b, :] = x[b, :]\n", []),
    ("    for b in loop(4):\n        y[2 * b:2 * b + 2, :] = x[2 * b:2 * b + 2, :]\n", []),  # chunks
    ("    for b in loop(0, 8, 2):\n        y[b, :] = x[b, :]\n", ["W0404"]),  # every other row
    ("    for b in loop(8):\n        if is_loop_end(b):\n            y[:] = x\n", []),
    ("    for b in loop(8):\n        if s > 0:\n            y[b, :] = x[b, :]\n", ["E0401"]),
])
def test_output_coverage_is_path_and_region_aware(compile_text, body: str, expected: list[str]) -> None:
    assert compile_text(H + body) == expected


@pytest.mark.parametrize("body, expected", [
    ("    t = tensor([8, N], f32)\n    for b in loop(8):\n        t[b, :] = x[b, :]\n"
     "    for c in loop(8):\n        y[c, :] = t[c, :]\n", []),  # filled row by row, read row by row
    ("    t = tensor([8, N], f32)\n    for b in loop(7):\n        t[b, :] = x[b, :]\n    y[:] = t\n", ["E0402"]),
    ("    t = tensor([1, N], f32)\n    for b in loop(s):\n        t[:] = x[b, :]\n    y[:] = x\n"
     "    y[0:1, :] = t\n", ["W0404"]),  # a runtime trip count may be zero
    ("    t = tensor([1, N], f32)\n    for b in loop(8):\n        if is_loop_begin(b):\n            t[:] = x[b, :]\n"
     "        else:\n            t[:] = t + x[b, :]\n    y[:] = x\n    y[0:1, :] = t\n", []),
])
def test_local_reads_are_path_and_region_aware(compile_text, body: str, expected: list[str]) -> None:
    assert compile_text(H + body) == expected


# ------------------------------------------------------------------ names the call takes itself


@pytest.mark.parametrize("name", ["backend", "device"])
def test_a_parameter_named_like_a_keyword_of_the_call_is_refused_by_check(name, write_spec, capsys) -> None:
    """`ptodsl check` refuses it at the parameter, as `gen` would otherwise (and as a call could
    never pass it); the same name for a local is fine: it never becomes an argument."""
    path = write_spec("k", f"kernel k(x: f32[N], y: out f32[N], {name}: f32 = 1.0):\n    y[:] = x * {name}\n",
                      "op: k\nschedule: {vec_tile: [256]}\n")
    assert cli.main(["check", "--color", "never", path]) == 1
    err = capsys.readouterr().err
    assert f"error[E0322]: parameter `{name}` cannot be used" in err and f"`{name}=`" in err
    assert "k.pto:1:36" in err and f"rename it, e.g. `{name}_`" in err


def test_a_local_may_take_a_name_the_call_keeps_for_itself(compile_text) -> None:
    assert compile_text("kernel k(x: f32[N], y: out f32[N]):\n    backend = x * 2.0\n    device = backend + 1.0\n"
                        "    y[:] = device\n", "schedule: {vec_tile: [256]}\n") == []
