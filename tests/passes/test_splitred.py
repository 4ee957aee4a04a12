"""Split reductions (ptodsl/passes/splitred.py): which loops split into partial accumulations, and
that what they compute is what the loop computed (simulator; the library's golden cases cover the
cpu backend, ``specs/tensor_sum``, ``layernorm_bwd``, ``rmsnorm_bwd``)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from ptodsl.api import load
from ptodsl.driver import compile_spec
from ptodsl.passes import parallel

YAML = """op: acc
doc: a carried accumulation
dtypes: {T: [DTYPE]}
schedule:
  vec_tile: [1, 128]
OPTIONS"""

# (kernel, numpy of x [B, N] -> y)
SPLIT = {
    "zero-filled sum beside row outputs": ("""kernel acc(x: T[B, N], y: out T[1, N], z: out T[B, N]):
    acc = zeros([1, N], T)
    for b in loop(B, name="rows"):
        acc[:] = acc + x[b, :] * 2.0
        z[b, :] = x[b, :] + 1.0
    y[:] = acc
""", lambda x: (2 * x.sum(0, keepdims=True), x + 1)),
    "first iteration initialises, last stores": ("""kernel acc(x: T[B, N], y: out T[1, N]):
    acc = tensor([1, N], T)
    for b in loop(B, name="rows"):
        if is_loop_begin(b):
            acc[:] = x[b, :]
        else:
            acc[:] = x[b, :] + acc
        if is_loop_end(b):
            y[:] = acc * 0.5
""", lambda x: 0.5 * x.sum(0, keepdims=True)),
    "a first iteration that may not come": ("""kernel acc(x: T[B, N], y: out T[1, N]):
    acc = full(0.25, [1, N], T)
    for b in loop(1, B, name="rows"):
        if is_loop_begin(b):
            acc[:] = x[b, :]
        else:
            acc[:] = maximum(acc, x[b, :])
    y[:] = acc
""", lambda x: x[1:].max(0, keepdims=True) if len(x) > 1 else np.full((1, x.shape[1]), 0.25, np.float32)),
    "maximum from a start value": ("""kernel acc(x: T[B, N], y: out T[1, N]):
    acc = full(0.25, [1, N], T)
    for b in loop(B, name="rows"):
        acc[:] = maximum(acc, x[b, :])
    y[:] = acc
""", lambda x: np.maximum(x.max(0, keepdims=True), 0.25)),
    "two accumulators, minimum and sum": ("""kernel acc(x: T[B, N], y: out T[1, N]):
    lo = full(3.0, [1, N], T)
    s = zeros([1, N], T)
    for b in loop(B, name="rows"):
        lo[:] = minimum(x[b, :], lo)
        s[:] = s + x[b, :]
    y[:] = lo + s
""", lambda x: np.minimum(x.min(0, keepdims=True), 3.0) + x.sum(0, keepdims=True)),
}

KEPT = {
    "a read of the running value": """kernel acc(x: T[B, N], y: out T[1, N], z: out T[B, N]):
    acc = zeros([1, N], T)
    for b in loop(B, name="rows"):
        acc[:] = acc + x[b, :]
        z[b, :] = acc
    y[:] = acc
""",
    "a first iteration that sets another value": """kernel acc(x: T[B, N], y: out T[1, N]):
    acc = tensor([1, N], T)
    for b in loop(B, name="rows"):
        if is_loop_begin(b):
            acc[:] = x[b, :] * 2.0
        else:
            acc[:] = acc + x[b, :]
    y[:] = acc
""",
    "a product": """kernel acc(x: T[B, N], y: out T[1, N]):
    acc = ones([1, N], T)
    for b in loop(B, name="rows"):
        acc[:] = acc * x[b, :]
    y[:] = acc
""",
    "a last-iteration branch reading the row": """kernel acc(x: T[B, N], y: out T[1, N]):
    acc = zeros([1, N], T)
    for b in loop(B, name="rows"):
        row = x[b, :] + 1.0
        acc[:] = acc + row
        if is_loop_end(b):
            y[:] = acc + row
""",
    "another first-iteration branch": """kernel acc(x: T[B, N], y: out T[1, N], z: out T[1, N]):
    acc = zeros([1, N], T)
    for b in loop(B, name="rows"):
        acc[:] = acc + x[b, :]
        if is_loop_begin(b):
            z[:] = x[b, :]
    y[:] = acc
""",
}


def _write(tmp_path, pto: str, dtype: str = "f32", options: str = "") -> str:
    (tmp_path / "acc.pto").write_text(pto)
    (tmp_path / "acc.yaml").write_text(YAML.replace("DTYPE", dtype).replace("OPTIONS", options))
    return str(tmp_path / "acc.yaml")


def _parts_loops(yaml_path: str) -> list:
    tile = compile_spec(yaml_path).after["parallel"]
    return [op for op in tile.walk() if parallel.is_user_loop(op) and op.attrs["name"] == "rows_parts"]


@pytest.mark.parametrize("what", list(SPLIT))
def test_an_accumulation_splits_into_independent_partials_and_computes_the_same(tmp_path, what):
    pto, ref = SPLIT[what]
    path = _write(tmp_path, pto)
    parts = _parts_loops(path)
    assert len(parts) == 1 and parts[0].attrs.get("parallel") == 1, what
    op = load(path)
    rng = np.random.default_rng(3)
    for b, n in ((1, 40), (7, 130), (97, 300)):  # fewer rows than cores, one per core, several
        x = rng.standard_normal((b, n)).astype(np.float32)
        got = op(x, backend="sim")
        want = ref(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{what} B={b}")


@pytest.mark.parametrize("what", list(KEPT))
def test_a_loop_that_is_not_only_an_accumulation_is_kept(tmp_path, what):
    assert _parts_loops(_write(tmp_path, KEPT[what])) == [], what


def test_a_half_float_sum_and_the_option_off_are_kept(tmp_path):
    pto = SPLIT["zero-filled sum beside row outputs"][0]
    assert _parts_loops(_write(tmp_path, pto, "f16")) == []  # its rounding depends on the order
    assert _parts_loops(_write(tmp_path, pto, options="  pass_options: {split_reduction: false}\n")) == []
    # a half-float maximum is exact in any order
    assert len(_parts_loops(_write(tmp_path, SPLIT["maximum from a start value"][0], "f16"))) == 1


def test_an_integer_sum_wraps_the_same_in_any_order(tmp_path):
    pto = """kernel acc(x: T[B, N], y: out T[1, N]):
    acc = zeros([1, N], T)
    for b in loop(B, name="rows"):
        acc[:] = acc + x[b, :]
    y[:] = acc
"""
    path = _write(tmp_path, pto, "i32")
    assert len(_parts_loops(path)) == 1
    x = np.full((60, 33), 2**30, np.int32)
    x[::7] = -(2**31)
    np.testing.assert_array_equal(load(path)(x, backend="sim"),
                                  x.sum(0, keepdims=True, dtype=np.int64).astype(np.int32))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="the cpu backend needs g++")
@pytest.mark.parametrize("spec", ["tensor_sum", "layernorm_bwd"])
def test_the_split_is_bitwise_the_same_on_the_simulator_and_the_cpu_backend(spec):
    # more rows than cores: each partial sums a share of several, then the combine adds the partials
    op = load(f"specs/{spec}.yaml")
    rng = np.random.default_rng(5)
    rows, cols = 100, 300
    args = [rng.standard_normal((rows, cols)).astype(np.float32)]
    if spec == "layernorm_bwd":
        args += [rng.standard_normal(cols).astype(np.float32), rng.standard_normal((rows, cols)).astype(np.float32)]
    sim, cpu = op(*args, backend="sim"), op(*args, backend="cpu")
    for a, b in zip(sim if isinstance(sim, tuple) else (sim,), cpu if isinstance(cpu, tuple) else (cpu,)):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("spec", [pytest.param("rmsnorm_bwd", marks=pytest.mark.slow), "layernorm_bwd"])
def test_a_split_share_gets_a_one_pass_version_of_the_whole_nest(spec):
    """The backward norms' row loop is both a split reduction and a row loop over a runtime row
    length: its one-pass version (passes/tile_fit.py) is the whole nest of the partials' loop
    around the share, so the branch between the versions stays outside the partials' loop (inside,
    it would keep that loop in the control program, a launch per part and row). In the one-pass
    version the partial row stays in UB across the share's rows (passes/promote.py)."""
    op = load(f"specs/{spec}.yaml")
    block = op.compiled.stages["block"]
    for control in (f for f in block.funcs if f.kind == "control"):
        in_loops = [o for loop in control.walk() if loop.name == "loop" and loop.attrs.get("kind") != "implicit"
                    for o in loop.walk() if o.name == "launch"]
        assert in_loops == [], [o.attrs["kernel"] for o in in_loops]
    fit = [(f, o) for f in block.funcs for o in f.walk() if o.name == "loop" and o.attrs.get("name") == "rows"
           and o.attrs.get("fit") == "H"]
    assert fit and all(f.kind == "vector" and "block_index" in f.attrs for f, _ in fit)
    for _, rows in fit:
        stored = [o for o in rows.walk() if o.name in ("tile.load", "tile.store")
                  and any(v.name.startswith("acc_part") for v in o.operands)]
        assert stored == [], stored


def test_each_partial_fills_its_own_row_so_the_partials_are_one_launch():
    """The identity fill of the partials' workspace is each partial's first step, not a grid of its
    own before them: tensor_sum is the partials' launch of blocks, then the combine's."""
    op = load("specs/tensor_sum.yaml")
    block = op.compiled.stages["block"]
    control = block.func("tensor_sum_f32")
    kernels = [o.attrs["kernel"] for o in control.walk() if o.name == "launch"]
    assert len(kernels) == 2, kernels
    parts = block.func(kernels[0])
    assert "block_index" in parts.attrs
    fills = [o for o in parts.walk() if o.name == "tile.fill"]
    assert fills and all(o in loop.walk() for o in fills for loop in parts.body if loop.name == "loop")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((130, 300)).astype(np.float32)
    np.testing.assert_allclose(op(x, backend="sim"), x.sum(0, keepdims=True), rtol=1e-5, atol=1e-5)
