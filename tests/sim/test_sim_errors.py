"""A simulated kernel that would touch memory outside a tensor stops with a rendered diagnostic
(E0712, the CPU backend's code for the same event) at the source line of the operation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl.backends.sim import SimError, run_block
from ptodsl.diagnostics import DiagnosticError

ROOT = Path(__file__).resolve().parents[2]


def test_an_out_of_bounds_load_is_a_diagnostic_at_its_line():
    op = ptodsl.load(str(ROOT / "specs" / "add_one.yaml"))
    block = op.compiled.stages["block"].clone()
    load = next(o for o in block.walk() if o.name == "tile.load")
    load.attrs["offsets"] = (load.attrs["offsets"][0], 10_000)  # a bug no pass would make
    x = np.ones((8, 256), np.float32)
    with pytest.raises(SimError) as info:
        run_block(block, "add_one", {"x": x, "y": np.zeros_like(x)}, {}, {"M": 8, "N": 256}, op.compiled.target)
    e = info.value
    assert isinstance(e, DiagnosticError) and e.diagnostic.code == "E0712"
    assert e.diagnostic.span is not None and e.diagnostic.span.file.endswith("add_one.pto")
    text = str(e)
    assert "error[E0712]" in text and "add_one.pto:3:" in text and "help:" in text and "tile.load" in text
