"""The runtime a generated package carries: :mod:`ptodsl.runtime` and every module it imports,
copied byte for byte into ``<package>/_ptodsl/``.

Why a copy rather than a ``ptodsl-runtime`` distribution: the runtime reads exactly the files
this compiler wrote (the op.json format, the IR's text, the C++ header subset the kernels were
emitted against), so the package pins it by carrying it; a package then installs from its own
wheel with numpy, ml_dtypes and PyYAML, from any index, and two packages made by different
ptodsl versions cannot disturb each other. The cost is about 0.5 MB per package.

The closure is found, not listed: the runtime's modules and, transitively, every module of
``ptodsl`` they import (relative imports, also those inside functions). Package ``__init__``
files that would import the compiler are replaced by empty ones; a module of the closure reaching
the front end, the checker, the passes or the emitters is an error here and in the tests.
"""

from __future__ import annotations

import ast
from importlib import resources
from pathlib import Path

from .. import __version__
from .kernels import GENERATED

# Packages whose own __init__ imports the compiler; inside the copy they are plain folders.
STUB_PACKAGES = ("", "backends", "backends/cpp", "cost")
# Data the copied modules read at run time, by folder and file suffix.
DATA = (("diagnostics/codes", ".yaml"), ("targets", ".yaml"), ("backends/cpp/include", ".hpp"))
# What the runtime must never reach: the compiler proper.
FORBIDDEN = ("frontend", "check", "passes", "driver", "api", "gen", "golden", "testing", "fuzz", "lsp")


class VendorError(RuntimeError):
    """The runtime's closure reaches the compiler (a bug of ptodsl, not of a spec)."""


def _root() -> Path:
    return Path(str(resources.files("ptodsl")))


def _module_file(root: Path, mod: str) -> Path | None:
    """``mod`` is a '/'-separated path below ptodsl ('' for ptodsl itself)."""
    base = root / mod if mod else root
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file() and mod:
        return base.with_suffix(".py")
    return None


def _imports(root: Path, mod: str, path: Path) -> set[str]:
    """The ptodsl modules ``mod`` imports (relative imports, wherever they appear)."""
    package = mod if path.name == "__init__.py" else mod.rpartition("/")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 0:
            if node.module and (node.module == "ptodsl" or node.module.startswith("ptodsl.")):
                raise VendorError(f"ptodsl/{mod}: absolute import of {node.module}; the runtime imports relatively")
            continue
        parts = [p for p in package.split("/") if p]
        if node.level - 1 > len(parts):
            raise VendorError(f"ptodsl/{mod}: relative import above the package")
        base = parts[:len(parts) - (node.level - 1)]
        target = "/".join(base + (node.module.split(".") if node.module else []))
        found.add(target)
        for alias in node.names:
            sub = f"{target}/{alias.name}" if target else alias.name
            if _module_file(root, sub) is not None:
                found.add(sub)
    return found


def closure(root: Path | None = None) -> list[str]:
    """Every module file (relative to the ptodsl folder) the runtime needs, sorted."""
    root = root or _root()
    todo = [f"runtime/{p.stem}" if p.name != "__init__.py" else "runtime"
            for p in sorted((root / "runtime").glob("*.py"))]
    seen: set[str] = set()
    files: set[str] = set()
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        parts = mod.split("/")
        for i in range(len(parts)):  # importing a module runs its parent packages' __init__
            parent = "/".join(parts[:i])
            if parent not in STUB_PACKAGES and parent not in seen:
                todo.append(parent)
        if mod in STUB_PACKAGES:
            continue
        if parts[0] in FORBIDDEN:
            raise VendorError(f"the runtime reaches ptodsl/{mod}, which is part of the compiler")
        path = _module_file(root, mod)
        if path is None:
            raise VendorError(f"the runtime imports ptodsl/{mod}, which does not exist")
        files.add(path.relative_to(root).as_posix())
        todo.extend(_imports(root, mod, path))
    return sorted(files)


def vendored_files(package: str) -> dict[str, bytes]:
    """The runtime's files, by path in the generated tree (``<package>/_ptodsl/...``)."""
    from ..runtime.layout import VENDOR

    root = _root()
    out: dict[str, bytes] = {}
    prefix = f"{package}/{VENDOR}"
    for rel in closure(root):
        out[f"{prefix}/{rel}"] = (root / rel).read_bytes()
    for stub in STUB_PACKAGES:
        name = f"{prefix}/{stub}/__init__.py" if stub else f"{prefix}/__init__.py"
        text = f'# {GENERATED}: do not edit; regenerate with `ptodsl gen`.\n"""A folder of the runtime copy."""\n'
        if not stub:
            text = (f'# {GENERATED}: do not edit; regenerate with `ptodsl gen`.\n'
                    '"""The runtime of ptodsl, copied into this package: it loads and runs the shipped kernels '
                    'without\nthe compiler."""\n\n'
                    f'__version__ = "{__version__}"\n')
        out[name] = text.encode()
    for folder, suffix in DATA:
        for path in sorted((root / folder).rglob(f"*{suffix}")):
            out[f"{prefix}/{path.relative_to(root).as_posix()}"] = path.read_bytes()
    return dict(sorted(out.items()))


__all__ = ["DATA", "FORBIDDEN", "STUB_PACKAGES", "VendorError", "closure", "vendored_files"]
