"""Fuzzing the whole compile path with broken inputs: only diagnostics may come out.

Every golden fixture and every spec of specs/ is first compiled as is, from the same scratch
folder the mutants use, and must do what it is there for: a spec compiles with no diagnostic at
all, a golden fixture reports exactly the codes of its expected.txt (failing when one is an
error). Then ~300 random mutations of them (tokens deleted or duplicated, lines swapped or
re-indented, numbers changed, YAML broken) must each either compile or raise CompileError whose
diagnostics render, within a time limit; any other exception, or a hang, is a crash and the test
prints a reproducer.
"""

from __future__ import annotations

import random
import re
import shutil
import signal
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.diagnostics.render import render_all
from ptodsl.driver import compile_spec

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
SEED = 20260611
MUTATIONS = 300
CASE_SECONDS = 60  # a hang is a finding too; a normal case takes well under a second

TOKEN = re.compile(r"\w+|[^\w\s]")
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
NUMBERS = ["0", "-1", "1", "2", "3", "7", "8", "16", "33", "100", "4096", "100000", "2147483647"]
JUNK = [":", "[", "]", "{", "}", "-", ",", "'", '"', "#", "&a", "*a", "!!str", "\t", "    ", "if", "for", "(", ")"]


CODE = re.compile(r"^(?:error|warning|note)\[([EWN]\d{4})\]", re.M)


@dataclass(frozen=True)
class Case:
    name: str
    pto: str
    yaml: str
    home: Path  # the folder it comes from: its neighbours (a backward spec, refs.py) are staged with it


def _sources() -> list[Case]:
    cases = []
    for folder in sorted(p for p in GOLDEN.iterdir() if p.is_dir()):
        cases.append(Case(folder.name, (folder / f"{folder.name}.pto").read_text("utf-8"),
                          (folder / f"{folder.name}.yaml").read_text("utf-8"), folder))
    for spec in sorted((REPO / "specs").glob("*.yaml")):
        pto = spec.with_suffix(".pto")
        if pto.exists():
            cases.append(Case(spec.stem, pto.read_text("utf-8"), spec.read_text("utf-8"), spec.parent))
    return cases


SOURCES = _sources()


# ------------------------------------------------------------------ mutations


def _tokens(rng: random.Random, text: str) -> str:
    toks = list(TOKEN.finditer(text))
    if not toks:
        return text
    t = rng.choice(toks)
    action = rng.randrange(3)
    if action == 0:  # delete
        return text[:t.start()] + text[t.end():]
    if action == 1:  # duplicate
        return text[:t.end()] + " " + t.group() + text[t.end():]
    other = rng.choice(toks).group()  # replace with another token of the file
    return text[:t.start()] + other + text[t.end():]


def _lines(rng: random.Random, text: str) -> str:
    lines = text.splitlines()
    if len(lines) < 2:
        return text
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    action = rng.randrange(4)
    if action == 0:
        lines[i], lines[j] = lines[j], lines[i]
    elif action == 1:
        del lines[i]
    elif action == 2:
        lines.insert(j, lines[i])
    else:
        lines[i] = " " * rng.choice([0, 2, 4, 8, 12]) + lines[i].lstrip()
    return "\n".join(lines) + "\n"


def _numbers(rng: random.Random, text: str) -> str:
    nums = list(NUMBER.finditer(text))
    if not nums:
        return text
    n = rng.choice(nums)
    return text[:n.start()] + rng.choice(NUMBERS) + text[n.end():]


def _junk(rng: random.Random, text: str) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + rng.choice(JUNK) + text[at:]


def mutate(rng: random.Random, case: Case) -> Case:
    pto, yml = case.pto, case.yaml
    for _ in range(rng.randrange(1, 4)):
        fn = rng.choice([_tokens, _lines, _numbers, _numbers, _junk])
        if rng.random() < 0.5:
            pto = fn(rng, pto)
        else:
            yml = fn(rng, yml)
    return Case(case.name, pto, yml, case.home)


def _mutants() -> list[tuple[str, Case]]:
    rng = random.Random(SEED)
    out = []
    for i in range(MUTATIONS):
        base = rng.choice(SOURCES)
        out.append((f"m{i:03d}-{base.name}", mutate(rng, base)))
    return out


# ------------------------------------------------------------------ running


def _stage(case: Case, folder: Path) -> Path:
    """Write ``case`` into its own subfolder of ``folder`` beside copies of its home's other files,
    so a forward spec finds its backward spec as it does in place; the copies are made once, and
    ``_unstage`` puts a mutant's two files back so the next case's neighbours are the originals."""
    home = folder / re.sub(r"\W", "_", str(case.home.relative_to(REPO)))
    if not home.is_dir():
        shutil.copytree(case.home, home)
    name = re.sub(r"\W", "_", case.name)
    (home / f"{name}.pto").write_text(case.pto, encoding="utf-8")
    yml = case.yaml
    if "source:" not in yml:
        yml = f"source: {name}.pto\n" + yml
    path = home / f"{name}.yaml"
    path.write_text(yml, encoding="utf-8")
    return path


def _unstage(path: Path, case: Case) -> None:
    for staged in (path, path.with_suffix(".pto")):
        original = case.home / staged.name
        if original.is_file():
            shutil.copyfile(original, staged)
        else:
            staged.unlink(missing_ok=True)


def compile_outcome(case: Case, folder: Path) -> tuple[bool, str]:
    """Compile one case staged in ``folder``: whether it compiled, and its rendered diagnostics."""
    path = _stage(case, folder)
    diags = Diagnostics()
    try:
        compile_spec(str(path), diags)
    except CompileError as exc:
        assert any(d.is_error for d in exc.diagnostics)
        return False, render_all(exc.diagnostics, color=False)
    finally:
        _unstage(path, case)
    return True, render_all(diags, color=False)


def compile_case(case: Case, folder: Path) -> str | None:
    """Compile one case staged in ``folder``; None when it compiled, else its rendered errors."""
    ok, text = compile_outcome(case, folder)
    return None if ok else text


class Hang(Exception):
    pass


@contextmanager
def time_limit(seconds: int):
    """Turn a case that runs too long into an exception (where the platform has SIGALRM)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum, frame):
        raise Hang(f"compiling took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _crash_report(name: str, case: Case, exc: BaseException) -> str:
    tb = "".join(traceback.format_exception(exc)[-4:])
    return f"--- {name}: {type(exc).__name__}: {exc}\n.pto:\n{case.pto}\n.yaml:\n{case.yaml}\n{tb}"


@pytest.mark.parametrize("case", SOURCES, ids=[c.name for c in SOURCES])
def test_fixtures_compile_or_fail_as_they_should(case: Case, tmp_path: Path) -> None:
    """The unmutated sources, staged as the mutants are: a spec of specs/ compiles silently; a
    golden fixture reports the codes of its expected.txt, in order, and fails exactly when one of
    them is an error. (A staging that lost a spec's neighbours, say, fails here, not silently.)"""
    with time_limit(CASE_SECONDS):
        ok, text = compile_outcome(case, tmp_path)
    if case.home.parent == GOLDEN:
        expected = CODE.findall((case.home / "expected.txt").read_text("utf-8"))
        assert expected and expected[0] == case.name.split("_", 1)[0].upper()
        assert CODE.findall(text) == expected, text
        assert ok == (not any(c.startswith("E") for c in expected)), text
    else:
        assert ok and text == "", text


def test_the_sources_are_what_the_mutants_start_from() -> None:
    """Both kinds are there, in numbers: a glob that found nothing would make the test above empty."""
    golden = [c for c in SOURCES if c.home.parent == GOLDEN]
    specs = [c for c in SOURCES if c.home == REPO / "specs"]
    assert len(golden) == sum(1 for p in GOLDEN.iterdir() if p.is_dir()) >= 20
    assert len(specs) == len(list((REPO / "specs").glob("*.pto"))) >= 30
    assert len(golden) + len(specs) == len(SOURCES)


@pytest.mark.slow  # about 13 s; the hostile suite's other tests run every day
def test_mutations_only_produce_diagnostics(tmp_path: Path) -> None:
    crashes = []
    failed = 0
    for name, case in _mutants():
        try:
            with time_limit(CASE_SECONDS):
                failed += compile_case(case, tmp_path) is not None
        except Exception as exc:  # noqa: BLE001 - any exception but CompileError is the finding
            crashes.append(_crash_report(name, case, exc))
    assert not crashes, f"{len(crashes)} crashes:\n" + "\n".join(crashes[:5])
    # The mutations must reach the error paths, and not only the parser's.
    assert failed > MUTATIONS // 3
