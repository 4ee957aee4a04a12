"""Arguments that share memory and buffers past the machine's memory, through the generated
package: its wrappers (numpy and torch, sim and cpu), its torch custom ops and the NPU argument
marshalling. The same rules as ptodsl.load's (tests/test_hostile_aliasing.py): an input sharing
memory with an output is read as it was, outputs sharing memory are refused (E0717), a buffer
the machine cannot give is E0718."""

from __future__ import annotations

import importlib
import json
import shutil
from types import ModuleType

import numpy as np
import pytest

HAS_CXX = shutil.which("g++") is not None
BACKENDS = ["sim", pytest.param("cpu", marks=[pytest.mark.cpu, pytest.mark.skipif(not HAS_CXX, reason="no g++")])]


def rows(r: int, n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, (r, n)).astype(np.float32)


def softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_package_reads_an_overlapping_input_as_it_was(pkg: ModuleType, backend: str):
    buf = rows(8, 1024)
    want = softmax_rows(buf[0:7].astype(np.float64))
    pkg.softmax(buf[0:7], y=buf[1:8], backend=backend)
    np.testing.assert_allclose(buf[1:8], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_package_with_torch_tensors_of_one_storage(pkg: ModuleType, backend: str):
    torch = pytest.importorskip("torch")
    buf = torch.from_numpy(rows(8, 1024))
    want = torch.softmax(buf[1:8].clone(), dim=-1)
    pkg.softmax(buf[1:8], y=buf[0:7], backend=backend)
    torch.testing.assert_close(buf[0:7], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_torch_custom_op_of_an_inout_tensor_sharing_storage_with_an_input(pkg: ModuleType, backend: str):
    """The custom ops are functional: an in-out tensor is cloned and returned updated, so an input
    sharing its storage is read as it was; the result does not alias either."""
    torch = pytest.importorskip("torch")
    buf = torch.from_numpy(np.random.default_rng(3).uniform(-1, 1, (3, 16, 64)).astype(np.float32))
    inp, out = buf[0:2], buf[1:3]
    lengths = torch.tensor([16, 5], dtype=torch.int32)
    want = out.clone()
    want[0] = inp[0] + 1.0
    want[1, :5] = inp[1, :5] + 1.0
    got = torch.ops.ptodsl_ops.seq_add(inp, lengths, out, backend=backend)
    torch.testing.assert_close(got, want)
    assert got.data_ptr() != out.data_ptr()


def test_the_package_refuses_outputs_that_share_memory(pkg: ModuleType):
    from ptodsl.api import ArgumentError

    x, dy = rows(4, 64), rows(4, 64, 1)
    buf = np.zeros(65, np.float32)
    with pytest.raises(ValueError) as info:
        pkg.layernorm_bwd(x, np.ones(64, np.float32), dy, dgamma=buf[0:64], dbeta=buf[1:65])
    assert info.value.diagnostic.code == "E0717"
    assert not isinstance(info.value, ArgumentError)  # the package's own copy of the runtime raised it


def test_the_package_names_an_output_the_machine_cannot_give(pkg: ModuleType):
    with pytest.raises(MemoryError) as info:
        pkg.add_one(np.broadcast_to(np.float32(1.0), (2**30, 2**30)))
    assert info.value.diagnostic.code == "E0718" and "output `y`" in info.value.diagnostic.message


# ------------------------------------------------------------------ the NPU argument marshalling


def _marshal(pkg: ModuleType, name: str, inputs: tuple, kwargs: dict, empty=None):
    torch = pytest.importorskip("torch")
    launch = importlib.import_module(f"{pkg.__name__}._ptodsl.runtime.npu_launch")
    op = importlib.import_module(f"{pkg.__name__}.ops.{name}")._PTODSL_OP
    index, symbols = op.validate(inputs, kwargs)
    folder = op.root / "kernels" / name / "npu" / "f32"
    params = [(p["kind"], p["name"], p["dtype"]) for p in json.loads((folder / "build.json").read_text())["params"]]
    empty = empty or (lambda shape, dtype: torch.zeros(shape, dtype=torch.float32))
    # CPU tensors stand for tensors in device memory: moved "to the device" without a copy
    return launch.marshal(op.operator, index, inputs, kwargs, symbols, params, lambda t: t.contiguous(), empty)


def test_npu_inputs_sharing_device_memory_with_an_output_are_copied_there(pkg: ModuleType):
    torch = pytest.importorskip("torch")
    buf = torch.from_numpy(rows(8, 1024))
    args, _results = _marshal(pkg, "softmax", (buf[0:7],), {"y": buf[1:8]})
    x_ptr, y_ptr = args[0], args[1]
    assert y_ptr == buf[1:8].data_ptr()  # the output is written in place
    assert x_ptr != buf[0:7].data_ptr()  # the input is a copy of what it held
    copy = torch.frombuffer(bytearray(7 * 1024 * 4), dtype=torch.float32)  # read back through the pointer
    import ctypes

    ctypes.memmove(copy.data_ptr(), x_ptr, 7 * 1024 * 4)
    assert torch.equal(copy.view(7, 1024), buf[0:7])


def test_npu_outputs_sharing_memory_are_refused(pkg: ModuleType):
    torch = pytest.importorskip("torch")
    buf = torch.zeros(65)
    with pytest.raises(ValueError) as info:
        _marshal(pkg, "layernorm_bwd", (torch.from_numpy(rows(4, 64)), torch.ones(64), torch.from_numpy(rows(4, 64, 1))),
                 {"dgamma": buf[0:64], "dbeta": buf[1:65]})
    assert info.value.diagnostic.code == "E0717"


def test_an_output_the_device_cannot_give_is_a_diagnostic(pkg: ModuleType):
    torch = pytest.importorskip("torch")

    def no_memory(shape, dtype):
        raise RuntimeError("NPU out of memory. Tried to allocate 28.00 GiB")

    with pytest.raises(MemoryError) as info:
        _marshal(pkg, "softmax", (torch.from_numpy(rows(7, 1024)),), {}, no_memory)
    d = info.value.diagnostic
    assert d.code == "E0718" and d.message == "output `y` ([7, 1024] f32) cannot be allocated"
    assert "NPU out of memory" in str(info.value)
