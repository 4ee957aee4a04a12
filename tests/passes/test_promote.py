"""GM regions a loop inside a kernel carries, held in a tile across it (ptodsl/passes/promote.py)."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl import ir
from ptodsl.driver import compile_spec
from ptodsl.ir import Op
from ptodsl.passes import promote
from ptodsl.passes.context import PassContext
from ptodsl.targets import load_target

# a running update of one tile-sized local across a loop of the user's, which runs inside its kernel
ACC = ("kernel k(x: f32[R, 64], w: f32[8, 64], y: out f32[8, 64]):\n"
       "    acc = zeros([8, 64], f32)\n"
       "    for j in loop(L, name=\"steps\"):\n"
       "        acc[:] = acc * w + view(x, [8, 64], [j * 8, 0])\n"
       "    y[:] = acc\n")
# a running max whose old value is still read after the new one is made (online softmax's m)
MAX = ("kernel k(x: f32[R, 64], y: out f32[8, 1]):\n"
       "    m = full(-1000.0, [8, 1], f32)\n"
       "    l = zeros([8, 1], f32)\n"
       "    for j in loop(L, name=\"steps\"):\n"
       "        s = view(x, [8, 64], [j * 8, 0])\n"
       "        m_new = maximum(m, amax(s, dim=-1, keepdim=True))\n"
       "        l[:] = l * exp(m - m_new) + sum(exp(s - m_new), dim=-1, keepdim=True)\n"
       "        m[:] = m_new\n"
       "    y[:] = m + log(l)\n")
YAML = "op: k\nsymbols: {R: 8*L}\nschedule: {vec_tile: [8, 64]}\n"


def _steps(op: ptodsl.Operator) -> Op:
    (kernel,) = [f for f in op.compiled.stages["block"].funcs if f.kind == "vector"]
    return next(o for o in kernel.walk() if o.name == "loop" and o.attrs["name"] == "steps")


def _gm_in(loop: Op, name: str) -> list[Op]:
    return [o for o in loop.walk() if o.name in ("tile.load", "tile.store") and
            any(v.name == name for v in o.operands)]


@pytest.mark.parametrize("backend", ["sim", "cpu"])
def test_an_accumulator_and_a_read_only_operand_stay_in_tiles_across_the_loop(write_spec, backend: str):
    op = ptodsl.load(write_spec("k", ACC, YAML))
    steps = _steps(op)
    assert not _gm_in(steps, "acc") and not _gm_in(steps, "w")  # loaded before, stored after
    rng = np.random.default_rng(3)
    w = rng.uniform(0.5, 1.0, (8, 64)).astype(np.float32)
    for trips in (1, 5):
        x = rng.standard_normal((8 * trips, 64)).astype(np.float32)
        want = np.zeros((8, 64), np.float64)
        for j in range(trips):
            want = want * w + x[8 * j:8 * j + 8]
        np.testing.assert_allclose(op(x, w, backend=backend), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["sim", "cpu"])
def test_a_value_read_after_its_update_is_made_is_copied_where_it_was_stored(write_spec, backend: str):
    op = ptodsl.load(write_spec("k", MAX, YAML))
    steps = _steps(op)
    assert not _gm_in(steps, "m") and not _gm_in(steps, "l")
    # m's new value is made before the old one's last read: it is copied into the held tile at
    # the end of the body; l's is made after, and is written into it directly
    copies = [o for o in steps.regions[0] if o.name == "tile.mul" and o.attrs.get("scalar") == 1.0]
    assert len(copies) == 1
    x = np.random.default_rng(4).standard_normal((8 * 6, 64)).astype(np.float32)
    rows = x.reshape(6, 8, 64).transpose(1, 0, 2).reshape(8, -1)
    want = np.log(np.exp(rows.astype(np.float64)).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(op(x, backend=backend), want, rtol=1e-5, atol=1e-5)


def _with_view_load(compiled, view: str, tile: str) -> ir.Module:
    """The module after ``blocks`` with a load of ``acc`` through ``view`` into a ``tile`` at the
    top of the steps loop."""
    text = str(compiled.after["blocks"])
    head = next(line for line in text.splitlines() if 'name = "steps"' in line)
    extra = (f'      %vw = view(%acc) {view}\n'
             f'      %tw = tile.alloc() : {tile}\n'
             '      tile.load(%tw, %vw) {offsets = [0, 0]}\n')
    module = ir.parse(text.replace(head + "\n", head + "\n" + extra, 1))
    ir.verify(module)
    return module


def _promoted_steps(module: ir.Module) -> Op:
    out = promote.run(module, PassContext(load_target("ascend910b")))
    return next(o for o in out.walk() if o.name == "loop" and o.attrs["name"] == "steps")


def test_a_region_also_reached_through_a_view_of_part_of_it_is_not_held(write_spec):
    """A load of half of acc through a view inside the loop: the body reaches the region otherwise
    than by the tile it loads and stores, so acc stays in GM (w, read-only, is still loaded once)."""
    compiled = compile_spec(write_spec("k", ACC, YAML))
    module = _with_view_load(compiled, "{offsets = [4, 0]} : tensor<f32 [4, 64]>",
                             "tile<ub f32 [4, 64] valid [4, 64]>")
    steps = _promoted_steps(module)
    assert len(_gm_in(steps, "acc")) == 2 and not _gm_in(steps, "w")
    # without the view, the same module has acc held
    assert not _gm_in(_promoted_steps(compiled.after["blocks"]), "acc")


def test_a_view_of_the_whole_region_is_the_held_tile(write_spec):
    """A load of acc through a view of all of it, at the offsets of the loop's own load and store:
    the same region, so it is held, the view's load reading the held tile."""
    compiled = compile_spec(write_spec("k", ACC, YAML))
    module = _with_view_load(compiled, "{offsets = [0, 0]} : tensor<f32 [8, 64]>",
                             "tile<ub f32 [8, 64] valid [8, 64]>")
    steps = _promoted_steps(module)
    assert not _gm_in(steps, "acc") and not _gm_in(steps, "vw")
    assert any(v.name.startswith("_held") for o in steps.walk() for v in o.operands)


def test_flash_attention_keeps_its_running_state_on_chip_across_the_kv_loop():
    op = ptodsl.load("specs/flash_attn.yaml")
    for kernel in (f for f in op.compiled.stages["block"].funcs if f.kind == "mixed"):
        for kv in (o for o in kernel.walk() if o.name == "loop" and o.attrs["name"] == "kv_loop"
                   and o.attrs.get("kind") is None):
            for name in ("m", "l", "acc"):
                assert not _gm_in(kv, name), (kernel.name, name)
