"""The generated torch custom ops: ``torch.library.opcheck`` for every op, and ``torch.compile``."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from ptodsl.api import to_torch

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
    """Every opcheck test; for an op with a backward, with inputs that require grad, so that the
    autograd registration and the gradients under AOT dispatch are checked too."""
    packaged = _op_of(pkg, spec_path)
    if packaged.name in OPCHECK_SKIP:
        pytest.skip(OPCHECK_SKIP[packaged.name])
    operator = packaged.operator
    case = operator.program.cases[0]  # the spec's first golden case: small shapes by convention
    # the package's own copy of the runtime: its programs hold its own expression classes
    packaged_golden = importlib.import_module(f"{pkg.__name__}._ptodsl.runtime.golden")
    arrays, scalars = packaged_golden.make_inputs(operator, case)
    differentiable = operator.program.backward is not None
    args = tuple(to_torch(arrays[p.name]).requires_grad_(differentiable and arrays[p.name].dtype.kind == "f")
                 for p in operator.inputs)
    custom = getattr(torch.ops.ptodsl_ops, packaged.name)
    result = torch.library.opcheck(custom.default, args, scalars)
    assert set(result.values()) == {"SUCCESS"}, result


def test_ops_without_a_backward_say_so(pkg: ModuleType):
    x = torch.rand(4, 64, requires_grad=True)
    y = torch.ops.ptodsl_ops.exp(x)
    with pytest.raises(RuntimeError, match=r"E0716.*cannot differentiate through `ptodsl_ops.exp`"):
        y.sum().backward()


# (op, its torch reference, input shapes, scalars); the references are the specs' `torch:` functions
GRADIENTS = [
    ("softmax", lambda x: torch.softmax(x, -1), [(5, 1024)], {}),
    ("rmsnorm", lambda x, g, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g, [(3, 300), (300,)],
     {"eps": 1e-5}),
    ("layernorm", lambda x, g, b, eps: torch.nn.functional.layer_norm(x, x.shape[-1:], g, b, eps),
     [(4, 200), (200,), (200,)], {"eps": 1e-5}),
    ("silu", torch.nn.functional.silu, [(6, 64)], {}),
    ("gelu", lambda x: torch.nn.functional.gelu(x, approximate="tanh"), [(6, 64)], {}),
    ("matmul", lambda a, b: a.float() @ b.float(), [(33, 40), (40, 70)], {}),
]
# per dtype (rtol, atol) of gradients against torch's own backward
GRAD_TOLERANCE = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize(("name", "reference", "shapes", "scalars"), GRADIENTS, ids=[g[0] for g in GRADIENTS])
def test_gradients_match_torch(pkg: ModuleType, name, reference, shapes, scalars, dtype):
    gen = torch.Generator().manual_seed(1)
    inputs = [(torch.rand(s, generator=gen) * 2 - 1).to(dtype).requires_grad_() for s in shapes]
    ours = getattr(torch.ops.ptodsl_ops, name)(*inputs, **scalars)
    weight = torch.rand(ours.shape, generator=gen).to(ours.dtype)
    got = torch.autograd.grad((ours.float() * weight.float()).sum(), inputs)
    # torch's backward of the same function, in f32 from the same (rounded) inputs
    ref_in = [t.detach().float().requires_grad_() for t in inputs]
    want = torch.autograd.grad((reference(*ref_in, **scalars).float() * weight.float()).sum(), ref_in)
    rtol, atol = GRAD_TOLERANCE[dtype]
    for g, w, t in zip(got, want, inputs):
        assert g.dtype == t.dtype and g.shape == t.shape
        torch.testing.assert_close(g.float(), w, rtol=rtol, atol=atol)


@pytest.mark.parametrize(("name", "reference", "shapes", "scalars"), GRADIENTS, ids=[g[0] for g in GRADIENTS])
def test_the_plain_wrapper_is_differentiable(pkg: ModuleType, name, reference, shapes, scalars):
    """``pkg.op(x)`` with tensors that require grad: the gradients of ``torch.ops.pkg.op``, bit for
    bit, and so torch's own."""
    gen = torch.Generator().manual_seed(3)
    inputs = [(torch.rand(s, generator=gen) * 2 - 1).requires_grad_() for s in shapes]
    plain = getattr(pkg, name)(*inputs, **scalars)
    assert plain.grad_fn is not None
    weight = torch.rand(plain.shape, generator=gen)
    got = torch.autograd.grad((plain * weight).sum(), inputs)
    custom = getattr(torch.ops.ptodsl_ops, name)(*inputs, **scalars)
    assert torch.equal(plain, custom)
    for g, w in zip(got, torch.autograd.grad((custom * weight).sum(), inputs)):
        assert torch.equal(g, w)
    ref_in = [t.detach().clone().requires_grad_() for t in inputs]
    want = torch.autograd.grad((reference(*ref_in, **scalars) * weight).sum(), ref_in)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_the_plain_wrapper_writes_buffers_autograd_follows(pkg: ModuleType):
    """An output passed by name is written with ``copy_``: autograd follows the values into it."""
    gen = torch.Generator().manual_seed(4)
    x, gamma = torch.rand(3, 300, generator=gen).requires_grad_(), torch.rand(300, generator=gen).requires_grad_()
    buf = torch.zeros(3, 300)
    assert pkg.rmsnorm(x, gamma, eps=1e-5, y=buf) is buf
    weight = torch.rand(3, 300, generator=gen)
    got = torch.autograd.grad((buf * weight).sum(), [x, gamma])
    want = torch.autograd.grad((torch.ops.ptodsl_ops.rmsnorm(x, gamma, eps=1e-5) * weight).sum(), [x, gamma])
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    # a wrong buffer is refused before anything runs, as without grad
    with pytest.raises(pkg.ArgumentValueError, match="E0702"):
        pkg.rmsnorm(x, gamma, eps=1e-5, y=torch.zeros(3, 301))


def test_the_plain_wrapper_without_a_backward_refuses_at_backward(pkg: ModuleType):
    """As the custom op does: the call works, ``.backward()`` through it raises E0716."""
    x = torch.rand(4, 64, requires_grad=True)
    y = pkg.exp(x)
    torch.testing.assert_close(y.detach(), x.detach().exp())
    with pytest.raises(RuntimeError, match=r"E0716.*cannot differentiate through `ptodsl_ops.exp`"):
        y.sum().backward()
    with torch.no_grad():  # nothing recorded: the plain call, through numpy
        assert pkg.exp(x).grad_fn is None
    assert pkg.exp(x.detach()).grad_fn is None
    # the custom op takes the device of its tensors, not `device=`: said before anything runs
    with pytest.raises(pkg.ArgumentValueError, match=r"E0704.*device=0.*requires grad"):
        pkg.exp(x, backend="npu", device=0)


def _layer(x: torch.Tensor, w: torch.Tensor, gamma: torch.Tensor, ops) -> torch.Tensor:
    """Three ops: a matmul, an RMSNorm of its rows, a SiLU; a scalar loss."""
    h = ops.matmul(x, w)
    return ops.silu(ops.rmsnorm(h, gamma, eps=1e-5)).square().mean()


class _TorchOps:
    matmul = staticmethod(lambda a, b: a @ b)
    rmsnorm = staticmethod(lambda x, g, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g)
    silu = staticmethod(torch.nn.functional.silu)


def test_a_compiled_training_step_matches_torch(pkg: ModuleType):
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(2)
    x = torch.rand(16, 64, generator=gen) - 0.5
    w0 = (torch.rand(64, 256, generator=gen) - 0.5) * 0.2
    g0 = torch.rand(256, generator=gen) + 0.5
    step = torch.compile(lambda x, w, g: _layer(x, w, g, torch.ops.ptodsl_ops), backend="aot_eager", fullgraph=True)
    params = {}
    for which, fn in (("ours", step), ("torch", lambda x, w, g: _layer(x, w, g, _TorchOps))):
        w, g = w0.clone().requires_grad_(), g0.clone().requires_grad_()
        opt = torch.optim.SGD([w, g], lr=0.5)
        loss = fn(x, w, g)
        loss.backward()
        grads = (w.grad.clone(), g.grad.clone())
        opt.step()
        params[which] = (loss.detach(), grads, (w.detach(), g.detach()))
    (l1, grads1, p1), (l2, grads2, p2) = params["ours"], params["torch"]
    torch.testing.assert_close(l1, l2, rtol=1e-5, atol=1e-6)
    for a, b in zip(grads1 + p1, grads2 + p2):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert grads1[0].abs().sum() > 0 and grads1[1].abs().sum() > 0


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
