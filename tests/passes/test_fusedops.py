"""pto-isa's fused vector instructions (passes/fusedops.py): which tile ops become one instruction,
and that the fused program computes bit for bit what the unfused one does on the simulator and the
CPU backend, with fewer vector instructions in the cost model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl.backends.cpp.emit import emit_variant
from ptodsl.backends.cpp.run import unbuildable_reason
from ptodsl.golden import run_case
from ptodsl.ir.opdefs import FUSED

REFS = """
import numpy as np

def softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
"""

# name -> (kernel, vec_tile, the fused ops it must hold, input shapes)
KERNELS = {
    # a row broadcast into sub then exp, and one into div: softmax in two instructions
    "softmax": ("kernel softmax(x: T[B, N], y: out T[B, N]):\n"
                "    e = exp(x - amax(x, dim=-1, keepdim=True))\n"
                "    y[:] = e / sum(e, dim=-1, keepdim=True)\n",
                "[4, 256]", {"tile.rowexpand_expdif", "tile.rowexpand_div"}, [(13, 200)]),
    # one row per tile: the per-row operand is read in place as a column
    "softmax1": ("kernel softmax1(x: T[B, N], y: out T[B, N]):\n"
                 "    e = exp(x - amax(x, dim=-1, keepdim=True))\n"
                 "    y[:] = e / sum(e, dim=-1, keepdim=True)\n",
                 "[1, 256]", {"tile.rowexpand_expdif", "tile.rowexpand_div"}, [(5, 256)]),
    # a column broadcast, the spread operand first
    "colsub": ("kernel colsub(x: T[M, N], y: out T[M, N]):\n"
               "    y[:] = amax(x, dim=0, keepdim=True) - x\n",
               "[8, 128]", {"tile.colexpand_sub"}, [(8, 100)]),
    # both operands spread (an outer product): one of the broadcasts fuses, the other stays
    "outer": ("kernel outer(a: T[R, 1], b: T[1, F], z: out T[R, F]):\n    z[:] = a * b\n",
              "[8, 128]", {"tile.rowexpand_mul"}, [(11, 1), (1, 150)]),
    # a product read only by an add: a multiply-add into the addend's tile
    "muladd": ("kernel muladd(x: T[M, N], y: T[M, N], w: T[M, N], z: out T[M, N]):\n    z[:] = x * y + w\n",
               "[8, 128]", {"tile.muladddst"}, [(9, 130)] * 3),
    # the addend read again: the multiply-add goes into the product's dying operand
    "fma": ("kernel fma(x: T[M, N], y: T[M, N], w: T[M, N], z: out T[M, N], z2: out T[M, N]):\n"
            "    z[:] = (x + 1.0) * y + w\n    z2[:] = w * 2.0\n",
            "[8, 128]", {"tile.fusedmuladd"}, [(9, 130)] * 3),
    # the other binary ops over a row or a column broadcast, and exp of a column difference
    "rowadd": ("kernel rowadd(x: T[M, N], y: out T[M, N]):\n    y[:] = x + amax(x, dim=-1, keepdim=True)\n",
               "[8, 128]", {"tile.rowexpand_add"}, [(9, 130)]),
    "rowmax": ("kernel rowmax(x: T[M, N], y: out T[M, N]):\n"
               "    y[:] = maximum(x, amin(x, dim=-1, keepdim=True) + 0.5)\n",
               "[8, 128]", {"tile.rowexpand_maximum"}, [(9, 130)]),
    "rowmin": ("kernel rowmin(x: T[M, N], y: out T[M, N]):\n"
               "    y[:] = minimum(x, amax(x, dim=-1, keepdim=True) - 0.5)\n",
               "[8, 128]", {"tile.rowexpand_minimum"}, [(9, 130)]),
    "colmax": ("kernel colmax(x: T[M, N], y: out T[M, N]):\n"
               "    y[:] = maximum(amin(x, dim=0, keepdim=True) + 0.5, x)\n",
               "[8, 128]", {"tile.colexpand_maximum"}, [(8, 100)]),
    "colexp": ("kernel colexp(x: T[M, N], y: out T[M, N]):\n    y[:] = exp(x - amax(x, dim=0, keepdim=True))\n",
               "[8, 128]", {"tile.colexpand_expdif"}, [(8, 100)]),
}


def _load(tmp_path: Path, name: str, fused: bool, dtype: str = "f32", muladd: bool = True) -> ptodsl.Operator:
    pto, tile, _, shapes = KERNELS[name]
    (tmp_path / "refs.py").write_text(REFS)
    (tmp_path / f"{name}.pto").write_text(pto)
    yaml = tmp_path / f"{name}_{int(fused)}.yaml"
    tests = "reference: refs.py:softmax\ntests:\n  - {shapes: {B: 13}}\n" if name == "softmax" else ""
    symbols = f"symbols: {{N: {shapes[0][1]}}}\n" if name.startswith("softmax") else ""  # a row in one pass
    # single buffered: what is compared is each fused instruction, and the C++ builds halve
    options = "double_buffer: false, " + f"fused_ops: {str(fused).lower()}" + (", multiply_add: true" if name in ("muladd", "fma") and muladd else "")
    yaml.write_text(f"op: {name}\nsource: {name}.pto\ndtypes: {{T: [{dtype}]}}\n{symbols}"
                    f"schedule: {{vec_tile: {tile}, pass_options: {{{options}}}}}\n{tests}")
    return ptodsl.load(str(yaml))


def _ops(op: ptodsl.Operator) -> set[str]:
    return {o.name for f in op.compiled.stages["block"].funcs for o in f.walk()}


def _inputs(name: str, dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.uniform(-2, 2, s).astype(dtype) for s in KERNELS[name][3]]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", list(KERNELS))
def test_fused_ops_are_selected_and_compute_what_the_unfused_do(tmp_path, name, dtype):
    short = {"float32": "f32", "float16": "f16"}[dtype]
    fused, plain = _load(tmp_path, name, True, short), _load(tmp_path, name, False, short)
    want = KERNELS[name][2]
    assert want <= _ops(fused), _ops(fused)
    assert not _ops(plain) & set(FUSED)
    if name.startswith("softmax"):
        assert "tile.expand" not in _ops(fused)  # both broadcasts are gone into their readers
    xs = _inputs(name, dtype)
    got, ref = fused(*xs), plain(*xs)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), np.asarray(ref).view(np.uint8))


@pytest.mark.cpu
@pytest.mark.parametrize("name", ["softmax", "outer", "muladd", "colexp", *(
    pytest.param(n, marks=pytest.mark.slow) for n in ("colsub", "fma", "rowadd", "rowmax", "rowmin", "colmax"))])
def test_the_cpu_backend_computes_what_its_unfused_build_does(tmp_path, name):
    fused, plain = _load(tmp_path, name, True), _load(tmp_path, name, False)
    source = "".join(emit_variant(fused.compiled, 0).sources.values())
    for f in KERNELS[name][2]:
        assert FUSED[f].instruction + "(" in source
    xs = _inputs(name, "float32")
    got = fused(*xs, backend="cpu")
    np.testing.assert_array_equal(got, plain(*xs, backend="cpu"))
    np.testing.assert_allclose(got, fused(*xs), rtol=1e-6, atol=1e-7)  # and the simulator's, up to exp and sums


def test_softmax_issues_fewer_vector_instructions(tmp_path):
    """The cost model counts a fused instruction as one: per row tile, TROWEXPAND + TSUB + TEXP
    and TROWEXPAND + TDIV become TROWEXPAND + TROWEXPANDEXPDIF and TROWEXPAND + TROWEXPANDDIV
    (with four rows a tile, each per-row operand still goes into 32-byte blocks first)."""
    runs = {}
    for fused in (True, False):
        op = _load(tmp_path, "softmax", fused)
        r = run_case(op, op.spec.tests[0])
        assert r.ok, r.report
        runs[fused] = r.timeline
    tiles = -(-13 // 4)
    assert runs[False].instructions["V"] - runs[True].instructions["V"] == tiles
    assert runs[True].estimate < runs[False].estimate


def test_multiply_adds_are_opt_in_and_skip_against_a_pto_isa_checkout(tmp_path, monkeypatch):
    """pto-isa's CPU simulation has no TMULADDDST or TFUSEDMULADD: without `multiply_add: true` the
    product and the sum stay two instructions, and with it a case run against a pto-isa checkout
    skips with the reason instead of failing to build."""
    plain = _load(tmp_path, "muladd", True, muladd=False)
    assert {"tile.mul", "tile.add"} <= _ops(plain) and not _ops(plain) & set(FUSED)
    fused = _load(tmp_path, "muladd", True)
    assert unbuildable_reason(fused.compiled, 0) is None
    monkeypatch.setenv("PTO_ISA_ROOT", str(tmp_path))
    assert unbuildable_reason(plain.compiled, 0) is None
    reason = unbuildable_reason(fused.compiled, 0)
    assert reason is not None and "TMULADDDST" in reason
