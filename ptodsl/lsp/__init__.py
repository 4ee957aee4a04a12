"""``ptodsl lsp``: a language server for .pto files and spec YAML over stdin/stdout.

Diagnostics are those of ``ptodsl check`` on the editor's unsaved text; hover shows builtins' docs,
the checker's types of names and the explanation of a diagnostic's code; go-to-definition finds
parameters, locals and loop indices; completion offers builtins and the spec's keys. The server
needs pygls (``pip install 'ptodsl[lsp]'``), imported only when the command runs.
"""

from __future__ import annotations

from typing import Any

E_NO_PYGLS = "E0254"


def serve(out: Any) -> int:
    """Run the server until the client exits; ``out`` reports a missing pygls as a diagnostic."""
    try:
        from .server import build_server
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        out.error("`ptodsl lsp` needs the pygls package, which is not installed",
                  "install it with `pip install 'ptodsl[lsp]'` (pygls 1.3 or later)", code=E_NO_PYGLS)
        return 1
    build_server().start_io()
    return 0
