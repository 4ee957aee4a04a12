"""Fixtures of the generator tests: the package of the repository's specs, built once per session.

The built package is written to a temporary folder and imported from there (as ``ptodsl_ops``),
so the wrapper, torch and NPU tests exercise exactly the generated code.
"""

from __future__ import annotations

import importlib
import os
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
    """The package of the library's specs, in memory. The folder is named as the other tests name
    their specs (relative to the working directory: `specs/NAME.yaml` from the repository), so a
    worker compiles the library once for all of them (``driver.compile_spec`` keeps what it
    compiled); test_gen_package checks that the output does not depend on how the folder is named."""
    return build_package(os.path.relpath(SPECS), PACKAGE)


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

