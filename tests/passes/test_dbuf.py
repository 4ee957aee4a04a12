"""Double buffering of grid loops in vector and cube kernels (passes/dbuf.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from library_copies import edited_copy  # tests/library_copies.py

import ptodsl
from ptodsl.diagnostics import Diagnostics
from ptodsl.driver import compile_spec
from ptodsl.golden import run_case
from ptodsl.ir import Op
from ptodsl.passes import dbuf
from ptodsl.passes.context import PassContext
from ptodsl.passes.pipes import at_most_once

REFS = """
import numpy as np

def add(x, y):
    return x + y

def matmul(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)

def softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
"""

# (shapes of many tile rows: every block of the kernel runs several iterations to overlap)
KERNELS = {
    "add": ("kernel add(x: f32[M, N], y: f32[M, N], z: out f32[M, N]):\n    z[:] = x + y\n",
            "reference: refs.py:add\ntests:\n  - {shapes: {M: 768, N: 700}}\n"),
    "softmax": ("kernel softmax(x: f32[B, N], y: out f32[B, N]):\n"
                "    e = exp(x - amax(x, dim=-1, keepdim=True))\n"
                "    y[:] = e / sum(e, dim=-1, keepdim=True)\n",
                "reference: refs.py:softmax\ntests:\n  - {shapes: {B: 1536, N: 256}}\n"),
    # a cube kernel: the K loop's loads of the next A and B tiles overlap this step's matmul
    "matmul": ("kernel matmul(a: f16[M, K], b: f16[K, N], c: out f32[M, N]):\n"
               "    c[:] = matmul(a, b, out_dtype=f32)\n",
               "reference: refs.py:matmul\ntests:\n  - {shapes: {M: 128, K: 512, N: 128}, rtol: 1e-3, atol: 1e-3}\n"),
}


def _write(tmp_path: Path, name: str, schedule: str, tag: str = "") -> str:
    pto, rest = KERNELS[name]
    (tmp_path / "refs.py").write_text(REFS)
    (tmp_path / f"{name}.pto").write_text(pto)
    yaml = tmp_path / f"{name}{tag}.yaml"
    yaml.write_text(f"op: {name}\nsource: {name}.pto\nschedule: {schedule}\n{rest}")
    return str(yaml)


def _allocs(op: Op) -> list[Op]:
    return [o for o in op.walk() if o.name == "tile.alloc"]


def _doubled_loops(operator: ptodsl.Operator) -> list[Op]:
    return [o for o in operator.compiled.stages["block"].walk() if o.name == "loop" and "double_buffered" in o.attrs]


def _estimate(operator: ptodsl.Operator) -> float:
    results = [run_case(operator, case) for case in operator.spec.tests]
    assert all(r.ok for r in results), [r.report for r in results]
    return sum(r.timeline.estimate for r in results)


@pytest.mark.parametrize("name, tile", [("add", "vec_tile: [8, 256]"), ("softmax", "vec_tile: [4, 256]"),
                                        ("matmul", "cube_tile: {m: [64, 64], k: [64, 64], n: [64, 64]}")])
def test_two_copies_get_distinct_memory_and_the_estimate_drops(tmp_path, name, tile):
    doubled = ptodsl.load(_write(tmp_path, name, f"{{{tile}, pass_options: {{double_buffer: true}}}}"))
    single = ptodsl.load(_write(tmp_path, name, f"{{{tile}, pass_options: {{double_buffer: false}}}}",
                                "_single"))
    assert not _doubled_loops(single)
    loops = _doubled_loops(doubled)
    assert loops
    for loop in loops:
        depth = loop.attrs["double_buffered"]
        copies: dict[int, list[tuple[str, int, int]]] = {}
        for alloc in _allocs(loop):
            a = alloc.attrs
            assert a["buffer_of"] == loop.attrs["index"]
            copies.setdefault(a["buffer"], []).append((alloc.result.type.space, a["offset"], a["offset"] + a["bytes"]))
        assert sorted(copies) == list(range(depth))
        for b0, b1 in ((b0, b1) for b0 in copies for b1 in copies if b0 < b1):
            for space0, lo0, hi0 in copies[b0]:
                for space1, lo1, hi1 in copies[b1]:  # (each on-chip buffer has offsets of its own)
                    assert space0 != space1 or hi0 <= lo1 or hi1 <= lo0, \
                        f"a tile of copy {b0} shares memory with one of copy {b1}"
        # every other copy runs in a loop of at most one trip, so a short last group needs no more bodies
        inner = [o for o in loop.regions[0] if o.name == "loop"]
        assert len(inner) == depth - 1 and all(at_most_once(i) for i in inner)
    assert _estimate(doubled) < 0.97 * _estimate(single)


def test_a_loop_that_does_not_fit_twice_stays_single_buffered(tmp_path):
    # two f32 [32, 512] tiles per body: 128 KiB fits the 192 KiB UB once, not twice
    op = ptodsl.load(_write(tmp_path, "add", "{vec_tile: [32, 512], pass_options: {double_buffer: true}}"))
    assert not _doubled_loops(op)
    assert max(f.attrs["ub_bytes"] for f in op.compiled.stages["block"].funcs if f.kind == "vector") <= 196608
    assert all(run_case(op, case).ok for case in op.spec.tests)


def test_a_loop_that_runs_at_most_once_is_left_alone(tmp_path):
    # one tile covers the whole tensor: there is no next iteration to overlap with
    op = ptodsl.load(_write(tmp_path, "add", "{vec_tile: [8, 256], pass_options: {double_buffer: true}}"))
    assert _doubled_loops(op)  # M, N are runtime symbols: the trip count is not known to be 1
    pto, _ = KERNELS["add"]
    (tmp_path / "one.pto").write_text(pto.replace("[M, N]", "[8, 256]"))
    (tmp_path / "one.yaml").write_text("op: add\nsource: one.pto\n"
                                       "schedule: {vec_tile: [8, 256], pass_options: {double_buffer: true}}\n"
                                       "reference: refs.py:add\ntests:\n  - {shapes: {}}\n")
    assert not _doubled_loops(ptodsl.load(str(tmp_path / "one.yaml")))


def test_doubling_that_needs_more_event_ids_than_the_target_has_is_undone(tmp_path):
    c = compile_spec(_write(tmp_path, "add", "{vec_tile: [8, 256], pass_options: {double_buffer: true}}"))
    partitioned = c.after["partition"]

    def doubled_with(events: int) -> list[Op]:
        ctx = PassContext(replace(c.target, max_event_ids=events), Diagnostics())
        out = dbuf.run(partitioned, ctx)
        assert not ctx.diags.items
        return [o for o in out.walk() if o.name == "loop" and "double_buffered" in o.attrs]

    # single buffered, the kernel needs one event id per pipe pair; doubled, two
    assert doubled_with(2) and not doubled_with(1)


def test_a_cube_steps_l1_tiles_stay_apart_so_its_loads_run_back_to_back(tmp_path):
    # the B tile sharing L1 bytes with the A tile would make B's load wait for MTE1 to move A out
    op = ptodsl.load(_write(tmp_path, "matmul", "{cube_tile: {m: [64, 64], k: [64, 64], n: [64, 64]}, "
                                                "pass_options: {double_buffer: true}}"))
    loops = _doubled_loops(op)
    assert loops
    for loop in loops:
        l1 = [(a.attrs["offset"], a.attrs["offset"] + a.attrs["bytes"]) for a in _allocs(loop)
              if a.result.type.space == "l1"]
        assert len(l1) == 2 * dbuf.DEEP
        assert all(hi0 <= lo1 or hi1 <= lo0 for n, (lo0, hi0) in enumerate(l1) for lo1, hi1 in l1[n + 1:])


def test_a_cube_step_loads_deep_ahead_and_gives_up_depth_before_buffering():
    """The matmul's K loop keeps DEEP sets of L1 tiles (its L0 tiles two): the loads of the next
    output tile go on while the fixpipe stores this one. With fewer event ids than that needs, the
    loop keeps as many sets as fit, before giving up buffering."""
    c = compile_spec(str(Path(__file__).resolve().parents[2] / "specs" / "matmul.yaml"))
    partitioned = c.after["partition"]

    def depth_with(events: int) -> int:
        ctx = PassContext(replace(c.target, max_event_ids=events), Diagnostics())
        out = dbuf.run(partitioned, ctx)
        assert not ctx.diags.items
        return max((o.attrs["double_buffered"] for o in out.walk() if o.name == "loop"
                    and "double_buffered" in o.attrs), default=1)

    full = depth_with(c.target.max_event_ids)
    assert full == dbuf.DEEP
    fewer = depth_with(c.target.max_event_ids - 3)
    assert 2 <= fewer < full


def test_a_cube_step_of_few_known_trips_keeps_no_more_sets_than_it_has_steps(write_spec):
    # K = 256 in k tiles of 64, one peeled, three in the loop
    pto = "kernel k(a: f16[M, 256], b: f16[256, 64], y: out f32[M, 64]):\n    y[:] = matmul(a, b)\n"
    yaml = "op: k\nschedule:\n  cube_tile: {m: [32, 64], k: [64, 128], n: [64, 128]}\n"
    c = compile_spec(write_spec("k", pto, yaml))
    depths = {o.attrs["name"]: o.attrs["double_buffered"] for o in c.stages["block"].walk()
              if o.name == "loop" and "double_buffered" in o.attrs and o.attrs["name"].startswith("_k")}
    assert depths and all(d == 3 for d in depths.values()), depths


def _ffn(tmp_path: Path, double: bool) -> ptodsl.Operator:
    """specs/ffn, one mixed kernel over row blocks, with double buffering on or off; its cases and
    one of several row blocks per core (a partial last one)."""
    library = "pass_options: {row_interchange: true}"
    option = f"pass_options: {{row_interchange: true, double_buffer: {str(double).lower()}}}"
    return edited_copy("ffn", tmp_path / str(double), [(library, option)],
                       "  - {shapes: {B: 1000}, scalars: {act: 0}, data_range: [-1.0, 1.0], name: row-blocks}\n")


def test_a_mixed_kernel_buffers_its_cube_steps_too(tmp_path):
    """A mixed kernel (ffn's row blocks: both products on the cube, the activation on the vector
    cores) double-buffers its cube loops: the second product's next K step loads while the cube
    multiplies this one, its L1 tiles apart, in two sets (the vector cores bound the kernel, so
    more would only add code), and the whole computes what the single-buffered one does."""
    doubled, single = _ffn(tmp_path, True), _ffn(tmp_path, False)
    assert not _doubled_loops(single)
    mixed = [f for f in doubled.compiled.stages["block"].funcs if f.kind == "mixed"]
    assert len(mixed) == 1
    loops = [o for o in mixed[0].walk() if o.name == "loop" and "double_buffered" in o.attrs]
    assert loops and all(loop.attrs["double_buffered"] == 2 for loop in loops)
    for loop in loops:
        l1 = [(a.attrs["offset"], a.attrs["offset"] + a.attrs["bytes"]) for a in _allocs(loop)
              if a.result.type.space == "l1"]
        assert all(hi0 <= lo1 or hi1 <= lo0 for n, (lo0, hi0) in enumerate(l1) for lo1, hi1 in l1[n + 1:])
    assert _estimate(doubled) < 0.97 * _estimate(single)
