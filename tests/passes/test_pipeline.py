"""The pipeline is one list of pass objects whose levels and required properties line up."""

from __future__ import annotations

import dataclasses

import pytest

from ptodsl import cli, driver
from ptodsl.passes import PIPELINE, check_pipeline


def test_the_pipeline_is_consistent_and_ends_synchronised():
    check_pipeline(PIPELINE)
    assert PIPELINE[0].takes == "tensor" and PIPELINE[-1].gives == "block"
    assert "synchronised" in PIPELINE[-1].establishes


def test_passes_out_of_order_are_refused():
    by_name = {p.name: p for p in PIPELINE}
    swapped = [by_name["loops"], by_name["unroll"], by_name["paths"], *PIPELINE[3:]]
    with pytest.raises(ValueError, match="`unroll` requires peeled"):
        check_pipeline(swapped)
    with pytest.raises(ValueError, match="takes tile IR"):
        check_pipeline([by_name["fuse"], *PIPELINE])
    with pytest.raises(ValueError, match="appears twice"):
        check_pipeline([*PIPELINE[:2], PIPELINE[1]])


def test_every_reader_uses_the_one_list(capsys):
    assert driver.pass_names() == ["tensorize"] + [p.name for p in PIPELINE]
    assert cli.main(["ir", "specs/add_one.yaml", "--after", "nosuchpass"]) == 1
    assert ", ".join(driver.pass_names()) in capsys.readouterr().err


def test_a_pass_given_the_wrong_level_is_an_internal_error(monkeypatch):
    from ptodsl.diagnostics import CompileError

    wrong = [dataclasses.replace(p, takes="tile") if p.name == "paths" else p for p in PIPELINE]
    monkeypatch.setattr(driver, "PASSES", wrong)
    with pytest.raises(CompileError) as info:
        driver.compile_spec("specs/add_one.yaml")
    assert [d.code for d in info.value.diagnostics] == ["E0990"]


def test_the_repro_of_a_broken_pass_stops_after_it(monkeypatch, capsys):
    """E0990's repro, `ptodsl ir SPEC --after PASS --no-verify`, prints the broken pass's IR: the
    passes after it never see that IR (they may not handle it, and would crash instead)."""
    ran: list[str] = []
    later = [dataclasses.replace(p, run=_recording(p, ran)) for p in driver.PASSES]
    monkeypatch.setattr(driver, "PASSES", later)
    driver.forget_compiled("specs/add_one.yaml")
    assert cli.main(["ir", "specs/add_one.yaml", "--after", "fuse", "--no-verify"]) == 0
    assert ran[-1] == "fuse" and "memplan" not in ran
    assert "level tile" in capsys.readouterr().out
    compiled = driver.compile_spec("specs/add_one.yaml", stop_after="partition")
    assert "partition" in compiled.after and "memplan" not in compiled.after


def _recording(p, ran: list[str]):
    def run(module, ctx):
        ran.append(p.name)
        return p.run(module, ctx)
    return run
