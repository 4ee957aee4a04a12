"""Arguments that share memory, and calls whose buffers the machine cannot give.

An input that shares memory with an output, in part or exactly, is read as it was before the call
(numpy's meaning of overlapping operands): the runtime copies it first. Outputs that share memory
are refused (E0717). A buffer the call would allocate past the machine's memory is a diagnostic
naming it and its size (E0718), not numpy's bare MemoryError nor an aborted process. The
generated package, its torch custom ops and the NPU argument marshalling are covered in
tests/gen/test_gen_safety.py.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ptodsl
from ptodsl.api import ArgumentError

HAS_CXX = shutil.which("g++") is not None
BACKENDS = ["sim", pytest.param("cpu", marks=[pytest.mark.cpu, pytest.mark.skipif(not HAS_CXX, reason="no g++")])]
LAYERNORM_BWD = "specs/layernorm_bwd.yaml"

# y[b] depends on x[0]: run in place without a copy, every row after the first would read the
# first row already overwritten.
FIRST_ROW = "kernel first_row(x: f32[B, N], y: out f32[B, N]):\n    for b in loop(B, name=\"rows\"):\n" \
            "        y[b, :] = x[b, :] - x[0, :] * 0.5\n"
# A GM workspace of M x N floats from inputs of M and N floats.
OUTER = """kernel outer(x: f32[M, 1], w: f32[1, N], y: out f32[M, 1]):
    t = tensor([M, N], f32)
    for i in loop(M, name="rows"):
        t[i, :] = x[i, :] * w
    y[:] = amax(t, dim=-1, keepdim=True)
"""


@pytest.fixture(scope="module")
def softmax() -> ptodsl.Operator:
    return ptodsl.load("specs/softmax.yaml")


@pytest.fixture(scope="module")
def first_row(tmp_path_factory) -> ptodsl.Operator:
    folder = tmp_path_factory.mktemp("first_row")
    (folder / "first_row.pto").write_text(FIRST_ROW)
    (folder / "first_row.yaml").write_text("schedule: {vec_tile: [1, 64]}\n")
    return ptodsl.load(str(folder / "first_row.yaml"))


@pytest.fixture(scope="module")
def outer(tmp_path_factory) -> ptodsl.Operator:
    folder = tmp_path_factory.mktemp("outer")
    (folder / "outer.pto").write_text(OUTER)
    (folder / "outer.yaml").write_text("schedule: {vec_tile: [1, 64]}\n")
    return ptodsl.load(str(folder / "outer.yaml"))


def rows(r: int, n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, (r, n)).astype(np.float32)


# ---- an input that shares memory with an output is read as it was


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shift", [1, -1, 6, -6])
def test_an_input_overlapping_the_output_gives_the_right_rows(softmax, backend: str, shift: int):
    """softmax(x=buf[0:7], y=buf[1:8]): rows overlapping by six gave wrong rows on sim and cpu."""
    buf = rows(8 + abs(shift), 1024)
    xs, ys = (0, shift) if shift > 0 else (-shift, 0)
    want = softmax(buf[xs:xs + 7].copy())
    softmax(buf[xs:xs + 7], y=buf[ys:ys + 7], backend=backend)
    np.testing.assert_allclose(buf[ys:ys + 7], want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_tensors_sharing_storage_give_the_right_rows(softmax, backend: str):
    torch = pytest.importorskip("torch")
    buf = torch.from_numpy(rows(8, 1024))
    want = torch.softmax(buf[0:7].clone(), dim=-1)
    y = softmax(buf[0:7], y=buf[1:8], backend=backend)
    assert y.data_ptr() == buf[1:8].data_ptr()
    torch.testing.assert_close(buf[1:8], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_aliasing_means_the_output_of_the_input_as_it_was(first_row, backend: str):
    x = rows(5, 64)
    want = x - x[0] * 0.5
    first_row(x, y=x, backend=backend)
    np.testing.assert_allclose(x, want, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_input_sharing_memory_with_an_inout_tensor(backend: str):
    """seq_add's `out` is in-out: it keeps its rows past each length, and `inp` (the same buffer,
    shifted) is read as it was."""
    seq_add = ptodsl.load("specs/seq_add.yaml")
    buf = np.random.default_rng(3).uniform(-1, 1, (3, 16, 64)).astype(np.float32)
    inp, out = buf[0:2], buf[1:3]
    lengths = np.array([16, 5], np.int32)
    want = out.copy()
    want[0] = inp[0] + 1.0
    want[1, :5] = inp[1, :5] + 1.0
    seq_add(inp, lengths, out=out, backend=backend)
    np.testing.assert_allclose(buf[1:3], want, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_outputs_that_share_memory_are_refused(backend: str):
    op = ptodsl.load(LAYERNORM_BWD)
    x, dy = rows(4, 64), rows(4, 64, 1)
    gamma = np.ones(64, np.float32)
    buf = np.full(65 + 64, 7.0, np.float32)
    for dgamma, dbeta in ((buf[0:64], buf[1:65]), (buf[0:64], buf[0:64])):
        with pytest.raises(ArgumentError) as info:
            op(x, gamma, dy, dgamma=dgamma, dbeta=dbeta, backend=backend)
        assert info.value.diagnostic.code == "E0717"
        assert "outputs `dgamma` and `dbeta` share memory" in str(info.value)
    assert (buf == 7.0).all()  # refused before anything ran
    dx, dgamma, dbeta = op(x, gamma, dy, dgamma=buf[0:64], dbeta=buf[64:128], backend=backend)  # apart: fine
    assert dgamma.base is buf and dbeta.base is buf


# ---- buffers the machine cannot give


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_output_sized_by_a_broadcast_input_is_a_diagnostic(backend: str):
    add_one = ptodsl.load("specs/add_one.yaml")
    x = np.broadcast_to(np.float32(1.0), (2**30, 2**30))  # 4 bytes, standing for 4 EiB
    with pytest.raises(MemoryError) as info:
        add_one(x, backend=backend)
    d = info.value.diagnostic
    assert d.code == "E0718"
    assert d.message == ("output `y` ([1073741824, 1073741824] f32) needs 4.0 EiB (4611686018427387904 bytes), "
                         "which cannot be allocated")


def test_a_broadcast_torch_input_is_a_diagnostic_too():
    torch = pytest.importorskip("torch")
    add_one = ptodsl.load("specs/add_one.yaml")
    with pytest.raises(MemoryError) as info:
        add_one(torch.ones(1).expand(2**30, 2**30))
    assert info.value.diagnostic.code == "E0718" and "output `y`" in info.value.diagnostic.message


def test_the_limit_adds_up_what_the_call_allocates(monkeypatch):
    """Each buffer fits; the output and the contiguous copy of the broadcast input together do not."""
    from ptodsl import inputs

    add_one = ptodsl.load("specs/add_one.yaml")
    monkeypatch.setattr(inputs, "memory_limit", lambda: 6 << 20)
    x = np.broadcast_to(np.float32(1.0), (1024, 1024))  # 4 MiB out, 4 MiB copied in
    with pytest.raises(MemoryError) as info:
        add_one(x)
    text = str(info.value)
    assert "the contiguous copy of input `x` ([1024, 1024] f32) needs 4.0 MiB" in text
    assert "the call allocates 4.0 MiB before it, 8.0 MiB in all" in text
    assert "at most 6.0 MiB" in text
    assert add_one(x[:512]).shape == (512, 1024)  # 4 MiB in all fits


def test_an_allocation_that_fails_anyway_is_a_diagnostic(monkeypatch):
    """Past the limit check (here: no limit known), numpy's MemoryError becomes E0718 as well."""
    from ptodsl import inputs

    monkeypatch.setattr(inputs, "memory_limit", lambda: None)
    add_one = ptodsl.load("specs/add_one.yaml")
    with pytest.raises(MemoryError) as info:
        add_one(np.broadcast_to(np.float32(1.0), (2**30, 2**30)))
    assert info.value.diagnostic.code == "E0718" and "numpy:" in str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_workspace_past_the_memory_is_a_diagnostic(outer, backend: str):
    x, w = np.ones((2**23, 1), np.float32), np.ones((1, 2**23), np.float32)  # 32 MiB each
    with pytest.raises(MemoryError) as info:
        outer(x, w, backend=backend)
    assert info.value.diagnostic.code == "E0718"
    assert "the workspace of local `t` ([8388608, 8388608] f32) needs 256.0 TiB" in info.value.diagnostic.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_workspace_the_backend_cannot_get_below_the_checks(outer, backend: str, monkeypatch):
    """With no limit known, the simulator's numpy and the C++ workspace's std::bad_alloc (which
    would abort the process from the library's entry) both end in E0718. 256 TiB is past any
    address space, so the allocation fails whatever the machine's overcommit policy."""
    from ptodsl import inputs

    monkeypatch.setattr(inputs, "memory_limit", lambda: None)
    x, w = np.ones((2**23, 1), np.float32), np.ones((1, 2**23), np.float32)
    with pytest.raises(MemoryError) as info:
        outer(x, w, backend=backend)
    assert info.value.diagnostic.code == "E0718"
    if backend == "cpu":
        assert "a GM workspace of the kernels of `outer` cannot be allocated" in info.value.diagnostic.message


def test_a_strided_bf16_torch_output_is_refused_not_left_unwritten(softmax):
    """A bf16 tensor reaches numpy through a contiguous copy: a strided output was written there
    and the caller's tensor was returned untouched."""
    torch = pytest.importorskip("torch")
    x = torch.rand(3, 1024).to(torch.bfloat16)
    y = torch.zeros(3, 2048, dtype=torch.bfloat16)[:, ::2]
    with pytest.raises(ArgumentError) as info:
        softmax(x, y=y)
    assert info.value.diagnostic.code == "E0709"
