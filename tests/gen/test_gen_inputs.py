"""A generated package carries the cases' explicit inputs (and the .npy files they name), and its
golden tests make the same inputs the compiler's harness makes."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np

from ptodsl.gen import build_package
from ptodsl.gen.writer import write_tree
from ptodsl.golden import load, make_inputs

PTO = "kernel gi(x: f32[M, N], idx: i32[M], y: out f32[M, N]):\n    y[:] = x * 2.0\n"
REF = "def gi(x, idx):\n    return x * 2\n"
YAML = ("op: gi\nschedule: {vec_tile: [1, 64]}\nreference: ref.py:gi\ntests:\n"
        "  - {shapes: {M: 3, N: 64}, inputs: {x: data/x.npy, idx: [2, 0, 1]}}\n"
        "  - {shapes: {M: 5, N: 64}, inputs: {idx: {permutation: M}}}\n")


def test_the_package_runs_the_cases_on_the_same_inputs(tmp_path: Path):
    specs = tmp_path / "specs"
    (specs / "data").mkdir(parents=True)
    (specs / "gi.pto").write_text(PTO)
    (specs / "gi.yaml").write_text(YAML)
    (specs / "ref.py").write_text(REF)
    np.save(specs / "data" / "x.npy", np.arange(3 * 64, dtype=np.float32).reshape(3, 64))
    package = build_package(str(specs), "gi_pkg")
    assert "gi_pkg/specs/data/x.npy" in package.files
    program = json.loads(package.files["gi_pkg/kernels/gi/op.json"])
    assert program["data_dir"] == "specs/." and program["cases"][0]["inputs"]["idx"] == {"values": [2, 0, 1]}
    out = tmp_path / "out"
    write_tree(package.files, out)
    sys.path.insert(0, str(out))
    try:
        mod = importlib.import_module("gi_pkg.ops.gi")
        from gi_pkg._ptodsl.runtime.golden import make_inputs as packaged_make_inputs  # type: ignore
        from gi_pkg._ptodsl.runtime.package import golden_case  # type: ignore

        compiler = load(str(specs / "gi.yaml"))
        for case, packaged in zip(compiler.program.cases, mod._PTODSL_OP.operator.program.cases):
            want, _ = make_inputs(compiler, case)
            got, _ = packaged_make_inputs(mod._PTODSL_OP.operator, packaged)
            assert want.keys() == got.keys() and all((want[k] == got[k]).all() for k in want)
            golden_case("gi_pkg", "gi", case.index, "sim")
        assert got["idx"].tolist() != [0, 1, 2, 3, 4] and sorted(got["idx"].tolist()) == [0, 1, 2, 3, 4]
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == "gi_pkg" or m.startswith("gi_pkg.")]:
            del sys.modules[name]
