"""A loop of the user's mixing cube and vector work runs inside one mixed kernel, whatever loop it
is (passes/persistent.py): its first and last iterations' branches become loops of 0 or 1 trips
(passes/branches.py), its workspaces whose valid shape it binds are allocated once, and a bounds
guard inside it stops both cores together (backends/cpp/kernel_control.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import ptodsl
from ptodsl import sym
from ptodsl.backends.cpp.emit import emit_npu_variant
from ptodsl.ir import Op
from ptodsl.passes import branches, syncheck
from ptodsl.passes.persistent import hoist_workspaces
from ptodsl.targets import load_target

TARGET = load_target("ascend910b")
# per head, blocks of w picked by an index read from data, each multiplied, exp'd and summed: the
# view's offset is checked inside the kernel, and the first iteration overwrites where others add
PICKED = ("kernel picked(x: f32[16, 16], w: f32[R, 16], pick: i32[H, J], y: out f32[Y, 16]):\n"
          "    for h in loop(H, name=\"heads\"):\n"
          "        acc = tensor([16, 16], f32)\n"
          "        for j in loop(J, name=\"steps\"):\n"
          "            wj = view(w, [16, 16], [pick[h, j] * 16, 0])\n"
          "            if is_loop_begin(j):\n"
          "                acc[:] = exp(matmul(x, wj) * 0.125)\n"
          "            else:\n"
          "                acc[:] = acc + exp(matmul(x, wj) * 0.125)\n"
          "            if is_loop_end(j):\n"
          "                y[h * 16:h * 16 + 16, :] = acc\n")
# the same heads, computed twice: the rounds loop is sequential (both rounds write all of y), the
# heads loop inside it parallel whatever the round, so blocks share out the heads and each runs
# both rounds
ROUNDS = PICKED.replace("kernel picked(", "kernel rounds(").replace(
    "    for h in loop(H, name=\"heads\"):\n", "    for r in loop(2, name=\"rounds\"):\n        for h in loop(H, name=\"heads\"):\n"
).replace("\n        ", "\n            ").replace("            for h in loop(H", "        for h in loop(H").replace(
    "y[h * 16:h * 16 + 16, :] = acc\n", "y[h * 16:h * 16 + 16, :] = acc + r\n")
YAML = ("op: picked\nsymbols: {Y: 16*H}\nschedule: {vec_tile: [16, 16], cube_tile: {m: [16, 16], k: [16, 16], n: [16, 16]}}\n")


@pytest.fixture(scope="module")
def picked(tmp_path_factory) -> ptodsl.Operator:
    d = tmp_path_factory.mktemp("picked")
    (d / "picked.pto").write_text(PICKED)
    (d / "picked.yaml").write_text(YAML)
    return ptodsl.load(str(d / "picked.yaml"))


def _want(x: np.ndarray, w: np.ndarray, pick: np.ndarray) -> np.ndarray:
    def head(row: np.ndarray) -> np.ndarray:
        return sum(np.exp(x.astype(np.float64) @ w[16 * p:16 * p + 16].astype(np.float64) * 0.125) for p in row)
    return np.concatenate([head(row) for row in pick])


def test_the_loop_runs_inside_one_mixed_kernel_launched_once(picked):
    block = picked.compiled.stages["block"]
    kinds = [f.kind for f in block.funcs if f.kind != "control"]
    assert kinds == ["mixed"]
    (control,) = [f for f in block.funcs if f.kind == "control"]
    launches = [o for o in control.walk() if o.name == "launch"]
    assert len(launches) == 1 and not [o for o in control.walk() if o.name == "loop"]
    (kernel,) = [f for f in block.funcs if f.kind == "mixed"]
    assert [o for o in kernel.walk() if o.name == "guard"]  # the view's offset, checked in the kernel
    assert not [o for o in kernel.walk() if o.name == "if"]
    assert syncheck.check(block, TARGET.max_event_ids, TARGET.cross_core_flags) == []


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_it_computes_for_every_trip_count(picked, backend: str):
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (16, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (16 * 5, 16)).astype(np.float32)
    # the first is the last; first and last; middle iterations too
    for pick in ([[3], [1]], [[4, 0], [2, 2], [0, 1]], [[1, 1, 2, 0, 4, 3], [4, 3, 2, 1, 0, 0]]):
        pick = np.array(pick, np.int32)
        np.testing.assert_allclose(picked(x, w, pick, backend=backend), _want(x, w, pick), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_an_index_outside_the_tensor_stops_the_call_inside_the_kernel(picked, backend: str):
    rng = np.random.default_rng(8)
    x = rng.uniform(-1, 1, (16, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (16 * 3, 16)).astype(np.float32)
    with pytest.raises(ptodsl.GuardError) as info:
        picked(x, w, np.array([[0, 2], [4, 1]], np.int32), backend=backend)
    assert info.value.diagnostic.code == "E0730"
    assert "the view starts at 64 on dim 0, but `w` has 48 there" in str(info.value)


def test_a_failed_guard_waits_on_each_core_for_what_that_core_consumes(picked):
    """The NPU form: both cores run every guard and stop at the same one; each then waits for the
    flags it consumes that are set and not yet waited for, its own pipes' and the other core's
    hand-overs (wait_flag_dev), and sets nothing."""
    (text,) = [t for kind, t in emit_npu_variant(picked.compiled, 0).kernels.values() if kind == "mixed"]
    npu = text.split("#else", 2)[2]
    parts = {"cube": npu.split("#if defined(__DAV_CUBE__)")[1].split("#if defined(__DAV_VEC__)")[0],
             "vec": npu.split("#if defined(__DAV_VEC__)")[1]}
    consumers = {"cube": {"M", "MTE1", "MTE2", "FIX"}, "vec": {"V", "MTE2", "MTE3"}}
    cross = 0
    for core, part in parts.items():
        stops = re.findall(r"if \(!\(.*?\)\) \{(.*?)return;", part, re.S)
        assert len(stops) == 3  # the first, middle and last iterations' view checks
        for stop in stops:
            assert "ffts_cross_core_sync" not in stop and "set_flag" not in stop
            assert set(re.findall(r"wait_flag\(PIPE_\w+, PIPE_(\w+),", stop)) <= consumers[core]
            cross += stop.count("wait_flag_dev(")
    assert cross  # a hand-over between the cores is pending at some stop, and is waited for


def test_an_integer_branch_becomes_loops_of_zero_or_one_trip():
    n = sym.Sym("n")
    for op, value, want in ((">=", 1, [0, 1, 1, 1]), ("==", 1, [0, 1, 0, 0]), ("!=", 1, [1, 0, 1, 1]),
                            ("<", 2, [1, 1, 0, 0]), (">", 0, [0, 1, 1, 1]), ("<=", 0, [1, 0, 0, 0])):
        trips = branches.trips_of(sym.compare(op, n, value), {})
        assert [sym.evaluate(trips, {"n": k}) for k in (0, 1, 2, 3)] == want, op
        # provably at most one trip: the passes that treat a loop of one trip as straight-line code
        # (passes/promote.py holds no state across it, the sync pass walks it once) see it so
        assert sym.prove_le(trips, 1, {}), op
    both = sym.logical("and", sym.compare(">=", n, 1), sym.compare("<", n, 3))
    assert [sym.evaluate(branches.trips_of(both, {}), {"n": k}) for k in range(5)] == [0, 1, 1, 0, 0]
    # a float scalar, or a division that is not floor division, keeps the branch
    assert branches.trips_of(sym.compare(">", sym.Sym("s"), 0), {"s": "f32"}) is None
    assert branches.trips_of(sym.compare(">", sym.truediv(n, 2), 0), {}) is None
    arms = [[Op("print", [], {"format": "a", "args": ()})], [Op("print", [], {"format": "b", "args": ()})]]
    loops = branches.as_loops([Op("if", [], {"cond": sym.compare(">=", n, 2)}, [], arms)], {}, [0], nested=True)
    assert [o.name for o in loops] == ["loop", "loop"]
    assert [sym.evaluate(o.attrs["hi"], {"n": 2}) for o in loops] == [1, 0]
    assert [sym.evaluate(o.attrs["hi"], {"n": 1}) for o in loops] == [0, 1]


def test_a_workspace_whose_valid_shape_the_kernel_binds_is_allocated_whole():
    from ptodsl.ir import TensorType, Value

    ws = Value("ws", TensorType("f32", (16, 16), (sym.Sym("k"), 16)))
    use = Op("print", [ws], {"format": "", "args": ()})
    loop = Op("loop", [], {"index": "k", "lo": 0, "hi": 4, "step": 1, "name": "k"}, [],
              [[Op("alloc", [], {}, [ws]), use]])
    (alloc,) = hoist_workspaces([loop])
    assert alloc.result.type.valid is None and use.operands[0].type.valid is None
    assert loop.regions[0] == [use]


def _launch(op: ptodsl.Operator) -> Op:
    (control,) = [f for f in op.compiled.stages["block"].funcs if f.kind == "control"]
    (launch,) = [o for o in control.walk() if o.name == "launch"]
    return launch


def test_blocks_share_out_the_heads_each_with_its_own_workspaces(picked):
    """The heads loop is parallel: each head's tensors are its own (allocated inside the loop), so
    each block gets a copy of every workspace the kernel writes, at its block index."""
    launch = _launch(picked)
    assert sym.evaluate(launch.attrs["block_dim"], {"H": 3}) == 3
    assert sym.evaluate(launch.attrs["block_dim"], {"H": 100}) == 20  # 24 cube cores, 5 heads each
    (kernel,) = [f for f in picked.compiled.stages["block"].funcs if f.kind == "mixed"]
    own = [o for o in kernel.body if o.name == "view"]
    assert own and all(o.attrs["offsets"][0] == sym.mul(sym.Sym(kernel.attrs["block_index"]), 16) for o in own)
    private = {o.operands[0].name for o in own}
    assert "acc" in private and "y" not in private


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_every_block_runs_the_sequential_loop_around_its_share(tmp_path, backend: str):
    (tmp_path / "rounds.pto").write_text(ROUNDS)
    (tmp_path / "rounds.yaml").write_text(YAML.replace("op: picked", "op: rounds"))
    rounds = ptodsl.load(str(tmp_path / "rounds.yaml"))
    launch = _launch(rounds)
    assert sym.evaluate(launch.attrs["block_dim"], {"H": 4}) == 4
    (kernel,) = [f for f in rounds.compiled.stages["block"].funcs if f.kind == "mixed"]
    outer = next(o for o in kernel.body if o.name == "loop")
    assert outer.attrs["name"] == "rounds" and outer.attrs.get("parallel") is None
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, (16, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (16 * 5, 16)).astype(np.float32)
    pick = np.array([[1, 4, 2], [0, 0, 3], [4, 1, 1], [2, 3, 0]], np.int32)
    np.testing.assert_allclose(rounds(x, w, pick, backend=backend), _want(x, w, pick) + 1.0, rtol=1e-5, atol=1e-5)
