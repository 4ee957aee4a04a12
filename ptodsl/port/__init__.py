"""``ptodsl port``: PyPTO kernels (``@pypto.frontend.jit`` functions) translated into ptodsl specs.

The Python source is read with ``ast``; nothing in it is imported or run. Each kernel becomes
``NAME.pto`` (its statements, one per line, each with ``# from FILE.py:LINE``), ``NAME.yaml`` (the
tile setters as a ``schedule:``, unroll lists, pass options, a ``reference:`` and ``tests:``
from the calls of the kernel in the file), a reference stub ``NAME_ref.py`` and
``NAME.portmap.json``, the source map ``ptodsl check`` uses to name the PyPTO line of a
diagnostic. This package is a tool: nothing in ptodsl imports it.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..diagnostics import Diagnostic, Diagnostics, Span
from .callsite import module_env
from .closure import kernel_env
from .exprs import PortError
from .names import legal
from .signature import resolve
from .sites import made_tensors
from .translate import KernelPort, Line, Schedule

MAX_SOURCE_BYTES = 4 * 1024 * 1024


@dataclass
class PortedKernel:
    name: str  # the op name (the .pto/.yaml stem)
    py_name: str
    line: int
    params: list[Any]
    modes: dict[str, str]
    lines: list[Line]
    schedule: Schedule
    symbols: dict[str, int]  # fixed in the YAML
    tests: list[dict[str, Any]]
    doc: str | None
    errors: int = 0
    test_notes: list[str] = field(default_factory=list)  # per case: where a size came from


@dataclass
class PortResult:
    source: str  # the .py path as given
    text: str
    kernels: list[PortedKernel] = field(default_factory=list)
    diags: Diagnostics = field(default_factory=Diagnostics)
    # every jit function found: (its name, its line, the diagnostics of its translation)
    attempts: list[tuple[str, int, list[Diagnostic]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.diags.has_errors


def _is_decorated(fn: ast.FunctionDef, what: str) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        parts = []
        while isinstance(target, ast.Attribute):
            parts.append(target.attr)
            target = target.value
        if isinstance(target, ast.Name) and target.id == "pypto" and parts and parts[0] == what:
            return True
    return False


def _jit_options(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    for d in fn.decorator_list:
        if isinstance(d, ast.Call):
            for k in d.keywords:
                if k.arg == "pass_options" and isinstance(k.value, ast.Dict):
                    return {key.value: v for key, v in zip(k.value.keys, k.value.values, strict=True)
                            if isinstance(key, ast.Constant) and isinstance(key.value, str)}
    return {}


def _span(path: str, node: ast.AST) -> Span:
    line = getattr(node, "lineno", 1)
    col = getattr(node, "col_offset", 0) + 1
    end_line = getattr(node, "end_lineno", None) or line
    end_col = (getattr(node, "end_col_offset", None) or col) + 1
    if end_line != line:  # one line of caret: the rest of the first line
        end_line, end_col = line, col + 1
    return Span(path, line, col, end_line, end_col)


def _shape_hints(fn: ast.FunctionDef) -> dict[tuple[str, int], str]:
    """``b, s = x.shape`` and ``b = x.shape[0]`` in the kernel name the symbols of x's dims."""
    hints: dict[tuple[str, int], str] = {}
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        t, v = node.targets[0], node.value
        if isinstance(v, ast.Attribute) and v.attr == "shape" and isinstance(v.value, ast.Name) \
                and isinstance(t, ast.Tuple):
            for i, e in enumerate(t.elts):
                if isinstance(e, ast.Name):
                    hints.setdefault((v.value.id, i), e.id)
        elif isinstance(v, ast.Subscript) and isinstance(t, ast.Name) and isinstance(v.value, ast.Attribute) \
                and v.value.attr == "shape" and isinstance(v.value.value, ast.Name) \
                and isinstance(v.slice, ast.Constant) and isinstance(v.slice.value, int) and v.slice.value >= 0:
            hints.setdefault((v.value.value.id, v.slice.value), t.id)
    return hints


def port_source(text: str, path: str, function: str | None = None) -> PortResult:
    """Translate every jit kernel of ``text`` (the file ``path``), or only ``function``."""
    result = PortResult(path, text)
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        result.diags.error("E1000", f"not valid Python: {e.msg}", Span(path, e.lineno or 1, (e.offset or 1)),
                           help="`python -m py_compile` shows the same error")
        return result
    except (ValueError, RecursionError) as e:
        result.diags.error("E1000", f"not valid Python: {e}", Span(path, 1, 1), help="check the file")
        return result
    fns = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    kernels = [f for f in fns if _is_decorated(f, "jit")]
    kernels = sorted({id(k): k for k in kernels}.values(), key=lambda k: (k.lineno, k.col_offset))
    helpers = {f.name: f for f in fns if f not in kernels}
    if function is not None:
        kernels = [k for k in kernels if k.name == function]
    if not kernels:
        what = f"no PyPTO kernel named `{function}`" if function else "no PyPTO kernel"
        result.diags.error("E1001", f"{what} in this file", Span(path, 1, 1),
                           help="a kernel is a function decorated `@pypto.frontend.jit`")
        return result
    env = module_env(tree)
    used_ops: set[str] = set()
    for fn in kernels:
        errors: list[PortError] = []
        try:
            k = _port_kernel(fn, tree, env, helpers, errors, used_ops)
        except RecursionError:
            k = None
            errors.append(PortError("E1008", "this kernel nests too deeply to translate", fn,
                                    help="split its expressions into statements"))
        mine = [result.diags.error(e.code, e.message, _span(path, e.node), e.label, help=e.help) for e in errors]
        result.attempts.append((fn.name, fn.lineno, mine))
        if k is not None:
            k.errors = len(errors)
            result.kernels.append(k)
    return result


def _port_kernel(fn: ast.FunctionDef, tree: ast.Module, env: dict[str, Any], helpers: dict[str, ast.FunctionDef],
                 errors: list[PortError], used_ops: set[str]) -> PortedKernel | None:
    made_env = env
    env, sites = kernel_env(tree, fn, env)
    taken = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {a.arg for a in fn.args.args}
    try:
        params, sym_values = resolve(fn, sites[0] if sites else None, env, _shape_hints(fn), taken)
    except PortError as e:
        errors.append(e)
        return None
    port = KernelPort(fn, params, env, helpers, errors)
    try:
        port.pass_options(_jit_options(fn), fn)
    except PortError as e:
        errors.append(e)
    port.block(fn.body)
    name = legal(fn.name, used_ops, op=True)
    used_ops.add(name)
    words = {w for ln in port.lines for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", ln.text)}
    symbols = {p.pto_name: p.value for p in params if p.kind == "symbol" and p.pto_name in words}
    modes = port.outputs()
    tests, notes = _tests(params, sites, sym_values, modes, lambda: made_tensors(tree, made_env))
    return PortedKernel(name, fn.name, fn.lineno, params, modes, port.lines, port.schedule, symbols,
                        tests, port.doc, test_notes=notes)


# The size of a DYNAMIC dim that no call and no tensor of the file gives: one above a power of
# two, so that every power-of-two tile up to 32 leaves a tail (docs/PORTING.md).
DEFAULT_DYNAMIC_SIZE = 33


def _tests(params: list[Any], sites: list[list[Any]], values: dict[str, int], modes: dict[str, str],
           made: Callable[[], list[tuple[Any, int]]]) -> tuple[list[dict[str, Any]], list[str]]:
    """One case per distinct call of the kernel: the dims of its runtime symbols and its scalars;
    and per case, a note saying where a size no call gives came from."""
    from .callsite import Arg

    cases: list[dict[str, Any]] = []
    notes: list[str] = []
    # a call with other fixed sizes traces another kernel (the first call's is the one ported)
    sites = [s for s in sites if _fits(params, s)]
    for site in sites or [[]]:
        shapes: dict[str, int] = {}
        scalars: dict[str, Any] = {}
        ranges: dict[str, list[float]] = {}
        for i, p in enumerate(params):
            got = site[i] if i < len(site) else None
            if p.kind == "tensor":
                if isinstance(got, Arg) and got.values is not None and got.values[0] < got.values[1] \
                        and modes.get(p.pto_name) != "out":
                    ranges[p.pto_name] = list(got.values)
                for axis, d in enumerate(p.dims):
                    if isinstance(d, str) and isinstance(got, Arg) and got.is_tensor and axis < len(got.shape):
                        shapes.setdefault(d, got.shape[axis])
                    elif isinstance(d, str) and d in values and not sites:
                        shapes.setdefault(d, values[d])
            elif p.kind == "scalar" and isinstance(got, (int, float)) and not isinstance(got, bool):
                scalars[p.pto_name] = float(got)
        note = _fill_dims(params, shapes, made)
        case: dict[str, Any] = {"shapes": dict(sorted(shapes.items()))}
        if scalars:
            case["scalars"] = scalars
        if ranges:
            case["ranges"] = ranges
        if case not in cases:
            cases.append(case)
            notes.append(note)
    return cases, notes


def _fits(params: list[Any], site: list[Any]) -> bool:
    """Whether the tensors of a call have the rank and the fixed dims of the ported signature."""
    from .callsite import Arg

    for p, got in zip(params, site, strict=False):
        if p.kind == "tensor" and isinstance(got, Arg) and got.is_tensor and got.shape is not None:
            if len(got.shape) != len(p.dims) or any(isinstance(d, int) and d != n
                                                    for d, n in zip(p.dims, got.shape, strict=True)):
                return False
    return True


def _fill_dims(params: list[Any], shapes: dict[str, int], made: Callable[[], list[tuple[Any, int]]]) -> str:
    """Sizes for the dim symbols no call gives: from the tensors the file makes whose rank, dtype
    and fixed dims are the parameter's, when they all agree; else DEFAULT_DYNAMIC_SIZE."""
    said: list[str] = []
    for p in params:
        if p.kind != "tensor" or all(not isinstance(d, str) or d in shapes for d in p.dims):
            continue
        fits = [(t, line) for t, line in made() if t.dtype == p.dtype and len(t.shape) == len(p.dims)
                and all(isinstance(d, str) or d == n for d, n in zip(p.dims, t.shape, strict=True))]
        for axis, d in enumerate(p.dims):
            if not isinstance(d, str) or d in shapes:
                continue
            sizes = {t.shape[axis] for t, _ in fits}
            if len(sizes) == 1:
                shapes[d] = sizes.pop()
                said.append(f"{d} from the tensor made at line {fits[0][1]}")
    missing = sorted({d for p in params if p.kind == "tensor" for d in p.dims if isinstance(d, str)} - set(shapes))
    for d in missing:
        shapes[d] = DEFAULT_DYNAMIC_SIZE
    if missing:
        said.append(f"{', '.join(missing)}: no call or tensor of the file gives a size, the port's default")
    return "; ".join(said)


def write_port(result: PortResult, out_dir: str, partial: bool = False) -> list[str]:
    """Write every kernel's files into ``out_dir``; see :func:`emit.write_all`."""
    from .emit import write_all

    return write_all(result, out_dir, partial)


def read_source(path: str, diags: Diagnostics) -> str | None:
    try:
        if os.path.getsize(path) > MAX_SOURCE_BYTES:
            diags.error("E1000", f"`{path}` is over {MAX_SOURCE_BYTES} bytes", None, help="port one kernel's file")
            return None
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        diags.error("E1000", f"cannot read `{path}`: {e.__class__.__name__}", None,
                    help="pass the PyPTO kernel's .py file")
        return None


__all__ = ["PortResult", "PortedKernel", "port_source", "read_source", "write_port"]
