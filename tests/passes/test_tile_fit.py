"""One-pass versions of row loops (passes/tile_fit.py): a row loop over a runtime row length gets a
version for rows that fit the UB beside the multi-pass one, chosen at call time; the fit version
reads each row once and loads gamma/beta once per block."""

from __future__ import annotations

import numpy as np
import pytest

import ptodsl
from ptodsl import stats, sym
from ptodsl.ir.gm import launches
from ptodsl.passes.tile_fit import GRANULE, choose_cap

NORMS = ["rmsnorm", "layernorm", "log_softmax", "softmax_long"]


def _choice(op, index: int = 0):
    (choice,) = [o for o in op.compiled.stages["tile"].funcs[index].body if o.name == "if"]
    return choice


@pytest.mark.parametrize("name", NORMS)
def test_a_row_loop_over_a_runtime_row_length_is_compiled_twice(name: str):
    op = ptodsl.load(f"specs/{name}.yaml")
    for index in range(len(op.compiled.checked)):
        choice = _choice(op, index)
        fit, rest = choice.regions
        (dim,) = sym.free_symbols(choice.attrs["cond"])
        (loop,) = [o for o in fit if o.name == "loop"]
        assert loop.attrs["fit"] == dim
        # no grid along the row in the fit version; the multi-pass version walks it in tiles
        assert not [o for o in loop.walk() if o.name == "loop" and o.attrs.get("kind") == "grid"]
        assert [o for x in rest for o in x.walk() if o.name == "loop" and o.attrs.get("kind") == "grid"]
        # rows of 1 .. cap columns take the fit version, none else
        cap = next(c for c in range(GRANULE, 1 << 20, GRANULE)
                   if not sym.evaluate(choice.attrs["cond"], {dim: c + GRANULE}))
        assert not sym.evaluate(choice.attrs["cond"], {dim: 0})
        assert all(t.shape[-1] == cap for o in loop.walk() if o.name == "tile.alloc"
                   for t in [o.result.type] if t.shape[-1] != 1)


@pytest.mark.parametrize("name", ["rmsnorm", "layernorm"])
def test_the_fit_version_reads_x_once_and_gamma_once_per_block(name: str):
    """At the bench size (4096 x 4096, f32) the modelled GM traffic is within 1.05x the minimum
    (x read once, y written once, gamma and beta once per block of rows), and the fit version's
    kernel runs as blocks with the gamma load before its share of the rows."""
    op = ptodsl.load(f"specs/{name}.yaml")
    (vs,) = [v for v in stats.collect(op, bench=True) if v.traffic]
    (_, moved, minimum), = vs.traffic
    assert moved <= 1.05 * minimum, (moved, minimum)
    block = op.compiled.stages["block"]
    control = block.func(f"{name}_f32")
    (choice,) = [o for o in control.body if o.name == "if"]
    (launch,) = [o for o in choice.regions[0] if o.name == "launch"]
    assert "block_dim" in launch.attrs
    kernel = block.func(launch.attrs["kernel"])
    first_loop = next(k for k, o in enumerate(kernel.body) if o.name == "loop")
    hoisted = {o.operands[1].name for o in kernel.body[:first_loop] if o.name == "tile.load"}
    assert hoisted == ({"gamma"} if name == "rmsnorm" else {"gamma", "beta"})
    assert not [o for o in kernel.body[first_loop].walk() if o.name == "tile.load" and o.operands[1].name in hoisted]


@pytest.mark.parametrize("backend", ["sim", "cpu"])
def test_both_versions_compute_the_reference(backend: str):
    """Rows on either side of the cap, gamma the same for every row: one call runs the fit version,
    the other the multi-pass one, and both give numpy's answer."""
    op = ptodsl.load("specs/rmsnorm.yaml")
    choice = _choice(op)
    rng = np.random.default_rng(24)
    for h in (1000, 12300):
        x = rng.standard_normal((3, h)).astype(np.float32)
        gamma = rng.standard_normal(h).astype(np.float32)
        want = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * gamma
        assert bool(sym.evaluate(choice.attrs["cond"], {"H": h})) == (h == 1000)
        np.testing.assert_allclose(op(x, gamma, backend=backend), want, rtol=2e-5, atol=2e-6)


def test_a_row_reduction_alone_is_not_versioned(write_spec):
    """A row sum reads the row once however long it is: nothing to gain from a second version."""
    pto = ("kernel k(x: f32[R, N], y: out f32[R, 1]):\n"
           "    for r in loop(R, name=\"rows\"):\n"
           "        y[r, :] = sum(x[r, :], dim=-1, keepdim=True)\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule:\n  vec_tile: [1, 64]\n"))
    assert not [o for o in op.compiled.stages["tile"].funcs[0].walk() if o.name == "if" or "fit" in o.attrs]
    x = np.random.default_rng(1).standard_normal((3, 200)).astype(np.float32)
    np.testing.assert_allclose(op(x), x.sum(axis=1, keepdims=True), rtol=1e-5)


def test_a_fixed_row_length_is_not_versioned():
    """softmax's N is fixed by the spec: its rows fit one tile already, no choice at call time."""
    op = ptodsl.load("specs/softmax.yaml")
    assert not [o for f in op.compiled.stages["tile"].funcs for o in f.walk() if o.name == "if"]
    assert len(list(launches(op.compiled.stages["block"].func("softmax_f32")))) == 1


def test_the_cap_is_the_widest_granule_multiple_that_fits():
    # bytes = 1000 + 20 * cap: 9950 columns fit 200000 bytes, rounded down to the granule
    assert choose_cap(lambda cap: 1000 + 20 * cap, 1024, 200_000) == 9950 // GRANULE * GRANULE
    # the measure of the chosen width is what decides: a width whose plan overflows is stepped down
    assert choose_cap(lambda cap: 1000 + 20 * cap + (5000 if cap > 8000 else 0), 1024, 200_000) == 9472
    # no width above the scheduled tile fits: no fit version
    assert choose_cap(lambda cap: 1000 + 200 * cap, 1024, 200_000) is None
    # a fit version that cannot be compiled at some width
    assert choose_cap(lambda cap: None, 1024, 200_000) is None


def test_the_copy_takes_no_name_of_the_loop_it_copies(write_spec):
    """A value named `row_fit` beside `row`: the one-pass copy renames both past every name of
    the loop as scheduled, so each name is defined once."""
    pto = ("kernel k(x: f32[R, N], y: out f32[R, N]):\n"
           "    for r in loop(R, name=\"rows\"):\n"
           "        row = x[r, :]\n"
           "        row_fit = row * 2.0\n"
           "        y[r, :] = row_fit - amax(row_fit, dim=-1, keepdim=True)\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule:\n  vec_tile: [1, 64]\n"))
    choice = _choice(op)
    defined = [r.name for o in op.compiled.stages["tile"].funcs[0].walk() for r in o.results]
    assert len(defined) == len(set(defined))
    assert "fit" in [o for o in choice.regions[0] if o.name == "loop"][0].attrs
    x = np.random.default_rng(2).standard_normal((3, 200)).astype(np.float32)
    np.testing.assert_allclose(op(x), 2 * x - (2 * x).max(1, keepdims=True))


RMS = ("kernel k(x: f32[R, H], g: f32[H], y: out f32[R, H]):\n"
       "    for r in loop(R, name=\"rows\"):\n"
       "        y[r, :] = x[r, :] * rsqrt(mean(x[r, :] * x[r, :], dim=-1, keepdim=True) + 1e-6) * g\n")


@pytest.mark.parametrize("backend", ["sim", "cpu"])
def test_a_bounded_dim_is_tiled_whole_without_versions(write_spec, backend: str):
    """`max_dims: {H: 100}`: one tile of 128 columns (100 rounded up to whole UB blocks) spans the
    row, no grid loop runs along it and no call-time choice is compiled; rows up to the bound, a
    partial tile included, compute numpy's answer, and a longer one is refused at the call."""
    op = ptodsl.load(write_spec("k", RMS, "op: k\nmax_dims: {H: 100}\nschedule:\n  vec_tile: [1, 64]\n"))
    tile = op.compiled.stages["tile"].funcs[0]
    assert not [o for o in tile.walk() if o.name == "if" or "fit" in o.attrs]
    assert not [o for o in tile.walk() if o.name == "loop" and o.attrs.get("kind") == "grid"]
    assert {o.result.type.shape[-1] for o in tile.walk() if o.name == "tile.alloc"} - {1} == {128}
    assert "max_dim.H = 100" in str(op.compiled.stages["tensor"])  # carried by the IR's text
    rng = np.random.default_rng(5)
    for h in (1, 37, 100):
        x = rng.standard_normal((3, h)).astype(np.float32)
        g = rng.standard_normal(h).astype(np.float32)
        want = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * g
        np.testing.assert_allclose(op(x, g, backend=backend), want, rtol=2e-5, atol=2e-6)
    with pytest.raises(ptodsl.ArgumentValueError, match="E0867"):
        op(np.ones((3, 101), np.float32), np.ones(101, np.float32), backend=backend)
    with pytest.raises(ptodsl.ArgumentValueError, match="E0867"):
        op(np.ones((3, 0), np.float32), np.ones(0, np.float32), backend=backend)


def test_a_bench_case_outside_the_bound_is_refused(compile_text):
    """A bench case the operator would refuse at the call is no call to model: E0867 at check time,
    as for a test case."""
    bench = "max_dims: {H: 100}\nschedule:\n  vec_tile: [1, 64]\nbench:\n  - {shapes: {R: 8, H: %d}}\n"
    assert compile_text(RMS, bench % 100) == []
    assert compile_text(RMS, bench % 101) == ["E0867"]


def test_top_level_statements_with_products_get_a_one_pass_version():
    """mha_sdpa's statements, the products and the softmax between them over a runtime key count,
    run as one implicit top-level loop: it is versioned as a row loop is, the softmax's rows read
    once each in the fit version (its golden cases run both versions)."""
    op = ptodsl.load("specs/mha_sdpa.yaml")
    for index in range(len(op.compiled.checked)):
        fit, rest = _choice(op, index).regions
        (loop,) = [o for o in fit if o.name == "loop"]
        assert loop.attrs["fit"] == "L" and loop.attrs["kind"] == "implicit"
        assert any(o.name == "tile.matmul" for o in loop.walk())
        # the vector work loads the scores once per row block; the multi-pass version more often
        ub_loads = [o for o in loop.walk() if o.name == "tile.load" and o.operands[0].type.space == "ub"]
        assert len(ub_loads) == 1, ub_loads
        assert len([o for x in rest for o in x.walk() if o.name == "tile.load" and o.operands[0].type.space == "ub"]) > 1


def test_an_implicit_loop_whose_values_are_used_after_it_is_not_versioned(write_spec):
    """A local allocated among the first statements and updated by a loop after them (fuzz seed
    7971173): a fit copy of the first statements would rename it under the loop's feet."""
    pto = ("kernel k(x0: f32[M, N], x1: f32[M, N], xf: f32[M, N], y2: out f32[M, 1], y3: out f32[1, N]):\n"
           "    y2[:] = mean(x1 / (abs(amin(x0, dim=-1, keepdim=True)) + 1.0), dim=-1, keepdim=True)\n"
           "    acc3 = ones([1, N], f32)\n"
           "    for r in loop(M, name=\"L3\"):\n"
           "        acc3[:] = acc3 - xf[r, :]\n"
           "    y3[:] = acc3\n")
    op = ptodsl.load(write_spec("k", pto, "op: k\nschedule:\n  vec_tile: [1, 16]\n"))
    rng = np.random.default_rng(3)
    x0, x1, xf = (rng.standard_normal((3, 40)).astype(np.float32) for _ in range(3))
    y2, y3 = op(x0, x1, xf)
    np.testing.assert_allclose(y2, (x1 / (np.abs(x0.min(1, keepdims=True)) + 1)).mean(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(y3, 1 - xf.sum(0, keepdims=True), rtol=1e-5, atol=1e-5)
