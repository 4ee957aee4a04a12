"""Fixtures of the generator tests: the package of the repository's specs, built once per session.

The built package is written to a temporary folder and imported from there (as ``ptodsl_ops``),
so the wrapper, torch and NPU tests exercise exactly the generated code.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ptodsl.gen import Package, build_package
from ptodsl.gen.writer import write_tree

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
PACKAGE = "ptodsl_ops"


@pytest.fixture(scope="session")
def built() -> Package:
    """The package of the library's specs, in memory (the path is absolute on purpose: the output
    must not depend on how the specs folder was named)."""
    return build_package(str(SPECS), PACKAGE)


@pytest.fixture(scope="session")
def tree(built: Package, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gen") / "out"
    write_tree(built.files, out)
    return out


@pytest.fixture(scope="session")
def pkg(tree: Path) -> ModuleType:
    """The generated package, imported from its folder (with torch: its custom ops registered)."""
    sys.path.insert(0, str(tree))
    try:
        return importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(tree))

