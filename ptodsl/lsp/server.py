"""The language server: LSP messages in, :mod:`ptodsl.lsp.analysis` answers out.

Diagnostics are published on open and save at once, and while typing after a short pause, so that
a burst of keystrokes costs one compile. A compile that fails inside ptodsl is logged to the
client, never allowed to take the server down.
"""

from __future__ import annotations

import asyncio
import traceback

from lsprotocol import types as lsp
from pygls.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from .. import __version__
from ..diagnostics import Diagnostic, Severity
from . import analysis

DEBOUNCE_SECONDS = 0.3
_EXTENSIONS = (".pto", ".yaml", ".yml")

_SEVERITY = {Severity.ERROR: lsp.DiagnosticSeverity.Error, Severity.WARNING: lsp.DiagnosticSeverity.Warning,
             Severity.NOTE: lsp.DiagnosticSeverity.Information}


class PtoServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("ptodsl", __version__)
        self.published: dict[str, list[Diagnostic]] = {}  # path -> what the client shows for it
        self.pending: dict[str, asyncio.TimerHandle] = {}

    def sources(self) -> dict[str, str]:
        """The open .pto and YAML buffers, by normalised path."""
        out = {}
        for uri, doc in self.workspace.text_documents.items():
            path = to_fs_path(uri)
            if path and path.endswith(_EXTENSIONS):
                out[analysis.norm(path)] = doc.source
        return out

    def refresh(self, uri: str) -> None:
        self.pending.pop(uri, None)
        path = to_fs_path(uri)
        if not path or not path.endswith(_EXTENSIONS):
            return
        try:
            found = analysis.diagnose(analysis.norm(path), self.sources())
        except Exception as exc:  # noqa: BLE001 - a compiler bug must not end the editing session
            self.show_message_log(f"ptodsl: internal error while checking {path}: {exc!r}\n"
                                  + traceback.format_exc(), lsp.MessageType.Error)
            return
        for file, diags in found.items():
            self.published[file] = diags
            self.publish_diagnostics(from_fs_path(file), [to_lsp(d) for d in _unique(diags)])

    def later(self, uri: str) -> None:
        if (handle := self.pending.pop(uri, None)) is not None:
            handle.cancel()
        self.pending[uri] = self.loop.call_later(DEBOUNCE_SECONDS, self.refresh, uri)


def _unique(diags: list[Diagnostic]) -> list[Diagnostic]:
    """One entry per code, place and message: a mistake met once per dtype variant is shown once."""
    seen: set[tuple] = set()
    out = []
    for d in diags:
        key = (d.code, d.span, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def to_range(span) -> lsp.Range:
    if span is None:
        return lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
    return lsp.Range(start=lsp.Position(line=span.line - 1, character=span.col - 1),
                     end=lsp.Position(line=span.end_line - 1, character=span.end_col - 1))


def to_lsp(d: Diagnostic) -> lsp.Diagnostic:
    parts = [d.message + (f": {d.label}" if d.label else "")]
    parts += [f"note: {n}" for n in d.notes]
    if d.help:
        parts.append(f"help: {d.help}")
    related = [lsp.DiagnosticRelatedInformation(
                   location=lsp.Location(uri=from_fs_path(analysis.norm(lb.span.file)), range=to_range(lb.span)),
                   message=lb.message or "here")
               for lb in d.secondary]
    return lsp.Diagnostic(range=to_range(d.span), message="\n".join(parts), severity=_SEVERITY[d.severity],
                          code=d.code, source="ptodsl", related_information=related or None)


def _inside(rng: lsp.Range, pos: lsp.Position) -> bool:
    return (rng.start.line, rng.start.character) <= (pos.line, pos.character) <= (rng.end.line, rng.end.character)


def build_server() -> PtoServer:
    server = PtoServer()

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: PtoServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.refresh(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: PtoServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.later(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: PtoServer, params: lsp.DidSaveTextDocumentParams) -> None:
        ls.refresh(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: PtoServer, params: lsp.DidCloseTextDocumentParams) -> None:
        if (handle := ls.pending.pop(params.text_document.uri, None)) is not None:
            handle.cancel()

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: PtoServer, params: lsp.HoverParams) -> lsp.Hover | None:
        uri, pos = params.text_document.uri, params.position
        path = analysis.norm(to_fs_path(uri) or "")
        text = ls.workspace.get_text_document(uri).source
        parts: list[str] = []
        if path.endswith(".pto"):
            hit = analysis.word_at(text, pos.line, pos.character)
            if hit is not None and (doc := analysis.builtin_doc(hit[0])):
                parts.append(f"```\n{doc}\n```")
            elif hit is not None:
                parts.extend(analysis.types_at(path, ls.sources(), pos.line, pos.character))
        elif (doc := analysis.yaml_key_doc(text, pos.line, pos.character)) is not None:
            parts.append(doc)
        for d in _unique(ls.published.get(path, [])):
            if _inside(to_range(d.span), pos) and (why := analysis.explain(d.code)):
                parts.append(why)
        if not parts:
            return None
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n".join(parts)))

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: PtoServer, params: lsp.DefinitionParams) -> lsp.Location | None:
        uri, pos = params.text_document.uri, params.position
        path = analysis.norm(to_fs_path(uri) or "")
        if not path.endswith(".pto"):
            return None
        span = analysis.definition(path, ls.workspace.get_text_document(uri).source, pos.line, pos.character)
        return None if span is None else lsp.Location(uri=uri, range=to_range(span))

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=[":", " "]))
    def completion(ls: PtoServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        uri, pos = params.text_document.uri, params.position
        path = to_fs_path(uri) or ""
        items: list[lsp.CompletionItem] = []
        if path.endswith(".pto"):
            kinds = {"function": lsp.CompletionItemKind.Function, "type": lsp.CompletionItemKind.TypeParameter,
                     "keyword": lsp.CompletionItemKind.Keyword}
            items = [lsp.CompletionItem(label=label, kind=kinds[kind], detail=detail)
                     for label, kind, detail in analysis.pto_completions()]
        elif path.endswith((".yaml", ".yml")):
            text = ls.workspace.get_text_document(uri).source
            items = [lsp.CompletionItem(label=k.name, kind=lsp.CompletionItemKind.Property, detail=k.desc)
                     for k in analysis.yaml_completions(text, pos.line, pos.character)]
        return lsp.CompletionList(is_incomplete=False, items=items)

    return server
