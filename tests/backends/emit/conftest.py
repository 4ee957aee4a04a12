"""Fixtures of the emitter tests: a private build cache for the session, and the whole library
built once.

Every test here builds into one temporary cache (never the user's): an autouse fixture points
PTODSL_CACHE_DIR at it for each test of this folder only. The ``library`` fixture compiles every
spec of ``specs/`` and builds all their variants in parallel (one compiler per core) the first time
a test asks for it; the runtime remembers the libraries it built, so the golden ``-cpu`` items of
the same session reuse them instead of compiling again.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import ptodsl
from ptodsl.api import Operator

ROOT = Path(__file__).resolve().parents[3]
SPECS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "specs").glob("*.yaml"))


def _settings(mp: pytest.MonkeyPatch, cache: Path) -> None:
    mp.setenv("PTODSL_CACHE_DIR", str(cache))
    mp.delenv("PTO_ISA_ROOT", raising=False)
    mp.delenv("PTODSL_CXX", raising=False)


@pytest.fixture(scope="session")
def emit_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ptodsl-emit-cache")


@pytest.fixture(autouse=True)
def _private_cache(emit_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _settings(monkeypatch, emit_cache)


@pytest.fixture(scope="session")
def gxx() -> None:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")


@pytest.fixture(scope="session")
def library(emit_cache: Path, gxx: None) -> Iterator[dict[str, Operator]]:
    """Every library spec, loaded, with all its variants built."""
    from ptodsl.backends.cpp.run import build_many

    with pytest.MonkeyPatch.context() as mp:
        _settings(mp, emit_cache)
        mp.chdir(ROOT)
        ops = {path: ptodsl.load(path) for path in SPECS}
        # reuse=False: a variant another test of this process built (into another cache) is built
        # here too, so the session cache holds every variant whatever ran before
        build_many([(op.compiled, i) for op in ops.values() for i in range(len(op.compiled.checked))], reuse=False)
    yield ops
