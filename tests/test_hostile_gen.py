"""`ptodsl gen` killed at any moment: OUT is always the old tree or the new one, or comes back on
the next run, and the folders of killed runs are cleaned."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ptodsl import staging
from ptodsl.gen import writer
from ptodsl.gen.kernels import STAMP

DEAD_PID = 4_000_000  # above Linux's pid_max default (4194304 is the hard limit; nothing runs there in tests)


def tree(version: str, files: int = 5) -> dict[str, bytes]:
    out = {"pyproject.toml": f"# {STAMP} {version}\n".encode()}
    out |= {f"pkg/m{i}.py": f"VERSION = {version!r}\n".encode() for i in range(files)}
    return out


def read(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def test_a_replaced_tree_leaves_no_sibling_behind(tmp_path: Path):
    out = tmp_path / "out"
    writer.write_tree(tree("1"), out)
    writer.write_tree(tree("2"), out)
    assert read(out) == tree("2") and siblings(out) == []


def test_the_fallback_swap_replaces_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(writer, "_exchange", lambda a, b: False)
    out = tmp_path / "out"
    writer.write_tree(tree("1"), out)
    writer.write_tree(tree("2"), out)
    assert read(out) == tree("2") and siblings(out) == []


def test_a_run_killed_between_the_renames_is_recovered(tmp_path: Path):
    out = tmp_path / "out"
    writer.write_tree(tree("1"), out)
    # What the two-rename swap leaves when killed in between: no OUT, the old tree aside, and the
    # finished new tree in its staging folder.
    aside = tmp_path / f".out.old-{DEAD_PID}-abc"
    aside.mkdir()
    os.rename(out, aside / "out")
    staging = tmp_path / f".out.new-{DEAD_PID}-def"
    staging.mkdir()
    (staging / "half.py").write_text("partial\n")
    writer.recover(out)
    assert read(out) == tree("1") and siblings(out) == []


def test_stale_staging_of_dead_runs_is_cleaned_but_not_that_of_live_ones(tmp_path: Path):
    """The rules of ptodsl.staging (shared with the cpu build's cache), beside OUT."""
    out = tmp_path / "out"
    other = "0123abcd" if staging.host() != "0123abcd" else "fedc0987"
    dead = [tmp_path / f".out.new-{DEAD_PID}-x", tmp_path / f".out.new-{DEAD_PID}@{staging.host()}-x"]
    live = [tmp_path / f".out.new-{os.getppid()}-y", tmp_path / f".out.new-{os.getppid()}@{staging.host()}-y",
            tmp_path / f".out.new-{DEAD_PID}@{other}-z"]  # another machine's run: judged by age only
    for folder in dead + live:
        folder.mkdir()
    writer.write_tree(tree("1"), out)
    assert siblings(out) == sorted(p.name for p in live)


KILLED_WRITER = """
import sys
from ptodsl import staging
from ptodsl.gen import writer
{patch}
files = {{"pyproject.toml": sys.argv[2].encode()}}
files |= {{f"pkg/m{{i}}.py": (sys.argv[2] * 2000).encode() for i in range(150)}}
print("ready", flush=True)
writer.write_tree(files, sys.argv[1])
"""


@pytest.mark.slow
@pytest.mark.parametrize("exchange", [True, False])
def test_gen_killed_at_random_moments_never_loses_out(tmp_path: Path, exchange: bool):
    out = tmp_path / "out"
    patch = "" if exchange else "writer._exchange = lambda a, b: False"
    script = tmp_path / "w.py"
    script.write_text(KILLED_WRITER.format(patch=patch))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    rng = random.Random(5)
    versions = []
    for run in range(3):
        stamp = f"# {STAMP} v{run}\n"
        proc = subprocess.Popen([sys.executable, str(script), str(out), stamp], env=env, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        proc.stdout.readline()
        time.sleep(rng.uniform(0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        writer.recover(out)  # what the next run does first
        if versions or out.exists():
            got = read(out)
            stamps = {got["pyproject.toml"].decode()}
            assert stamps <= {f"# {STAMP} v{k}\n" for k in range(run + 1)}
            version = got["pyproject.toml"].decode()
            assert len(got) == 151 and all(v == (version * 2000).encode() for k, v in got.items() if k != "pyproject.toml")
            versions.append(version)
        assert [s for s in siblings(out)] == []
