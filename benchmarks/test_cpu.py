"""The cpu backend: how long the whole library takes to build, cold and cached, and how fast the
emitted softmax runs next to numpy and torch.

Run with ``pytest benchmarks --benchmark-only -s``. Figures are printed (and kept in the
benchmark's extra_info), never asserted. Every timing of one test comes from the same run, so the
ratios compare like with like; idle OpenMP threads sleep in all runtimes (see
``ptodsl.bench.passive_openmp``).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl.backends.cpp.build import STATS
from ptodsl.backends.cpp.run import build_many
from ptodsl.bench import measure, passive_openmp
from ptodsl.golden import spec_paths

passive_openmp()  # before torch loads its OpenMP runtime

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX_SHAPE = (4096, 4096)


@pytest.fixture(scope="module")
def variants():
    ops = [ptodsl.load(p) for p in spec_paths(str(ROOT / "specs"))]
    return [(op.compiled, i) for op in ops for i in range(len(op.compiled.checked))]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("ptodsl-bench-cache")


def _build(variants) -> tuple[float, int]:
    compiles = STATS.compiles
    start = time.perf_counter()
    build_many(variants, reuse=False)
    return time.perf_counter() - start, STATS.compiles - compiles


def test_library_build_cold(benchmark, variants, cache_dir, monkeypatch):
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(cache_dir))
    seconds, compiles = benchmark.pedantic(_build, args=(variants,), rounds=1, iterations=1)
    print(f"\ncold build of the library: {len(variants)} variants, {compiles} compiler runs, {seconds:.1f} s")
    benchmark.extra_info.update(variants=len(variants), compiles=compiles, seconds=seconds)


def test_library_build_cached(benchmark, variants, cache_dir, monkeypatch):
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(cache_dir))
    _build(variants)  # cold when this test runs alone
    seconds, compiles = benchmark.pedantic(_build, args=(variants,), rounds=3, iterations=1)
    print(f"\ncached build of the library: {len(variants)} variants, {compiles} compiler runs, {seconds:.2f} s")
    benchmark.extra_info.update(variants=len(variants), compiles=compiles, seconds=seconds)


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_softmax_4096x4096_f32(benchmark, cache_dir, monkeypatch):
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(cache_dir))
    op = ptodsl.load(str(ROOT / "specs" / "softmax_long.yaml"))
    x = np.random.default_rng(0).standard_normal(SOFTMAX_SHAPE).astype(np.float32)
    y = np.empty_like(x)
    op(x, y=y, backend="cpu")  # build (or find) the kernel outside the timing
    np.testing.assert_allclose(y, numpy_softmax(x), rtol=1e-5, atol=1e-6)

    benchmark.pedantic(lambda: op(x, y=y, backend="cpu"), rounds=5, iterations=1, warmup_rounds=1)
    cpu_s = benchmark.stats.stats.min
    numpy_s = measure(lambda: numpy_softmax(x), min_round_s=0.0, rounds=5)
    figures = {"cpu_s": cpu_s, "numpy_s": numpy_s, "cpu_over_numpy": cpu_s / numpy_s}
    line = f"cpu {cpu_s * 1e3:.1f} ms, numpy {numpy_s * 1e3:.1f} ms ({cpu_s / numpy_s:.2f}x numpy)"
    try:
        import torch
    except ImportError:
        line += ", torch not installed"
    else:
        t = torch.from_numpy(x)
        torch_s = measure(lambda: torch.softmax(t, -1), min_round_s=0.0, rounds=5)
        figures.update(torch_s=torch_s, cpu_over_torch=cpu_s / torch_s, torch_threads=torch.get_num_threads())
        line += f", torch {torch_s * 1e3:.1f} ms ({cpu_s / torch_s:.2f}x torch, {torch.get_num_threads()} threads)"
    print(f"\nsoftmax {SOFTMAX_SHAPE[0]}x{SOFTMAX_SHAPE[1]} f32: {line}")
    benchmark.extra_info.update(figures)
