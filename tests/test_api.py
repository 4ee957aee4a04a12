"""The Python API: ptodsl.load(), calling with numpy and torch, outputs in place, argument errors."""

import numpy as np
import pytest

import ptodsl
from ptodsl.dtypes import numpy_dtype


@pytest.fixture(scope="module")
def softmax():
    return ptodsl.load("specs/softmax.yaml")


def ref_softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_numpy_in_numpy_out(softmax):
    x = np.random.default_rng(0).standard_normal((5, 1024)).astype(np.float32)
    y = softmax(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    np.testing.assert_allclose(y, ref_softmax(x), rtol=1e-5, atol=1e-6)


def test_output_written_in_place(softmax):
    x = np.random.default_rng(1).standard_normal((3, 1024)).astype(np.float32)
    buf = np.zeros_like(x)
    out = softmax(x, y=buf)
    assert out is buf
    np.testing.assert_allclose(buf, ref_softmax(x), rtol=1e-5, atol=1e-6)


def test_dtype_variant_is_picked_from_the_argument(softmax):
    x = np.random.default_rng(2).standard_normal((2, 1024)).astype(numpy_dtype("bf16"))
    y = softmax(x)
    assert y.dtype == numpy_dtype("bf16")
    np.testing.assert_allclose(y.astype(np.float32), ref_softmax(x.astype(np.float32)), rtol=3e-2, atol=1e-2)


def test_torch_in_torch_out(softmax):
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 1024, dtype=torch.float32)
    y = softmax(x)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    assert torch.allclose(y, torch.softmax(x, dim=-1), rtol=1e-5, atol=1e-6)
    xb = x.to(torch.bfloat16)
    yb = softmax(xb)
    assert yb.dtype == torch.bfloat16
    assert torch.allclose(yb.float(), torch.softmax(xb.float(), dim=-1), rtol=3e-2, atol=1e-2)


def test_torch_tensors_that_require_grad_are_differentiated():
    """A loaded op called with tensors that require grad: its results carry a grad_fn, whose
    backward is the spec's backward op (compiled at the first .backward()), or E0716 without one."""
    torch = pytest.importorskip("torch")
    rmsnorm = ptodsl.load("specs/rmsnorm.yaml")
    gen = torch.Generator().manual_seed(0)
    x, gamma = torch.rand(3, 300, generator=gen).requires_grad_(), torch.rand(300, generator=gen).requires_grad_()
    y = rmsnorm(x, gamma, eps=1e-5)
    assert y.grad_fn is not None
    weight = torch.rand(3, 300, generator=gen)
    got = torch.autograd.grad((y * weight).sum(), [x, gamma])
    rx, rg = x.detach().clone().requires_grad_(), gamma.detach().clone().requires_grad_()
    ref = rx * torch.rsqrt(rx.pow(2).mean(-1, keepdim=True) + 1e-5) * rg
    for g, w in zip(got, torch.autograd.grad((ref * weight).sum(), [rx, rg])):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    buf = torch.zeros(3, 300)  # an output passed by name: written with copy_, which autograd records
    assert rmsnorm(x, gamma, eps=1e-5, y=buf) is buf and buf.grad_fn is not None
    for g, w in zip(torch.autograd.grad((buf * weight).sum(), [x, gamma]), got):
        assert torch.equal(g, w)
    mixed = rmsnorm(x, gamma.detach().numpy(), eps=1e-5)  # a numpy array beside them: no gradient of its own
    assert torch.equal(torch.autograd.grad((mixed * weight).sum(), [x])[0], got[0])
    exp = ptodsl.load("specs/exp.yaml")
    e = exp(torch.rand(4, 64, requires_grad=True))
    with pytest.raises(RuntimeError, match=r"E0716.*cannot differentiate through `exp`"):
        e.sum().backward()
    with torch.no_grad():
        assert exp(torch.rand(4, 64, requires_grad=True)).grad_fn is None


def test_scalar_keyword_and_default():
    op = ptodsl.load("specs/scale_shift.yaml")
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_allclose(op(x, alpha=2.0), x * 2 + 0.5)
    np.testing.assert_allclose(op(x, alpha=2.0, beta=1.0), x * 2 + 1.0)


@pytest.mark.parametrize("call, exc, code, words", [
    (lambda op, x: op(x.astype(np.float64)), TypeError, "E0700", ["`x`", "f32"]),
    (lambda op, x: op(x[0]), ValueError, "E0701", ["`x`", "rank 1", "expected rank 2"]),
    (lambda op, x: op(np.zeros((3, 7), np.float32)), ValueError, "E0702", ["`x`", "7", "1024"]),
    (lambda op, x: op(), TypeError, "E0703", ["`x`"]),
    (lambda op, x: op(x, z=1), TypeError, "E0704", ["`z`"]),
    (lambda op, x: op(x, x), TypeError, "E0704", ["positional"]),
    (lambda op, x: op([1, 2]), TypeError, "E0705", ["`x`", "list"]),
    (lambda op, x: op(x, y=np.zeros((2, 3, 1024), np.float32)), ValueError, "E0701", ["`y`"]),
    (lambda op, x: op(x, backend="gpu"), ValueError, "E0707", ["gpu"]),
])
def test_argument_errors_name_the_parameter(softmax, call, exc, code, words):
    x = np.zeros((3, 1024), np.float32)
    with pytest.raises(exc) as info:
        call(softmax, x)
    assert isinstance(info.value, ptodsl.ArgumentError)
    assert info.value.diagnostic.code == code
    text = str(info.value)
    for w in words:
        assert w in text, text
    assert "help:" in text


@pytest.mark.parametrize("dtype, shown", [(np.float64, "float64"), (np.complex64, "complex64"),
                                          (np.float16, "f16"), (object, "object")])
def test_an_output_buffer_of_another_dtype_is_named(softmax, dtype, shown):
    """An output whose dtype the op has no kernel for is named like an input would be, never `None`."""
    x = np.zeros((3, 1024), np.float32)
    with pytest.raises(ptodsl.ArgumentError) as info:
        softmax(x, y=np.zeros((3, 1024), dtype))
    d = info.value.diagnostic
    assert d.code == "E0700" and d.message == f"`y` has dtype {shown}, but `T` is f32 from an earlier argument"
    with pytest.raises(ptodsl.ArgumentError) as info:  # add_one's output is f32 alone: no dtype variable
        ptodsl.load("specs/add_one.yaml")(np.zeros((2, 4), np.float32), y=np.zeros((2, 4), dtype))
    assert info.value.diagnostic.message == f"`y` has dtype {shown}, expected f32"


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_torch_tensors_of_any_dtype_or_layout_are_refused_by_name(softmax):
    """Dtypes numpy has (float64, complex64, uint16), those it has not (float8, complex32, which
    cannot even become numpy arrays) and layouts other than dense: a diagnostic, never a TypeError."""
    torch = pytest.importorskip("torch")
    x = np.zeros((3, 1024), np.float32)
    for dtype in ("float64", "complex64", "uint16", "float8_e4m3fn", "float8_e5m2", "complex32"):
        t = torch.zeros((3, 1024), dtype=getattr(torch, dtype))
        for args, kwargs in (((x,), {"y": t}), ((t,), {})):
            with pytest.raises(ptodsl.ArgumentError) as info:
                softmax(*args, **kwargs)
            assert info.value.diagnostic.code == "E0700" and f"has dtype {dtype}," in info.value.diagnostic.message
    with pytest.raises(ptodsl.ArgumentError) as info:
        softmax(torch.zeros((3, 1024)).to_sparse())
    assert info.value.diagnostic.code == "E0705" and "sparse_coo tensor" in info.value.diagnostic.message


def test_symbol_consistency_across_arguments():
    op = ptodsl.load("specs/add_bcast.yaml")
    x = np.zeros((2, 4, 128), np.float32)
    with pytest.raises(ValueError, match="`H`"):
        op(x, np.zeros((1, 1, 64), np.float32))
    with pytest.raises(TypeError, match="`T` is f32"):
        op(x, np.zeros((1, 1, 128), np.float16))


def test_compile_error_carries_diagnostics(write_spec):
    path = write_spec("bad", "kernel bad(x: f32[N], y: out f32[N]):\n    y = x + 1.0\n", "op: bad\n")
    with pytest.raises(ptodsl.CompileError) as info:
        ptodsl.load(path)
    assert [d.code for d in info.value.diagnostics] == ["E0400"]
