"""The generated torch custom ops: ``torch.library.opcheck`` for every op, and ``torch.compile``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from ptodsl.api import to_torch
from ptodsl.golden import make_inputs

torch = pytest.importorskip("torch")

# Ops whose opcheck needs something the custom ops do not support, with the reason. None today:
# every library op passes all of opcheck's tests (schema, autograd registration, fake tensor,
# AOT dispatch with dynamic shapes).
OPCHECK_SKIP: dict[str, str] = {}


def _op_of(pkg: ModuleType, spec_path: str):
    """The PackagedOp generated from the library spec ``spec_path`` (specs/NAME.yaml)."""
    manifest = json.loads((Path(pkg.__file__).parent / "manifest.json").read_text())
    for name, op in manifest["ops"].items():
        if op["spec"] == spec_path:
            return getattr(pkg.ops, name)._PTODSL_OP
    raise KeyError(spec_path)


def test_opcheck(pkg: ModuleType, spec_path: str):
    packaged = _op_of(pkg, spec_path)
    if packaged.name in OPCHECK_SKIP:
        pytest.skip(OPCHECK_SKIP[packaged.name])
    operator = packaged.operator
    case = operator.program.cases[0]  # the spec's first golden case: small shapes by convention
    arrays, scalars = make_inputs(operator, case)
    args = tuple(to_torch(arrays[p.name]) for p in operator.inputs)
    custom = getattr(torch.ops.ptodsl_ops, packaged.name)
    result = torch.library.opcheck(custom.default, args, scalars)
    assert set(result.values()) == {"SUCCESS"}, result


def test_custom_op_results(pkg: ModuleType):
    x = torch.rand(6, 1024)
    torch.testing.assert_close(torch.ops.ptodsl_ops.softmax(x), torch.softmax(x, -1))
    a, n = pkg.torch_ops.abs_neg(x[:, :256].contiguous())
    torch.testing.assert_close(a, x[:, :256].abs())
    torch.testing.assert_close(n, -x[:, :256])
    # in-out tensors come back updated; the argument itself is left alone (the op is functional)
    inp, out = torch.rand(2, 4, 64), torch.zeros(2, 4, 64)
    seqs = torch.tensor([1, 4], dtype=torch.int32)
    new = torch.ops.ptodsl_ops.seq_add(inp, seqs, out)
    assert out.abs().sum() == 0
    torch.testing.assert_close(new[0, :1], inp[0, :1] + 1)
    torch.testing.assert_close(new[0, 1:], out[0, 1:])
    # scalars are keywords with the spec's defaults
    y = torch.ops.ptodsl_ops.rmsnorm(torch.rand(3, 300), torch.rand(300), eps=1e-3)
    assert y.shape == (3, 300)


def _two_ops(x: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    y = torch.ops.ptodsl_ops.softmax(x) * 2.0
    return torch.ops.ptodsl_ops.rmsnorm(y, gamma, eps=1e-5) + 1.0


def _reference(x: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    y = torch.softmax(x, -1) * 2.0
    return y * torch.rsqrt((y * y).mean(-1, keepdim=True) + 1e-5) * gamma + 1.0


def _compiled_runs(backend: str) -> None:
    torch._dynamo.reset()
    fn = torch.compile(_two_ops, backend=backend, fullgraph=True, dynamic=True)
    gamma = torch.rand(1024)
    for rows in (5, 9):  # a second batch size runs the same graph with another B
        x = torch.rand(rows, 1024)
        torch.testing.assert_close(fn(x, gamma), _reference(x, gamma), rtol=1e-4, atol=1e-5)


def test_compile_aot_eager(pkg: ModuleType):
    _compiled_runs("aot_eager")


@pytest.mark.slow
def test_compile_inductor(pkg: ModuleType):
    # inductor builds C++ for the code around the custom ops; without a compiler it cannot run
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("inductor needs a C++ compiler (g++) on PATH; aot_eager is tested above")
    _compiled_runs("inductor")


def _raised(call) -> str:
    """The diagnostic a call stops with, rendered (an ArgumentError of the package's runtime)."""
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert "ArgumentError" in [c.__name__ for c in type(info.value).__mro__], info.value
    return str(info.value)


@pytest.mark.parametrize("shape, dtype, code", [
    ((6, 1000), torch.float32, "E0702"),  # softmax's N is fixed at 1024 by its YAML
    ((6, 1024), torch.float64, "E0700"),
    ((6, 2, 1024), torch.float32, "E0701"),
])
def test_fake_impl_checks_arguments_like_the_real_op(pkg: ModuleType, shape, dtype, code):
    from torch._subclasses.fake_tensor import FakeTensorMode

    softmax = torch.ops.ptodsl_ops.softmax
    real = _raised(lambda: softmax(torch.zeros(shape, dtype=dtype)))
    assert f"error[{code}]" in real
    with FakeTensorMode():
        fake = torch.zeros(shape, dtype=dtype)
        assert _raised(lambda: softmax(fake)) == real
    assert _raised(lambda: softmax(torch.empty(shape, dtype=dtype, device="meta"))) == real
    # while tracing, too: the graph fails where eager would, not at its first run
    torch._dynamo.reset()
    traced = torch.compile(lambda x: softmax(x) * 2.0, backend="aot_eager", fullgraph=True, dynamic=True)
    with pytest.raises(Exception) as info:
        traced(torch.zeros(shape, dtype=dtype))
    assert f"error[{code}]" in str(info.value)


def test_fake_impl_keeps_dynamic_sizes_symbolic(pkg: ModuleType):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    env = ShapeEnv()
    real = torch.zeros(5, 1024)
    with FakeTensorMode(shape_env=env) as mode:
        dynamic_b = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
        x = mode.from_tensor(real, symbolic_context=dynamic_b)
        assert isinstance(x.shape[0], torch.SymInt)
        y = torch.ops.ptodsl_ops.softmax(x)
    # checked through the value it traces with, but B stays a symbol: no guard fixes it to 5
    assert isinstance(y.shape[0], torch.SymInt) and y.dtype == torch.float32
    assert not any("5" in str(g.expr) for g in env.guards), env.guards
