"""Fixtures of the emitter tests: a private build cache for the session, and the library built
once.

Every test here builds into one temporary cache (never the user's), shared by the session's
pytest-xdist workers: an autouse fixture points PTODSL_CACHE_DIR at it for each test of this folder
only, and the cache's per-entry locks make each library compile once however many workers ask for
it. The ``library`` fixture maps every spec of ``specs/`` to its operator, compiled on first use, and
builds, in parallel (one compiler per core), the variants of the golden cases the session selected
(test_cpu_golden.py: one variant of one spec per kernel family in the everyday suite, all of them
under ``-m full``).
"""

from __future__ import annotations

import os
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


class Library(dict):
    """Library spec path (``specs/NAME.yaml``) -> its operator, loaded when first asked for: the
    everyday suite runs the cpu cases of a few specs, and compiling all of them cost it seconds."""

    def __missing__(self, path: str) -> Operator:
        if path not in SPECS:
            raise KeyError(path)
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(ROOT)  # by its relative path, as the golden ids name it
            op = self[path] = ptodsl.load(path)
        return op


def selected_variants(ops: Library, items: list[pytest.Item]) -> list:
    """(compiled spec, variant index) of the golden cases among ``items`` (test_case_on_cpu's)."""
    out, seen = [], set()
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "spec_file" not in params or "index" not in params or params["spec_file"] not in SPECS:
            continue
        op = ops[params["spec_file"]]
        variant = op.spec.variant_of(op.spec.tests[params["index"]])
        index = next(i for i, ck in enumerate(op.compiled.checked) if ck.variant == variant)
        if (params["spec_file"], index) not in seen:
            seen.add((params["spec_file"], index))
            out.append((op.compiled, index))
    return out


@pytest.fixture(scope="session")
def emit_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the workers' folders are popen-gwN in the session's folder
    path = base / "ptodsl-emit-cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(autouse=True)
def _private_cache(emit_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _settings(monkeypatch, emit_cache)


@pytest.fixture(scope="session")
def gxx() -> None:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")


@pytest.fixture(scope="session")
def library(emit_cache: Path, gxx: None, request: pytest.FixtureRequest) -> Iterator[Library]:
    """Every library spec, loaded on first use, with the variants of the session's selected golden
    cases built."""
    from ptodsl.backends.cpp.run import build_many

    with pytest.MonkeyPatch.context() as mp:
        _settings(mp, emit_cache)
        mp.chdir(ROOT)
        ops = Library()
        # reuse=False: a variant another test of this process built (into another cache) is built
        # here too, so the session cache holds every variant whatever ran before
        request.session.ptodsl_library_variants = variants = selected_variants(ops, request.session.items)
        build_many(variants, reuse=False)
    yield ops
