"""The parallel pass (ptodsl/passes/parallel.py): which user loops get ``parallel = 1``."""

from __future__ import annotations

import pytest

from ptodsl import ir
from ptodsl.driver import compile_spec
from ptodsl.passes import parallel
from ptodsl.passes.context import PassContext
from ptodsl.targets import load_target

HEAD = 'module @m level tile attributes {target = "ascend910b"} {\n  kernel @m(PARAMS) {\n'
TAIL = '  }\n}\n'
ROWS = '''    loop() {index = "b", lo = 0, hi = B, step = 1, name = "rows"} region {
BODY
    }
'''


def _run(body: str, params: str = "%x: tensor<f32 [B, 64]>, %y: tensor<f32 [B, 64]> out") -> ir.Module:
    text = HEAD.replace("PARAMS", params) + ROWS.replace("BODY", body) + TAIL
    module = ir.parse(text)
    ir.verify(module)
    out = parallel.run(module, PassContext(load_target("ascend910b")))
    ir.verify(out)
    assert "parallel" not in module.funcs[0].body[0].attrs  # the pass never mutates its input
    return out


def _marked(module: ir.Module) -> bool:
    return module.funcs[0].body[0].attrs.get("parallel") == 1


ROW_COPY = '''      %t = tile.alloc() : tile<ub f32 [1, 64] valid [1, 64]>
      tile.load(%t, %x) {offsets = [b, 0]}
      tile.store(%y, %t) {offsets = [b, 0]}'''
# iteration b runs rows [4b, min(B, 4b + 4)), the share a split reduction gives each partial
SHARE = '''      loop() {index = "j", lo = b * 4, hi = min(B, b * 4 + 4), step = 1, name = "share"} region {
        %t = tile.alloc() : tile<ub f32 [1, 64] valid [1, 64]>
        tile.load(%t, %x) {offsets = [j, 0]}
        tile.store(%y, %t) {offsets = [j, 0]}
      }'''


def test_a_loop_writing_its_own_row_is_marked_and_printed():
    before = HEAD.replace("PARAMS", "%x: tensor<f32 [B, 64]>, %y: tensor<f32 [B, 64]> out") + \
        ROWS.replace("BODY", ROW_COPY) + TAIL
    after = parallel.run(ir.parse(before), PassContext(load_target("ascend910b")))
    assert str(after) == before.replace('name = "rows"}', 'name = "rows", parallel = 1}')
    assert str(ir.parse(str(after))) == str(after)


@pytest.mark.parametrize("what, body", [
    ("overlapping rows", ROW_COPY.replace("tile<ub f32 [1, 64] valid [1, 64]>", "tile<ub f32 [2, 64] valid [2, 64]>")),
    ("a fixed row", ROW_COPY.replace("tile.store(%y, %t) {offsets = [b, 0]}", "tile.store(%y, %t) {offsets = [0, 0]}")),
    ("a print", ROW_COPY + '\n      print() {format = "{}", args = [b]}'),
    ("reading the next iteration's row", ROW_COPY.replace("tile.load(%t, %x) {offsets = [b, 0]}",
                                                          "tile.load(%t, %y) {offsets = [b + 1, 0]}")),
    ("reading rows of other iterations", ROW_COPY + '\n      %u = tile.alloc() : tile<ub f32 [8, 64] valid [8, 64]>'
                                                    '\n      tile.load(%u, %y) {offsets = [0, 0]}'),
    ("an inner loop whose share overlaps the next", SHARE.replace("b * 4 + 4", "b * 4 + 5")),
    ("a scalar read of what is written", ROW_COPY + '\n      read(%y) {index = [0, 0], sym = "v", dtype = "f32"}'),
    ("a data-dependent row", '      read(%i) {index = [b], sym = "r", dtype = "i32"}\n' +
     ROW_COPY.replace("tile.store(%y, %t) {offsets = [b, 0]}", "tile.store(%y, %t) {offsets = [r, 0]}")),
])
def test_a_loop_whose_iterations_may_interact_is_not_marked(what, body):
    params = "%x: tensor<f32 [B, 64]>, %y: tensor<f32 [B, 64]> out, %i: tensor<i32 [B]>"
    assert not _marked(_run(body, params)), what


def test_a_tile_carried_across_iterations_keeps_the_loop_sequential():
    text = HEAD.replace("PARAMS", "%x: tensor<f32 [B, 64]>, %y: tensor<f32 [B, 64]> out") + '''\
    %acc = tile.alloc() : tile<ub f32 [1, 64] valid [1, 64]>
    tile.fill(%acc) {scalar = 0.0}
''' + ROWS.replace("BODY", ROW_COPY + "\n      tile.add(%acc, %acc, %t)") + TAIL
    out = parallel.run(ir.parse(text), PassContext(load_target("ascend910b")))
    assert "parallel" not in out.funcs[0].body[2].attrs


def test_a_guard_and_a_read_of_an_input_keep_the_loop_parallel():
    # the guard reads nothing iterations write; the backends report the first failing iteration
    body = ('      read(%i) {index = [b], sym = "r", dtype = "i32"}\n'
            '      guard() {cond = r < B, tensor = "x", axis = 0, offset = r, extent = 1, dim = B, access = "view"}\n'
            '      %v = view(%x) {offsets = [r, 0]} : tensor<f32 [1, 64]>\n' +
            ROW_COPY.replace("tile.load(%t, %x) {offsets = [b, 0]}", "tile.load(%t, %v) {offsets = [0, 0]}"))
    assert _marked(_run(body, "%x: tensor<f32 [B, 64]>, %y: tensor<f32 [B, 64]> out, %i: tensor<i32 [B]>"))


def test_a_workspace_of_the_iteration_is_its_own():
    body = ('      %w = alloc() : tensor<f32 [1, 64]>\n' + ROW_COPY.replace("tile.store(%y, %t) {offsets = [b, 0]}",
            "tile.store(%w, %t) {offsets = [0, 0]}\n      %u = tile.alloc() : tile<ub f32 [1, 64] valid [1, 64]>\n"
            "      tile.load(%u, %w) {offsets = [0, 0]}\n      tile.store(%y, %u) {offsets = [b, 0]}"))
    assert _marked(_run(body))


def test_bands_of_a_symbolic_width_are_disjoint():
    # iteration b writes rows [b * S, b * S + S) of y in tiles of 8 rows... at offsets b * S + 8 * k
    params = "%x: tensor<f32 [B, 64]>, %y: tensor<f32 [B * 8, 64]> out"
    body = ROW_COPY.replace("tile<ub f32 [1, 64] valid [1, 64]>", "tile<ub f32 [8, 64] valid [8, 64]>").replace(
        "tile.store(%y, %t) {offsets = [b, 0]}", "tile.store(%y, %t) {offsets = [b * 8, 0]}").replace(
        "tile.load(%t, %x) {offsets = [b, 0]}", "tile.load(%t, %x) {offsets = [0, 0]}")
    assert _marked(_run(body, params))


@pytest.mark.parametrize("spec, loops", [
    ("specs/softmax.yaml", {"b_loop": True}),
    ("specs/rmsnorm.yaml", {"rows": True}),
    ("specs/add_bcast.yaml", {"batch": True}),
    # every row adds into one accumulator: the loop over partial accumulations (passes/splitred.py)
    # is independent, each partial's share of rows is not
    ("specs/tensor_sum.yaml", {"b_loop": False, "b_loop_parts": True}),
    ("specs/layernorm_bwd.yaml", {"rows": False, "rows_parts": True}),
    ("specs/flash_attn.yaml", {"kv_loop": False}),  # the running max, sum and output
])
def test_library_loops(spec, loops):
    tile = compile_spec(spec).after["parallel"]
    for op in tile.walk():
        if parallel.is_user_loop(op) and op.attrs["name"] in loops:
            assert bool(op.attrs.get("parallel")) == loops[op.attrs["name"]], (spec, op.attrs)


def test_an_iteration_reading_only_its_own_rows_of_what_it_writes_is_marked():
    # a partial accumulation (passes/splitred.py): row b of a workspace read, added to, written back
    assert _marked(_run(ROW_COPY.replace("tile.load(%t, %x)", "tile.load(%t, %y)")))


def test_an_inner_loop_running_its_own_share_of_rows_is_marked():
    # the shares of two iterations never meet
    assert _marked(_run(SHARE))


# iteration b runs a row block of 32 rows, tiled by 8: its grid runs cdiv(min(B - 32b, 32), 8) trips
BLOCK = '''      loop() {index = "g", lo = 0, hi = cdiv(min(B - b * 32, 32), 8), step = 1, name = "_g", kind = "grid"} region {
        %t = tile.alloc() : tile<ub f32 [8, 64] valid [8, 64]>
        tile.load(%t, %x) {offsets = [b * 32 + g * 8, 0]}
        tile.store(%y, %t) {offsets = [b * 32 + g * 8, 0]}
      }'''


@pytest.mark.parametrize("hi, marked", [
    ("cdiv(min(B - b * 32, 32), 8)", True),  # at most 4 trips: rows [32b, 32b + 32)
    ("min(cdiv(B - b * 32, 8), 4)", True),
    ("cdiv(min(B - b * 32, 40), 8)", False),  # up to 5 trips: into the next block's rows
    ("cdiv(B - b * 32, 8)", False),
])
def test_the_grid_over_a_row_block_of_a_user_loop_stays_in_its_block(hi, marked):
    # a user's loop over row blocks with a partial last block (`for i in loop(cdiv(B, R))`)
    assert _marked(_run(BLOCK.replace("cdiv(min(B - b * 32, 32), 8)", hi))) == marked


# iteration b scatters 8 rows of x into y at the positions rows [8b, 8b + 8) of %i name
SCATTER = '''      %it = tile.alloc() : tile<ub i64 [8] valid [8]>
      tile.load(%it, %i) {offsets = [OFF]}
      %ic = tile.alloc() : tile<ub i32 [8] valid [8]>
      tile.cast(%ic, %it) {to = "i32", mode = "rint"}
      %t = tile.alloc() : tile<ub f32 [8, 64] valid [8, 64]>
      tile.load(%t, %x) {offsets = [b * 8, 0]}
      tile.scatter_rows(%y, %t, %ic) {offsets = [0, 0]UNIQUE}'''
SCATTER_PARAMS = "%x: tensor<f32 [B, 64]>, %y: tensor<f32 [S, 64]> out, %i: tensor<i64 [B]>"


@pytest.mark.parametrize("what, off, unique, marked", [
    ("positions declared unique, each iteration its own", "b * 8", True, True),
    ("positions that may repeat", "b * 8", False, False),
    ("every iteration the same positions", "0", True, False),
    ("positions of overlapping index rows", "b * 4", True, False),
])
def test_a_unique_scatter_is_independent_where_its_iterations_read_their_own_positions(what, off, unique, marked):
    body = SCATTER.replace("OFF", off).replace("UNIQUE", ", unique = true" if unique else "")
    assert _marked(_run(body, SCATTER_PARAMS)) == marked, what


def test_a_unique_scatter_into_a_tensor_the_loop_also_reads_stays_sequential():
    body = SCATTER.replace("OFF", "b * 8").replace("UNIQUE", ", unique = true") + \
        '\n      %u = tile.alloc() : tile<ub f32 [1, 64] valid [1, 64]>\n      tile.load(%u, %y) {offsets = [b, 0]}'
    assert not _marked(_run(body, SCATTER_PARAMS))


# paged attention's rows: batch b owns rows [64b, 64b + 64); inside it the KV head n owns
# NQ // n_kv = 64 // (KD // 32) of them, and each query group g a tile of 16 of those
RADIX = '''      loop() {index = "n", lo = 0, hi = KD // 32, step = 1, name = "heads"} region {
        loop() {index = "g", lo = 0, hi = GROUPS, step = 1, name = "groups"} region {
          %t = tile.alloc() : tile<ub f32 [16, 32] valid [16, 32]>
          tile.load(%t, %x) {offsets = [0, n * 32]}
          tile.store(%y, %t) {offsets = [ROW, 0]}
        }
      }'''
RADIX_PARAMS = "%x: tensor<f32 [16, KD]>, %y: tensor<f32 [B * 64, 32]> out"


@pytest.mark.parametrize("what, groups, row, marked", [
    ("mixed-radix rows", "64 // (KD // 32) // 16", "b * 64 + n * (64 // (KD // 32)) + g * 16", True),
    ("one group too many", "64 // (KD // 32) // 16 + 1", "b * 64 + n * (64 // (KD // 32)) + g * 16", False),
    ("a batch of fewer rows", "64 // (KD // 32) // 16", "b * 48 + n * (64 // (KD // 32)) + g * 16", False),
    ("groups twice as far apart", "64 // (KD // 32) // 16", "b * 64 + n * (64 // (KD // 32)) + g * 32", False),
    ("a negative stride", "64 // (KD // 32) // 16", "b * 64 + (0 - n) * (64 // (KD // 32)) + g * 16", False),
])
def test_a_mixed_radix_offset_over_inner_loops_is_a_band(what, groups, row, marked):
    # each refused case does overlap: another batch's rows for KD = 32 (one KV head) or KD = 64
    body = RADIX.replace("GROUPS", groups).replace("ROW", row)
    assert _marked(_run(body, RADIX_PARAMS)) == marked, what


def test_paged_attention_runs_its_batches_as_blocks():
    tile = compile_spec("specs/paged_attention.yaml").after["parallel"]
    marked = {op.attrs["name"]: op.attrs.get("parallel") == 1 for op in tile.walk() if parallel.is_user_loop(op)}
    assert marked["b_loop"] and marked["g_loop"] and not marked["s2_loop"]
