"""The pytest plugin (ptodsl.testing) as a user meets it: in a project of its own, run by pytester."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import ptodsl.api

# Imported before any in-process pytest run: pytester restores sys.modules after each, and a module
# first imported inside one would be imported afresh later while its package still holds the old
# one, splitting the emitters' registries (tests after this module in the same process saw none).
import ptodsl.backends.cpp.emit  # noqa: F401
import ptodsl.backends.cpp.run  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]

BROKEN_PTO = "kernel broken(x: f32[N], y: out f32[N]):\n    y = x + 1.0\n"
BROKEN_YAML = "op: broken\nreference: refs.py:add_one\ntests:\n  - {shapes: {N: 8}}\n  - {shapes: {N: 9}}\n"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project folder holding two library specs (and softmax's backward spec, which softmax names)
    and one spec that does not compile."""
    for name in ("add_one", "softmax", "softmax_bwd"):
        for suffix in (".pto", ".yaml"):
            shutil.copy(ROOT / "specs" / f"{name}{suffix}", pytester.path)
    shutil.copy(ROOT / "specs" / "refs.py", pytester.path)
    (pytester.path / "broken.pto").write_text(BROKEN_PTO)
    (pytester.path / "broken.yaml").write_text(BROKEN_YAML)
    return pytester


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The spec paths compiled while the test runs (the plugin compiles through ptodsl.load)."""
    calls: list[str] = []
    real = ptodsl.api.compile_spec

    def counting(path, *args, **kwargs):
        calls.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(ptodsl.api, "compile_spec", counting)
    return calls


def test_collecting_compiles_nothing(project: pytest.Pytester, compiled: list[str]):
    result = project.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*add_one.yaml::add_one[[]tails[]]", "*add_one.yaml::add_one[[]tails-cpu[]]",
                                 "*broken.yaml::broken[[]N8[]]", "*softmax.yaml::softmax[[]*", "22 tests collected*"])
    assert compiled == []


def test_k_compiles_only_the_spec_it_selects(project: pytest.Pytester, compiled: list[str]):
    result = project.runpytest_inprocess("-k", "add_one and not cpu", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    assert compiled == ["add_one.yaml"]  # once for its three cases; the others never compile


def test_a_spec_that_does_not_compile_fails_each_case(project: pytest.Pytester, compiled: list[str]):
    result = project.runpytest_inprocess("-k", "broken and not cpu", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*error[[]E0400[]]*"])
    assert compiled == ["broken.yaml"]  # the error is kept for the second case, not compiled again


def test_markers_are_registered_by_the_plugin(pytester: pytest.Pytester):
    pytester.makepyfile(test_marks="""
        import pytest

        @pytest.mark.cpu
        def test_cpu():
            pass

        @pytest.mark.slow
        def test_slow():
            pass
    """)
    result = pytester.runpytest_inprocess("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result = pytester.runpytest_inprocess("--markers", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["@pytest.mark.cpu: *", "@pytest.mark.slow: *"])
