"""``ptodsl gen``: an installable operator package from a folder of specs.

:func:`generate` compiles every spec, renders the package in memory (:mod:`.build`, with the
templates of :mod:`.render`) and swaps it in for OUT (:mod:`.writer`). The generated wrappers call
:mod:`.runtime` (and :mod:`.torch_support`, :mod:`.npu`) of the same ptodsl version, which the
package pins. Generation is imported lazily, so that a generated package's runtime does not load
the templates.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..diagnostics import Diagnostics
    from .build import Package

DEFAULT_PACKAGE = "ptodsl_ops"


def generate(specs: str, out: str | os.PathLike[str], name: str = DEFAULT_PACKAGE,
             diags: Diagnostics | None = None, on_spec: Callable[[str], None] | None = None) -> Package:
    """Generate package ``name`` from the specs under ``specs`` into the folder ``out``;
    ``on_spec(path)`` is called as each spec starts compiling (a progress line).

    Raises CompileError (any spec fails; ``out`` is untouched), OutputError (``out`` cannot be
    replaced) or ValueError (``name`` is not a valid package name).
    """
    from .build import build_package
    from .model import package_name_problem
    from .writer import write_tree

    problem = package_name_problem(name)
    if problem is not None:
        raise ValueError(f"`{name}` is not a valid package name: {problem}")
    package = build_package(specs, name, diags, on_spec=on_spec)
    write_tree(package.files, out)
    return package


def __getattr__(name: str) -> Any:
    if name in ("Package", "build_package"):
        from . import build

        return getattr(build, name)
    if name == "OutputError":
        from .writer import OutputError

        return OutputError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DEFAULT_PACKAGE", "OutputError", "Package", "build_package", "generate"]
