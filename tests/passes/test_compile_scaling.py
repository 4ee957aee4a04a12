"""Compiling a kernel twice as long is twice the work, not four times: fusion used to re-read the
whole merged loop after every merge (and rematerialisation, the memory plan and the sync checker
scanned everything seen so far for every op), so a chain of 1000 statements took minutes.

The work is counted as Python function calls during one compile (deterministic, whatever the
machine's load); times are measured in ``benchmarks/test_compile_scaling.py``, never here.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import ptodsl
from ptodsl.driver import compile_spec

# bounded: the values stay near 1 over a thousand steps
STEPS = (("*", 0.5), ("+", 1.0), ("-", 0.25))


def _chain(n: int) -> str:
    lines = ["kernel k(x: f32[M, N], y: out f32[M, N]):", "    t1 = x + 1.0"]
    lines += [f"    t{i} = t{i - 1} {STEPS[i % 3][0]} {STEPS[i % 3][1]}" for i in range(2, n + 1)]
    return "\n".join(lines + [f"    y[:] = t{n}"]) + "\n"


def _row_reductions(n: int) -> str:
    # a grid nest per reduction that cannot merge into the one before: many loops, many workspaces
    lines = ["kernel k(x: f32[M, N], y: out f32[M, N]):", "    t1 = x + 1.0"]
    lines += [f"    t{i} = t{i - 1} - amax(t{i - 1}, dim=-1, keepdim=True)" if i % 2 else f"    t{i} = t{i - 1} * 0.5"
              for i in range(2, n + 1)]
    return "\n".join(lines + [f"    y[:] = t{n}"]) + "\n"


def _stores(n: int) -> str:
    # many grid nests writing one output: none merges, every one is a candidate for recomputation
    return "kernel k(x: f32[M, N], y: out f32[M, N]):\n" + "".join(f"    y[:] = x + {i}.0\n" for i in range(n))


def _calls(path: str) -> int:
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event == "call":
            count += 1

    compile_spec(path)  # the target file and the grammar are loaded once per process
    sys.setprofile(profile)
    try:
        compile_spec(path)
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.slow
@pytest.mark.parametrize("program", [_chain, _row_reductions, _stores], ids=["chain", "reductions", "stores"])
def test_compile_work_grows_linearly_with_the_number_of_statements(write_spec, program):
    # a low cycle bound cuts the reductions' nests into kernels that stay under the stack budget (E0613)
    yaml = "op: k\nschedule:\n  vec_tile: [8, 256]\n  pass_options: {cycle_upper_bound: 2000}\n"
    small = _calls(write_spec("k", program(60), yaml))
    large = _calls(write_spec("k", program(120), yaml))
    # linear work doubles (less the fixed cost); the quadratic stages gave 3.4x and more
    assert large < 2.3 * small, f"{small} calls for 60 statements, {large} for 120"


@pytest.mark.slow
def test_a_chain_of_a_thousand_statements_fuses_into_one_kernel(write_spec):
    n = 1000
    op = ptodsl.load(write_spec("k", _chain(n), "op: k\nschedule:\n  vec_tile: [8, 256]\n"))
    tile = op.compiled.stages["tile"].funcs[0]
    names = [o.name for o in tile.walk()]
    assert names.count("tile.load") == 1 and names.count("tile.store") == 1
    assert "alloc" not in names, "no intermediate goes to a GM workspace"
    kernels = [f for f in op.compiled.stages["block"].funcs if f.kind in ("vector", "cube")]
    assert len(kernels) == 1
    x = np.random.default_rng(0).standard_normal((9, 300)).astype(np.float32)
    want = x + np.float32(1.0)
    for i in range(2, n + 1):
        sign, c = STEPS[i % 3]
        want = {"+": want + np.float32(c), "*": want * np.float32(c), "-": want - np.float32(c)}[sign]
    np.testing.assert_allclose(op(x), want, rtol=1e-5)
