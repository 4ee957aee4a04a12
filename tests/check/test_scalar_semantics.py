"""Scalar arithmetic follows Python (true `/`, floor `//`, `cdiv`), loop steps are positive
constants, and `print` shows exactly the values it is given, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl.api import ArgumentValueError

BACKENDS = ["sim", pytest.param("cpu", marks=pytest.mark.cpu)]
YAML = "schedule: {vec_tile: [1, 64]}\n"


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=[pytest.mark.cpu, pytest.mark.slow])])
def test_division_is_true_division_and_blocks_cover_the_tail(write_spec, backend):
    pto = ("kernel k(x: f32[M, N], y: out f32[M, N], z: out f32[M, N]):\n"
           "    y[:] = x * (1 / N) + (N // 4) + (N % 3)\n"
           "    for j in loop(cdiv(M, 4), name=\"blocks\"):\n"
           "        blk = view(x, [4, N], [j * 4, 0])\n"
           "        z.assemble(blk * (N / 4), [j * 4, 0])\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [4, 64]}\n"))
    for m, n in ((8, 64), (10, 70), (3, 5)):  # whole blocks, a partial last block, a single one
        x = np.random.default_rng(m).standard_normal((m, n)).astype(np.float32)
        y, z = op(x, backend=backend)
        np.testing.assert_allclose(y, x / n + n // 4 + n % 3, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(z, x * (n / 4), rtol=1e-6)


@pytest.mark.parametrize(("bound", "code"), [
    ("100 / 64", "E0341"),       # a constant that is not an integer
    ("M / 0", "E0340"),
    ("cdiv(M, 0)", "E0340"),
    ("w[0] / 2", "E0342"),       # exactness known only on the device
    ("M * 0.5", "E0302"),        # a float
    ("M / 4 * 2", None),         # exact division over dims: checked at call time
    ("6 / 3", None),             # a constant quotient that is an integer
    ("cdiv(M, 4) + M // 3 - M % 2", None),
])
def test_loop_bounds_must_be_integers(compile_text, bound, code):
    pto = (f"kernel k(x: f32[M, N], w: i32[M], y: out f32[M, N]):\n"
           f"    for i in loop({bound}, name=\"l\"):\n"
           f"        y[i, :] = x[i, :]\n")
    assert [c for c in compile_text(pto, YAML) if c.startswith("E")][:1] == ([code] if code else [])


def test_exact_division_is_checked_before_the_kernel_runs(write_spec):
    pto = ("kernel k(x: f32[M, N], y: out f32[M, N]):\n"
           "    for j in loop(M / 4, name=\"blocks\"):\n"
           "        y[j * 4:j * 4 + 4, :] = x[j * 4:j * 4 + 4, :] + 1.0\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [4, 64]}\n"))
    x = np.ones((8, 16), np.float32)
    np.testing.assert_array_equal(op(x), x + 1)
    with pytest.raises(ArgumentValueError) as info:
        op(np.ones((10, 16), np.float32))
    d = info.value.diagnostic
    assert d.code == "E0715" and "M = 10" in d.message and d.span.line == 2


@pytest.mark.parametrize("step", ["0", "-1", "N", "M // 2"])
def test_loop_steps_are_positive_constants(compile_text, step):
    pto = (f"kernel k(x: f32[M, N], y: out f32[M, N]):\n"
           f"    for i in loop(0, M, {step}, name=\"l\"):\n"
           f"        y[i, :] = x[i, :]\n")
    assert compile_text(pto, YAML) == ["E0302"]


@pytest.mark.parametrize(("call", "code"), [
    ('print("{} {}", i)', "E0343"),
    ('print("{}", i, n)', "E0343"),
    ('print("{0}", i)', "E0343"),
    ('print("{:.3f}", i)', "E0343"),
    ('print("{", i)', "E0343"),
    ('print("{}", x)', "E0343"),
    ('print("i =", i, n)', None),
    ('print("{{}} {}", n)', None),
])
def test_print_fields_match_values(compile_text, call, code):
    pto = ("kernel k(x: f32[M, N], w: i32[M], y: out f32[M, N]):\n"
           "    for i in loop(M, name=\"l\"):\n"
           "        n = w[i]\n"
           f"        {call}\n"
           "        y[i, :] = x[i, :]\n")
    assert [c for c in compile_text(pto, YAML) if c.startswith("E")][:1] == ([code] if code else [])


@pytest.mark.parametrize("backend", BACKENDS)
def test_print_shows_every_value_like_python(write_spec, backend, capfd):
    pto = ("kernel k(x: f32[M, N], w: i32[M], y: out f32[M, N]):\n"
           "    for i in loop(M, name=\"l\"):\n"
           "        n = w[i]\n"
           "        print(\"i =\", i, n)\n"
           "        print(\"{{{}}} 100%\", n)\n"
           "        y[i, :] = x[i, :]\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [1, 64]}\n"))
    op(np.zeros((2, 8), np.float32), np.array([5, 6], np.int32), backend=backend)
    assert capfd.readouterr().out.splitlines() == ["i = 0 5", "{5} 100%", "i = 1 6", "{6} 100%"]


def test_exact_division_over_an_output_only_dim_is_checked_in_golden_cases(write_spec, tmp_path):
    """K sizes only the output: the golden harness binds it from the case, after the inputs."""
    from ptodsl.golden import run_case

    pto = ("kernel k(x: f32[M, N], y: out f32[K, N]):\n"
           "    for j in loop(K / 4, name=\"blocks\"):\n"
           "        y[j * 4:j * 4 + 4, :] = x[0:4, :] * 2.0\n")
    (tmp_path / "ref.py").write_text("import numpy as np\ndef k(x):\n    return np.zeros((10, 16))\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [4, 16]}\nreference: ref.py:k\n"
                                "tests:\n  - {shapes: {M: 4, N: 16, K: 10}}\n"))
    with pytest.raises(ArgumentValueError) as info:
        run_case(op, op.spec.tests[0])
    assert info.value.diagnostic.code == "E0715" and "K = 10" in info.value.diagnostic.message


def test_a_mistake_in_every_variant_is_reported_once(write_spec):
    """The typer runs once per dtype variant; a mistake that does not depend on the dtype is one
    diagnostic naming the variants, not one per variant."""
    from ptodsl.diagnostics import CompileError
    from ptodsl.driver import compile_spec

    pto = "kernel k(x: T[N], y: out T[N]):\n    y[:] = cast(x, f3)\n"
    yaml = "op: k\ndtypes: {T: [f32, f16, bf16]}\nschedule: {vec_tile: [256]}\n"
    with pytest.raises(CompileError) as info:
        compile_spec(write_spec("k", pto, yaml))
    errors = [d for d in info.value.diagnostics if d.code == "E0300"]
    assert len(errors) == 1 and "in the dtype variants T=f32; T=f16; T=bf16" in errors[0].notes
