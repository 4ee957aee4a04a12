"""The multi-head attention spec's numpy reference, held to torch's scaled_dot_product_attention on
every one of its golden cases, in f64 (test_op_table.py compares each spec's torch equivalent with
its reference on the first case only, at the case's tolerance). Skips without torch: the
references themselves are numpy, and the README suite runs without torch."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl.frontend.spec import load_spec
from ptodsl.golden import as_ref_input, make_inputs

ROOT = Path(__file__).resolve().parents[1]


def _refs():
    loader = importlib.util.spec_from_file_location("library_refs", ROOT / "specs" / "refs.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


SPEC = ROOT / "specs" / "mha_sdpa.yaml"


@pytest.mark.parametrize("index", range(len(load_spec(str(SPEC)).tests)))
def test_mha_sdpa_reference_is_torch_scaled_dot_product_attention(index):
    torch = pytest.importorskip("torch")
    op = ptodsl.load(str(SPEC))
    inputs, scalars = make_inputs(op, op.spec.tests[index])
    q, k, v = (as_ref_input(inputs[n]) for n in ("q", "k", "v"))
    want = _refs().mha_sdpa(q, k, v, **scalars)
    got = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(x.astype(np.float64)) for x in (q, k, v)), scale=scalars["scale"]).numpy()
    assert want.shape == got.shape == q.shape
    np.testing.assert_allclose(want, got, rtol=1e-10, atol=1e-12)
