"""The loops pass (implicit loop(1), merging) and the paths pass (peeled first/last iterations)."""

import numpy as np
import pytest

import ptodsl


def _top_loops(op, after):
    return [o for o in op.compiled.after[after].funcs[0].body if o.name == "loop"]


def test_top_level_code_runs_in_one_implicit_loop(write_spec):
    pto = ("kernel two(x: f32[N], y: out f32[N], z: out f32[N]):\n"
           "    y[:] = x + 1.0\n"
           "    for i in loop(1, name=\"one\"):\n"
           "        z[:] = x * 2.0\n")
    op = ptodsl.load(write_spec("two", pto, "op: two\nschedule:\n  vec_tile: [64]\n"))
    loops = _top_loops(op, "loops")
    assert len(loops) == 1, "the implicit loop(1) and the user's loop(1) merge"
    x = np.arange(100, dtype=np.float32)
    y, z = op(x)
    np.testing.assert_array_equal(y, x + 1)
    np.testing.assert_array_equal(z, x * 2)


@pytest.fixture(scope="module")
def attn():
    return ptodsl.load("specs/online_softmax_attn.yaml")


def test_kv_loop_body_has_no_branch_left(attn):
    body_loops = [o for o in attn.compiled.after["paths"].funcs[0].walk()
                  if o.name == "loop" and o.attrs["name"] == "kv_loop" and o.attrs.get("kind") != "peeled"]
    assert body_loops
    assert not any(o.name == "if" for lp in body_loops for o in lp.regions[0])


@pytest.mark.parametrize("blocks", [1, 2, 3, 4, 5])
def test_attention_is_right_for_every_kv_trip_count(attn, blocks):
    rng = np.random.default_rng(blocks)
    s, d, length = 20, 32, 64 * blocks
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for shape in ((s, d), (length, d), (length, d)))
    o = attn(q, k, v, scale=0.2)
    logits = (q.astype(np.float64) @ k.T.astype(np.float64)) * 0.2
    p = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(o, (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.cpu)])
def test_a_top_level_read_bounds_a_later_loop(write_spec, backend):
    """A scalar read outside any loop stays visible to the loops after it (it used to be wrapped
    into an implicit loop(1), out of their scope)."""
    pto = ("kernel k(x: f32[8, N], n: i32[8], y: out f32[8, N]):\n"
           "    s = n[0]\n"
           "    y[:] = x\n"
           "    for b in loop(s, name=\"rows\"):\n"
           "        y[b, :] = x[b, :] * 2.0\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule: {vec_tile: [1, 64]}\n"))
    x = np.random.default_rng(0).standard_normal((8, 40)).astype(np.float32)
    for s in (0, 3, 8):
        want = x.copy()
        want[:s] *= 2
        np.testing.assert_array_equal(op(x, np.full(8, s, np.int32), backend=backend), want)
