"""The ``ptodsl port FILE.py [--function NAME] -o DIR [--partial]`` sub-command.

Exit 0 when every kernel translated and its files were written; 1 when a kernel did not
translate (nothing written, or with ``--partial`` the files with ``# TODO`` lines) or the
output could not be written.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

EXIT_OK, EXIT_USER = 0, 1


def add_parser(sub: Any, common: argparse.ArgumentParser, fn: Callable[..., int]) -> argparse.ArgumentParser:
    s = sub.add_parser("port", parents=[common], help="translate PyPTO kernels (@pypto.frontend.jit) into specs")
    s.add_argument("source", metavar="FILE.py", help="the PyPTO source; read, never imported or run")
    s.add_argument("-o", "--output", required=True, metavar="DIR", help="the folder for NAME.pto, NAME.yaml, ...")
    s.add_argument("--function", default=None, metavar="NAME", help="only this jit function")
    s.add_argument("--partial", action="store_true",
                   help="also write kernels that did not translate whole, with a `# TODO` at each line left")
    s.set_defaults(fn=fn)
    return s


def run(args: argparse.Namespace, out: Any) -> int:
    from ..diagnostics import Diagnostics
    from . import port_source, read_source
    from .emit import OutputError, write_all

    diags = Diagnostics()
    out.result(source=args.source, output=args.output, written=[], kernels=[])
    text = read_source(args.source, diags)
    if text is None:
        out.diagnostics(diags.items)
        return EXIT_USER
    result = port_source(text, args.source, args.function)
    out.diagnostics(result.diags.items)
    out.result(kernels=[{"name": k.name, "function": k.py_name, "line": k.line, "untranslated": k.errors}
                        for k in result.kernels])
    if not result.kernels or (not result.ok and not args.partial):
        out.say(f"not written: `{args.output}` is left as it was")
        return EXIT_USER
    try:
        written = write_all(result, args.output, args.partial)
    except OutputError as e:
        d = Diagnostics()
        d.error("E1009", str(e), None, help="choose a folder you may write")
        out.diagnostics(d.items)
        return EXIT_USER
    out.result(written=written)
    todo = sum(k.errors for k in result.kernels)
    out.say(f"ported {len(result.kernels)} kernel{'s' if len(result.kernels) != 1 else ''} into {args.output}"
            + (f" ({todo} line{'s' if todo != 1 else ''} left as `# TODO`)" if todo else ""))
    return EXIT_OK if result.ok else EXIT_USER
