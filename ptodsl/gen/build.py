"""Compile a folder of specs and render the operator package, in memory.

:func:`build_package` returns every file of the package as ``{relative path: bytes}``; nothing is
written (see :mod:`.writer`), so a spec that fails leaves no trace. Iteration is sorted
everywhere and nothing depends on the time, the machine or absolute paths, so the same specs and
compiler give byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

from .. import __version__
from ..diagnostics import CompileError, Diagnostics
from ..driver import Compiled, compile_spec
from ..golden import spec_paths
from . import DEFAULT_PACKAGE, render
from .kernels import GENERATED, kernel_files
from .model import OpModel, duplicate_op, name_problems, op_model
from .vendor import vendored_files


@dataclass(frozen=True)
class Package:
    name: str
    ops: tuple[OpModel, ...]
    files: dict[str, bytes]  # relative path -> content, sorted by path

    @property
    def variants(self) -> int:
        return sum(len(op.variants) for op in self.ops)


def _root(specs: str) -> str:
    """The folder the package's ``specs/`` mirrors."""
    return (os.path.dirname(specs) or ".") if os.path.isfile(specs) else specs


def _rel(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` with ``/`` separators, or None when it lies outside."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/")


def _spec_files(c: Compiled, root: str, diags: Diagnostics) -> dict[str, str] | None:
    """The files one spec is made of (YAML, .pto, reference, the .npy inputs of its cases), by path
    relative to ``root``."""
    spec = c.spec
    files = {spec.path: ("the spec", None), spec.source: ("its `source:`", "source")}
    if spec.reference is not None:
        files[os.path.normpath(os.path.join(spec.folder, spec.reference.file))] = ("its reference", "reference")
    for case in spec.tests:
        for name, entry in case.inputs.items():
            if "file" in entry:
                files[os.path.normpath(os.path.join(spec.folder, entry["file"]))] = (
                    f"the input `{name}` of test {case.index}", ("tests", case.index, "inputs", name))
    out: dict[str, str] = {}
    for path, (what, key) in files.items():
        rel = _rel(path, root)
        if rel is None:
            code = "E0215" if key == "source" else "E0864" if isinstance(key, tuple) else "E0213"
            diags.error(code, f"{what} `{path}` lies outside the specs folder `{root}`, so it cannot be packaged",
                        spec.spans.at(key if isinstance(key, tuple) else (key,)) if key else None,
                        "outside the specs folder",
                        help="move the file into the specs folder (a sub-folder is fine)")
            return None
        out[rel] = path
    return out


def compile_all(specs: str, diags: Diagnostics, on_spec: Callable[[str], None] | None = None) -> list[Compiled]:
    """Compile every spec under ``specs`` (calling ``on_spec(path)`` before each); raises
    CompileError after reporting all failures."""
    compiled: list[Compiled] = []
    failed = False
    paths = spec_paths(specs)
    if not paths:
        diags.error("E0203", f"no spec files (NAME.yaml) under `{specs}`", None,
                    help="pass a folder of specs, or a spec file")
    todo = list(paths)
    seen = {os.path.abspath(p) for p in todo}
    while todo:
        path = todo.pop(0)
        if on_spec is not None:
            on_spec(path)
        try:
            c = compile_spec(path, diags)
        except CompileError:
            failed = True
            continue
        compiled.append(c)
        # an op's backward ships with it, so that torch can differentiate it in the package
        back = c.spec.backward_path
        if back is not None and os.path.abspath(back) not in seen:
            seen.add(os.path.abspath(back))
            todo.append(back)
    by_name: dict[str, Compiled] = {}
    for c in compiled:
        diags.extend(name_problems(c))
        if c.spec.op in by_name:
            diags.add(duplicate_op(c, by_name[c.spec.op]))
        by_name.setdefault(c.spec.op, c)
    if failed or diags.has_errors:
        raise CompileError(diags.items)
    return sorted(compiled, key=lambda c: c.spec.op)


def build_package(specs: str, name: str = DEFAULT_PACKAGE, diags: Diagnostics | None = None,
                  on_spec: Callable[[str], None] | None = None) -> Package:
    """Every file of the package generated from the specs under ``specs``.

    Raises CompileError with every diagnostic when any spec fails; ``diags`` also receives the
    warnings of the specs that compile.
    """
    diags = diags if diags is not None else Diagnostics()
    compiled = compile_all(specs, diags, on_spec)
    root = _root(specs)
    files: dict[str, bytes] = {}
    ops: list[OpModel] = []
    for c in compiled:
        sources = _spec_files(c, root, diags)
        if sources is None:
            continue
        hashes: dict[str, str] = {}
        for rel, path in sources.items():
            with open(path, "rb") as f:
                data = f.read()
            files[f"{name}/specs/{rel}"] = data
            hashes[f"specs/{rel}"] = hashlib.sha256(data).hexdigest()
        kernels = kernel_files(c, root)
        for rel, text in kernels.items():
            files[f"{name}/kernels/{rel}"] = text.encode()
        spec_rel = f"specs/{_rel(c.spec.path, root)}"
        ops.append(op_model(c, spec_rel, hashes, kernels))
    if diags.has_errors:
        raise CompileError(diags.items)
    for rel, text in render.package_files(name, ops).items():
        files[rel] = text.encode()
    runtime = vendored_files(name)
    files.update(runtime)
    files[f"{name}/manifest.json"] = manifest(name, ops, runtime).encode()
    return Package(name, tuple(ops), dict(sorted(files.items())))


def manifest(name: str, ops: list[OpModel], runtime: dict[str, bytes] | None = None) -> str:
    """``manifest.json``: the ops, their variants and kernel files, the sha256 of each spec file,
    and the sha256 of each file of the runtime copy (so a package can be audited against ptodsl)."""
    data = {
        "_generated": f"{GENERATED}: do not edit; regenerate with `ptodsl gen`",
        "package": name,
        "compiler": {"name": "ptodsl", "version": __version__},
        "runtime": {path.removeprefix(f"{name}/"): hashlib.sha256(data).hexdigest()
                    for path, data in sorted((runtime or {}).items())},
        "ops": {
            op.name: {
                "doc": op.doc,
                "spec": op.spec,
                "files": op.files,
                "target": op.target,
                "signature": op.signature,
                "params": [{"name": p.name, "kind": p.kind, "decl": p.decl, "default": p.default}
                           for p in op.params],
                "variants": {v.slug: {"dtypes": v.dtypes, "kernels": list(v.kernels)} for v in op.variants},
                "tests": [case.id for case in op.cases],
            }
            for op in ops
        },
    }
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


__all__ = ["DEFAULT_PACKAGE", "Package", "build_package", "compile_all", "manifest"]
