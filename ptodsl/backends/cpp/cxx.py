"""C++ spelling shared by the kernel and control emitters: element types, identifiers, symbolic
expressions and source-location comments.

Symbolic expressions (:mod:`ptodsl.sym`) follow Python semantics: ``/`` is true division and
``//``, ``%`` and ``cdiv`` round towards minus infinity. C++ integer division truncates, so those
three print as plain ``/`` and ``%`` only where both operands are provably non-negative; elsewhere
they call a small helper that the translation unit defines once (see :data:`HELPERS`). ``min`` and
``max`` call helpers too: pto-isa's device code calls no standard-library function, so neither does
an emitted kernel (no ``std::min``, ``std::fmin``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ... import sym
from ...cxx_names import cxx_reserved
from ...diagnostics import CompileError, Diagnostic, Span
from ...escape import cpp_comment

# C++ element type of each ptodsl dtype. bool tensors and tiles are bytes (numpy's bool layout);
# a comparison result is a packed predicate stored in such a byte tile.
CXX_TYPES: dict[str, str] = {
    "bool": "uint8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
    "u8": "uint8_t", "f16": "half", "bf16": "bfloat16_t", "f32": "float",
}
FLOAT_DTYPES = ("f16", "bf16", "f32")

KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t
class compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield
decltype default delete do double dynamic_cast else enum explicit export extern false float for friend
goto if inline int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private
protected public register reinterpret_cast requires return short signed sizeof static static_assert
static_cast struct switch template this thread_local throw true try typedef typeid typename union
unsigned using virtual void volatile wchar_t while xor xor_eq
std pto half bfloat16_t main floor_div floor_mod ceil_div min_i64 max_i64 min_fp max_fp AICORE
""".split())

# Helpers defined in a translation unit only when one of its expressions needs them: floor rounding
# for operands that may be negative, and min/max. They are AICORE functions, as everything a kernel
# calls on the NPU must be (pto-isa's header defines the macro; it is empty on the CPU and on the
# NPU host). min and max keep Python's meaning, which the simulator evaluates: the first argument
# unless the second is smaller (or, for max, larger), also when one of them is NaN.
_HELPER_HEAD = "AICORE static inline constexpr"


def _minmax(name: str, ctype: str, op: str) -> str:
    return f"{_HELPER_HEAD} {ctype} {name}({ctype} a, {ctype} b)\n{{\n    return b {op} a ? b : a;\n}}"


def _fminmax(name: str, op: str) -> str:
    # the operands' common type, as std::fmin gives: a float scalar operand stays a float
    return (f"template <typename A, typename B>\n{_HELPER_HEAD} decltype(A() + B()) {name}(A a, B b)\n"
            f"{{\n    return b {op} a ? b : a;\n}}")


HELPERS: dict[str, str] = {
    "floor_div": (f"{_HELPER_HEAD} int64_t floor_div(int64_t a, int64_t b)\n"
                  "{\n    const int64_t q = a / b;\n    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n}"),
    "floor_mod": (f"{_HELPER_HEAD} int64_t floor_mod(int64_t a, int64_t b)\n"
                  "{\n    const int64_t r = a % b;\n    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n}"),
    "ceil_div": (f"{_HELPER_HEAD} int64_t ceil_div(int64_t a, int64_t b)\n"
                 "{\n    return -floor_div(-a, b);\n}"),
    "min_i64": _minmax("min_i64", "int64_t", "<"),
    "max_i64": _minmax("max_i64", "int64_t", ">"),
    "min_fp": _fminmax("min_fp", "<"),
    "max_fp": _fminmax("max_fp", ">"),
}
HELPER_DEPS = {"ceil_div": ("floor_div",)}


def unsupported(what: str, span: Span | None = None, help: str | None = None) -> CompileError:
    """The E0800 diagnostic for an IR construct the C++ emitter cannot express."""
    return CompileError([Diagnostic(
        "E0800", f"the C++ emitter does not support {what}", span, "here" if span else "",
        help=help or "run this kernel with backend=\"sim\" until the emitter handles it",
    )])


def cxx_type(dtype: str) -> str:
    try:
        return CXX_TYPES[dtype]
    except KeyError:
        raise unsupported(f"the element type `{dtype}`") from None


def location(span: Span | None) -> str:
    """``softmax.pto:5:17``: the file's base name keeps machine paths out of generated files."""
    if span is None:
        return ""
    return cpp_comment(f"{os.path.basename(span.file)}:{span.line}:{span.col}")


def format_lines(lines: Iterable[tuple[int, str, str]]) -> list[str]:
    """(depth, code, location) statements as indented lines, each with its location comment."""
    out = []
    for depth, code, loc in lines:
        text = "    " * depth + code
        out.append(f"{text}  // {loc}" if loc else text)
    return out


def camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


class Names:
    """Identifiers of one C++ scope: sanitised, unique and stable for the same input."""

    def __init__(self, reserved: Iterable[str] = ()):
        self.taken: set[str] = set(KEYWORDS) | set(reserved)

    def claim(self, wanted: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in wanted) or "v"
        if base[0].isdigit():
            base = "v" + base
        if cxx_reserved(base):
            # A macro or a pto API name would be expanded or hidden: `NAN` becomes `v_NAN`, a
            # spelling no macro and no API name has.
            base = "v_" + base
        name, n = base, 1
        while name in self.taken or name.startswith("__"):
            name = f"{base}_{n}"
            n += 1
        self.taken.add(name)
        return name


# ------------------------------------------------------------------------------ expressions

INT, FLOAT, BOOL = "int", "float", "bool"
# C++ precedence levels (higher binds tighter); Python's relative order for these operators is
# the same, so one table serves both.
_PREC = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4,
         "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
_ATOM = 9
_CPP_OP = {"and": "&&", "or": "||"}


@dataclass
class ExprContext:
    """What the printer knows about the symbols of one scope."""

    kinds: Mapping[str, str] = field(default_factory=dict)  # symbol -> INT | FLOAT (default INT)
    names: Mapping[str, str] = field(default_factory=dict)  # symbol -> C++ identifier
    nonneg: frozenset[str] = frozenset()  # symbols known to be >= 0
    helpers: set[str] = field(default_factory=set)  # helpers the printed text calls
    # compound node -> its printing: the offsets and extents of a kernel repeat the same min/max
    # subtrees in many expressions. Sound because the names and kinds are complete before printing,
    # and the helpers a subtree calls were added to ``helpers`` when it was first printed.
    printed: dict[str, tuple[str, int, str]] = field(default_factory=dict, repr=False, compare=False)

    def ranges(self) -> dict[str, sym.Bounds]:
        return {name: (0, None) for name in self.nonneg}

    def is_nonneg(self, e: sym.Expr) -> bool:
        return sym.prove_nonneg(e, self.ranges())


# The compiler's own constants, not the standard library's: device code calls no std:: function
# (pto-isa's AICORE code never does), and bisheng and g++ both have these builtins.
_NAN = {"float": '__builtin_nanf("")', "double": '__builtin_nan("")'}
_INF = {"float": "__builtin_inff()", "double": "__builtin_inf()"}


def float_literal(value: float, ctype: str = "double") -> str:
    if math.isnan(value):
        return _NAN[ctype]
    if math.isinf(value):
        return _INF[ctype] if value > 0 else f"-{_INF[ctype]}"
    text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + ("f" if ctype == "float" else "")


def _int_literal(value: int) -> str:
    return str(value) if -(2**31) <= value < 2**31 else f"INT64_C({value})"


def expr(e: sym.Expr, ctx: ExprContext) -> str:
    """``e`` as a C++ expression over the scope's identifiers."""
    return _print(e, ctx)[0]


def kind_of(e: sym.Expr, ctx: ExprContext) -> str:
    return _print(e, ctx)[2]


def _wrap(text: str, prec: int, need: int) -> str:
    return f"({text})" if prec < need else text


def _print(e: sym.Expr, ctx: ExprContext) -> tuple[str, int, str]:
    """(text, precedence, kind)."""
    if isinstance(e, bool):
        return ("true" if e else "false"), _ATOM, BOOL
    if isinstance(e, int):
        text = _int_literal(e)
        return text, (_ATOM if e >= 0 else 7), INT
    if isinstance(e, float):
        text = float_literal(e)
        return text, (_ATOM if not text.startswith("-") else 7), FLOAT
    if isinstance(e, sym.Sym):
        return ctx.names.get(e.name, e.name), _ATOM, ctx.kinds.get(e.name, INT)
    key = sym.to_text(e)  # not the node: `x + 1` and `x + 1.0` are equal nodes of other kinds
    found = ctx.printed.get(key)
    if found is None:
        found = ctx.printed[key] = _compound(e, ctx)
    return found


def _compound(e: sym.Expr, ctx: ExprContext) -> tuple[str, int, str]:
    if isinstance(e, sym.NegExpr):
        text, prec, kind = _print(e.operand, ctx)
        return f"-{_wrap(text, prec, 8)}", 7, kind
    if isinstance(e, sym.CallExpr):
        return _call(e, ctx)
    if isinstance(e, sym.BinExpr):
        return _binary(e, ctx)
    raise TypeError(f"not a symbolic expression: {e!r}")


def _call(e: sym.CallExpr, ctx: ExprContext) -> tuple[str, int, str]:
    args = [_print(a, ctx) for a in e.args]
    if e.fn == "not":
        return f"!{_wrap(args[0][0], args[0][1], 8)}", 7, BOOL
    if e.fn in ("min", "max"):
        integral = all(kind != FLOAT for _, _, kind in args)
        helper = f"{e.fn}_{'i64' if integral else 'fp'}"
        _use(ctx, helper)
        return f"{helper}({args[0][0]}, {args[1][0]})", _ATOM, INT if integral else FLOAT
    if e.fn == "cdiv":
        a, b = e.args
        if ctx.is_nonneg(a) and isinstance(b, int) and b > 0:
            # (a + b - 1) / b for non-negative a: the sum folds the constant (N + 63) / 64.
            num = _print(sym.add(a, b - 1), ctx)
            return f"{_wrap(num[0], num[1], 6)} / {_wrap(args[1][0], args[1][1], 7)}", 6, INT
        _use(ctx, "ceil_div")
        return f"ceil_div({args[0][0]}, {args[1][0]})", _ATOM, INT
    raise TypeError(f"unknown function {e.fn}")


def _use(ctx: ExprContext, helper: str) -> None:
    ctx.helpers.add(helper)
    ctx.helpers.update(HELPER_DEPS.get(helper, ()))


def _binary(e: sym.BinExpr, ctx: ExprContext) -> tuple[str, int, str]:
    left, right = _print(e.left, ctx), _print(e.right, ctx)
    kinds = {left[2], right[2]}
    op = _CPP_OP.get(e.op, e.op)
    if op in ("//", "%") and FLOAT not in kinds:
        name = "floor_div" if op == "//" else "floor_mod"
        if ctx.is_nonneg(e.left) and ctx.is_nonneg(e.right):
            # C++ truncation is floor rounding for non-negative operands.
            cop = "/" if op == "//" else "%"
            text = f"{_wrap(left[0], left[1], 6)} {cop} {_wrap(right[0], right[1], 7)}"
            return text, 6, INT
        else:
            _use(ctx, name)
            return f"{name}({left[0]}, {right[0]})", _ATOM, INT
    elif op == "//":
        return f"std::floor({left[0]} / {right[0]})", _ATOM, FLOAT
    elif op == "%":
        return f"({left[0]} - {right[0]} * std::floor({left[0]} / {right[0]}))", _ATOM, FLOAT
    prec = _PREC[op]
    if op == "/" and FLOAT not in kinds:
        # Python's true division of two integers.
        text = f"static_cast<double>({left[0]}) / {_wrap(right[0], right[1], prec + 1)}"
        return text, prec, FLOAT
    # an `&&` under `||` is bracketed although C++ binds it first: compilers warn of it (-Wparentheses)
    left_at = prec + 2 if op == "||" else prec
    text = f"{_wrap(left[0], left[1], left_at)} {op} {_wrap(right[0], right[1], max(left_at, prec + 1))}"
    if op in ("&&", "||", "==", "!=", "<", "<=", ">", ">="):
        kind = BOOL
    else:
        kind = FLOAT if FLOAT in kinds else INT
    return text, prec, kind


def helper_definitions(helpers: Iterable[str]) -> list[str]:
    """Definitions of the helpers used, in dependency order."""
    wanted = set(helpers)
    return [HELPERS[name] for name in HELPERS if name in wanted]


def scalar_value(e: sym.Expr, dtype: str, ctx: ExprContext) -> str:
    """A scalar operand of a tile instruction whose element type is ``dtype``."""
    if isinstance(e, (int, float)) and not isinstance(e, bool):
        if dtype in FLOAT_DTYPES:
            return float_literal(float(e), "float")
        if isinstance(e, float):
            if not e.is_integer():
                raise unsupported(f"the non-integral scalar {e!r} on a `{dtype}` tile")
            e = int(e)
        return _int_literal(int(e))
    text, _, kind = _print(e, ctx)
    want = FLOAT if dtype in FLOAT_DTYPES else INT
    if kind == want and (want == INT or all(ctx.kinds.get(s) == FLOAT for s in sym.free_symbols(e))):
        return text
    return f"static_cast<{'float' if want == FLOAT else cxx_type(dtype)}>({text})"


__all__ = ["CXX_TYPES", "ExprContext", "Names", "camel", "cxx_type", "expr", "float_literal",
           "helper_definitions", "location", "scalar_value", "unsupported"]
