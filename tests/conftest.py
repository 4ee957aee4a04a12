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


def pytest_generate_tests(metafunc):
    """A ``spec_path`` argument runs the test once per library spec."""
    if "spec_path" in metafunc.fixturenames:
        metafunc.parametrize("spec_path", SPECS)
