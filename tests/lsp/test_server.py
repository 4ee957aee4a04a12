"""`ptodsl lsp` driven over stdio by pygls's own client, as an editor would drive it."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsprotocol import types as lsp  # noqa: E402
from pygls.lsp.client import BaseLanguageClient  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PTO = REPO / "specs" / "layernorm.pto"
YAML = REPO / "specs" / "layernorm.yaml"
TIMEOUT = 20


def _pos(text: str, needle: str, offset: int = 0) -> lsp.Position:
    """The position of the first ``needle`` in text, ``offset`` characters in."""
    i = text.index(needle) + offset
    return lsp.Position(line=text.count("\n", 0, i), character=i - text.rfind("\n", 0, i) - 1)


async def _session() -> dict:
    client = BaseLanguageClient("ptodsl-test", "1")
    published: dict[str, asyncio.Queue] = {}

    def queue(uri: str) -> asyncio.Queue:
        return published.setdefault(uri, asyncio.Queue())

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
        queue(params.uri).put_nowait(params.diagnostics)

    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    await client.start_io(sys.executable, "-m", "ptodsl", "lsp", env=env, cwd=str(REPO))
    got: dict = {}
    try:
        init = await client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(),
                                                                  root_uri=from_fs_path(str(REPO))))
        got["capabilities"] = init.capabilities
        client.initialized(lsp.InitializedParams())
        pto_uri, yaml_uri = from_fs_path(str(PTO)), from_fs_path(str(YAML))
        # A misspelt dtype in the buffer only: the file on disk is correct and stays untouched.
        text = PTO.read_text().replace("cast(x[r, :], f32)", "cast(x[r, :], f3)")
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=pto_uri, language_id="pto", version=1, text=text)))
        got["diagnostics"] = await asyncio.wait_for(queue(pto_uri).get(), TIMEOUT)
        got["hover_diag"] = await client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(pto_uri), _pos(text, "f3)")))
        got["hover_op"] = await client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(pto_uri), _pos(text, "rsqrt", 1)))
        got["definition"] = await client.text_document_definition_async(
            lsp.DefinitionParams(lsp.TextDocumentIdentifier(pto_uri), _pos(text, "d * d")))
        got["completion_pto"] = await client.text_document_completion_async(
            lsp.CompletionParams(lsp.TextDocumentIdentifier(pto_uri), _pos(text, "mean(xf")))
        # The fix, as an edit: the diagnostics go away, and the checker's types appear on hover.
        fixed = PTO.read_text()
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=2, uri=pto_uri),
            [lsp.TextDocumentContentChangeEvent_Type2(text=fixed)]))
        got["after_fix"] = await asyncio.wait_for(queue(pto_uri).get(), TIMEOUT)
        got["hover_type"] = await client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(pto_uri), _pos(fixed, "xf = ")))
        yaml_text = YAML.read_text() + "  \n"
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=yaml_uri, language_id="yaml", version=1, text=yaml_text)))
        got["completion_yaml"] = await client.text_document_completion_async(
            lsp.CompletionParams(lsp.TextDocumentIdentifier(yaml_uri), _pos(yaml_text, "vec_tile")))
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()
    return got


def test_language_server_over_stdio() -> None:
    on_disk = PTO.read_text()
    got = asyncio.run(asyncio.wait_for(_session(), 60))
    assert PTO.read_text() == on_disk
    assert got["capabilities"].hover_provider and got["capabilities"].definition_provider

    diags = got["diagnostics"]
    assert [d.code for d in diags] == ["E0300"]
    d = diags[0]
    line = on_disk.splitlines().index("        xf = cast(x[r, :], f32)")
    assert d.range.start == lsp.Position(line=line, character=27) and d.range.end == lsp.Position(line=line, character=29)
    assert "unknown name `f3`" in d.message and "help:" in d.message and d.source == "ptodsl"
    assert "E0300" in got["hover_diag"].contents.value  # the code's explanation

    assert "rsqrt" in got["hover_op"].contents.value and "pto-isa instruction" in got["hover_op"].contents.value
    assert got["definition"].range.start == lsp.Position(line=line + 1, character=8)  # `d = ...`: its first assignment
    labels = {i.label for i in got["completion_pto"].items}
    assert {"exp", "rsqrt", "loop", "view", "f32"} <= labels

    assert got["after_fix"] == []
    assert "`xf: f32[1, H]`" in got["hover_type"].contents.value

    keys = {i.label for i in got["completion_yaml"].items}
    assert {"vec_tile", "cube_tile", "loops", "pass_options"} <= keys and "op" not in keys
