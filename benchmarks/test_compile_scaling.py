"""How compile time grows with the length of a kernel: a chain of N elementwise statements
(``t1 = x + 1.0``, ``t2 = t1 * 2.0``, ..., ``y[:] = tN``), compiled through every pass (check,
tensorize, tile, fuse, partition, memplan, sync and the checks after each pass) for N = 10, 100 and
1000, with the tile given in the YAML and with the tile left to the compiler's search.

Run with ``pytest benchmarks/test_compile_scaling.py --benchmark-only -s``. Times are printed (and
kept in the benchmark's extra_info), never asserted; ``tests/passes/test_compile_scaling.py``
checks that the work grows linearly with N, by counting calls, not by the clock.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ptodsl.driver import compile_spec

SIZES = (10, 100, 1000)
OPS = ("+", "*", "-")


def chain_spec(folder: Path, n: int, schedule: bool) -> str:
    """A spec whose kernel is a chain of ``n`` elementwise statements; the path of its YAML."""
    lines = ["kernel chain(x: f32[M, N], y: out f32[M, N]):", "    t1 = x + 1.0"]
    lines += [f"    t{i} = t{i - 1} {OPS[i % 3]} {1.0 + i % 7}" for i in range(2, n + 1)]
    lines.append(f"    y[:] = t{n}")
    (folder / "chain.pto").write_text("\n".join(lines) + "\n")
    (folder / "chain.yaml").write_text("op: chain\n" + ("schedule:\n  vec_tile: [8, 256]\n" if schedule else ""))
    return str(folder / "chain.yaml")


@pytest.mark.parametrize("schedule", [True, False], ids=["tile-given", "tile-searched"])
@pytest.mark.parametrize("n", SIZES)
def test_compile_time_of_a_chain(benchmark, tmp_path, n, schedule):
    path = chain_spec(tmp_path, n, schedule)

    def compile_once() -> tuple[float, float, int]:
        wall, cpu = time.perf_counter(), time.process_time()
        compiled = compile_spec(path)
        kernels = sum(f.kind in ("vector", "cube") for f in compiled.stages["block"].funcs)
        return time.perf_counter() - wall, time.process_time() - cpu, kernels

    wall, cpu, kernels = benchmark.pedantic(compile_once, rounds=1, iterations=1)
    how = "tile given" if schedule else "tile searched"
    print(f"\nchain of {n:5d} statements, {how:13s}: {wall:6.2f} s ({cpu:.2f} s CPU), {kernels} compute kernel(s)")
    benchmark.extra_info.update(statements=n, schedule=how, seconds=wall, cpu_seconds=cpu, kernels=kernels)
