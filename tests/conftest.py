"""Shared fixtures: the repository root, the library's spec paths, and a tmp spec writer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "specs").glob("*.yaml"))


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    """Run every test from the repository root, so rendered paths are relative and stable."""
    monkeypatch.chdir(ROOT)


@pytest.fixture
def write_spec(tmp_path):
    """write_spec(name, pto, yaml) -> path of the YAML, with the .pto beside it."""

    def write(name: str, pto: str, yaml: str) -> str:
        (tmp_path / f"{name}.pto").write_text(pto)
        (tmp_path / f"{name}.yaml").write_text(yaml)
        return os.fspath(tmp_path / f"{name}.yaml")

    return write


@pytest.fixture
def compile_text(write_spec):
    """compile_text(pto, yaml) -> the codes that compiling reports; the kernel is named `k`."""
    from ptodsl.diagnostics import CompileError, Diagnostics
    from ptodsl.driver import compile_spec

    def run(pto: str, spec: str = "schedule: {vec_tile: [1, 256]}\n") -> list[str]:
        diags = Diagnostics()
        try:
            compile_spec(write_spec("k", pto, "op: k\n" + spec), diags)
        except CompileError as exc:
            return [d.code for d in exc.diagnostics]
        return [d.code for d in diags.items]

    return run


def pytest_generate_tests(metafunc):
    """A ``spec_path`` argument runs the test once per library spec."""
    if "spec_path" in metafunc.fixturenames:
        metafunc.parametrize("spec_path", SPECS)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``wheel`` install packages from an index into a fresh venv (about a minute,
    and the network), and those marked ``full`` complete the cpu golden matrix (a C++ build per
    variant of every library spec, minutes): they run only when ``-m`` names them, as CI does
    after the suite. The pytest plugin's ``-cpu`` items of the library's own specs are left out:
    tests/backends/emit/test_cpu_golden.py runs the same cases and also compares them with the
    simulator."""
    expr = config.getoption("markexpr", default="") or ""
    specs = (Path(__file__).resolve().parents[1] / "specs").resolve()

    def kept_item(item) -> bool:
        if item.get_closest_marker("cpu") is not None and Path(str(item.path)).resolve().parent == specs:
            return False
        return all(item.get_closest_marker(m) is None for m in ("wheel", "full") if m not in expr)

    kept = [item for item in items if kept_item(item)]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


# `pytester` runs pytest inside a test: the ptodsl plugin's own tests (tests/test_pytest_plugin.py).
pytest_plugins = ["pytester"]
