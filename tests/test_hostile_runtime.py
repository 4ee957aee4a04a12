"""Hostile runtime values: every input is validated before a kernel runs, on every backend.

Scalars of the wrong kind or beyond their dtype, dims beyond the kernels' limits, zero-size dims,
negative strides and lengths read from tensors beyond the dims they bound are each either a
diagnostic (an ArgumentError with an E07xx code) or the mathematically right answer; nothing
segfaults, aborts, hangs or writes outside a tensor. The cpu cases build two small libraries.
"""

from __future__ import annotations

import shutil
from fractions import Fraction

import numpy as np
import pytest

import ptodsl
from ptodsl.api import ArgumentError, run_kernel
from ptodsl.dtypes import from_numpy

SCALE_ROWS = "tests/golden_codes/ops/scale_rows.yaml"
HAS_CXX = shutil.which("g++") is not None
BACKENDS = ["sim", pytest.param("cpu", marks=[pytest.mark.cpu, pytest.mark.skipif(not HAS_CXX, reason="no g++")])]


@pytest.fixture(scope="module")
def scale_rows() -> ptodsl.Operator:
    return ptodsl.load(SCALE_ROWS)


@pytest.fixture(scope="module")
def seq_add() -> ptodsl.Operator:
    return ptodsl.load("specs/seq_add.yaml")


def x32(rows: int = 4) -> np.ndarray:
    return np.full((rows, 256), 2.0, np.float32)


def w32() -> np.ndarray:
    return np.full((1, 256), 0.5, np.float32)


def code_of(call) -> str:
    with pytest.raises(ArgumentError) as info:
        call()
    return info.value.diagnostic.code


BAD_SCALARS = ["abc", b"2", 1 + 2j, np.complex64(1), np.ones(3), [2.0], None, object(), 10**40, -(10**40),
               10**5000, 1e39, np.float64(-1e39), Fraction(10**50, 3)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("value", BAD_SCALARS, ids=[f"{type(v).__name__}{i}" for i, v in enumerate(BAD_SCALARS)])
def test_bad_scalars_are_refused(scale_rows, backend: str, value):
    assert code_of(lambda: scale_rows(x32(), w32(), alpha=value, backend=backend)) == "E0706"


@pytest.mark.parametrize("value", [2, 2.0, np.float32(2), np.int64(2), np.array(2.0), True, Fraction(4, 2)])
def test_real_scalars_of_any_kind_are_taken(scale_rows, value):
    y = scale_rows(x32(), w32(), alpha=value)
    assert float(y[0, 0]) == 2.0 * 0.5 * float(value)


def test_infinity_and_nan_may_be_passed_on_purpose(scale_rows):
    assert np.isinf(scale_rows(x32(), w32(), alpha=float("inf"))).all()
    assert np.isnan(scale_rows(x32(), w32(), alpha=float("nan"))).all()


def test_integer_scalars_are_checked_against_their_dtype(tmp_path):
    (tmp_path / "k.pto").write_text("kernel k(x: i32[N], n: i8, y: out i32[N]):\n    y[:] = x + n\n")
    (tmp_path / "k.yaml").write_text("schedule: {vec_tile: [64]}\n")
    op = ptodsl.load(str(tmp_path / "k.yaml"))
    x = np.zeros(64, np.int32)
    for bad in (128, -129, 2.5, float("inf"), float("nan"), 10**30):
        assert code_of(lambda bad=bad: op(x, n=bad)) == "E0706"
    assert int(op(x, n=127)[0]) == 127 and int(op(x, n=np.int8(-128))[0]) == -128 and int(op(x, n=3.0)[0]) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_outputs_are_returned_without_running(scale_rows, backend: str):
    y = scale_rows(np.ones((0, 256), np.float32), w32(), alpha=2.0, backend=backend)
    assert y.shape == (0, 256)


def test_huge_dims_are_refused_before_anything_runs(tmp_path):
    (tmp_path / "k.pto").write_text("kernel k(x: f32[M, N], y: out f32[M, N]):\n    y[:] = x + 1.0\n")
    (tmp_path / "k.yaml").write_text("schedule: {vec_tile: [8, 64]}\n")
    op = ptodsl.load(str(tmp_path / "k.yaml"))
    big = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=(2**40, 0), strides=(0, 4))
    assert code_of(lambda: op(big)) == "E0710"
    wide = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=(1, 2**31), strides=(0, 0))
    assert code_of(lambda: op(wide)) == "E0710"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_matmul_over_an_empty_k_is_refused(backend: str):
    matmul = ptodsl.load("specs/matmul.yaml")
    a, b = np.ones((16, 0), np.float32), np.ones((0, 16), np.float32)
    assert code_of(lambda: matmul(a, b, backend=backend)) == "E0710"


def test_a_reduction_over_an_empty_axis_is_refused_and_an_empty_batch_returns():
    sum_rows = ptodsl.load("specs/sum_rows.yaml")
    params = [p for p in sum_rows.inputs]
    assert params  # the op takes one [R, C] input and reduces C
    assert code_of(lambda: sum_rows(np.ones((4, 0), np.float32))) == "E0710"
    assert sum_rows(np.ones((0, 64), np.float32)).shape[0] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_strides_give_the_right_answer(scale_rows, backend: str):
    x = np.arange(4 * 256, dtype=np.float32).reshape(4, 256)[::-1, ::-1]
    y = scale_rows(x, w32(), alpha=2.0, backend=backend)
    np.testing.assert_array_equal(y, x * 0.5 * 2.0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lengths", [[3, 17], [-1, 2], [2**31 - 1, 0], [16, 16000]])
def test_lengths_read_from_a_tensor_beyond_their_dim_are_refused(seq_add, backend: str, lengths):
    inp = np.ones((2, 16, 64), np.float32)
    out = np.zeros((2, 16, 64), np.float32)
    before = out.copy()
    assert code_of(lambda: seq_add(inp, np.array(lengths, np.int32), out=out, backend=backend)) == "E0711"
    np.testing.assert_array_equal(out, before)  # nothing ran


@pytest.mark.parametrize("backend", BACKENDS)
def test_lengths_at_their_bounds_run(seq_add, backend: str):
    inp = np.ones((2, 16, 64), np.float32)
    out = np.zeros((2, 16, 64), np.float32)
    seq_add(inp, np.array([0, 16], np.int32), out=out, backend=backend)
    assert out[0].sum() == 0 and (out[1] == 2.0).all()


def test_run_kernel_validates_too(scale_rows):
    """Callers below the Operator (the golden harness, generated packages) get the same checks."""
    compiled = scale_rows.compiled
    index = compiled.kernel_for({"T": "f32"})
    arrays = {"x": x32(), "w": w32(), "y": np.zeros((4, 256), np.float32)}
    with pytest.raises(ArgumentError):
        run_kernel(compiled, index, arrays, {"alpha": "2"}, {"M": 4, "N": 256}, "sim")


def _every_numpy_dtype() -> list[np.dtype]:
    return sorted({np.dtype(t) for t in np.sctypeDict.values()
                   if np.dtype(t).kind not in "MmSUV" or np.dtype(t).itemsize}, key=str)


# An op of f32 alone and one of a dtype variable (T: f32, f16, bf16), each with an f32 input and a
# buffer for its output; the dtypes each takes as its input.
OPS = {"add_one": ((4, 256), {"f32"}), "softmax": ((4, 1024), {"f32", "f16", "bf16"})}


def _refused_by_name(op: ptodsl.Operator, bad, as_output: bool, shown: str, takes: set[str]) -> None:
    """``bad`` as the op's input, or as its output buffer beside an f32 input: taken when the op
    takes its dtype there, else E0700 naming ``shown``, never `None`."""
    x = np.zeros(bad.shape, np.float32)
    call = (lambda: op(x, y=bad)) if as_output else (lambda: op(bad))
    if shown in ({"f32"} if as_output else takes):
        call()
        return
    with pytest.raises(ArgumentError) as info:
        call()
    d = info.value.diagnostic
    assert d.code == "E0700" and "None" not in d.message and f"dtype {shown}," in d.message, (shown, d.message)


@pytest.mark.parametrize("as_output", [False, True], ids=["input", "output"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_every_numpy_dtype_is_taken_or_refused_by_name(name: str, as_output: bool):
    op, (shape, takes) = ptodsl.load(f"specs/{name}.yaml"), OPS[name]
    for dtype in _every_numpy_dtype():
        _refused_by_name(op, np.zeros(shape, dtype), as_output, from_numpy(dtype) or str(dtype), takes)


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch warns about its experimental dtypes
@pytest.mark.parametrize("as_output", [False, True], ids=["input", "output"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_every_torch_dtype_is_taken_or_refused_by_name(name: str, as_output: bool):
    """float8, complex32, bits and quantized tensors cannot even become numpy arrays."""
    torch = pytest.importorskip("torch")
    op, (shape, takes) = ptodsl.load(f"specs/{name}.yaml"), OPS[name]
    for dtype in sorted({v for v in vars(torch).values() if isinstance(v, torch.dtype)}, key=str):
        try:
            bad = torch.zeros(shape, dtype=dtype)
        except (RuntimeError, TypeError):  # a dtype torch cannot allocate on the CPU
            continue
        bare = str(dtype).removeprefix("torch.")
        try:
            shown = "bf16" if dtype == torch.bfloat16 else from_numpy(np.dtype(bare)) or bare
        except TypeError:  # numpy has no such dtype
            shown = bare
        _refused_by_name(op, bad, as_output, shown, takes)


# ---- accesses at offsets read from a tensor: the guards of the control program (E0730)

GATHER_ROWS = "tests/golden_codes/ops/gather_rows.yaml"
PICK_ELEMENTS = "tests/golden_codes/ops/pick_elements.yaml"
SCATTER_ROWS = "tests/golden_codes/ops/scatter_rows.yaml"


@pytest.fixture(scope="module")
def gather_rows() -> ptodsl.Operator:
    return ptodsl.load(GATHER_ROWS)


@pytest.fixture(scope="module")
def pick_elements() -> ptodsl.Operator:
    return ptodsl.load(PICK_ELEMENTS)


def rows(r: int, n: int) -> np.ndarray:
    return np.arange(r * n, dtype=np.float32).reshape(r, n) + 1.0


def stopped(call) -> ptodsl.GuardError:
    with pytest.raises(ptodsl.GuardError) as info:
        call()
    assert info.value.diagnostic.code == "E0730"
    return info.value


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_view_at_any_row_index_read_from_a_tensor_runs(gather_rows, backend: str):
    """Every row index inside the tensor is a valid view offset (it was refused as a length, E0711,
    for every index but the last row)."""
    x = rows(5, 256)
    ids = np.array([0, 1, 2, 3, 4, 2], np.int32)
    np.testing.assert_array_equal(gather_rows(x, ids, backend=backend), x[ids])
    # a view may start at the end of the tensor: it holds nothing, and its row is not written
    y = np.full((2, 256), 7.0, np.float32)
    gather_rows(x, np.array([5, 1], np.int32), y=y, backend=backend)
    np.testing.assert_array_equal(y, np.stack([np.full(256, 7.0, np.float32), x[1]]))


@pytest.mark.parametrize("index", [6, -1, 2**31 - 1, -(2**31)])
def test_a_row_view_outside_the_tensor_stops_the_call_alike_on_every_backend(gather_rows, index: int):
    x = rows(5, 256)
    ids = np.array([1, index], np.int32)
    texts = []
    for backend in ("sim", "cpu") if HAS_CXX else ("sim",):
        y = np.full((2, 256), 7.0, np.float32)
        texts.append(str(stopped(lambda backend=backend, y=y: gather_rows(x, ids, y=y, backend=backend))))
        np.testing.assert_array_equal(y[0], x[1])  # the row before the stop was written
        np.testing.assert_array_equal(y[1], 7.0)
    assert f"the view starts at {index} on dim 0, but `x` has 5 there" in texts[0]
    assert len(set(texts)) == 1, texts  # the same diagnostic on both backends


@pytest.mark.parametrize("backend", BACKENDS)
def test_element_reads_at_indices_read_from_a_tensor(pick_elements, backend: str):
    x = rows(3, 8)
    ids = np.array([2, 0, 1], np.int32)
    np.testing.assert_array_equal(pick_elements(x, ids, backend=backend), 2.0 * x[ids])


@pytest.mark.parametrize("index", [3, -1, 2**31 - 1, -(2**31)])
def test_an_element_read_outside_the_tensor_stops_the_call_alike_on_every_backend(pick_elements, index: int):
    """The cpu backend read whatever lay there (1.13e-22, 1.7e-43) where the simulator failed."""
    x = rows(3, 8)
    texts = []
    for backend in ("sim", "cpu") if HAS_CXX else ("sim",):
        texts.append(str(stopped(lambda backend=backend: pick_elements(x, np.array([0, index], np.int32),
                                                                       backend=backend))))
    assert f"the index is {index} on dim 0, but `x` has 3 there" in texts[0]
    assert len(set(texts)) == 1, texts


def test_the_npu_build_carries_the_read_guards(pick_elements, gather_rows):
    """The NPU build checks the same bounds before it reads device memory: the loops run inside the
    kernels, whose guards leave their number in the status buffer and return before the read; the
    host program stops the call at the guard a block left."""
    from ptodsl.backends.cpp.emit import emit_npu_variant

    for op, needle in ((pick_elements, "x[s0 * N + c]"), (gather_rows, "x + r * N")):
        variant = emit_npu_variant(op.compiled, 0)
        ((_, kernel),) = variant.kernels.values()
        body = kernel[kernel.index("{\n"):]
        guard = body.index("if (!(0 <= ")
        assert guard < body.index("] = 1;") < body.index("return;", guard) < body.index(needle), body
        host = variant.host[variant.host.index('extern "C" int '):]
        assert 0 < host.index("_launch(") < host.index("guard_stopped(") < host.index("return static_cast<int>("), host


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_past_the_end_stops_before_it_stores_outside_the_tensor(backend: str):
    """`y` is rows 1-5 of a 7-row buffer: without the guard the third row would land in row 6."""
    op = ptodsl.load(SCATTER_ROWS)
    buf = np.full((7, 256), -3.0, np.float32)
    stopped(lambda: op(rows(3, 256), np.array([0, 2, 5], np.int32), y=buf[1:6], backend=backend))
    np.testing.assert_array_equal(buf[[0, 6]], -3.0)  # nothing outside `y` changed
    np.testing.assert_array_equal(buf[[1, 3]], rows(3, 256)[:2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_lengths_are_clamped_inside_the_kernels_too(seq_add, backend: str):
    """Below the call-time check (E0711), the kernels themselves clamp a length to its view: a run
    that skips the check, as the NPU path must (it cannot read device data first), still writes
    nothing outside `out`."""
    program = seq_add.program
    index = 0
    buf = np.full((4, 16, 64), -3.0, np.float32)
    arrays = {"inp": np.ones((2, 16, 64), np.float32), "act_seqs": np.array([40, 16000], np.int32),
              "out": buf[1:3]}
    symbols = {"B": 2, "S": 16, "H": 64}
    if backend == "sim":
        from ptodsl.backends import sim

        sim.run_block(program.block_module(index), program.control(index), arrays, {}, symbols, program.target)
    else:
        from ptodsl.runtime.cpu import run_variant

        run_variant(program, index, arrays, {}, symbols)
    np.testing.assert_array_equal(buf[[0, 3]], -3.0)
    np.testing.assert_array_equal(buf[1:3], 2.0)
