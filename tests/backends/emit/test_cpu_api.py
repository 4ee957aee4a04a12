"""backend="cpu" through the public API and the command line."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl.cli import main

pytestmark = pytest.mark.cpu


def test_numpy_in_numpy_out(gxx):
    op = ptodsl.load("specs/softmax_long.yaml")
    x = np.random.default_rng(0).standard_normal((9, 2500)).astype(np.float32)
    y = op(x, backend="cpu")
    np.testing.assert_allclose(y, op(x), rtol=1e-6, atol=1e-7)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_torch_bf16_in_torch_out(gxx):
    torch = pytest.importorskip("torch")
    op = ptodsl.load("specs/softmax.yaml")
    x = torch.randn(5, 1024, dtype=torch.bfloat16)
    y = op(x, backend="cpu")
    assert isinstance(y, torch.Tensor) and y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=3e-2, atol=1e-2)


def test_outputs_by_name_are_written_in_place(gxx):
    op = ptodsl.load("specs/seq_add.yaml")
    rng = np.random.default_rng(1)
    inp = rng.standard_normal((3, 13, 100)).astype(np.float32)
    act = np.array([0, 5, 13], np.int32)
    out = np.full_like(inp, 7.0)
    assert op(inp, act, out=out, backend="cpu") is out
    want = np.full_like(inp, 7.0)
    for b, n in enumerate(act):
        want[b, :n] = inp[b, :n] + 1.0
    np.testing.assert_array_equal(out, want)


def test_scalar_parameters(gxx):
    op = ptodsl.load("specs/scale_shift.yaml")
    x = np.linspace(-1, 1, 3000, dtype=np.float32)
    np.testing.assert_allclose(op(x, alpha=3.0, beta=-1.0, backend="cpu"), x * 3 - 1, rtol=1e-6)


def test_ptodsl_test_runs_on_the_cpu_backend(gxx, capsys):
    assert main(["test", "specs/softmax.yaml", "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "3 passed, 0 failed" in out


def test_print_runs_once_per_iteration_on_the_cpu(gxx, write_spec, capfd):
    pto = ("kernel rows(x: f32[R, N], act: i32[R], y: out f32[R, N]):\n"
           "    for r in loop(R, name=\"rows\"):\n"
           "        n = act[r]\n"
           "        print(\"row {} keeps {}\", r, n)\n"
           "        y[r, :] = x[r, :] * 2.0\n")
    op = ptodsl.load(write_spec("rows", pto, "op: rows\nschedule:\n  vec_tile: [1, 64]\n"))
    x = np.ones((3, 8), np.float32)
    y = op(x, np.array([5, 6, 7], np.int32), backend="cpu")
    np.testing.assert_array_equal(y, x * 2)
    assert capfd.readouterr().out.splitlines() == ["row 0 keeps 5", "row 1 keeps 6", "row 2 keeps 7"]


def test_ptodsl_bench_prints_a_row_per_case(gxx, capsys, monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")  # what bench would set; restored after the test
    assert main(["bench", "specs/add_one.yaml", "-k", "tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["case", "cpu", "ms"] and "numpy ms" in lines[0] and "GM traffic" in lines[0]
    note, row = lines[1:]
    assert note.startswith("# specs/add_one.yaml: compiled in") and "IR verification" in note
    assert row.startswith("add_one[tiny]") and row.split()[-1] == "1.00"
