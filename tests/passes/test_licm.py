"""Loop-invariant cube operands (passes/licm.py): flash attention loads its query tile once per
query block, not once per KV block, and computes the same."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl import sym
from ptodsl.driver import compile_spec
from ptodsl.passes import licm
from ptodsl.passes.persistent import bound_within

SPEC = "specs/flash_attn.yaml"


def _middle_loops(func) -> list:
    """The KV loops the kernel runs (the first and last blocks are peeled)."""
    return [op for op in func.walk() if op.name == "loop" and op.attrs.get("name") == "kv_loop"
            and "kind" not in op.attrs]


def _guarded_query_loads(ops) -> list:
    return [op for op in ops if op.name == "if"
            and any(o.name == "tile.load" and o.operands[1].name == "q" for o in op.regions[0])]


def test_flash_attention_loads_its_query_tile_above_the_kv_loop():
    func = compile_spec(SPEC).stages["tile"].funcs[0]
    loops = _middle_loops(func)
    assert loops
    for loop in loops:
        loads = [o for o in loop.walk() if o.name == "tile.load"]
        assert "kj" in {o.operands[1].name for o in loads}  # its offset names the KV index: it stays
        inner = bound_within(loop)
        # q stays inside only where its offset names an index of the loop's (the k steps of a head
        # dim over one k tile), not out of the product's column loop (a middle KV block is whole:
        # that loop runs, and its load needs no guard inside the KV loop)
        assert all(set().union(*map(sym.free_symbols, o.attrs["offsets"])) & inner
                   for o in loads if o.operands[1].name == "q")
        assert not _guarded_query_loads(list(loop.walk()))
    # above the loop, under `hi > lo`: with two KV blocks or fewer the loop runs no iteration
    guards = _guarded_query_loads(list(func.walk()))
    assert guards and all(str(g.attrs["cond"]).count(">") == 1 for g in guards)
    space = {op.result.name: op.result.type.space for op in func.walk() if op.name == "tile.alloc"}
    assert {space[o.operands[0].name] for g in guards for o in g.regions[0]} == {"l1"}


def test_a_load_of_a_tensor_the_function_writes_stays_in_the_loop():
    c = compile_spec(SPEC)
    module = c.after["rowgrid"].clone()
    func = module.funcs[0]
    hoister = licm._Hoister(func, c.target.l1_bytes, c.target.ub_block_bytes)
    hoister.written.add("q")  # as if the kernel wrote q: an iteration could change what it reads
    func.body = hoister.block(func.body)
    for loop in _middle_loops(func):  # (out of the column loop of its product, not out of the KV loop)
        assert _guarded_query_loads(list(loop.walk())) or \
            "q" in {o.operands[1].name for o in loop.regions[0] if o.name == "tile.load"}
    assert not [g for g in _guarded_query_loads(list(func.walk()))
                if not any(g is o for loop in _middle_loops(func) for o in loop.walk())]


def test_no_room_in_l1_keeps_the_load_in_the_loop():
    c = compile_spec(SPEC)
    func = c.after["rowgrid"].clone().funcs[0]
    func.body = licm._Hoister(func, 0, c.target.ub_block_bytes).block(func.body)
    assert not _guarded_query_loads(list(func.walk()))


@pytest.mark.parametrize("kv_len", [64, 128, 192, 320])  # 0, 0, 1 and 3 middle KV blocks
def test_flash_attention_with_and_without_middle_blocks_computes_right(kv_len):
    op = ptodsl.load(SPEC)
    rng = np.random.default_rng(kv_len)
    q, k, v = (rng.uniform(-1, 1, (n, 64)).astype(np.float16) for n in (72, kv_len, kv_len))
    o = op(q, k, v, scale=0.125, backend="sim")
    s = (q.astype(np.float64) @ k.astype(np.float64).T) * 0.125
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    want = (p / p.sum(axis=-1, keepdims=True)) @ v.astype(np.float64)
    np.testing.assert_allclose(o.astype(np.float64), want, rtol=2e-2, atol=2e-3)


def _pt_loads_in_grids(loop) -> list:
    """Loads of `pt` (the probabilities the vector cores stored) inside the grid loops of ``loop``."""
    return [o for g in loop.walk() if g.name == "loop" and g.attrs.get("kind") == "grid"
            for o in g.walk() if o.name == "tile.load" and o.operands[1].name == "pt"]


def test_the_probabilities_load_once_per_kv_block_not_per_output_column_tile():
    """pv = matmul(pt, vprev) over D = 128 in cube tiles of 64 columns: pt, which the function
    writes but the product's column loop does not, is loaded once above that loop."""
    func = compile_spec(SPEC).stages["tile"].funcs[0]
    loops = _middle_loops(func)
    assert loops and all(not _pt_loads_in_grids(loop) for loop in loops)
    for loop in loops:  # just above it, with no `hi > lo` guard: every dim is at least 1 in a call
        assert any(o.name == "tile.load" and o.operands[1].name == "pt" for o in loop.regions[0])


def test_a_load_of_what_the_grid_loop_writes_stays_in_it(monkeypatch):
    c = compile_spec(SPEC)
    func = c.after["rowgrid"].clone().funcs[0]
    hoister = licm._Hoister(func, c.target.l1_bytes, c.target.ub_block_bytes)
    written_in = hoister._written_in
    monkeypatch.setattr(hoister, "_written_in", lambda loop: written_in(loop) | {"pt"})
    func.body = hoister.block(func.body)
    assert all(_pt_loads_in_grids(loop) for loop in _middle_loops(func))


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_flash_attention_over_two_output_column_tiles_computes_right(backend: str):
    op = ptodsl.load(SPEC)
    rng = np.random.default_rng(11)
    q, k, v = (rng.uniform(-1, 1, (n, 128)).astype(np.float16) for n in (40, 200, 200))
    o = op(q, k, v, scale=0.08, backend=backend)
    s = (q.astype(np.float64) @ k.astype(np.float64).T) * 0.08
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    want = (p / p.sum(axis=-1, keepdims=True)) @ v.astype(np.float64)
    np.testing.assert_allclose(o.astype(np.float64), want, rtol=2e-2, atol=2e-3)
