"""Copies of library specs with their YAML edited, for tests that compare a spec with a variation."""

from __future__ import annotations

import shutil
from pathlib import Path

import ptodsl

SPECS = Path(__file__).resolve().parents[1] / "specs"


def edited_copy(name: str, folder: Path, edits: list[tuple[str, str]], cases: str = "") -> ptodsl.Operator:
    """Library spec ``name`` (its .pto and the references) copied into ``folder``, each ``old`` of
    ``edits`` in its YAML (which must hold it) replaced by ``new``, and ``cases`` (YAML lines of
    golden cases) added after its own; loaded."""
    folder.mkdir(parents=True, exist_ok=True)
    for file in (f"{name}.pto", "refs.py"):
        shutil.copy(SPECS / file, folder / file)
    text = (SPECS / f"{name}.yaml").read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    if cases:
        text = text.replace("bench:", f"{cases}bench:", 1)
    (folder / f"{name}.yaml").write_text(text)
    return ptodsl.load(str(folder / f"{name}.yaml"))
