"""Runtime print: once per executed iteration, with the iteration's values (unlike PyPTO's
trace-time print)."""

import numpy as np

import ptodsl


def test_print_runs_once_per_iteration(write_spec, capsys):
    pto = ("kernel rows(x: f32[R, N], act: i32[R], y: out f32[R, N]):\n"
           "    for r in loop(R, name=\"rows\"):\n"
           "        n = act[r]\n"
           "        print(\"row {} keeps {}\", r, n)\n"
           "        y[r, :] = x[r, :] * 2.0\n")
    op = ptodsl.load(write_spec("rows", pto, "op: rows\nschedule:\n  vec_tile: [1, 64]\n"))
    x = np.ones((3, 8), np.float32)
    op(x, np.array([5, 6, 7], np.int32))
    out = capsys.readouterr().out.splitlines()
    assert out == ["row 0 keeps 5", "row 1 keeps 6", "row 2 keeps 7"]
