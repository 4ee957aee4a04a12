"""The op mapping of ``ptodsl port``: PyPTO name -> ptodsl form, as data.

A PyPTO op (``pypto.NAME(...)`` or the tensor method ``t.NAME(...)``) translates by its row of
``TABLE``. A name with no row that is an op of ``ptodsl.ops.OPS`` or a structure builtin of
``ptodsl.ops.STRUCTURE_BUILTINS`` maps to the ptodsl call of the same name, arguments passed as
they are: when the language gains an op under PyPTO's name, the port covers it without a row
here. A row is needed only where the spelling differs (``pypto.add`` is ``+``, ``a_trans`` is
``trans_a``) or where the op is a composite of ptodsl ops (``clip``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ops import OPS, STRUCTURE_BUILTINS


@dataclass(frozen=True)
class Form:
    """How one PyPTO op is written in ptodsl.

    ``kind``: ``call`` (``target(args..., kw=...)``), ``operator`` (``a target b``, a binary
    operator) or ``template`` (``target`` is a format string over the positional operands
    ``{0}``, ``{1}``, ...). ``params`` are PyPTO's parameter names in positional order, so that a
    keyword argument finds its place; the first ``positional`` of them are passed positionally,
    the rest as keywords. ``rename`` maps a PyPTO keyword to ptodsl's; ``ignore`` lists keywords
    accepted only with the value given (PyPTO defaults that ptodsl has no knob for); ``fill``
    gives ptodsl keywords PyPTO defaults differently (``keepdim``); ``order`` puts the positional
    operands in ptodsl's order (``full(value, shape, dtype)``).
    """

    target: str
    kind: str = "call"
    params: tuple[str, ...] = ()
    positional: int = 1
    rename: dict[str, str] = field(default_factory=dict)
    ignore: dict[str, object] = field(default_factory=dict)
    fill: dict[str, object] = field(default_factory=dict)
    order: tuple[int, ...] = ()  # ptodsl's order of the positional operands, when it differs


def _binary(op: str) -> Form:
    return Form(op, "operator", ("input", "other"), 2)


def _reduce(name: str) -> Form:
    return Form(name, "call", ("input", "dim", "keepdim"), 1, fill={"keepdim": False})


TABLE: dict[str, Form] = {
    # arithmetic and comparisons are ptodsl operators
    "add": _binary("+"), "sub": _binary("-"), "mul": _binary("*"), "div": _binary("/"),
    "gt": _binary(">"), "greater": _binary(">"), "ge": _binary(">="), "lt": _binary("<"),
    "le": _binary("<="), "eq": _binary("=="), "ne": _binary("!="),
    # reductions: PyPTO's keepdim defaults to False; ptodsl's spelling says it
    "sum": _reduce("sum"), "amax": _reduce("amax"), "amin": _reduce("amin"),
    "maximum": Form("maximum", params=("input", "other"), positional=2),
    "minimum": Form("minimum", params=("input", "other"), positional=2),
    "where": Form("where", params=("condition", "input", "other"), positional=3),
    "matmul": Form("matmul", params=("input", "mat2", "out_dtype"), positional=2,
                   rename={"a_trans": "trans_a", "b_trans": "trans_b"},
                   ignore={"c_matrix_nz": False, "extend_params": None}),
    "cast": Form("cast", params=("input", "dtype"), positional=2,
                 ignore={"mode": "CAST_NONE", "satmode": "OFF"}),
    "view": Form("view", params=("input", "shape", "offsets"), positional=3),
    "full": Form("full", params=("shape", "fill_value", "dtype"), positional=3, order=(1, 0, 2)),
    "zeros": Form("zeros", params=("shape", "dtype"), positional=2),
    "ones": Form("ones", params=("shape", "dtype"), positional=2),
    "ceildiv": Form("cdiv", params=("a", "b"), positional=2),
    # composites of ptodsl ops
    "clip": Form("minimum(maximum({0}, {1}), {2})", "template", ("input", "min", "max"), 3),
    "erfc": Form("1.0 - erf({0})", "template", ("input",)),
    "softmax": Form("exp({0} - amax({0}, dim={1}, keepdim=True)) / sum(exp({0} - amax({0}, dim={1}, keepdim=True)), "
                    "dim={1}, keepdim=True)", "template", ("input", "dim"), 2),
}

# Names ptodsl spells alike that are not translatable calls: the checker's own comparison op,
# and the loop forms and predicates the translator handles as statements.
NOT_DEFAULT = {"cmp", "loop", "loop_unroll", "print"}


def form_of(name: str) -> Form | None:
    """The ptodsl form of PyPTO op ``name``, or None when ptodsl has none."""
    row = TABLE.get(name)
    if row is not None:
        return row
    if name in NOT_DEFAULT:
        return None
    if name in OPS or name in STRUCTURE_BUILTINS:
        od = OPS.get(name)
        return Form(name, params=(), positional=od.arity if od is not None else 99)
    return None


def known_names() -> list[str]:
    """Every PyPTO op name the port translates, for "did you mean" and the docs."""
    return sorted({*TABLE, *(n for n in (*OPS, *STRUCTURE_BUILTINS) if n not in NOT_DEFAULT)})


# PyPTO dtype names -> ptodsl dtypes.
DTYPES: dict[str, str] = {
    "DT_FP32": "f32", "DT_FP16": "f16", "DT_BF16": "bf16", "DT_INT8": "i8", "DT_INT16": "i16",
    "DT_INT32": "i32", "DT_INT64": "i64", "DT_UINT8": "u8", "DT_BOOL": "bool",
}
# torch dtypes (of the tensors a kernel is called with) -> ptodsl dtypes.
TORCH_DTYPES: dict[str, str] = {
    "float32": "f32", "float": "f32", "float16": "f16", "half": "f16", "bfloat16": "bf16",
    "int8": "i8", "int16": "i16", "int32": "i32", "int": "i32", "int64": "i64", "long": "i64",
    "uint8": "u8", "bool": "bool",
}
# Python annotations of scalar parameters -> ptodsl scalar dtypes.
SCALAR_ANNOTATIONS: dict[str, str] = {"float": "f32", "int": "i32", "bool": "bool"}

# Pass options ptodsl knows under PyPTO's name (``jit(pass_options=...)``, ``set_pass_options``).
PASS_OPTIONS = ("cycle_upper_bound",)

# Keywords of ``pypto.loop`` ptodsl has a place for; others are E1007.
LOOP_KEYWORDS = ("name", "idx_name", "unroll_list", "submit_before_loop")
