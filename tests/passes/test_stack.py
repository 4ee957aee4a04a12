"""The stack frame estimate of compute kernels (passes/stack.py): its counts against what the C++
emitter declares, and the W0613/E0613 checks memory planning runs."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from ptodsl.backends.cpp.emit import emit_variant
from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.driver import Compiled, compile_spec
from ptodsl.ir import Op
from ptodsl.passes import dbuf, memplan, stack
from ptodsl.passes.context import PassContext

REPO = Path(__file__).resolve().parents[2]

# Inline kernels for what no library spec has: every scratch tile and view the emitter declares
# (compare masks, selects with a scalar on either side, a single value spread over a tile), and
# a parameter that takes its strides as arguments (a column block of a wider matrix).
INLINE = {
    "mix": ("kernel mix(x: f32[M, N], y: out f32[M, N], z: out f32[M, N], s: out f32[M, N]):\n"
            "    y[:] = where(x > 0.0, x, 0.0)\n"
            "    z[:] = where(x > 1.0, 2.0, x)\n"
            "    s[:, :] = amax(amax(x, dim=-1, keepdim=True), dim=0, keepdim=True)\n",
            "symbols: {M: 16}\nschedule: {vec_tile: [8, 256]}\n"),
    "strided": ("kernel strided(x: f32[M, N], y: out f32[M, 256]):\n"
                "    y[:, :] = x[:, 0:256] + 1.0\n",
                # single buffered: one copy of the body declares the view, so one Stride
                "symbols: {M: 8, N: 1024}\nschedule: {vec_tile: [2, 256], pass_options: {double_buffer: false}}\n"),
    # views and element reads inside a kernel (the loop runs inside it): a pointer and a scalar each
    "inside": ("kernel inside(x: f32[M, N], ids: i32[M], y: out f32[M, N]):\n"
               "    for i in loop(M, name=\"rows\"):\n"
               "        y[i, :] = view(x, [1, N], [min(max(ids[i], 0), M - 1), 0]) * 2.0\n",
               "schedule: {vec_tile: [1, 256]}\n"),
    "doubled": ("kernel doubled(x: f32[M, N], y: out f32[M, N]):\n    y[:] = exp(x) + x\n",
                "schedule: {vec_tile: [8, 256], pass_options: {double_buffer: true}}\n"),
}
# Library specs covering row and column reductions, broadcasts, tails, cube kernels, grid loops, and
# the tables of gathers and scatters (GlobalTensor views built like a transfer's).
LIBRARY = ["softmax", "layernorm_bwd", "seq_add", "add_bcast", "sum_cols", "matmul", "flash_attn",
           "where_relu", "scalar_ops", "transpose2d", "concat_last", "permute_heads", "bias_expand",
           "gather_rows", "gather_last", "kv_cache_update", "argmax_rows"]


def _inline(tmp_path: Path, name: str) -> str:
    pto, yaml = INLINE[name]
    (tmp_path / f"{name}.pto").write_text(pto)
    (tmp_path / f"{name}.yaml").write_text(f"op: {name}\n{yaml}")
    return str(tmp_path / f"{name}.yaml")


def declared(text: str, kernel: str) -> dict[str, int]:
    """The objects a kernel's C++ declares, by kind, read from the emitted text. Of a mixed kernel,
    its CPU build's body: each NPU part declares the skeleton and its own core's share of it."""
    text = text.split("\n#else\n    set_ffts_base_addr")[0]
    counts = dict.fromkeys(stack.KINDS, 0)
    params = re.search(r"AICORE void " + re.escape(kernel) + r"\((.*)\)", text).group(1)
    for p in (x.strip() for x in params.split(",") if x.strip()):
        counts["pointer" if p.startswith("__gm__ ") else "scalar"] += 1
    tiles = set(re.findall(r"using (\w+) = Tile(?:Left|Right|Acc)?<", text))
    views = set(re.findall(r"using (\w+) = GlobalTensor<", text))
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"(\w+) \w+(\(.*\))?;", s)
        counts["tile"] += bool(m and m.group(1) in tiles)
        counts["global_tensor"] += bool(m and m.group(1) in views) or s.startswith("GlobalTensor<")
        counts["shape"] += s.count("::Shape(")
        counts["stride"] += s.count("::Stride(")
        counts["loop"] += s.startswith("for (int64_t ")
        counts["pointer"] += bool(re.match(r"__gm__ \w+\* \w+ = ", s))  # a view inside the kernel
        # an element read (the NPU build's block index and count are the CPU build's parameters)
        counts["scalar"] += bool(re.match(r"const (int64_t|float) \w+ = static_cast<\w+>\((?!get_block_)", s))
    return counts


def _compare(c: Compiled) -> list[str]:
    estimates = {e.kernel: e for e in stack.estimates(c.stages["block"], c.target)}
    seen = []
    for index in range(len(c.checked)):
        v = emit_variant(c, index)
        for k in v.kernels:
            e = estimates[k]
            assert declared(v.sources[f"{k}.cpp"], k) == e.counts, k
            whole = sum(n * getattr(c.target.stack, stack.KINDS[kind]) for kind, n in e.counts.items())
            # a mixed kernel's frame is its larger NPU part's: each holds the skeleton and one core's share
            mixed = any(f.name == k and f.kind == "mixed" for f in c.stages["block"].funcs)
            assert e.bytes < whole if mixed else e.bytes == whole
            seen.append(k)
    return seen


@pytest.mark.parametrize("name", LIBRARY)
def test_the_estimate_counts_the_objects_the_emitter_declares(name: str, monkeypatch):
    monkeypatch.chdir(REPO)
    assert _compare(compile_spec(f"specs/{name}.yaml"))


@pytest.mark.parametrize("name", sorted(INLINE))
def test_the_estimate_counts_scratch_tiles_strides_and_doubled_bodies(tmp_path: Path, name: str):
    c = compile_spec(_inline(tmp_path, name))
    assert _compare(c)
    block = c.stages["block"]
    ops = [o for f in block.funcs if f.kind == "vector" for o in f.walk()]
    if name == "mix":  # every kind of scratch the emitter adds is in it
        assert {(o.name, stack.scratch_tiles(o)) for o in ops if stack.scratch_tiles(o)} == {
            ("tile.cmp", 1), ("tile.where", 6), ("tile.amax", 1), ("tile.expand", 1)}
    elif name == "strided":
        (params,) = stack.strided_params(block).values()
        assert len(params) == 1
        (e,) = stack.estimates(block, c.target)
        assert e.counts["stride"] == 1 <= e.counts["shape"]  # a Shape() goes with every Stride
    elif name == "inside":
        assert {"view", "read"} <= {o.name for o in ops}
    else:
        assert any(o.name == "loop" and "double_buffered" in o.attrs for o in ops)


def _with_stack(c: Compiled, **limits: int) -> PassContext:
    return PassContext(replace(c.target, stack=replace(c.target.stack, **limits)), Diagnostics())


def test_near_the_limit_is_a_warning_and_over_it_an_error_at_the_kernels_lines(monkeypatch):
    monkeypatch.chdir(REPO)
    c = compile_spec("specs/softmax.yaml")
    block = c.stages["block"]
    frames = {e.kernel: e.bytes for e in stack.estimates(block, c.target)}
    f32 = frames["softmax_f32_k0"]
    ctx = _with_stack(c, warn_bytes=min(frames.values()) - 1, limit_bytes=max(frames.values()))
    stack.check(block, ctx)
    assert [d.code for d in ctx.diags.items] == ["W0613"] * 3  # one per variant, each at the limit
    ctx = _with_stack(c, warn_bytes=f32 - 2, limit_bytes=f32 - 1)
    stack.check(block, ctx)
    d = next(d for d in ctx.diags.items if "softmax_f32_k0" in d.message)
    assert d.code == "E0613" and f"estimated {f32} bytes" in d.message
    # the span runs over the kernel's source lines: the row loop, which runs inside it, and its body
    assert (d.span.file, d.span.line, d.span.end_line) == ("specs/softmax.pto", 3, 6)
    assert "larger tiles" in d.help and "(K)" in d.help
    # the kernel is one loop: no cut point, so no cycle bound helps
    assert "cycle_upper_bound" not in d.help and any("would not help" in n for n in d.notes)
    ctx = _with_stack(c)
    stack.check(block, ctx)
    assert not ctx.diags.items


def test_memplan_reports_through_the_pass_context(monkeypatch):
    monkeypatch.chdir(REPO)
    c = compile_spec("specs/softmax.yaml")
    ctx = _with_stack(c, warn_bytes=1, limit_bytes=2)
    memplan.run(c.after["dbuf"], ctx)
    assert {d.code for d in ctx.diags.items} == {"E0613"}


FIXTURE = REPO / "tests" / "golden_codes" / "fixtures" / "e0613_unrolled_rows_in_one_kernel"


@pytest.mark.slow  # two compiles of an unrolled kernel: about 11 s
def test_the_cycle_bound_the_help_names_brings_the_kernel_under_the_limit(tmp_path: Path):
    name = FIXTURE.name
    with pytest.raises(CompileError) as err:
        compile_spec(str(FIXTURE / f"{name}.yaml"))
    (d,) = [d for d in err.value.diagnostics if d.code == "E0613"]
    bound = int(re.search(r"set `cycle_upper_bound` below (\d+)", d.help).group(1))
    (tmp_path / f"{name}.pto").write_text((FIXTURE / f"{name}.pto").read_text())
    yaml = (FIXTURE / f"{name}.yaml").read_text()
    (tmp_path / f"{name}.yaml").write_text(re.sub(r"cycle_upper_bound: \d+", f"cycle_upper_bound: {bound // 2}", yaml))
    c = compile_spec(str(tmp_path / f"{name}.yaml"))
    frames = [e.bytes for e in stack.estimates(c.stages["block"], c.target)]
    assert len(frames) > 2 and max(frames) < c.target.stack.limit_bytes


def test_cut_points_are_where_no_value_is_live_across():
    def op(result: str | None, *operands: str) -> Op:
        from ptodsl.ir import TileType, Value

        t = TileType("ub", "f32", (1, 8), (1, 8))
        return Op("tile.add", [Value(v, t) for v in operands], {}, [Value(result, t)] if result else [])

    body = [op("a"), op("b", "a"), op(None, "b"), op("c"), op(None, "c")]
    assert stack.cut_points(body) == (1, None)  # between the two chains only
    held = [op("g"), op("a", "g"), op("b", "g")]  # g is read by every later op
    free, blocker = stack.cut_points(held)
    assert free == 0 and blocker is held[0]


def test_doubling_that_would_take_the_stack_over_the_limit_is_not_done(tmp_path: Path):
    c = compile_spec(_inline(tmp_path, "doubled"))
    partitioned = c.after["blocks"]  # what double buffering starts from
    single = max(e.bytes for e in stack.estimates(memplan.run(partitioned, PassContext(c.target)), c.target))
    doubled = max(e.bytes for e in stack.estimates(c.stages["block"], c.target))
    assert doubled > single

    def doubled_with(limit: int) -> bool:
        ctx = _with_stack(c, warn_bytes=limit, limit_bytes=limit)
        out = dbuf.run(partitioned, ctx)
        assert not ctx.diags.items
        return any(o.name == "loop" and "double_buffered" in o.attrs for o in out.walk())

    assert doubled_with(doubled) and not doubled_with(doubled - 1)
