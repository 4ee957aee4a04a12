"""Partitioning a loop launched per iteration: its body is cut into kernels by kind of core only
where no tile lives across the cut (passes/partition.py)."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl.backends.cpp.emit import emit_npu_variant
from ptodsl.passes import syncheck
from ptodsl.targets import load_target

TARGET = load_target("ascend910b")

# `acc` is written by vector work, multiplied on the cube, then read again by vector work: fusion
# forwards the tile it stored to that read, across the product (passes/fuse.py). The print keeps
# the loop in the control program, so its body is partitioned on its own.
FORWARDED = ("kernel fwd(x: f32[16, 16], w: f32[R, 16], y: out f32[Y, 16]):\n"
             "    for j in loop(J, name=\"steps\"):\n"
             "        print(\"step\", j)\n"
             "        wj = view(w, [16, 16], [j * 16, 0])\n"
             "        acc = tensor([16, 16], f32)\n"
             "        acc[:] = x * 2.0\n"
             "        y[j * 16:j * 16 + 16, :] = acc * 3.0 + matmul(x, wj)\n")
YAML = ("op: fwd\nsymbols: {Y: 16*J, R: 16*J}\n"
        "schedule: {vec_tile: [16, 16], cube_tile: {m: [16, 16], k: [16, 16], n: [16, 16]}}\n")


@pytest.fixture(scope="module")
def forwarded(tmp_path_factory) -> ptodsl.Operator:
    d = tmp_path_factory.mktemp("fwd")
    (d / "fwd.pto").write_text(FORWARDED)
    (d / "fwd.yaml").write_text(YAML)
    return ptodsl.load(str(d / "fwd.yaml"))


def test_a_tile_living_across_the_product_keeps_the_body_one_mixed_kernel(forwarded):
    block = forwarded.compiled.stages["block"]
    assert [f.kind for f in block.funcs if f.kind != "control"] == ["mixed"]
    (control,) = [f for f in block.funcs if f.kind == "control"]
    (loop,) = [o for o in control.body if o.name == "loop"]
    assert [o.name for o in loop.regions[0] if o.name == "launch"] == ["launch"]
    assert syncheck.check(block, TARGET.max_event_ids, TARGET.cross_core_flags) == []
    # on the NPU, a cube part and a vector part handing the product over by cross-core flags
    (text,) = [t for kind, t in emit_npu_variant(forwarded.compiled, 0).kernels.values() if kind == "mixed"]
    npu = text.split("#else", 2)[2]
    assert "#if defined(__DAV_CUBE__)" in npu and "#if defined(__DAV_VEC__)" in npu
    assert "ffts_cross_core_sync" in npu and "wait_flag_dev" in npu


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_it_computes(forwarded, backend: str, capfd):
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (16, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (48, 16)).astype(np.float32)
    a = x.astype(np.float64) * 2.0
    want = np.concatenate([a * 3.0 + x.astype(np.float64) @ w[16 * j:16 * j + 16] for j in range(3)])
    np.testing.assert_allclose(forwarded(x, w, backend=backend), want, rtol=1e-5, atol=1e-5)
    assert capfd.readouterr().out.split() == ["step", "0", "step", "1", "step", "2"]
