"""The generated wrappers: signatures from the spec, numpy and torch calls, argument errors by name."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from ptodsl.dtypes import numpy_dtype

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "specs"))
import refs  # noqa: E402 - the library's numpy references

sys.path.remove(str(ROOT / "specs"))


def rand(*shape: int, dtype: str = "f32", seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(numpy_dtype(dtype))


def test_signature_and_doc_come_from_the_spec(pkg: ModuleType):
    sig = inspect.signature(pkg.rmsnorm)
    kinds = {n: (p.kind, p.default) for n, p in sig.parameters.items()}
    assert list(kinds) == ["x", "gamma", "y", "eps", "backend", "device"]
    assert kinds["x"][0] is kinds["gamma"][0] is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert kinds["y"] == (inspect.Parameter.KEYWORD_ONLY, None)
    assert kinds["eps"] == (inspect.Parameter.KEYWORD_ONLY, 1e-6)
    assert kinds["backend"] == (inspect.Parameter.KEYWORD_ONLY, "sim")
    assert kinds["device"] == (inspect.Parameter.KEYWORD_ONLY, None)
    doc = pkg.rmsnorm.__doc__
    assert doc.startswith("RMSNorm over the last axis")
    assert "gamma: ``T[H]``" in doc and "Dtype variants: T in f32, f16, bf16." in doc
    # a scalar without a default is a required keyword
    assert inspect.signature(pkg.attn).parameters["scale"].default is inspect.Parameter.empty
    assert pkg.__all__ == sorted(pkg.__all__) and "softmax" in pkg.__all__


def test_the_calls_own_keywords_are_the_ones_the_checker_reserves(pkg: ModuleType):
    """A parameter may not take a keyword the call has of its own: the checker refuses the names
    of CALL_KEYWORDS, so every wrapper, torch op and ``ptodsl.load`` operator must take no other."""
    import ptodsl
    from ptodsl.yamlio.schema import CALL_KEYWORDS

    own: set[str] = set()
    for name in pkg.__all__:
        module = getattr(pkg.ops, name, None)
        if module is None:
            continue
        params = {p.name for p in module._PTODSL_OP.program.params}
        own |= set(inspect.signature(getattr(pkg, name)).parameters) - params
        torch_ops = getattr(pkg, "torch_ops", None)  # with torch installed
        if torch_ops is not None:
            schema = getattr(getattr(torch_ops.torch.ops, pkg.__name__), name).default._schema
            own |= {a.name for a in schema.arguments} - params
    assert own == set(CALL_KEYWORDS)
    op = ptodsl.load("specs/add_one.yaml")
    x = np.ones((2, 4), np.float32)
    for keyword in set(CALL_KEYWORDS) - {"backend"}:  # Operator takes `backend=` and nothing else
        with pytest.raises(ptodsl.ArgumentError, match=f"unknown argument `{keyword}`"):
            op(x, **{keyword: None})
    assert op(x, backend="sim").shape == (2, 4)


def test_numpy_call(pkg: ModuleType):
    x = rand(7, 1024)
    y = pkg.softmax(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    np.testing.assert_allclose(y, refs.softmax(x), rtol=1e-5, atol=1e-6)


def test_torch_call(pkg: ModuleType):
    torch = pytest.importorskip("torch")
    x = torch.rand(5, 1024, dtype=torch.bfloat16)
    y = pkg.softmax(x)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=3e-2, atol=1e-2)


def test_outputs_by_name_are_written_in_place(pkg: ModuleType):
    x, gamma = rand(3, 300), rand(300, seed=1)
    buf = np.zeros((3, 300), np.float32)
    out = pkg.rmsnorm(x, gamma, y=buf, eps=1e-3)
    assert out is buf
    np.testing.assert_allclose(buf, refs.rmsnorm(x, gamma, eps=1e-3), rtol=1e-5, atol=1e-6)


def test_inout_is_positional_and_updated(pkg: ModuleType):
    inp = rand(2, 4, 64)
    seqs = np.array([3, 0], np.int32)
    out = rand(2, 4, 64, seed=2)
    want = refs.seq_add(inp, seqs, out)
    assert pkg.seq_add(inp, seqs, out) is out
    np.testing.assert_allclose(out, want)


def test_several_outputs_come_back_as_a_tuple(pkg: ModuleType):
    x = rand(8, 256)
    a, n = pkg.abs_neg(x)
    np.testing.assert_array_equal(a, np.abs(x))
    np.testing.assert_array_equal(n, -x)


@pytest.mark.parametrize(("call", "error", "fragment"), [
    (lambda p: p.softmax(rand(7, 1024).astype(np.float64)), "ArgumentTypeError", "`x` has dtype"),
    (lambda p: p.softmax(rand(1024)), "ArgumentValueError", "`x` has rank 1"),
    (lambda p: p.softmax(rand(7, 512)), "ArgumentValueError", "symbol `N` is 512 in `x`"),
    (lambda p: p.rmsnorm(rand(3, 300), rand(200)), "ArgumentValueError", "symbol `H` is 200 in `gamma`"),
    (lambda p: p.rmsnorm(rand(3, 300), rand(300, dtype="f16")), "ArgumentTypeError", "`gamma` has dtype f16"),
    (lambda p: p.softmax([1.0, 2.0]), "ArgumentTypeError", "`x` must be a numpy array"),
    (lambda p: p.softmax(rand(7, 1024), y=np.zeros((1024, 7), np.float32).T), "ArgumentValueError",
     "output `y` must be a contiguous"),
    (lambda p: p.softmax(rand(7, 1024), backend="gpu"), "ArgumentValueError", "unknown backend 'gpu'"),
    (lambda p: p.softmax(rand(7, 1024), device=0), "ArgumentValueError", "only backend=\"npu\" takes"),
], ids=["dtype", "rank", "fixed-dim", "symbol", "dtype-variable", "not-a-tensor", "strided-output",
        "backend", "device-on-sim"])
def test_argument_errors_name_the_parameter(pkg: ModuleType, call, error, fragment):
    with pytest.raises(getattr(pkg, error)) as exc:  # the package's own error classes
        call(pkg)
    assert fragment in str(exc.value)


def test_tensors_on_another_device_are_refused_by_the_simulator(pkg: ModuleType):
    torch = pytest.importorskip("torch")
    with pytest.raises(pkg.ArgumentValueError, match="`x` is on device meta"):
        pkg.softmax(torch.empty((7, 1024), device="meta"))


def test_python_checks_the_call_shape(pkg: ModuleType):
    with pytest.raises(TypeError, match="scale"):
        pkg.attn(rand(64, 64), rand(256, 64), rand(256, 64))
    with pytest.raises(TypeError):
        pkg.softmax(rand(7, 1024), rand(7, 1024))  # outputs are keywords


def test_cpu_backend_is_passed_through(pkg: ModuleType):
    x = rand(4, 64)
    np.testing.assert_allclose(pkg.exp(x, backend="cpu"), np.exp(x), rtol=1e-5)


def _run(tree: Path, script: str) -> None:
    proc = subprocess.run([sys.executable, "-c", script], cwd=tree, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_import_without_torch(tree: Path):
    # torch is blocked before the import: the package loads and runs on numpy alone.
    _run(tree, "import sys; sys.modules['torch'] = None\n"
               "import numpy as np, ptodsl_ops\n"
               "assert not hasattr(ptodsl_ops, 'torch_ops')\n"
               "y = ptodsl_ops.add_one(np.array([[-1.0, 2.0]], np.float32))\n"
               "assert y.tolist() == [[0.0, 3.0]], y\n"
               "print('ok')\n")


REGISTERED = "hasattr(torch.ops.ptodsl_ops, 'add_one')"


def test_torch_is_imported_only_for_torch(tree: Path):
    """torch takes seconds to import: the package and its numpy calls leave it alone; the first
    call with a torch tensor registers the custom ops."""
    pytest.importorskip("torch")
    _run(tree, "import sys\n"
               "import numpy as np, ptodsl_ops\n"
               "assert 'torch' not in sys.modules\n"
               "y = ptodsl_ops.add_one(np.array([[-1.0, 2.0]], np.float32))\n"
               "assert y.tolist() == [[0.0, 3.0]] and 'torch' not in sys.modules\n"
               "import torch\n"
               f"assert not {REGISTERED}\n"
               "y = ptodsl_ops.add_one(torch.tensor([[-1.0, 2.0]]))\n"
               "assert isinstance(y, torch.Tensor) and y.tolist() == [[0.0, 3.0]]\n"
               f"assert {REGISTERED}\n"
               "print('ok')\n")


def test_torch_ops_are_registered_at_import_after_torch(tree: Path):
    """`import torch; import pkg`: `torch.ops.<pkg>.<op>` works before any call of the package."""
    pytest.importorskip("torch")
    _run(tree, f"import torch, ptodsl_ops\nassert {REGISTERED}\nprint('ok')\n")


def test_torch_ops_attribute_registers_the_ops(pkg: ModuleType):
    """`<pkg>.torch_ops` imports (and so registers) the ops at its first use; here they are already."""
    torch = pytest.importorskip("torch")
    assert pkg.__getattr__("torch_ops") is pkg.torch_ops
    assert pkg.torch_ops.add_one is not None and hasattr(torch.ops.ptodsl_ops, "add_one")
    with pytest.raises(AttributeError):
        pkg.__getattr__("no_such_op")
