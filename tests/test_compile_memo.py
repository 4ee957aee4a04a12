"""A spec compiled again in one process is copied from the first compile, and only when nothing it
depends on changed: its files, the arguments, the pass list and the pass defaults."""

from __future__ import annotations

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


def test_forget_compiled_compiles_afresh(write_spec):
    path = write_spec("k", PTO.format(factor="2.0"), YAML.format(extra=""))
    first = driver.compile_spec(path)
    driver.forget_compiled()
    again = driver.compile_spec(path)
    assert again.after["tensorize"] is not first.after["tensorize"]
    assert str(again.stages["block"]) == str(first.stages["block"])
