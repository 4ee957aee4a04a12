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
    cells = row.split()  # ..., GM traffic, model cycles, /roofline, chip us, /chip roofline
    assert "chip us" in lines[0] and "/chip roof" in lines[0]
    assert row.startswith("add_one[tiny]") and cells[-5] == "1.00" and float(cells[-4]) > 0
    assert cells[-3].endswith("x") and float(cells[-3][:-1]) >= 1.0
    assert float(cells[-2]) > 0 and cells[-1].endswith("x") and float(cells[-1][:-1]) >= 1.0


def test_local_declared_among_top_level_statements_reaches_later_loops(gxx, write_spec):
    # The local lands in the implicit loop(1) of the statement before it; its C++ workspace must
    # still be in scope for the loop that follows (found by the random-program fuzzer).
    pto = ("kernel k(x: f32[M, N], y: out f32[M, N], z: out f32[1, N]):\n"
           "    y[:] = x * 2.0\n"
           "    acc = tensor([1, N], f32)\n"
           "    for r in loop(M, name=\"rows\"):\n"
           "        if is_loop_begin(r):\n"
           "            acc[:] = x[r, :]\n"
           "        else:\n"
           "            acc[:] = acc + x[r, :]\n"
           "        if is_loop_end(r):\n"
           "            z[:] = acc\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule:\n  vec_tile: [1, 64]\n"))
    x = np.random.default_rng(2).standard_normal((5, 70)).astype(np.float32)
    y, z = op(x, backend="cpu")
    np.testing.assert_allclose(y, x * 2.0, rtol=1e-6)
    np.testing.assert_allclose(z, x.sum(0, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.cpu)])
def test_views_of_a_top_level_local_keep_its_workspace_for_later_loops(backend, write_spec, request):
    # A later loop reads the local only through a reshape or a transpose made among the top-level
    # statements: the workspace under them must outlive their implicit loop(1) too (a reshape read
    # freed memory, a permute's pointer was out of scope: PyPTO's attention with projections).
    if backend == "cpu":
        request.getfixturevalue("gxx")
    pto = ("kernel k(x: f32[8, 64], y: out f32[8, 64], z: out f32[2, 4, 4, 16]):\n"
           "    t = x * 2.0\n"
           "    u = reshape(t, [2, 4, 64])\n"
           "    w = transpose(reshape(t, [2, 4, 4, 16]), 1, 2)\n"
           "    for b in loop(2, name=\"b\"):\n"
           "        y[b * 4:b * 4 + 4, :] = reshape(view(u, [1, 4, 64], [b, 0, 0]), [4, 64]) + 1.0\n"
           "        z[b:b + 1, :, :, :] = view(w, [1, 4, 4, 16], [b, 0, 0, 0]) * 3.0\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule:\n  vec_tile: [1, 1, 4, 64]\n"))
    x = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
    y, z = op(x, backend=backend)
    np.testing.assert_allclose(y, x * 2.0 + 1.0, rtol=1e-6)
    np.testing.assert_allclose(z, (x * 2.0).reshape(2, 4, 4, 16).transpose(0, 2, 1, 3) * 3.0, rtol=1e-6)
