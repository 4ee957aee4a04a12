"""Packaging hygiene of ptodsl and of the packages ``ptodsl gen`` writes: the licence (an SPDX
expression and its text), PEP 561 markers, root-anchored sdist contents and torch >= 2.4 ranges."""

from __future__ import annotations

import re
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from ptodsl.gen import build_package

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def torch_requirements(project: dict) -> list[str]:
    reqs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    return [r for r in reqs if re.match(r"torch\b", r)]


def check_torch_ranges(project: dict) -> None:
    """Every torch requirement allows any torch from 2.4 on (torch.library.custom_op), and none pins one."""
    reqs = torch_requirements(project)
    assert reqs, "a torch extra"
    for r in reqs:
        assert "==" not in r and r.replace(" ", "").startswith("torch>=2.4"), r


def test_licence_is_an_spdx_expression_with_its_text():
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text.splitlines()[1] and "Version 2.0, January 2004" in text
    # PEP 639 metadata needs hatchling 1.27, wherever the project is built
    assert "hatchling>=1.27" in PYPROJECT["build-system"]["requires"]
    assert "hatchling>=1.27" in project["optional-dependencies"]["dev"]


def test_typed_and_anchored():
    assert (ROOT / "ptodsl" / "py.typed").is_file()
    includes = PYPROJECT["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    assert all(i.startswith("/") for i in includes), includes
    assert {"/ptodsl", "/LICENSE", "/grammar"} <= set(includes)


def test_torch_is_a_range_and_ci_installs_the_local_wheel():
    check_torch_ranges(PYPROJECT["project"])
    # CI still installs the CPU build it holds, by exact version, before the project
    assert re.search(r"pip install [^\n]*'torch==2\.13\.0'", (ROOT / ".ci" / "run").read_text())


def test_generated_package_hygiene():
    files = build_package(str(ROOT / "specs" / "add_one.yaml"), "hyg_ops").files
    project = tomllib.loads(files["pyproject.toml"].decode())
    check_torch_ranges(project["project"])
    assert project["project"]["license"] == "Apache-2.0" and project["project"]["license-files"] == ["LICENSE"]
    assert files["LICENSE"] == (ROOT / "LICENSE").read_bytes()
    assert "hyg_ops/py.typed" in files
    includes = project["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    assert includes and all(i.startswith("/") for i in includes), includes
    assert "hatchling>=1.27" in project["build-system"]["requires"]


def test_built_distributions(tmp_path: Path):
    """The wheel and sdist hatchling builds from this tree: licence metadata, markers, nothing stray."""
    hatch_wheel = pytest.importorskip("hatchling.builders.wheel")
    hatch_sdist = pytest.importorskip("hatchling.builders.sdist")
    wheel = Path(next(iter(hatch_wheel.WheelBuilder(str(ROOT)).build(directory=str(tmp_path), versions=["standard"]))))
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert {"ptodsl/py.typed", "ptodsl/_license/LICENSE", "ptodsl/_grammar/pto.lark"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    sdist = Path(next(iter(hatch_sdist.SdistBuilder(str(ROOT)).build(directory=str(tmp_path), versions=["standard"]))))
    with tarfile.open(sdist) as t:
        tops = {m.name.split("/", 2)[1] for m in t.getmembers() if m.name.count("/") >= 1}
    assert tops <= {"ptodsl", "grammar", "editors", "docs", "README.md", "SECURITY.md", "LICENSE", "pyproject.toml", "PKG-INFO",
                    ".gitignore"}, tops
