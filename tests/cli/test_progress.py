"""The progress line: on a terminal's stderr only, never in a file or pipe, and never with --quiet."""

from __future__ import annotations

import io

import pytest

from ptodsl import cli
from ptodsl.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_writes_to_a_terminal_and_erases_itself():
    tty = Terminal()
    with Progress(2, "check", stream=tty) as p:
        p.step("a.yaml")
        p.step("b.yaml")
    assert "[1/2] check a.yaml" in tty.getvalue() and "[2/2] check b.yaml" in tty.getvalue()
    assert tty.getvalue().endswith("\r\x1b[K")  # the line is gone when the work is done


@pytest.mark.parametrize("stream, quiet", [(io.StringIO(), False), (Terminal(), True)])
def test_progress_is_silent_off_a_terminal_or_when_quiet(stream, quiet):
    with Progress(3, "test", stream=stream, quiet=quiet) as p:
        for name in "abc":
            p.step(name)
            p.status(name + "[case]")
    assert stream.getvalue() == ""


@pytest.mark.parametrize("argv", [["check", "specs/add_one.yaml"], ["test", "specs/add_one.yaml", "-k", "tiny"],
                                  ["gen", "specs/add_one.yaml", "-o", "{tmp}/pkg"]])
def test_commands_show_progress_on_a_terminal_only(monkeypatch, capsys, tmp_path, argv):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert cli.main(argv) == 0
    assert "\r" not in capsys.readouterr().err  # stderr is captured: not a terminal
    for quiet in (False, True):
        tty = Terminal()
        monkeypatch.setattr("sys.stderr", tty)
        assert cli.main(argv + (["--quiet"] if quiet else [])) == 0
        shown = f"[1/1] {argv[0]} specs/add_one.yaml" in tty.getvalue()
        assert shown != quiet, tty.getvalue()
