"""Persistent kernels (passes/persistent.py, passes/partition.py): a loop of the user's runs inside
its compute kernel only when that kernel still compiles; otherwise the control program keeps the
loop and launches a kernel per iteration, as it did before loops ran inside kernels."""

from __future__ import annotations

import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import ptodsl
from ptodsl.ir.gm import walk_ops

HAS_CXX = shutil.which("g++") is not None
BACKENDS = ["sim", "cpu"] if HAS_CXX else ["sim"]
BF16 = ml_dtypes.bfloat16

# The fuzzer's seed 9073, unrolled further. Each unrolled copy of the body writes bf16 workspaces
# (the casts' results) and reads them back; in one kernel holding the loop, every workspace's load
# in one iteration and its store in the next is a dependency carried across the loop, one
# MTE2 -> MTE3 event id each for the whole loop: for the 8 copies, more than the target's 8 (E0612).
FZ9073 = """kernel fz9073(y1: inout T[M, N], gidx: i32[M], x0: T[M, N], xf: f32[M, N], rv: T[N], cv: T[M, 1]):
    for r in loop(M, name="L1"):
        g1 = gidx[r]
        v1 = x0[g1, :]
        y1[r, :] = (v1 * ((rv * cv[r, :]) + cast(xf[r, :], T)))
"""
FZ9073_YAML = """op: fz9073
dtypes: {T: [bf16]}
schedule:
  vec_tile: [1, 48]
  loops:
    L1: {unroll: [8, 4, 2, 1]}
  pass_options: {multiply_add: true, max_paths: 256}
"""


def _bf16(x: np.ndarray) -> np.ndarray:
    return x.astype(BF16).astype(np.float32)


# (the cpu build of its 15 unrolled copies takes seconds: that side runs with `-m slow`)
@pytest.mark.parametrize("backend", [pytest.param(b, marks=pytest.mark.slow) if b == "cpu" else b for b in BACKENDS])
def test_a_loop_whose_kernel_would_need_too_many_event_ids_launches_per_iteration(tmp_path: Path, backend: str):
    (tmp_path / "fz9073.pto").write_text(FZ9073)
    (tmp_path / "fz9073.yaml").write_text(FZ9073_YAML)
    op = ptodsl.load(str(tmp_path / "fz9073.yaml"))  # raised E0612
    block = op.compiled.stages["block"]
    control = block.func("fz9073_bf16")
    loops = {o.attrs["unrolled"]: o for o in walk_ops(control.body) if o.name == "loop"}
    assert list(loops) == [8]  # the copies of 4, 2 and 1 still run inside their kernel
    assert any(o.name == "launch" for o in walk_ops(loops[8].regions[0]))
    kernel_loops = {o.attrs.get("unrolled") for f in block.funcs if f.kind == "vector" for o in f.walk()
                    if o.name == "loop"}
    assert {4, 2, 1} <= kernel_loops and 8 not in kernel_loops

    m, n = 15, 100  # one group of 8, one of 4, 2 and 1; two tiles of 48 and a tail of 4
    rng = np.random.default_rng(9073)
    gidx = rng.permutation(m).astype(np.int32)
    x0, rv, cv = (rng.standard_normal(s).astype(BF16) for s in ((m, n), (n,), (m, 1)))
    xf = rng.standard_normal((m, n)).astype(np.float32)
    y1 = np.zeros((m, n), BF16)
    op(y1, gidx, x0, xf, rv, cv, backend=backend)  # y1 is updated in place
    f = np.float32
    want = _bf16(x0[gidx].astype(f) * _bf16(_bf16(rv.astype(f) * cv.astype(f)) + _bf16(xf)))
    np.testing.assert_allclose(y1.astype(f), want, rtol=2e-2, atol=1e-2)


# top-level work merges into one implicit loop with the statement before it; the view it defines
# is used only by the loop after, whose kernels the control program launches
ESCAPING_VIEW = """kernel ev(x: f32[M, N], a: f32[M, K], b: f32[K, N], y: out f32[M, N], z: out f32[M, N]):
    y[:] = x * 2.0
    bv = view(b, [K, N], [0, 0])
    st = tensor([M, N], f32)
    for j in loop(3, name="steps"):
        t = matmul(a, bv)
        if is_loop_begin(j):
            st[:] = t
        else:
            st[:] = st * 0.5 + t
        if is_loop_end(j):
            z[:] = st
"""


def test_a_view_a_later_launch_uses_is_defined_by_the_control_program(write_spec):
    # (an internal error once: the view stayed inside the first statement's kernel)
    op = ptodsl.load(write_spec("ev", ESCAPING_VIEW, "op: ev\nschedule:\n  vec_tile: [8, 64]\n"
                                "  cube_tile: {m: [16, 32], k: [32, 64], n: [32, 64]}\n"))
    control = next(f for f in op.compiled.stages["block"].funcs if f.kind == "control")
    views = [o.result.name for o in control.walk() if o.name == "view"]
    assert "bv" in views
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (20, 40)).astype(np.float32)
    a = rng.uniform(-1, 1, (20, 30)).astype(np.float32)
    b = rng.uniform(-1, 1, (30, 40)).astype(np.float32)
    y, z = op(x, a, b, backend="sim")
    t = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(y, 2.0 * x, rtol=1e-6)
    np.testing.assert_allclose(z, t * 0.25 + t * 0.5 + t, rtol=1e-5, atol=1e-5)
