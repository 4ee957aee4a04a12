"""What the language server knows about a file, computed from texts alone (no LSP types here).

Every function takes the editor's buffers as ``sources`` (normalised path -> text): an open file is
read from its buffer, any other file from disk, and nothing is ever written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..check import check
from ..check.types import DtypeTy, ScalarTy, TensorTy, Ty
from ..diagnostics import CompileError, Diagnostic, Diagnostics, Span, code_registry
from ..driver import compile_spec
from ..dtypes import DTYPE_NAMES
from ..fmt import KEYWORDS
from ..frontend import ast
from ..frontend.parser import parse_module
from ..frontend.schema import spec_schema
from ..frontend.spec import load_spec
from ..frontend.text import strip_bom
from ..ops import INDEXING, OPS, SCALAR_BUILTINS, STRUCTURE_BUILTINS, describe_index_op, describe_op
from ..yamlio.schema import Bool, Enum, ListOf, MapOf, Obj, OneOf, Schema

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CODE = re.compile(r"\b[EWN]\d{4}\b")

STRUCTURE_DOCS = {
    "view": "view(x, shape, offset, valid_shape=...): a window of a tensor, no copy",
    "transpose": "transpose(x, d0, d1): dims d0 and d1 swapped (TTRANS when the last dim moves)",
    "reshape": "reshape(x, shape): the same elements under another shape",
    "unsqueeze": "unsqueeze(x, dim): a dim of 1 inserted at dim",
    "squeeze": "squeeze(x, dim): the dim of 1 at dim removed",
    "permute": "permute(x, order): result dim k is x's dim order[k]",
    "concat": "concat([a, b, ...], dim=0): the parts one after the other along dim",
    "expand": "expand(x, shape): x's dims of 1 repeated to shape (-1 keeps a dim)",
    "clone": "clone(x): a copy of x in a tensor of its own",
    "tensor": "tensor(shape, dtype): a local tensor, uninitialised",
    "zeros": "zeros(shape, dtype): a local tensor of zeros",
    "ones": "ones(shape, dtype): a local tensor of ones",
    "full": "full(shape, value, dtype): a local tensor filled with one value",
    "loop": "loop(n, name=...): a loop over 0..n-1, scheduled by `schedule.loops.<name>` in the YAML",
    "loop_unroll": "loop_unroll(n, name=...): a loop the YAML unrolls by its `unroll:` factors",
    "is_loop_begin": "is_loop_begin(i): true in the first iteration of the loop of index i",
    "is_loop_end": "is_loop_end(i): true in the last iteration of the loop of index i",
    "print": "print(...): print values from a kernel (debugging)",
    "cdiv": "cdiv(a, b): a / b rounded up, for symbols and integers",
    "min": "min(a, b, ...): the smallest of scalars (dims, indices, values read from tensors)",
    "max": "max(a, b, ...): the largest of scalars (dims, indices, values read from tensors)",
}


def norm(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


# ------------------------------------------------------------------ which spec a file belongs to


def spec_of(path: str, sources: Mapping[str, str]) -> str | None:
    """The YAML spec a .pto or .yaml file is compiled through: the YAML itself, the YAML of the same
    stem beside a .pto, or a YAML beside it whose ``source:`` names it."""
    if path.endswith((".yaml", ".yml")):
        return path
    folder, stem = os.path.split(os.path.splitext(path)[0])
    for ext in (".yaml", ".yml"):
        if os.path.isfile(stem_path := os.path.join(folder, stem + ext)) or stem_path in sources:
            return stem_path
    names = set(os.listdir(folder)) if os.path.isdir(folder) else set()
    names |= {os.path.basename(p) for p in sources if os.path.dirname(p) == folder}
    for name in sorted(names):
        if not name.endswith((".yaml", ".yml")):
            continue
        yaml_path = os.path.join(folder, name)
        text = _text(yaml_path, sources)
        if _source_of(yaml_path, text or "") == path:
            return yaml_path
    return None


def _source_of(yaml_path: str, text: str) -> str:
    """The .pto a spec names, read from its text without validating it (it may be half typed)."""
    m = re.search(r"^source:\s*['\"]?([^'\"#\s]+)", text, re.M)
    rel = m.group(1) if m else os.path.splitext(os.path.basename(yaml_path))[0] + ".pto"
    if not m and (op := re.search(r"^op:\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)", text, re.M)):
        rel = op.group(1) + ".pto"
    return norm(os.path.join(os.path.dirname(yaml_path), rel))


def _text(path: str, sources: Mapping[str, str]) -> str | None:
    if path in sources:
        return sources[path]
    try:
        with open(path, encoding="utf-8") as f:
            return strip_bom(f.read())  # positions do not count a byte-order mark, as in the compiler
    except (OSError, UnicodeDecodeError):
        return None


# ------------------------------------------------------------------ diagnostics


def diagnose(path: str, sources: Mapping[str, str]) -> dict[str, list[Diagnostic]]:
    """The diagnostics of the compile `ptodsl check` runs for ``path``, by file. The files compiled
    appear with an empty list when clean, so that an editor clears what it showed before."""
    spec = spec_of(path, sources)
    diags = Diagnostics()
    files = {path}
    if spec is None:  # a .pto with no spec: only its syntax can be checked
        text = _text(path, sources)
        if text is not None:
            parse_module(text, path, diags)
    else:
        files.add(spec)
        files.add(_source_of(spec, _text(spec, sources) or ""))  # cleared too when the YAML alone fails
        try:
            compiled = compile_spec(spec, diags, sources=sources)
            files.add(compiled.spec.source)
        except CompileError as exc:
            diags.extend(exc.diagnostics)
    out: dict[str, list[Diagnostic]] = {f: [] for f in files}
    for d in diags:
        out.setdefault(norm(d.span.file) if d.span else path, []).append(d)
    return out


def explain(code: str) -> str | None:
    info = code_registry().get(code)
    return None if info is None else f"**{info.code}**: {info.title}\n\n{info.explain}"


# ------------------------------------------------------------------ .pto: names


def word_at(text: str, line: int, col: int) -> tuple[str, int] | None:
    """The identifier at 0-based (line, col) and the column it starts at."""
    lines = text.splitlines()
    if line >= len(lines):
        return None
    for m in _WORD.finditer(lines[line]):
        if m.start() <= col <= m.end():
            return m.group(), m.start()
    return None


def _covers(span: Span, line: int, col: int) -> bool:
    """Whether 1-based (line, col) lies in the span."""
    return (span.line, span.col) <= (line, col) < (span.end_line, span.end_col)


def _kernel_at(module: ast.Module, line: int) -> ast.Kernel | None:
    found = None
    for k in module.kernels:
        if k.span.line <= line:
            found = k
    return found


def definition(path: str, text: str, line: int, col: int) -> Span | None:
    """Where the name at 0-based (line, col) is defined: a parameter, the first assignment of a local,
    or the target of the ``for`` that binds a loop index."""
    hit = word_at(text, line, col)
    module = parse_module(text, path, Diagnostics())
    if hit is None or module is None:
        return None
    name, start = hit
    kernel = _kernel_at(module, line + 1)
    if kernel is None:
        return None
    for p in kernel.params:
        if p.name == name:
            return Span(p.span.file, p.span.line, p.span.col, p.span.line, p.span.col + len(name))
    for node in ast.walk(kernel):
        if isinstance(node, ast.Assign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node.target.span
        if isinstance(node, (ast.For, ast.Unpack)):
            for t in node.targets:
                if t.id == name:
                    return t.span
    return None


def show_ty(ty: Ty) -> str:
    if isinstance(ty, TensorTy):
        shape = f"[{', '.join(str(d) for d in ty.shape)}]"
        valid = "" if ty.valid is None else f" (valid [{', '.join(str(d) for d in ty.valid)}])"
        return f"{ty.dtype}{shape}{valid}"
    if isinstance(ty, ScalarTy):
        return f"{ty.dtype} scalar"
    if isinstance(ty, DtypeTy):
        return f"dtype {ty.dtype}"
    return str(ty)


def types_at(path: str, sources: Mapping[str, str], line: int, col: int) -> list[str]:
    """``variant: type`` of the name at 0-based (line, col), one line a dtype variant, as the checker
    types it; empty when the file does not check (its diagnostics say why)."""
    spec_path = spec_of(path, sources)
    text = sources.get(path)
    if spec_path is None or text is None:
        return []
    diags = Diagnostics()
    try:
        spec = load_spec(spec_path, diags, sources)
    except CompileError:
        return []
    module = parse_module(text, path, diags) if spec.source == path else None
    if module is None:
        return []
    try:
        checked = check(module, spec, diags)
    except CompileError:
        return []
    out = []
    for ck in checked:
        for node in ast.walk(ck.kernel):
            if isinstance(node, ast.Name) and _covers(node.span, line + 1, col + 1):
                ty = ck.typing.ty.get(id(node))
                binding = ck.typing.binding.get(id(node))
                if ty is None and binding is not None:
                    ty = binding.ty
                if ty is not None:
                    kind = f" ({binding.kind})" if binding is not None else ""
                    out.append(f"{ck.variant_name or 'all'}: `{node.id}: {show_ty(ty)}`{kind}")
                break
    return out


def builtin_doc(name: str) -> str | None:
    if name in OPS:
        return describe_op(OPS[name])
    if name in INDEXING:
        return describe_index_op(INDEXING[name])
    return STRUCTURE_DOCS.get(name)


def pto_completions() -> list[tuple[str, str, str]]:
    """(label, kind, detail) of what may be typed in a .pto: builtins, dtypes, keywords."""
    items = [(n, "function", OPS[n].doc) for n in sorted(OPS)]
    items += [(n, "function", STRUCTURE_DOCS[n]) for n in sorted(STRUCTURE_BUILTINS) + list(SCALAR_BUILTINS)
              if n in STRUCTURE_DOCS]
    items += [(n, "function", INDEXING[n].doc) for n in sorted(INDEXING)]
    items += [(d, "type", "dtype") for d in DTYPE_NAMES]
    items += [(k, "keyword", "keyword") for k in sorted(KEYWORDS | {"True", "False", "out", "inout"})]
    return items


# ------------------------------------------------------------------ spec YAML: keys by position


@dataclass
class KeyInfo:
    name: str
    desc: str


_KEY = re.compile(r"^(\s*)(-\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*:(.*)$")


def yaml_path_at(text: str, line: int, col: int) -> tuple[list[str], str | None]:
    """The block-style key path of the mapping 0-based (line, col) is in, and the key whose value the
    cursor is typing (``target: |``), if any. ``[]`` stands for a list item."""
    lines = text.split("\n")
    cur = lines[line][:col] if line < len(lines) else ""
    path: list[str] = []
    m = re.match(r"^(\s*)(-\s+)?", cur)
    assert m is not None
    need = len(m.group(1)) if m.group(2) else len(m.group(0))
    if m.group(2):
        path.append("[]")
    key = _KEY.match(cur)
    value_of = key.group(3) if key else None
    for raw in reversed(lines[:line]):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        km = _KEY.match(raw)
        dash = re.match(r"^(\s*)-(\s+|$)", raw)
        lead = len(raw) - len(raw.lstrip())
        kcol = len(km.group(1)) + len(km.group(2) or "") if km else lead
        opens = km is not None and (not km.group(4).strip() or km.group(4).strip().startswith("#"))
        if km and kcol < need and opens:
            path.append(km.group(3))
            need = kcol
        if dash and lead < need:
            path.append("[]")
            need = lead
        if need == 0:
            break
    return list(reversed(path)), value_of


def _resolve(schema: Schema | None, step: str) -> Schema | None:
    if isinstance(schema, OneOf):
        want = ListOf if step == "[]" else (Obj, MapOf)
        schema = next((a for a in schema.alts if isinstance(a, want)), None)
    if step == "[]":
        return schema.item if isinstance(schema, ListOf) else None
    if isinstance(schema, Obj):
        return schema.fields.get(step)
    if isinstance(schema, MapOf):
        return schema.value
    return None


def schema_at(path: list[str]) -> Schema | None:
    schema: Schema | None = spec_schema()
    for step in path:
        schema = _resolve(schema, step)
    return schema


def yaml_completions(text: str, line: int, col: int) -> list[KeyInfo]:
    """Keys that may start at (line, col), or the values of an enumerated or boolean key."""
    path, value_of = yaml_path_at(text, line, col)
    if value_of is not None:
        schema = schema_at([*path, value_of])
        if isinstance(schema, Enum):
            values = schema.values() if callable(schema.values) else schema.values
            return [KeyInfo(v, schema.desc) for v in values]
        if isinstance(schema, Bool):
            return [KeyInfo("true", schema.desc), KeyInfo("false", schema.desc)]
        return []
    schema = schema_at(path)
    if isinstance(schema, OneOf):
        schema = next((a for a in schema.alts if isinstance(a, Obj)), None)
    if isinstance(schema, Obj):
        return [KeyInfo(k, v.desc) for k, v in schema.fields.items()]
    return []


def yaml_key_doc(text: str, line: int, col: int) -> str | None:
    """The schema's description of the key at (line, col)."""
    lines = text.split("\n")
    km = _KEY.match(lines[line]) if line < len(lines) else None
    if km is None:
        return None
    start = len(km.group(1)) + len(km.group(2) or "")
    if not start <= col <= start + len(km.group(3)):
        return None
    path, _ = yaml_path_at(text, line, start)
    schema = schema_at([*path, km.group(3)])
    if schema is None:
        return None
    return f"`{km.group(3)}`: {schema.desc}" if schema.desc else f"`{km.group(3)}`"


def codes_in(text: str) -> list[str]:
    return _CODE.findall(text)
