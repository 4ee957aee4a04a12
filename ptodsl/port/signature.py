"""A PyPTO kernel's parameters as ptodsl parameters: tensor annotations (with ``DYNAMIC`` dims as
symbols and ``[...]`` dims from the call site), ``int`` parameters as symbols fixed in the YAML,
``float`` parameters as scalars, and other parameters as values of the trace."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from .callsite import DYNAMIC, UNKNOWN, Arg, DtypeName, Evaluator
from .exprs import PortError
from .mapping import DTYPES, SCALAR_ANNOTATIONS
from .values import Val, const, scalar, seq

DYN = "DYNAMIC"
VAR = "variable"  # a dim given by a variable of the enclosing code that the port cannot evaluate


@dataclass
class Param:
    name: str  # the PyPTO name
    kind: str  # tensor | scalar | symbol | value
    node: ast.arg
    dims: list[int | str] = field(default_factory=list)  # tensor: literals and symbol names
    dtype: str | None = None
    value: Any = None  # symbol/value: from the call site; scalar: the test value when known
    pto_name: str = ""


def _is_pypto(node: ast.expr, *names: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in names and isinstance(node.value, ast.Name) \
        and node.value.id == "pypto"


def parse_annotation(ann: ast.expr | None, module_env: dict[str, Any]) -> tuple[str, list | None, bool, str | None]:
    """(kind, dims or None when unknown, whether dims continue as ``...``, dtype). ``kind`` is
    tensor, or the Python type name of a scalar parameter, or ``value``."""
    if ann is None:
        return "value", None, False, None
    if isinstance(ann, ast.Name) and ann.id in ("int", "float", "bool", "tuple", "list"):
        return ann.id, None, False, None
    args: list[ast.expr] = []
    shape_at: ast.expr | None = None  # the argument that is the shape, when its place says so
    if isinstance(ann, ast.Call) and _is_pypto(ann.func, "Tensor", "tensor"):
        args = list(ann.args) + [k.value for k in ann.keywords if k.arg in ("shape", "dtype")]
        shape_at = ann.args[0] if ann.args else next((k.value for k in ann.keywords if k.arg == "shape"), None)
    elif isinstance(ann, ast.Subscript) and _is_pypto(ann.value, "Tensor", "tensor"):
        sl = ann.slice
        args = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        if len(args) == 1 and isinstance(args[0], ast.Constant) and args[0].value is Ellipsis:
            args = []
    else:
        return "value", None, False, None
    dims: list | None = None
    more = False
    dtype = None
    for a in args:
        if _is_pypto(a, *DTYPES):
            dtype = DTYPES[a.attr]  # type: ignore[attr-defined]
            continue
        ev = Evaluator(module_env)
        shape = ev.ev(a)
        if isinstance(shape, DtypeName):
            dtype = shape.name
            continue
        if shape is UNKNOWN and a is shape_at:
            continue  # a shape no evaluation gives: every dim from the call site, as `[]`
        if shape is UNKNOWN and a is not shape_at and len(args) > 1:
            continue  # a dtype no evaluation gives: from the call site
        if not isinstance(shape, (list, tuple)):
            raise PortError("E1005", "this tensor annotation's shape is not known when the kernel is traced", a)
        entries = list(a.elts) if isinstance(a, (ast.List, ast.Tuple)) and len(a.elts) == len(shape) else \
            [None] * len(shape)
        dims = []
        for e, v in zip(entries, shape, strict=True):
            if v is Ellipsis:
                more = True
            elif isinstance(v, int) and not isinstance(v, bool) and v > 0:
                dims.append(v)
            elif v is DYNAMIC:
                # a module constant bound to pypto.DYNAMIC names its symbol
                dims.append((DYN, e.id) if isinstance(e, ast.Name) else DYN)
            elif v is UNKNOWN:
                # a variable the port cannot evaluate is a dim bound at the call, as DYNAMIC is;
                # one variable is one value, so every dim it gives shares one symbol
                dims.append((DYN, e.id, VAR) if isinstance(e, ast.Name) else DYN)
            else:
                raise PortError("E1005", "a dim must be a positive integer or `pypto.DYNAMIC`", e or a)
        if not dims and not more:
            dims = None  # `[]`: every dim from the call site
    return "tensor", dims, more, dtype


def resolve(fn: ast.FunctionDef, site: list[Any] | None, module_env: dict[str, Any],
            hints: dict[tuple[str, int], str], taken: set[str]) -> tuple[list[Param], dict[str, int]]:
    """The kernel's parameters, and the values of the symbols at the call site (for tests)."""
    positional = [v for v in site if not isinstance(v, tuple) or len(v) != 2 or not isinstance(v[0], str)] \
        if site is not None else []
    keywords = dict(v for v in site if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str)) \
        if site is not None else {}
    params: list[Param] = []
    symbol_at: dict[tuple[int, Any], str] = {}  # (axis from the right, call-site value) -> symbol
    values: dict[str, int] = {}
    names = set(taken)
    all_args = fn.args.args + fn.args.kwonlyargs
    defaults = dict(zip([a.arg for a in fn.args.args[len(fn.args.args) - len(fn.args.defaults):]],
                        fn.args.defaults, strict=True))
    for i, a in enumerate(all_args):
        got = positional[i] if i < len(positional) else keywords.get(a.arg, UNKNOWN)
        if got is UNKNOWN and a.arg in defaults and isinstance(defaults[a.arg], ast.Constant):
            got = defaults[a.arg].value
        kind, dims, more, dtype = parse_annotation(a.annotation, module_env)
        if kind == "tensor":
            arg = got if isinstance(got, Arg) and got.is_tensor else None
            need = dims is None or more
            if need and arg is None:
                raise PortError("E1005", f"the shape of `{a.arg}` is not known: no call of the kernel in this file "
                                         "that the port can evaluate", a,
                                help="annotate the dims: `pypto.Tensor([pypto.DYNAMIC, 128], pypto.DT_FP32)`")
            if dims is None:
                dims = list(arg.shape)  # type: ignore[union-attr]
            elif more:
                rest = arg.shape[len(dims):]  # type: ignore[union-attr]
                dims = dims + list(rest)
            if dtype is None:
                if arg is None or arg.dtype is None:
                    raise PortError("E1005", f"the dtype of `{a.arg}` is not known", a,
                                    help="give it: `pypto.Tensor([...], pypto.DT_FP32)`")
                dtype = arg.dtype
            out: list[int | str] = []
            for axis, d in enumerate(dims):
                hint = hints.get((a.arg, axis))
                var = isinstance(d, tuple) and len(d) == 3
                if isinstance(d, tuple):
                    d, hint = d[0], (d[1] if var else hint or d[1])
                if d != DYN:
                    out.append(d)
                    continue
                # dims at the same place from the right share a symbol when the call passes them
                # the same size, or when no call says (`x[:] = y + 1` needs x and y alike)
                seen = arg.shape[axis] if arg is not None and axis < len(arg.shape) else None
                key: tuple[Any, ...] = (VAR, hint) if var else (len(dims) - axis, seen)
                if key in symbol_at:
                    out.append(symbol_at[key])
                    continue
                name = _symbol_name(hint, a.arg, axis, names)
                names.add(name)
                symbol_at[key] = name
                if seen is not None:
                    values[name] = seen
                out.append(name)
            params.append(Param(a.arg, "tensor", a, out, dtype))
        elif kind == "float":
            params.append(Param(a.arg, "scalar", a, dtype="f32", value=got if isinstance(got, (int, float)) else None))
        elif kind == "int" and isinstance(got, int) and not isinstance(got, bool) and got >= 1:
            name = _symbol_name(a.arg.upper(), a.arg, 0, names)
            names.add(name)
            params.append(Param(a.arg, "symbol", a, value=got, pto_name=name))
        elif got is not UNKNOWN and isinstance(got, (int, float, bool, str, tuple, list, dict, DtypeName)) \
                or got is None:
            params.append(Param(a.arg, "value", a, value=got))
        else:
            raise PortError("E1005", f"the value of parameter `{a.arg}` is not known when the kernel is traced", a,
                            help="call the kernel in this file with a literal value, or make it a tensor")
    return params, values


def _symbol_name(hint: str | None, param: str, axis: int, taken: set[str]) -> str:
    from .names import legal

    base = (hint or f"{param}_{axis}").upper()
    return legal(base, taken)


def bind(p: Param) -> Val:
    """The value a parameter's name has in the kernel body."""
    if p.kind == "tensor":
        shape = [const(d) if isinstance(d, int) else scalar(d) for d in p.dims]
        return Val("tensor", text=p.pto_name, shape=shape, dtype=p.dtype)
    if p.kind == "scalar":
        return scalar(p.pto_name)
    if p.kind == "symbol":
        v = scalar(p.pto_name)
        v.py = p.value
        return v
    return _py(p.value)


def _py(x: Any) -> Val:
    if isinstance(x, (list, tuple)):
        return seq([_py(i) for i in x])
    if isinstance(x, DtypeName):
        return Val("dtype", text=x.name)
    if isinstance(x, dict):
        return Val("record", py=x)
    return const(None if x is UNKNOWN else x) if not isinstance(x, Arg) else const(None)


SCALAR_TYPES = SCALAR_ANNOTATIONS
