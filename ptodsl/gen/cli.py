"""The ``ptodsl gen SPECS -o OUT [--name PKG]`` sub-command.

Kept here so that ``ptodsl/cli.py`` only registers it. Exit 0 when OUT holds the new package;
1 on a spec error (with every diagnostic; OUT untouched) or when OUT cannot be replaced.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from .model import package_name_problem

EXIT_OK, EXIT_USER = 0, 1


def package_name(text: str) -> str:
    """argparse type of ``--name``: a Python identifier that is no keyword."""
    problem = package_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"`{text}` is not a valid package name: {problem}")
    return text


def add_parser(sub: Any, common: argparse.ArgumentParser, fn: Callable[..., int]) -> argparse.ArgumentParser:
    """Register ``gen`` on the ``ptodsl`` sub-parsers; ``fn`` is the command function."""
    from . import DEFAULT_PACKAGE

    s = sub.add_parser("gen", parents=[common], help="write an installable operator package from specs")
    s.add_argument("specs", metavar="SPECS", help="a folder of specs (or one spec file)")
    s.add_argument("-o", "--output", required=True, metavar="OUT", help="the package folder to (re)write")
    s.add_argument("--name", type=package_name, default=DEFAULT_PACKAGE, metavar="PKG",
                   help=f"the Python package name (default: {DEFAULT_PACKAGE})")
    s.set_defaults(fn=fn)
    return s


def run(args: argparse.Namespace, out: Any) -> int:
    """Generate; ``out`` is the CLI's output (``ptodsl.cli._Out``: diagnostics, errors, result fields)."""
    from ..diagnostics import CompileError, Diagnostics
    from ..golden import spec_paths
    from . import OutputError, generate

    if not os.path.exists(args.specs):
        d = Diagnostics()
        d.error("E0203", f"no such file or directory: `{args.specs}`", None,
                help="pass a folder of specs (NAME.yaml + NAME.pto) or a spec file")
        out.diagnostics(d.items)
        return EXIT_USER
    diags = Diagnostics()
    out.result(package=args.name, output=args.output, generated=False)
    try:
        with out.progress(len(spec_paths(args.specs)), "gen") as progress:
            package = generate(args.specs, args.output, args.name, diags, on_spec=progress.step)
    except CompileError:
        out.diagnostics(diags.items)
        print(f"not generated: `{args.output}` is left as it was", file=sys.stderr)
        return EXIT_USER
    except OutputError as exc:
        out.diagnostics(diags.items)
        out.error(str(exc), "choose a new or empty folder for `-o`, or one `ptodsl gen` wrote", code="E0251")
        return EXIT_USER
    out.diagnostics(diags.items)
    n = len(package.ops)
    out.result(generated=True, ops=[op.name for op in package.ops], variants=package.variants,
               files=len(package.files))
    if not out.json:
        print(f"generated {package.name} in {args.output}: {n} op{'s' if n != 1 else ''}, {package.variants} "
              f"kernel variants, {len(package.files)} files", file=sys.stderr)
    return EXIT_OK


__all__ = ["add_parser", "package_name", "run"]
