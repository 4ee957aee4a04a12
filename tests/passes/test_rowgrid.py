"""Row interchange (ptodsl/passes/rowgrid.py): the grid over an output's row blocks becomes the
outer loop of a body whose user loop carries state, only when every op is row-wise."""

from __future__ import annotations

from pathlib import Path

import pytest
from library_copies import edited_copy  # tests/library_copies.py

import ptodsl
from ptodsl import ir
from ptodsl.diagnostics import Diagnostics
from ptodsl.driver import compile_spec
from ptodsl.golden import run_case
from ptodsl.passes import rowgrid
from ptodsl.passes.context import PassContext
from ptodsl.stats import collect
from ptodsl.targets import load_target

HEAD = ('module @m level tile attributes {target = "ascend910b", option.row_interchange = 1} {\n'
        '  kernel @m(%x: tensor<f32 [S, 64]>, %y: tensor<f32 [S, 64]> out, L: i64) {\n'
        '    %acc = alloc() : tensor<f32 [S, 64]>\n'
        '    loop() {index = "j", lo = 0, hi = L, step = 1, name = "steps"} region {\n')
TAIL = '    }\n  }\n}\n'
# acc += x, row tile by row tile: state carried across j in a GM workspace, every access in the
# row band of the grid's iteration
GRID = '''      loop() {index = "g", lo = 0, hi = cdiv(S, 8), step = 1, name = "g", kind = "grid"} region {
        %a = tile.alloc() : tile<ub f32 [8, 64] valid [min(S - g * 8, 8), 64]>
        tile.load(%a, %acc) {offsets = [g * 8, 0]}
        %b = tile.alloc() : tile<ub f32 [8, 64] valid [min(S - g * 8, 8), 64]>
        tile.load(%b, %x) {offsets = [g * 8, 0]}
        tile.add(%a, %a, %b)
        tile.store(%acc, %a) {offsets = [g * 8, 0]}
        tile.store(%y, %a) {offsets = [g * 8, 0]}
      }
'''


def _module(body: str) -> ir.Module:
    module = ir.parse(HEAD + body + TAIL)
    ir.verify(module)
    return module


def test_a_row_wise_body_gets_its_row_blocks_outside_the_user_loop():
    module = _module(GRID)
    out = rowgrid.run(module, PassContext(load_target("ascend910b")))
    ir.verify(out)
    body = out.funcs[0].body
    assert [op.name for op in body] == ["alloc", "loop"]  # the workspace is allocated once
    outer = body[1]
    assert outer.attrs["index"] == "_qb0" and outer.attrs["parallel"] == 1 and outer.attrs["rows_interchanged"] == 1
    assert str(outer.attrs["hi"]) == str(ir.parse(HEAD + GRID + TAIL).funcs[0].body[1].regions[0][0].attrs["hi"])
    inner = outer.regions[0][0]
    assert inner.attrs["name"] == "steps"
    assert not [o for o in inner.walk() if o.name == "loop" and o.attrs.get("kind") == "grid"]
    assert "offsets = [_qb0 * 8, 0]" in str(out)
    assert "grid" in str(module)  # the pass never mutates its input


@pytest.mark.parametrize("what, body", [
    ("a row of another block", GRID.replace("tile.load(%a, %acc) {offsets = [g * 8, 0]}",
                                            "tile.load(%a, %acc) {offsets = [g * 8 + 8, 0]}")),
    ("rows past the block", GRID.replace(
         "tile.store(%y, %a) {offsets = [g * 8, 0]}",
         "%w = tile.alloc() : tile<ub f32 [16, 64] valid [min(S - g * 8, 16), 64]>\n"
         "        tile.load(%w, %x) {offsets = [g * 8, 0]}\n"
         "        tile.store(%y, %w) {offsets = [g * 8, 0]}")),
    ("a tile carried across row blocks", '      %c = tile.alloc() : tile<ub f32 [8, 64] valid [8, 64]>\n' +
     GRID.replace("tile.add(%a, %a, %b)", "tile.add(%c, %c, %b)")),
    ("a written tensor read outside the grid", GRID + '      %t = tile.alloc() : tile<ub f32 [8, 64] valid [8, 64]>\n'
                                                   '      tile.load(%t, %acc) {offsets = [0, 0]}\n'),
    ("a scalar read of a written tensor", GRID + '      read(%acc) {index = [0, 0], sym = "v", dtype = "f32"}\n'),
    ("a print", GRID + '      print() {format = "{}", args = [j]}\n'),
])
def test_a_body_that_is_not_row_wise_keeps_its_order(what, body):
    module = _module(body)
    assert not rowgrid.row_bands(module.funcs[0]), what
    out = rowgrid.run(module, PassContext(load_target("ascend910b")))
    assert str(out) == str(module), what


def test_without_the_option_nothing_changes():
    module = ir.parse((HEAD + GRID + TAIL).replace(", option.row_interchange = 1", ""))
    assert rowgrid.row_bands(module.funcs[0])
    assert str(rowgrid.run(module, PassContext(load_target("ascend910b")))) == str(module)


LIBRARY = "pass_options: {row_interchange: true, row_fusion: true, cycle_upper_bound: 16384}"
APART = "{row_interchange: true}"


def _flash_attn(tmp_path: Path, options: str | None = None) -> ptodsl.Operator:
    """specs/flash_attn (which turns the option on), and cases of several row blocks (a partial
    last one); ``options``: its ``pass_options`` instead."""
    return edited_copy("flash_attn", tmp_path, [(LIBRARY, f"pass_options: {options}" if options else LIBRARY)],
                       "  - {shapes: {S: 200, D: 64, L: 192}, dtypes: {T: f16}, scalars: {scale: 0.125}, "
                       "name: row-blocks}\n  - {shapes: {S: 130, D: 32, L: 64}, dtypes: {T: f32}, "
                       "scalars: {scale: 0.2}, rtol: 1e-4, atol: 1e-5, name: one-kv-block}\n")


def test_flash_attention_runs_its_kv_loop_in_mixed_kernels_over_row_blocks(tmp_path):
    operator = _flash_attn(tmp_path)
    block = operator.compiled.stages["block"]
    mixed = [f for f in block.funcs if f.kind == "mixed"]
    assert len(mixed) == 2  # one per variant: its first, middle and last KV blocks (row_fusion)
    for kernel in mixed:
        assert kernel.attrs.get("block_index")  # shared out over the row blocks
        loop = next(o for o in kernel.body if o.name == "loop")
        assert loop.attrs["rows_interchanged"] == 1
        assert any(o.name == "tile.matmul" for o in loop.walk())
        assert any(o.name.startswith("tile.row") for o in loop.walk())
    for control in (f for f in block.funcs if f.kind == "control"):
        # the KV loop and the branches on the number of KV blocks are inside the kernel: the
        # control program allocates its workspaces and launches it once per call
        assert not any(o.name in ("loop", "if") for o in control.walk())
        assert sum(o.name == "launch" for o in control.walk()) == 1
    results = [run_case(operator, case) for case in operator.spec.tests]
    assert all(r.ok for r in results), [r.report for r in results]
    # at the bench size, 64 query blocks: 3 to each of 22 blocks on the 24 cube cores
    chips = [c for vs in collect(operator, bench=True) for c in vs.chip]
    assert [(c.launches, c.block_dim, c.cores_used) for c in chips] == [(1, 22, 22)]


def test_without_row_fusion_the_peeled_kv_blocks_are_kernels_of_their_own(tmp_path):
    """Without row_fusion the first KV block, the loop and the last block (three statements) each
    get a row block loop, so a kernel of their own, and hand the running max, sum and accumulator
    on through GM between launches: the same results, slower in the model than one kernel."""
    fused = _flash_attn(tmp_path / "fused")
    apart = _flash_attn(tmp_path / "apart", APART)
    # per variant: the first KV block, the first when it is the only one, the loop, the last
    assert sum(f.kind == "mixed" for f in apart.compiled.stages["block"].funcs) == 8
    assert any(o.name == "loop" for f in apart.compiled.stages["block"].funcs if f.kind == "control"
               for o in f.walk())
    results = [run_case(apart, case) for case in apart.spec.tests]
    assert all(r.ok for r in results), [r.report for r in results]
    chips = {name: [c for vs in collect(op, bench=True) for c in vs.chip] for name, op in
             (("fused", fused), ("apart", apart))}
    assert [(c.launches, c.block_dim) for c in chips["apart"]] == [(3, 22)]
    assert chips["fused"][0].modelled_us < chips["apart"][0].modelled_us


def test_a_row_block_loop_over_the_cycle_budget_is_one_kernel_and_warns(tmp_path):
    """A row block loop is not cut into kernels launched per iteration, which would launch one per
    row block, whatever the budget (a kernel of its body cut in two once failed to compile: a tile
    the row block hoisted was used in a kernel that did not define it, E0990)."""
    for fusion in ("true", "false"):
        folder = tmp_path / fusion
        operator = _flash_attn(folder, f"{{row_interchange: true, row_fusion: {fusion}, cycle_upper_bound: 2000}}")
        assert all(f.kind in ("mixed", "control") for f in operator.compiled.stages["block"].funcs)
        diags = Diagnostics()
        compile_spec(str(folder / "flash_attn.yaml"), diags)
        assert any(d.code == "W0610" and "as one kernel all the same" in d.message for d in diags.items)
        results = [run_case(operator, case) for case in operator.spec.tests[:2]]
        assert all(r.ok for r in results), [r.report for r in results]


@pytest.mark.slow
def test_mixed_kernels_over_several_row_blocks_compute_right_on_cpu(tmp_path):
    operator = _flash_attn(tmp_path)
    cases = [c for c in operator.spec.tests if c.name in ("row-blocks", "one-kv-block")]
    assert len(cases) == 2
    results = [run_case(operator, case, backend="cpu") for case in cases]
    assert all(r.ok for r in results), [r.report for r in results]


# a score block one tile wide inside a KV loop: its column loop runs once for every j of the loop
# (the range of j proves it), and a second one-trip loop reads back what the first stored
KV = '''      loop() {index = "g", lo = 0, hi = cdiv(S, 8), step = 1, name = "g", kind = "grid"} region {
        loop() {index = "c", lo = 0, hi = cdiv(min(L * 64 - j * 64, 64), 64), step = 1, name = "c", kind = "grid"} region {
          %a = tile.alloc() : tile<ub f32 [8, 64] valid [min(S - g * 8, 8), 64]>
          tile.load(%a, %x) {offsets = [g * 8, c * 64]}
          tile.store(%s, %a) {offsets = [g * 8, c * 64]}
        }
        loop() {index = "d", lo = 0, hi = cdiv(min(L * 64 - j * 64, 64), 64), step = 1, name = "d", kind = "grid"} region {
          %b = tile.alloc() : tile<ub f32 [8, 64] valid [min(S - g * 8, 8), 64]>
          tile.load(%b, %s) {offsets = [g * 8, d * 64]}
          %e = tile.alloc() : tile<ub f32 [8, 64] valid [min(S - g * 8, 8), 64]>
          tile.exp(%e, %b)
          %c = tile.alloc() : tile<ub f32 [8, 64] valid [min(S - g * 8, 8), 64]>
          tile.load(%c, %acc) {offsets = [g * 8, 0]}
          tile.add(%c, %c, %e)
          tile.store(%acc, %c) {offsets = [g * 8, 0]}
          tile.store(%y, %c) {offsets = [g * 8, 0]}
        }
      }
'''


def test_one_trip_column_loops_of_a_row_block_become_straight_line_and_forward():
    text = (HEAD.replace("%x: tensor<f32 [S, 64]>", "%x: tensor<f32 [S, 64 * L]>")
            .replace("%acc = alloc()", "%s = alloc() : tensor<f32 [S, 64 * L]>\n    %acc = alloc()") + KV + TAIL)
    module = ir.parse(text)
    ir.verify(module)
    out = rowgrid.run(module, PassContext(load_target("ascend910b")))
    ir.verify(out)
    steps = next(o for o in out.walk() if o.name == "loop" and o.attrs["name"] == "steps")
    assert not [o for o in steps.walk() if o.name == "loop" and o is not steps]  # both ran once: unwrapped
    assert "offsets = [_qb0 * 8, j * 64]" not in str(out)  # the column index is its first value, 0
    # the workspace the first stored and the second loaded back is gone: the tile is forwarded
    assert not [o for o in out.walk() if o.name.startswith("tile.") and "%s" in [f"%{v.name}" for v in o.operands]]


def test_a_column_loop_that_may_run_twice_stays_a_loop():
    two = KV.replace("min(L * 64 - j * 64, 64), 64)", "min(L * 64 - j * 64, 128), 64)")
    text = (HEAD.replace("%x: tensor<f32 [S, 64]>", "%x: tensor<f32 [S, 64 * L]>")
            .replace("%acc = alloc()", "%s = alloc() : tensor<f32 [S, 64 * L]>\n    %acc = alloc()") + two + TAIL)
    out = rowgrid.run(ir.parse(text), PassContext(load_target("ascend910b")))
    steps = next(o for o in out.walk() if o.name == "loop" and o.attrs["name"] == "steps")
    grids = [o for o in steps.walk() if o.name == "loop" and o.attrs.get("kind") == "grid"]
    # still a loop (the two, alike now that they share the row block, merge into one): its
    # accesses keep the column index
    assert len(grids) == 1 and any(grids[0].attrs["index"] in str(x) for o in grids[0].walk()
                                   for x in o.attrs.get("offsets", ()))


# fuzz seed 8100458, shrunk: the cast of the local for the sum after the chain is the run's last
# statement, and its workspace, which the sum reads whole, is one tensor for every row block
CHAIN_THEN_SUM = (
    "kernel fz(a1: f32[K, M], b1: f32[N, K], y1: out f32[M, N], e1: f32[N, N], z1: out f32[1, N]):\n"
    "    h1 = cast(matmul(a1, b1, trans_a=True, trans_b=True), f32)\n"
    "    c1 = tensor([M, N], f32)\n"
    "    if N % 2 == 0:\n"
    "        c1[:] = cast(exp(h1 * 0.125), f32)\n"
    "    else:\n"
    "        c1[:] = cast(relu(h1) - h1 * 0.25, f32)\n"
    "    y1[:] = matmul(c1, e1, out_dtype=f32)\n"
    "    z1[:] = sum(cast(c1, f32), dim=0, keepdim=True)\n")


@pytest.mark.parametrize("backend", ["sim", pytest.param("cpu", marks=pytest.mark.slow)])
def test_a_workspace_read_after_the_row_blocks_is_shared_by_them(write_spec, backend: str):
    import numpy as np

    from ptodsl import sym
    from ptodsl.ir.gm import launches

    yaml = ("op: fz\nschedule: {vec_tile: [1, 8], cube_tile: {m: [16, 32], k: [32, 32], n: [32, 64]},"
            " pass_options: {row_interchange: true}}\n")
    op = ptodsl.load(write_spec("fz", CHAIN_THEN_SUM, yaml))
    block = op.compiled.stages["block"]
    (mixed,) = [launch for launch in launches(block.func("fz")) if block.func(launch.attrs["kernel"]).kind == "mixed"]
    assert sym.evaluate(mixed.attrs["block_dim"], {"M": 40, "N": 4, "K": 3}) == 3  # a row block each
    allocs = [o for o in block.func("fz").walk() if o.name == "alloc" and "row_block" not in o.attrs]
    assert allocs and not any("within" in o.attrs for o in allocs)
    rng = np.random.default_rng(5)
    a, b = rng.uniform(-1, 1, (3, 40)).astype(np.float32), rng.uniform(-1, 1, (4, 3)).astype(np.float32)
    e = rng.uniform(-1, 1, (4, 4)).astype(np.float32)
    c = np.exp((a.T.astype(np.float64) @ b.T.astype(np.float64)) * 0.125)
    y, z = op(a, b, e, backend=backend)
    np.testing.assert_allclose(y, c @ e, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(z, c.sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-5)


def test_an_unrolled_kv_loops_blocks_stay_on_chip():
    """attn's KV loop unrolled by two (`unroll: [2, 1]`): a middle block is whole, which the ranges
    of the unrolled loop prove (``sym.body_range``), so each block's one-trip grid loops become
    straight-line code and its scores and probabilities are forwarded, not stored and loaded back."""
    func = compile_spec("specs/online_softmax_attn.yaml").stages["tile"].funcs[0]
    (unrolled,) = [o for o in func.walk() if o.name == "loop" and o.attrs.get("unrolled") == 2]
    stored = {o.operands[0].name for o in unrolled.walk() if o.name == "tile.store"}
    assert stored and not {n for n in stored if n.startswith(("s_", "p_"))}, stored
