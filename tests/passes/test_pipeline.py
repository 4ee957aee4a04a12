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
