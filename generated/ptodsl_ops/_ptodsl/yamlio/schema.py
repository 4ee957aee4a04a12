"""Validating YAML files against a description given as data, for specs and target files alike.

A handful of combinators (:class:`Obj`, :class:`MapOf`, :class:`ListOf`, :class:`Int`, ...) describe
what a YAML file may contain. The same description validates a located tree from
:mod:`.nodes` (reporting every problem, at its line and column) and generates a JSON Schema for
editors and other tools. The spec format is in :mod:`ptodsl.frontend.schema`; the target files
under ``ptodsl/targets/`` use the same combinators from here, without the front end.
"""

from __future__ import annotations

import difflib
import keyword
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..cxx_names import cxx_reserved
from ..diagnostics import Diagnostics, Label, Span
from ..dtypes import DTYPE_ALIASES, DTYPE_NAMES, UNSUPPORTED_DTYPES
from ..escape import unprintable
from .nodes import YMap, YNode, YScalar, YSeq, describe

E_UNKNOWN_KEY = "E0206"
E_TYPE = "E0207"
E_MISSING_KEY = "E0208"
E_VALUE = "E0209"
E_DUPLICATE_ENTRY = "E0210"
E_NAME = "E0211"
E_DTYPE = "E0212"
E_REFERENCE = "E0213"
E_TARGET = "E0214"

Path = tuple[str | int, ...]
MAX_STRING = 10_000  # characters of one YAML string (a doc, a test name, a path)


class _Invalid:
    """What a check returns for a value it reported an error on; callers drop it."""

    def __repr__(self) -> str:
        return "INVALID"


INVALID: Any = _Invalid()


def path_str(path: Path) -> str:
    """``("tests", 0, "shapes")`` as ``tests[0].shapes``, the way a user would name the place."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "the top level"


# ------------------------------------------------------------------ identifiers

IDENT_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
_IDENT = re.compile(IDENT_PATTERN)

# Names from the spec end up in generated C++ (kernel, loop and variable names) and in generated
# Python (wrapper parameters), so they must be legal and unreserved in both languages.
CPP_KEYWORDS: frozenset[str] = frozenset(
    """
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
    char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
    co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq
    nullptr operator or or_eq private protected public register reinterpret_cast requires return
    short signed sizeof static static_assert static_cast struct switch template this thread_local
    throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
    xor xor_eq
    """.split()
)
PYTHON_KEYWORDS: frozenset[str] = frozenset(keyword.kwlist)
# C++ reserves these spellings for the implementation in every scope.
_CPP_RESERVED = re.compile(r"__|_[A-Z]")


def identifier_problem(name: str) -> str | None:
    """Why ``name`` cannot be used as a name in generated code, or None when it can."""
    if not _IDENT.fullmatch(name):
        return "names must start with a letter or `_` and contain only letters, digits and `_`"
    if name in PYTHON_KEYWORDS and name in CPP_KEYWORDS:
        return f"`{name}` is a keyword in Python and C++"
    if name in PYTHON_KEYWORDS:
        return f"`{name}` is a Python keyword"
    if name in CPP_KEYWORDS:
        return f"`{name}` is a C++ keyword"
    if _CPP_RESERVED.match(name):
        return "names starting with `__` or `_` and an uppercase letter are reserved in C++"
    return None


# The keyword arguments a call of an op takes besides the kernel's parameters, each with what it
# is for: ``ptodsl.load``'s Operator, the generated wrappers (``ops/<op>.py``) and the generated
# torch ops. A parameter of one of these names could never be passed, so the checker refuses it
# (E0322); tests/gen checks that the wrappers take no other keyword of their own.
CALL_KEYWORDS: dict[str, str] = {
    "backend": "every call of an op takes `backend=` (sim, cpu or npu) besides its parameters",
    "device": "a generated wrapper takes `device=` (the NPU to run on) besides its parameters",
}


def parameter_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a kernel parameter (it becomes a keyword argument of every call of
    the op), or None when it can."""
    return identifier_problem(name) or CALL_KEYWORDS.get(name)


def op_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an op: it is also the C symbol of the kernel library's entry."""
    problem = identifier_problem(name)
    if problem is None and cxx_reserved(name):
        problem = f"`{name}` is a macro or an API name in the C++ the kernels are built with"
    return problem


def _suggest_identifier(name: str, reserved: Sequence[str] = ()) -> str:
    """A valid spelling close to ``name``, for the help line."""
    fixed = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if _CPP_RESERVED.match(fixed):
        fixed = fixed.lstrip("_")
    if not fixed:
        return "x"
    if fixed[0].isdigit():
        fixed = "v" + fixed
    if fixed in PYTHON_KEYWORDS or fixed in CPP_KEYWORDS:
        fixed += "_"
    elif fixed in reserved:
        fixed = fixed.upper()
    elif cxx_reserved(fixed):
        fixed = fixed.lower() + "_op"
    return fixed


# ------------------------------------------------------------------ validation context


@dataclass
class Ctx:
    """What a validation run needs besides the node: where to report, and the whole schema (for hints)."""

    diags: Diagnostics
    root: Schema | None = None

    def type_error(self, node: YNode, path: Path, expected: str) -> Any:
        self.diags.error(
            E_TYPE, f"`{path_str(path)}` must be {expected}, found {describe(node)}", node.span,
            f"expected {expected}",
        )
        return INVALID


# ------------------------------------------------------------------ combinators


@dataclass
class Schema:
    """Base of all combinators: ``check`` validates a node, ``to_json`` describes it as JSON Schema."""

    desc: str = field(default="", kw_only=True)
    default: Any = field(default=None, kw_only=True)
    # Codes of the checker's diagnostics for this value's constraints (a number's bounds, a list's
    # uniqueness): the JSON Schema states the constraints, and validating the YAML leaves them to the
    # checker, whose message knows the loop, the op or the target. The value's type and a list's
    # length stay the validator's.
    checked_by: tuple[str, ...] = field(default=(), kw_only=True)

    expected: str = field(default="a value", init=False, repr=False)

    def accepts(self, node: YNode) -> bool:
        """Whether the node has the right shape (scalar type, list, mapping) to be checked by this."""
        raise NotImplementedError

    def check(self, node: YNode, path: Path, ctx: Ctx) -> Any:
        raise NotImplementedError

    def json(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        out = self.json()
        if self.desc:
            out["description"] = self.desc
        if self.default is not None:
            out["default"] = self.default
        return out


def _is_int(node: YNode) -> bool:
    return isinstance(node, YScalar) and isinstance(node.value, int) and not isinstance(node.value, bool)


def _is_number(node: YNode) -> bool:
    return isinstance(node, YScalar) and isinstance(node.value, int | float) and not isinstance(node.value, bool)


def _out_of_range(value: float, lo: float | None, hi: float | None) -> str | None:
    """What the value should be, naming only the bound it breaks; None when it is in range."""
    if lo is not None and value < lo:
        return "positive" if lo == 1 and isinstance(lo, int) else f"at least {lo}"
    if hi is not None and value > hi:
        return f"at most {hi}"
    return None


@dataclass
class _Number(Schema):
    """Shared by Int and Float: type test, range check and the JSON Schema bounds."""

    min: float | None = None
    max: float | None = None
    json_type = "number"

    def is_kind(self, node: YNode) -> bool:
        return _is_number(node)

    def convert(self, value: Any) -> Any:
        return value

    def accepts(self, node: YNode) -> bool:
        return self.is_kind(node)

    def check(self, node: YNode, path: Path, ctx: Ctx) -> Any:
        if not self.is_kind(node):
            return ctx.type_error(node, path, self.expected)
        assert isinstance(node, YScalar)
        try:
            value = self.convert(node.value)
        except OverflowError:  # an integer too large for a float
            value = math.inf
        if isinstance(value, float) and not math.isfinite(value):
            ctx.diags.error(E_VALUE, f"`{path_str(path)}` must be a finite number, found `{node.text}`",
                            node.span, "not a finite number")
            return INVALID
        what = None if self.checked_by else _out_of_range(value, self.min, self.max)
        if what is not None:
            ctx.diags.error(E_VALUE, f"`{path_str(path)}` must be {what}, found {node.text}", node.span,
                            f"must be {what}")
            return INVALID
        return value

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.json_type}
        if self.min is not None:
            out["minimum"] = self.min
        if self.max is not None:
            out["maximum"] = self.max
        return out


@dataclass
class Int(_Number):
    min: int | None = None
    max: int | None = None
    json_type = "integer"

    def __post_init__(self) -> None:
        self.expected = "an integer"

    def is_kind(self, node: YNode) -> bool:
        return _is_int(node)


@dataclass
class Float(_Number):
    """A finite number; integers are accepted and converted (``atol: 0`` is a fine tolerance)."""

    def __post_init__(self) -> None:
        self.expected = "a number"

    def convert(self, value: Any) -> Any:
        return float(value)


@dataclass
class Bool(Schema):
    def __post_init__(self) -> None:
        self.expected = "`true` or `false`"

    def accepts(self, node: YNode) -> bool:
        return isinstance(node, YScalar) and isinstance(node.value, bool)

    def check(self, node: YNode, path: Path, ctx: Ctx) -> Any:
        if not self.accepts(node):
            return ctx.type_error(node, path, self.expected)
        assert isinstance(node, YScalar)
        return node.value

    def json(self) -> dict[str, Any]:
        return {"type": "boolean"}


@dataclass
class Str(Schema):
    """A string, optionally of a given form; ``form`` says the form in words for the error message."""

    pattern: str | None = None
    form: str = ""
    code: str = E_VALUE
    example: str = ""
    what: str = "a string"
    multiline: bool = False  # whether `\n` may occur (a doc); other control characters never may
    max_len: int = MAX_STRING

    def __post_init__(self) -> None:
        self.expected = self.what

    def accepts(self, node: YNode) -> bool:
        return isinstance(node, YScalar) and isinstance(node.value, str)

    def check(self, node: YNode, path: Path, ctx: Ctx) -> Any:
        if not self.accepts(node):
            return ctx.type_error(node, path, self.expected)
        assert isinstance(node, YScalar)
        bad = unprintable(node.value, allow_newline=self.multiline)
        if bad is not None:
            # Spec strings reach comments, string literals and docstrings of generated code.
            ctx.diags.error(
                E_VALUE, f"`{path_str(path)}` contains the control character U+{ord(bad):04X}", node.span,
                "control characters are not allowed here",
                help="remove it" + ("" if self.multiline else "; the value must be one line"),
            )
            return INVALID
        if len(node.value) > self.max_len:
            ctx.diags.error(
                E_VALUE, f"`{path_str(path)}` is {len(node.value)} characters long, at most {self.max_len} are allowed",
                node.span, "too long", help="shorten it",
            )
            return INVALID
        if self.pattern is not None and not re.fullmatch(self.pattern, node.value):
            ctx.diags.error(
                self.code, f"`{path_str(path)}` must be {self.form}, found `{node.value}`", node.span,
                f"expected {self.form}", help=f"for example `{self.example}`" if self.example else None,
            )
            return INVALID
        return node.value

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "string"}
        if self.pattern is not None:
            out["pattern"] = f"^(?:{self.pattern})$"
        return out


@dataclass
class Ident(Schema):
    """A name that reaches generated C++ and Python; ``role`` names it in messages ("loop name")."""

    role: str = "name"
    reserved: Sequence[str] = ()  # further names this role may not take, e.g. the dtype names
    reserved_why: str = ""
    exported: bool = False  # names a C symbol of the kernel library (an op), so it cannot be renamed

    def __post_init__(self) -> None:
        self.expected = f"a {self.role}"

    def accepts(self, node: YNode) -> bool:
        return isinstance(node, YScalar) and isinstance(node.value, str)

    def check(self, node: YNode, path: Path, ctx: Ctx) -> Any:
        if not isinstance(node, YScalar) or node.value is None:
            return ctx.type_error(node, path, self.expected)
        # Checked as written: `1` or `on` are no names, whatever YAML would convert them to.
        name = node.text
        problem = op_name_problem(name) if self.exported else identifier_problem(name)
        if problem is None and name in self.reserved:
            problem = self.reserved_why or f"`{name}` is reserved"
        if problem is not None:
            shown = name if name else "(empty)"
            ctx.diags.error(
                E_NAME, f"`{shown}` is not a valid {self.role}", node.span, problem,
                help=f"rename it, e.g. `{_suggest_identifier(name, self.reserved)}`",
            )
            return INVALID
        return name

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"$ref": "#/$defs/identifier"}
        if self.reserved:
            out["not"] = {"enum": list(self.reserved)}
        return out


@dataclass
class Enum(Schema):
    """One of a fixed set of words; ``values`` may be a function when the set is only known late."""

    values: Sequence[str] | Callable[[], Sequence[str]] = ()
    what: str = "value"
    code: str = E_VALUE
    hints: Mapping[str, str] = field(default_factory=dict)  # a common wrong word -> the help to give

    def __post_init__(self) -> None:
        self.expected = f"a {self.what}"

    def allowed(self) -> list[str]:
        return list(self.values() if callable(self.values) else self.values)

    def accepts(self, node: YNode) -> bool:
        # Any non-null scalar: `T: [f32, 16]` is better told "unknown dtype `16`" than "not a string".
        return isinstance(node, YScalar) and node.value is not None

    def check(self, node: YNode, path: Path, ctx: Ctx) -> Any:
        if not self.accepts(node):
            return ctx.type_error(node, path, self.expected)
        assert isinstance(node, YScalar)
        allowed = self.allowed()
        if node.text in allowed:
            return node.text
        close = difflib.get_close_matches(node.text, allowed, n=1, cutoff=0.5)
        help = self.hints.get(node.text) or (f"did you mean `{close[0]}`?" if close else None)
        ctx.diags.error(
            self.code, f"unknown {self.what} `{node.text}`", node.span, f"not a known {self.what}",
            help=help,
            notes=[f"known {self.what}s: {', '.join(allowed)}"],
        )
        return INVALID

    def json(self) -> dict[str, Any]:
        return {"enum": self.allowed()}


@dataclass
class ListOf(Schema):
    item: Schema = field(default_factory=lambda: Str())
    min_len: int = 0
    max_len: int | None = None
    unique: bool = False
    # Keep the valid items (and INVALID in place of the others) instead of dropping the whole list,
    # so cross-item checks still run, at the right indices, on a list with one broken item.
    keep_valid: bool = False

    def __post_init__(self) -> None:
        self.expected = "a list"

    def accepts(self, node: YNode) -> bool:
        return isinstance(node, YSeq)

    def check(self, node: YNode, path: Path, ctx: Ctx) -> Any:
        if not isinstance(node, YSeq):
            return ctx.type_error(node, path, self._expected_long())
        n = len(node.items)
        if n < self.min_len or (self.max_len is not None and n > self.max_len):
            ctx.diags.error(
                E_VALUE, f"`{path_str(path)}` must have {self._length_text()}, found {n}", node.span,
                f"{n} item{'' if n == 1 else 's'}",
            )
            bad = True
        else:
            bad = False
        out = []
        seen: dict[Any, YNode] = {}
        for i, item in enumerate(node.items):
            value = self.item.check(item, (*path, i), ctx)
            if value is INVALID:
                bad = True
                out.append(INVALID)
                continue
            if self.unique and not self.checked_by and isinstance(value, int | float | str | bool):
                first = seen.get(value)
                if first is not None:
                    ctx.diags.error(
                        E_DUPLICATE_ENTRY, f"`{path_str(path)}` lists `{value}` twice", item.span, "repeated here",
                        secondary=[Label(first.span, "first listed here")], help="remove the repetition",
                    )
                    bad = True
                    out.append(INVALID)
                    continue
                seen[value] = item
            out.append(value)
        return INVALID if bad and not self.keep_valid else out

    def _length_text(self) -> str:
        if self.max_len is not None and self.max_len == self.min_len:
            return f"exactly {self.min_len} item{'' if self.min_len == 1 else 's'}"
        if self.max_len is not None:
            return f"{self.min_len} to {self.max_len} items"
        return f"at least {self.min_len} item{'' if self.min_len == 1 else 's'}"

    def _expected_long(self) -> str:
        return f"a list of {_plural(self.item.expected)}"

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "array", "items": self.item.to_json()}
        if self.min_len:
            out["minItems"] = self.min_len
        if self.max_len is not None:
            out["maxItems"] = self.max_len
        if self.unique:
            out["uniqueItems"] = True
        return out


def _plural(expected: str) -> str:
    """The plural noun of an ``expected`` text: "an integer" gives "integers" (for "a list of integers")."""
    words = expected.split(" ", 1)
    noun = words[1] if len(words) == 2 and words[0] in ("a", "an") else expected
    if noun.startswith("`"):
        return noun
    return noun if noun.endswith("s") else noun + "s"


@dataclass
class MapOf(Schema):
    """A mapping from free names (checked by ``key``) to values of one kind."""

    key: Schema = field(default_factory=lambda: Ident())
    value: Schema = field(default_factory=lambda: Str())
    placeholder: str = "<name>"  # how the free key is written in paths shown to users

    def __post_init__(self) -> None:
        self.expected = "a mapping"

    def accepts(self, node: YNode) -> bool:
        return isinstance(node, YMap)

    def check(self, node: YNode, path: Path, ctx: Ctx) -> Any:
        if not isinstance(node, YMap):
            return ctx.type_error(node, path, self.expected)
        out: dict[str, Any] = {}
        for pair in node.pairs:
            key = self.key.check(pair.key, (*path, pair.key.text), ctx)
            value = self.value.check(pair.value, (*path, pair.key.text), ctx)
            if key is not INVALID and value is not INVALID:
                out[key] = value
        return out

    def json(self) -> dict[str, Any]:
        return {"type": "object", "propertyNames": self.key.json(), "additionalProperties": self.value.to_json()}


@dataclass
class Obj(Schema):
    """A mapping with a fixed set of keys; unknown keys are errors with a "did you mean"."""

    fields: dict[str, Schema] = field(default_factory=dict)
    required: Iterable[str] = ()

    def __post_init__(self) -> None:
        self.expected = "a mapping"
        self.required = tuple(self.required)
        unknown = set(self.required) - set(self.fields)
        assert not unknown, f"required keys {unknown} are not fields"

    def accepts(self, node: YNode) -> bool:
        return isinstance(node, YMap)

    def check(self, node: YNode, path: Path, ctx: Ctx, key_span: Span | None = None) -> Any:
        if not isinstance(node, YMap):
            return ctx.type_error(node, path, self.expected)
        out: dict[str, Any] = {}
        for pair in node.pairs:
            name = pair.key.text
            sub = self.fields.get(name)
            if sub is None:
                self._unknown(pair.key, path, ctx)
                continue
            if isinstance(sub, Obj):
                value = sub.check(pair.value, (*path, name), ctx, key_span=pair.key.span)
            else:
                value = sub.check(pair.value, (*path, name), ctx)
            if value is not INVALID:
                out[name] = value
        for name in self.required:
            if node.get(name) is None:
                where = key_span or node.span
                what = f"`{path_str(path)}`" if path else "the file"
                sub = self.fields[name]
                ctx.diags.error(
                    E_MISSING_KEY, f"{what} is missing the required key `{name}`", where, f"`{name}` is missing",
                    help=f"add `{name}:` ({sub.desc or sub.expected})",
                )
        return out

    def _unknown(self, key: YScalar, path: Path, ctx: Ctx) -> None:
        allowed = list(self.fields)
        close = difflib.get_close_matches(key.text, allowed, n=1, cutoff=0.6)
        where = f"in `{path_str(path)}`" if path else "at the top level"
        notes = [f"allowed keys here: {', '.join(allowed)}"]
        help = f"did you mean `{close[0]}`?" if close else None
        if not close and ctx.root is not None:
            # A known key in the wrong place is a common slip (e.g. `unroll` directly under
            # `schedule`); say where it belongs.
            homes = [p for p, k in key_locations(ctx.root) if k == key.text]
            if homes:
                places = [f"under `{h}`" if h else "at the top level" for h in homes]
                help = f"`{key.text}` belongs " + " or ".join(places)
        ctx.diags.error(E_UNKNOWN_KEY, f"unknown key `{key.text}` {where}", key.span, "unknown key",
                        help=help, notes=notes)

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "object",
            "properties": {k: v.to_json() for k, v in self.fields.items()},
            "additionalProperties": False,
        }
        if self.required:
            out["required"] = list(self.required)
        return out


@dataclass
class OneOf(Schema):
    """The first alternative whose shape fits the node checks it; e.g. an integer or a symbol name."""

    alts: tuple[Schema, ...] = ()
    what: str = ""

    def __post_init__(self) -> None:
        self.expected = self.what or " or ".join(a.expected for a in self.alts)

    def accepts(self, node: YNode) -> bool:
        return any(a.accepts(node) for a in self.alts)

    def check(self, node: YNode, path: Path, ctx: Ctx) -> Any:
        for alt in self.alts:
            if alt.accepts(node):
                return alt.check(node, path, ctx)
        return ctx.type_error(node, path, self.expected)

    def json(self) -> dict[str, Any]:
        # anyOf, not oneOf: an integer is also a JSON "number", so oneOf would reject it.
        return {"anyOf": [a.to_json() for a in self.alts]}


def key_locations(schema: Schema, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Every fixed key of the schema, as (dotted path of the mapping holding it, key)."""
    if isinstance(schema, Obj):
        for name, sub in schema.fields.items():
            yield prefix, name
            yield from key_locations(sub, f"{prefix}.{name}" if prefix else name)
    elif isinstance(schema, MapOf):
        yield from key_locations(schema.value, f"{prefix}.{schema.placeholder}")
    elif isinstance(schema, ListOf):
        yield from key_locations(schema.item, f"{prefix}[i]")
    elif isinstance(schema, OneOf):
        for alt in schema.alts:
            yield from key_locations(alt, prefix)


def validate(schema: Schema, node: YNode, diags: Diagnostics) -> Any:
    """Check ``node`` against ``schema``; every problem goes to ``diags``; returns the plain value."""
    return schema.check(node, (), Ctx(diags, schema))


# Shared by every Ident, so the keyword list appears once in a generated schema.
_JSON_DEFS: dict[str, Any] = {
    "identifier": {
        "type": "string",
        "pattern": f"^{IDENT_PATTERN}$",
        "not": {"anyOf": [{"enum": sorted(PYTHON_KEYWORDS | CPP_KEYWORDS)}, {"pattern": "^(__|_[A-Z])"}]},
        "description": "a name valid in Python and C++: no keyword, no name reserved in C++",
    }
}


def to_json_schema(schema: Schema, title: str, description: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title}
    if description:
        out["description"] = description
    out.update(schema.to_json())
    out["$defs"] = dict(_JSON_DEFS)
    return out

def dtype_name(desc: str = "") -> Enum:
    hints = {alias: f"ptodsl spells it `{name}`" for alias, name in DTYPE_ALIASES.items()}
    hints.update({alias: why for alias, why in UNSUPPORTED_DTYPES.items()})
    return Enum(values=DTYPE_NAMES, what="dtype", code=E_DTYPE, desc=desc, hints=hints)
