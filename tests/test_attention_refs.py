"""The numpy references of the data-driven attention specs against torch's own attention.

``specs/refs.py`` holds numpy references (the golden oracle: the suite runs without torch) and the
same ops written with ``torch.nn.functional.scaled_dot_product_attention`` per sequence. Both are
run on every golden case's inputs (the literal lengths, offsets and block tables of the YAML) and
must agree; the test skips where torch is not installed. The references also need the YAML's fixed
symbols, which the kernels' 2-D views do not carry: those must agree too.
"""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl.golden import as_ref_input, import_file, make_inputs

SPECS = ["specs/paged_attention.yaml", "specs/varlen_attention.yaml"]


def test_the_references_use_the_yaml_symbols():
    refs = import_file("specs/refs.py")
    paged = ptodsl.load(SPECS[0]).spec.symbols
    assert (refs.PAGED_NQ, refs.PAGED_BLOCK) == (paged["NQ"], paged["BLK"])
    assert refs.VARLEN_D == ptodsl.load(SPECS[1]).spec.symbols["D"]


@pytest.mark.parametrize("path", SPECS)
def test_numpy_reference_matches_torch_attention(path):
    torch = pytest.importorskip("torch")
    op = ptodsl.load(path)
    refs = import_file("specs/refs.py")
    numpy_ref, torch_ref = getattr(refs, op.spec.reference.function), getattr(refs, op.spec.torch)
    for case in op.spec.tests:
        inputs, scalars = make_inputs(op, case)
        args = [as_ref_input(inputs[p.name]) for p in op.inputs]
        want = numpy_ref(*args, **scalars)
        got = torch_ref(*(torch.from_numpy(a) for a in args), **scalars)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        assert len(want) == len(got)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-5, err_msg=f"{path} case {case.index}")
