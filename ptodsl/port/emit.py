"""The files of a ported kernel, written all at once.

Every name written was made a ptodsl identifier by ``names.legal``; numbers are Python ints and
floats; the doc, comments and the Python line quoted in the source map lose their control
characters. Files are rendered in full, written into a fresh folder beside the output folder and
moved into it only when every one was written: a failed run leaves the output as it was, and two
runs on the same source write the same bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from ..diagnostics import Diagnostics
from ..escape import py_comment, py_docstring
from . import PortedKernel, PortResult
from .tolerance import case_atol, reductions


class OutputError(Exception):
    """The output folder cannot be written (E1009)."""


def _clean(text: str) -> str:
    """One line of printable text: control characters become spaces."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def _ynum(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    text = repr(float(v))
    return text if any(c in text for c in ".e") else text + ".0"


def _yflow(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_yflow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_yflow(x) for x in v) + "]"
    return _ynum(v)


def render_pto(k: PortedKernel, source: str) -> tuple[str, dict[str, Any]]:
    """The .pto text and its source map (ptodsl line -> PyPTO line, column and text)."""
    base = os.path.basename(source)
    src_lines = k.source_lines if hasattr(k, "source_lines") else []
    params = []
    for p in k.params:
        if p.kind == "tensor":
            mode = k.modes.get(p.pto_name, "in")
            dims = ", ".join(str(d) for d in p.dims)
            params.append(f"{p.pto_name}: {'' if mode == 'in' else mode + ' '}{p.dtype}[{dims}]")
        elif p.kind == "scalar":
            params.append(f"{p.pto_name}: {p.dtype}")
    head = [f"# Ported from {py_comment(base)}:{k.line} by `ptodsl port`.",
            f"kernel {k.name}({', '.join(params)}):"]
    out = list(head)
    smap: dict[str, Any] = {}
    body = k.lines or []
    for ln in body:
        text = "    " * (ln.indent + 1) + ln.text
        if ln.node is not None and not ln.text.startswith("# TODO"):
            line = getattr(ln.node, "lineno", 0)
            text += f"  # from {py_comment(base)}:{line}"
            smap[str(len(out) + 1)] = {"line": line, "col": getattr(ln.node, "col_offset", 0) + 1,
                                       "text": _clean(src_lines[line - 1]) if 0 < line <= len(src_lines) else ""}
        elif ln.text.startswith("# TODO"):
            text = "    " * (ln.indent + 1) + "# TODO(port): " + py_comment(_clean(ln.text[len("# TODO(port): "):]))
        out.append(text)
    if not body:
        out.append("    pass")
    return "\n".join(out) + "\n", smap


def render_yaml(k: PortedKernel, source: str, atols: list[tuple[float, str] | None] | None = None) -> str:
    """The spec; ``atols`` gives a case the tolerance its f32 reductions need (tolerance.py)."""
    base = os.path.basename(source)
    lines = [f"# Ported from {py_comment(base)}:{k.line} (`{py_comment(k.py_name)}`) by `ptodsl port`.",
             f"op: {k.name}"]
    if k.doc:
        lines.append(f"doc: {json.dumps(_clean(k.doc)[:2000], ensure_ascii=True)}")
    if k.symbols:
        lines.append(f"symbols: {_yflow(dict(sorted(k.symbols.items())))}")
    s = k.schedule
    sched: list[str] = []
    if s.vec_tile is not None:
        sched.append(f"  vec_tile: {_yflow(s.vec_tile)}")
    if s.cube_tile is not None:
        sched.append(f"  cube_tile: {_yflow(s.cube_tile)}")
    loops = {n: v for n, v in s.loops.items() if v}
    if loops:
        sched.append("  loops:")
        sched += [f"    {n}: {_yflow(v)}" for n, v in loops.items()]
    if s.pass_options:
        sched.append(f"  pass_options: {_yflow(s.pass_options)}")
    if sched:
        lines += ["schedule:", *sched]
    lines.append(f"reference: {k.name}_ref.py:{k.name}")
    lines.append("tests:")
    for i, case in enumerate(k.tests):
        said = [f"sizes: {k.test_notes[i]}"] if i < len(k.test_notes) and k.test_notes[i] else []
        tol = atols[i] if atols and i < len(atols) else None
        if tol is not None and "atol" not in case:
            case = {**case, "atol": tol[0]}
            said.append(f"atol: {tol[1]}")
        note = f"  # {py_comment('; '.join(said))} (docs/PORTING.md)" if said else ""
        lines.append(f"  - {_yflow(case)}{note}")
    return "\n".join(lines) + "\n"


def render_ref(k: PortedKernel, source: str) -> str:
    ins = [p.pto_name for p in k.params if p.kind == "tensor" and k.modes.get(p.pto_name) != "out"]
    outs = [p.pto_name for p in k.params if p.kind == "tensor" and k.modes.get(p.pto_name) in ("out", "inout")]
    scalars = [p.pto_name for p in k.params if p.kind == "scalar"]
    sig = ", ".join(ins + ([("*, " if ins else "*, ") + ", ".join(scalars)] if scalars else []))
    doc = py_docstring(f"Numpy reference of `{k.name}` (ported from {os.path.basename(source)}:{k.line}).\n\n"
                       f"Takes the inputs positionally and the scalars by keyword; returns "
                       f"{', '.join(outs) or 'the outputs'} in this order. Write it from the PyPTO "
                       f"example's golden function; until then `ptodsl test` fails here.")
    return (f'"""{doc}"""\n\nimport numpy as np  # noqa: F401\n\n\n'
            f"def {k.name}({sig}):\n"
            f"    raise NotImplementedError(\"the numpy reference of {k.name} is not written yet\")\n")


def files_of(result: PortResult) -> dict[str, str]:
    files: dict[str, str] = {}
    for k in result.kernels:
        k.source_lines = result.text.splitlines()  # type: ignore[attr-defined]
        pto, smap = render_pto(k, result.source)
        files[f"{k.name}.pto"] = pto
        yml = render_yaml(k, result.source)
        found = reductions(pto, yml, k.name) if not k.errors else None
        if found:
            yml = render_yaml(k, result.source, [case_atol(found, c, k.symbols) for c in k.tests])
        files[f"{k.name}.yaml"] = yml
        files[f"{k.name}_ref.py"] = render_ref(k, result.source)
        files[f"{k.name}.portmap.json"] = json.dumps(
            {"version": 1, "source": os.path.basename(result.source), "kernel": k.py_name, "lines": smap},
            indent=1, sort_keys=True, ensure_ascii=True) + "\n"
    return files


def write_all(result: PortResult, out_dir: str, partial: bool = False, keep_refs: bool = True) -> list[str]:
    """Write the files of every kernel into ``out_dir``; returns their names. A reference the
    folder already holds is kept (it is where the user writes the numpy oracle)."""
    files = files_of(result)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise OutputError(f"`{out_dir}` is a file")
    parent = os.path.dirname(os.path.abspath(out_dir))
    try:
        os.makedirs(parent, exist_ok=True)
        stage = tempfile.mkdtemp(prefix=".ptodsl-port-", dir=parent)
    except OSError as e:
        raise OutputError(f"cannot create a folder beside `{out_dir}`: {e.strerror}") from e
    try:
        for name, text in files.items():
            with open(os.path.join(stage, name), "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
        os.makedirs(out_dir, exist_ok=True)
        written = []
        for name in files:
            dest = os.path.join(out_dir, name)
            if keep_refs and name.endswith("_ref.py") and os.path.exists(dest):
                continue
            os.replace(os.path.join(stage, name), dest)
            written.append(name)
        return written
    except OSError as e:
        raise OutputError(f"cannot write into `{out_dir}`: {e.strerror}") from e
    finally:
        shutil.rmtree(stage, ignore_errors=True)


__all__ = ["OutputError", "files_of", "write_all", "Diagnostics"]
