"""A spec compiled again in one process is copied from the first compile, and only when nothing it
depends on changed: its files, the arguments, the pass list and the pass defaults."""

from __future__ import annotations

import os

import pytest

from ptodsl import driver
from ptodsl.diagnostics import Diagnostics
from ptodsl.schedule import PASS_OPTION_DEFAULTS

PTO = "kernel k(x: f32[M, N], y: out f32[M, N]):\n    y[:] = x * {factor}\n"
YAML = "op: k\nsymbols: {{M: 8}}\nschedule: {{vec_tile: [8, 256]}}\n{extra}"


def _scale(c: driver.Compiled) -> str:
    return str(c.stages["tensor"])


def test_the_same_files_are_copied_and_an_edit_compiles_again(write_spec):
    path = write_spec("k", PTO.format(factor="2.0"), YAML.format(extra=""))
    first = driver.compile_spec(path)
    again = driver.compile_spec(path)
    assert _scale(again) == _scale(first) and "2.0" in _scale(again)
    assert again.stages["block"] is not first.stages["block"]  # a copy: changing it changes neither
    write_spec("k", PTO.format(factor="3.0"), YAML.format(extra=""))  # the .pto the YAML names
    assert "3.0" in _scale(driver.compile_spec(path))
    write_spec("k", PTO.format(factor="3.0"), YAML.format(extra="doc: edited\n"))  # the YAML
    assert driver.compile_spec(path).spec.doc == "edited"


def test_warnings_are_given_again_to_each_caller():
    path = "tests/golden_codes/fixtures/w0330_unused_dtype_var/w0330_unused_dtype_var.yaml"
    first, second = Diagnostics(), Diagnostics()
    driver.compile_spec(path, first)
    driver.compile_spec(path, second)
    assert [d.code for d in first.items] == [d.code for d in second.items] == ["W0330"]
    assert second.items[0] == first.items[0]


def test_other_pass_defaults_compile_again(write_spec, monkeypatch):
    path = write_spec("k", PTO.format(factor="2.0"), YAML.format(extra=""))
    doubled = driver.compile_spec(path)
    monkeypatch.setitem(PASS_OPTION_DEFAULTS, "double_buffer", 1 - PASS_OPTION_DEFAULTS["double_buffer"])
    single = driver.compile_spec(path)
    assert str(single.stages["block"]) != str(doubled.stages["block"])


@pytest.fixture
def private_memo(monkeypatch):
    """A memo of the test's own: the worker's (the library it compiled) stays as it was."""
    monkeypatch.setattr(driver, "_MEMO", {})
    monkeypatch.setattr(driver, "_MEMO_RANK", {})
    monkeypatch.setattr(driver, "_MEMO_CLOCK", [0.0])


def test_forget_compiled_compiles_afresh(write_spec, private_memo):
    path = write_spec("k", PTO.format(factor="2.0"), YAML.format(extra=""))
    other = "tests/golden_codes/fixtures/w0330_unused_dtype_var/w0330_unused_dtype_var.yaml"
    first, kept = driver.compile_spec(path), driver.compile_spec(other, Diagnostics())
    driver.forget_compiled(path)  # that spec alone
    assert len(driver._MEMO) == 1 and next(iter(driver._MEMO))[0] == other
    again = driver.compile_spec(path)
    assert again.after["tensorize"] is not first.after["tensorize"]
    assert str(again.stages["block"]) == str(first.stages["block"])
    driver.forget_compiled()  # every spec
    assert not driver._MEMO and not driver._MEMO_RANK and kept


def test_a_spec_slow_to_compile_outlives_many_quick_ones(tmp_path, monkeypatch, private_memo):
    real, calls, now = driver._compile, [], [0.0]

    def timed(path, *args):  # on a clock of its own: 1 s for the slow spec, 10 ms for the others
        calls.append(path)
        now[0] += 1.0 if "/slow/" in path else 0.01
        return real(path, *args)

    def spec(folder: str, factor: str) -> str:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "k.pto").write_text(PTO.format(factor=factor))
        (tmp_path / folder / "k.yaml").write_text(YAML.format(extra=""))
        return os.fspath(tmp_path / folder / "k.yaml")

    monkeypatch.setattr(driver, "_compile", timed)
    monkeypatch.setattr(driver, "_clock", lambda: now[0])
    monkeypatch.setattr(driver, "_MEMO_LIMIT", 3)
    slow = spec("slow", "2.0")
    driver.compile_spec(slow)
    quick = [spec(f"q{i}", f"{i}.5") for i in range(6)]
    for path in quick:
        driver.compile_spec(path)
    assert len(driver._MEMO) == 3
    calls.clear()
    driver.compile_spec(slow)  # kept: dropping it costs more than dropping any of the quick ones
    driver.compile_spec(quick[0])  # the oldest quick one went
    assert calls == [quick[0]]
