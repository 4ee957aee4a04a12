"""The mutation fuzzer of hostile specs: a short run here, the 10k-spec run behind `slow`."""

from __future__ import annotations

import os
import random

import pytest

from ptodsl.fuzz import mutate


def test_mutants_are_reproducible_and_hostile():
    first = list(mutate.mutants(40, seed=3))
    assert first == list(mutate.mutants(40, seed=3))
    assert list(mutate.mutants(40, seed=3, start=30)) == first[30:]
    base = {c.pto for c in mutate.sources()} | {c.yaml for c in mutate.sources()}
    changed = [c for _, c in first if c.pto not in base or c.yaml not in base]
    assert len(changed) >= 35


def test_each_mutation_changes_some_spec():
    rng = random.Random(1)
    for fn in {*mutate.PTO_MUTATIONS, *mutate.YAML_MUTATIONS}:
        sources = mutate.sources()
        assert any(fn(rng, c.pto) != c.pto or fn(rng, c.yaml) != c.yaml for c in sources), fn.__name__


def test_a_short_run_finds_only_diagnostics(capsys):
    assert mutate.run(30, seed=11) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert "30 mutated specs" in line and "0 internal errors, 0 crashes" in line


def test_an_internal_error_is_counted_and_reported(monkeypatch, capsys, tmp_path):
    """A worker that dies inside a case counts as a crash and the run goes on after it."""
    monkeypatch.setenv("PTODSL_FUZZ_TEST_CRASH_AT", "2")
    assert mutate.run(4, seed=1) == 1
    out = capsys.readouterr().out
    assert "4 mutated specs" in out and "1 crashes" in out and "mutant 2 (crash)" in out


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("PTODSL_MUTATE_COUNT"), reason="set PTODSL_MUTATE_COUNT (e.g. 10000: about 2 min on 2 cores)")
def test_many_mutants_only_diagnostics():
    assert mutate.run(int(os.environ["PTODSL_MUTATE_COUNT"]), seed=0) == 0
