"""How long the whole golden suite takes: every spec compiled, every case run on the simulator
(Block IR, poison mode) and compared with its reference.

Run with ``pytest benchmarks --benchmark-only``; the budget is 60 s on a 2-core machine, and the
figure is printed, not asserted.
"""

from pathlib import Path

import ptodsl
from ptodsl.golden import run_case, spec_paths

SPECS = Path(__file__).resolve().parents[1] / "specs"


def run_suite() -> tuple[int, int]:
    cases = failed = 0
    for path in spec_paths(str(SPECS)):
        op = ptodsl.load(path)
        for case in op.spec.tests:
            cases += 1
            failed += not run_case(op, case).ok
    return cases, failed


def test_golden_suite(benchmark):
    cases, failed = benchmark.pedantic(run_suite, rounds=1, iterations=1)
    seconds = benchmark.stats.stats.mean
    print(f"\ngolden suite: {cases} cases ({failed} failed) in {seconds:.2f} s; budget 60 s")
    benchmark.extra_info.update(cases=cases, failed=failed)
    assert failed == 0
