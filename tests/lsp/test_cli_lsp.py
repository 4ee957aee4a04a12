"""`ptodsl lsp` without pygls installed: a diagnostic, not a traceback."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ptodsl import cli

GOLDEN = Path(__file__).parent / "golden"


def test_lsp_without_pygls_says_how_to_install_it(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("pygls", "lsprotocol"):
        monkeypatch.setitem(sys.modules, name, None)  # None: an import of it fails
    monkeypatch.delitem(sys.modules, "ptodsl.lsp.server", raising=False)
    code = cli.main(["lsp", "--color", "never"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    path = GOLDEN / "e0254_lsp_without_pygls.expected"
    if os.environ.get("PTODSL_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(err)
    assert err == path.read_text()
