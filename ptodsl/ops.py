"""The op table: every operator of the language described once.

The checker reads arity, kind and ``dtypes`` from here; lowering reads ``expand`` (composites
become primitive ops) and ``combine``/``identity`` (reductions spanning several tiles); the emitter
reads the instructions (``pto``, ``pto_scalar``, ``row_pto``, ``col_pto``, ``acc_pto``),
``commutative`` (a left scalar may move right) and ``mean_of``; pipe assignment reads ``pipe``; the
simulator reads ``sim`` and ``identity_for``; ``ptodsl explain NAME`` shows a row. A new elementwise op
is one row here, one C++ function in the CPU header, one library spec and one line of
docs/LANGUAGE.md; tests/test_op_table.py fails while any of them is missing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .dtypes import DTYPE_NAMES, DTYPES, value_range

# A composite's body: nested tuples over op names. "x"/"y"/"z" name the operands (a scalar operand
# of the op stands for its name); floats are scalar operands of the scalar forms (``("add", "x",
# 1.0)`` is TADDS); ``("let", "u", value, body)`` computes ``value`` once and names it ``u`` inside
# ``body``; a comparison mode (``("gt", "x", 0.0)``, see TEMPLATE_COMPARES) is a `cmp` giving a
# bool tile, which ``("where", cond, a, b)`` selects with.
Template = tuple | str | float
TEMPLATE_COMPARES = ("lt", "le", "gt", "ge", "eq", "ne")


# Element types an op is defined on (``OpDef.dtypes``).
FLOATS: tuple[str, ...] = tuple(d for d in DTYPE_NAMES if DTYPES[d].is_float)
ANY: tuple[str, ...] = DTYPE_NAMES
INTS_TO_32: tuple[str, ...] = tuple(d for d in DTYPE_NAMES if not DTYPES[d].is_float and d != "bool"
                                    and DTYPES[d].itemsize <= 4)
NUMBERS: tuple[str, ...] = tuple(d for d in DTYPE_NAMES if d != "bool")
SIGNED: tuple[str, ...] = tuple(d for d in NUMBERS if d != "u8")
BOOL: tuple[str, ...] = ("bool",)


# The cube, as the language defines it (the same on every target; each target file's
# ``cube_dtypes`` and ``cube_stores`` say what its chip does): the dtype a matmul of each input dtype
# accumulates in on L0C, and the dtypes that accumulator may be written out as (``out_dtype``),
# converted once on its way out of L0C.
MATMUL_ACCUMULATOR: dict[str, str] = {"f16": "f32", "bf16": "f32", "f32": "f32", "i8": "i32"}
MATMUL_OUT: dict[str, tuple[str, ...]] = {"f32": ("f32", "f16", "bf16"), "i32": ("i32",)}


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: str  # unary | binary | ternary | reduce | cast | compare | select | matmul
    arity: int
    doc: str
    pto: str | None = None  # tile-tile instruction
    pto_scalar: str | None = None  # tile-scalar instruction (binary ops)
    pipe: str = "V"
    sim: Callable[..., np.ndarray] | None = None
    expand: Template | None = None  # composite ops: their primitive form
    dtypes: tuple[str, ...] = FLOATS  # the element types it is defined on
    commutative: bool = False  # binary ops: op(x, y) == op(y, x), so a scalar may sit on either side
    identity: float | None = None  # reductions: the value an empty partial holds (+-inf: the dtype's extreme)
    combine: str | None = None  # reductions: the binary op that merges partial results
    row_pto: str | None = None  # reductions along the last axis (one value per row)
    col_pto: str | None = None  # reductions along the second-to-last axis (one value per column)
    acc_pto: str | None = None  # the accumulating form (matmul: adds to the accumulator it is given)
    bias_pto: str | None = None  # the form that starts from a bias row (matmul: one value per column)
    mean_of: str | None = None  # reductions: computed as that reduction, then scaled by 1 / extent
    round_mode: str | None = None  # unary ops that are a TCVT to their own dtype under this RoundMode

    def __post_init__(self) -> None:
        # a row that contradicts itself would be caught only where some stage reads the wrong field
        want = {"unary": 1, "binary": 2, "ternary": 3, "reduce": 1, "cast": 1, "compare": 2, "select": 3,
                "matmul": 2}
        if self.kind not in want or self.arity != want[self.kind]:
            raise ValueError(f"op {self.name}: kind {self.kind!r} takes {want.get(self.kind)} operands, not {self.arity}")
        if (self.expand is None) == (self.pto is None and self.kind in ("unary", "binary", "ternary")):
            raise ValueError(f"op {self.name}: an elementwise op has an instruction or a template, exactly one")
        if self.kind == "ternary" and self.expand is None:
            raise ValueError(f"op {self.name}: a three-operand op is a composite (its IR exists at the tensor level only)")
        if self.round_mode is not None and (self.kind, self.pto) != ("unary", "TCVT"):
            raise ValueError(f"op {self.name}: a rounding mode belongs to a unary op computed by TCVT")
        reduce_fields = (self.identity, self.combine, self.row_pto, self.col_pto)
        if self.kind == "reduce" and self.mean_of is None and None in reduce_fields:
            raise ValueError(f"op {self.name}: a reduction needs identity, combine, row_pto and col_pto")
        if self.kind == "reduce" and self.mean_of is not None and (self.row_pto, self.col_pto) != (None, None):
            raise ValueError(f"op {self.name}: a mean runs the instructions of the reduction it is the mean of")
        if self.kind != "reduce" and (*reduce_fields, self.mean_of) != (None,) * 5:
            raise ValueError(f"op {self.name}: only reductions have identity, combine, row_pto, col_pto, mean_of")
        if self.pipe not in ("V", "M"):
            raise ValueError(f"op {self.name}: pipe {self.pipe!r} is not V (vector) or M (cube)")
        if not self.dtypes or not set(self.dtypes) <= set(DTYPE_NAMES):
            raise ValueError(f"op {self.name}: dtypes {self.dtypes!r} are not ptodsl dtypes")
        if self.commutative and self.kind != "binary":
            raise ValueError(f"op {self.name}: only binary ops are commutative")
        if self.sim is None and self.kind in ("unary", "binary", "ternary", "reduce"):
            # the simulator runs a primitive's; a composite's is what its template is tested against
            raise ValueError(f"op {self.name}: needs `sim`, its numpy meaning")

    def takes(self, dtype: str) -> bool:
        """Whether the op is defined on elements of ``dtype``."""
        return dtype in self.dtypes

    def identity_for(self, dtype: str) -> float | int:
        """A reduction's identity in ``dtype``: an infinite identity is the dtype's extreme value
        for integers, which have no infinity."""
        assert self.identity is not None, f"{self.name} is not a reduction"
        if DTYPES[dtype].is_float or math.isfinite(self.identity):
            return self.identity if DTYPES[dtype].is_float else int(self.identity)
        lo, hi = value_range(dtype)
        return int(lo if self.identity < 0 else hi)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(np.result_type(x, np.float32))


# erf(x) = tanh(x * S(x^2)) with x clamped to [-4, 4] (erf(4) rounds to 1 in f32) and S a degree-6
# polynomial fitted to atanh(erf(x)) / x, weighted by 1 - erf^2 so the error is even in erf's own
# terms: at most 2.5e-7 from math.erf over the reals when evaluated in f32. The tanh form keeps erf
# odd and saturating without a sign function, which pto-isa's vector unit does not have.
_ERF_S = (1.1283798, 0.102764531, -0.000182089676, -0.000627806131, 9.05351557e-05, -6.12606035e-06,
          1.67348068e-07)


def _horner(coeffs: tuple[float, ...], var: str) -> Template:
    node: Template = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        node = ("add", ("mul", var, node), c)
    return node


# exp2(x) = exp(n * HI) * exp(n * LO + f * ln 2) with n = floor(x), f = x - n in [0, 1) and
# HI + LO = ln 2, HI of 15 significant bits: n * HI is exact for every n whose result is finite,
# so neither exp sees a rounded large argument (exp(x * ln 2) would carry |x| ulps of error). At
# most 4e-7 relative error from numpy's exp2 for results in f32's normal range, measured in f32.
# An infinite x (x == n) takes f = 0, not inf - inf.
_LN2 = 0.6931471805599453
_LN2_HI, _LN2_LO = 0.693145751953125, 1.428606765330187e-06
_EXP2 = ("let", "n", ("floor", "x"),
         ("let", "f", ("where", ("eq", "x", "n"), 0.0, ("sub", "x", "n")),
          ("mul", ("exp", ("mul", "n", _LN2_HI)), ("exp", ("add", ("mul", "n", _LN2_LO), ("mul", "f", _LN2))))))

# log1p(x) = log(u) * x / (u - 1) with u = 1 + x rounded (Goldberg's form: the quotient corrects
# the rounding of u), x itself where u rounds to 1, and log(u) where 1 + x was exact (x = -1 and
# x = inf included). At most 4e-7 relative error from numpy's log1p over (-1, inf), in f32.
_LOG1P = ("let", "u", ("add", "x", 1.0),
          ("let", "d", ("sub", "u", 1.0),
           ("let", "l", ("log", "u"),
            ("where", ("eq", "u", 1.0), "x",
             ("where", ("eq", "d", "x"), "l", ("mul", "l", ("div", "x", "d")))))))

# sin and cos reduce x by the nearest multiple n (sin) or odd half-multiple m + 1/2 (cos) of pi,
# subtracting n * pi in three parts (Cody and Waite: each part has at most 11 significant bits, so
# n * part is exact for |n| < 2^12), and evaluate sin(r) = r + r^3 S(r^2) on |r| <= pi/2 with S
# fitted to sin's relative error (1e-8 in exact arithmetic), times (-1)^n as 1 - 2 * (n mod 2).
# In f32: at most 1.5e-7 absolute error from numpy's for |x| <= 1e4, 1e-6 for |x| <= 1e5; past
# that the reduction loses the digits of r, and a reduced value beyond [-2, 2] (|x| >~ 1e7) gives
# 0. The trig functions of the vector unit would need a reduction of their own: pto-isa has none.
_PI_A, _PI_B, _PI_C = 3.140625, 0.0009675025939941406, 1.5099580252808664e-07
_INV_PI = 0.3183098861837907
_SIN_S = (-0.16666656732559204, 0.008332972414791584, -0.0001980264496523887, 2.5903266305249417e-06)


def _trig(k: str, sign: Template) -> Template:
    """sign * sin(x - k * pi), the reduced argument bounded to [-2, 2] (0 beyond: see above)."""
    r0 = ("sub", ("sub", ("sub", "x", ("mul", k, _PI_A)), ("mul", k, _PI_B)), ("mul", k, _PI_C))
    poly = ("let", "u", ("mul", "r", "r"), ("add", "r", ("mul", ("mul", "r", "u"), _horner(_SIN_S, "u"))))
    return ("let", "r0", r0, ("let", "r", ("where", ("gt", ("abs", "r0"), 2.0), 0.0, "r0"), ("mul", sign, poly)))


def _odd(n: str) -> Template:
    """n mod 2 for an integral n, as 0.0 or 1.0 (exact: n / 2 and its floor are exact)."""
    return ("sub", n, ("mul", ("floor", ("mul", n, 0.5)), 2.0))


_SIN = ("let", "n", ("round", ("mul", "x", _INV_PI)), _trig("n", ("add", ("mul", _odd("n"), -2.0), 1.0)))
# cos(x) = cos((m + 1/2) pi + r) = -(-1)^m sin(r)
_COS = ("let", "m", ("floor", ("mul", "x", _INV_PI)),
        ("let", "k", ("add", "m", 0.5), _trig("k", ("sub", ("mul", _odd("m"), 2.0), 1.0))))


_ROWS = [
    # binary arithmetic (tile-tile and tile-scalar forms)
    OpDef("add", "binary", 2, "x + y", "TADD", "TADDS", sim=np.add, dtypes=ANY, commutative=True),
    OpDef("sub", "binary", 2, "x - y", "TSUB", "TSUBS", sim=np.subtract, dtypes=ANY),
    OpDef("mul", "binary", 2, "x * y", "TMUL", "TMULS", sim=np.multiply, dtypes=ANY, commutative=True),
    OpDef("div", "binary", 2, "x / y", "TDIV", "TDIVS", sim=np.divide),
    OpDef("maximum", "binary", 2, "elementwise maximum", "TMAX", "TMAXS", sim=np.maximum, dtypes=ANY, commutative=True),
    OpDef("minimum", "binary", 2, "elementwise minimum", "TMIN", "TMINS", sim=np.minimum, dtypes=ANY, commutative=True),
    # unary primitives
    OpDef("exp", "unary", 1, "e ** x", "TEXP", sim=np.exp),
    OpDef("log", "unary", 1, "natural logarithm", "TLOG", sim=np.log),
    OpDef("sqrt", "unary", 1, "square root", "TSQRT", sim=np.sqrt),
    OpDef("rsqrt", "unary", 1, "1 / sqrt(x)", "TRSQRT", sim=lambda x: 1.0 / np.sqrt(x)),
    OpDef("reciprocal", "unary", 1, "1 / x", "TRECIP", sim=lambda x: 1.0 / x),
    OpDef("abs", "unary", 1, "absolute value", "TABS", sim=np.abs, dtypes=ANY),
    OpDef("neg", "unary", 1, "-x", "TNEG", sim=np.negative, dtypes=ANY),
    OpDef("relu", "unary", 1, "max(x, 0)", "TRELU", sim=lambda x: np.maximum(x, 0), dtypes=ANY),
    OpDef("bitwise_not", "unary", 1, "~x, every bit flipped", "TNOT", sim=np.invert, dtypes=INTS_TO_32),
    # composites, expanded into primitives by lowering; sim is the meaning their template must have
    OpDef("sigmoid", "unary", 1, "1 / (1 + exp(-x))", sim=_sigmoid,
          expand=("reciprocal", ("add", ("exp", ("neg", "x")), 1.0))),
    OpDef("tanh", "unary", 1, "hyperbolic tangent, as 2 * sigmoid(2x) - 1", sim=np.tanh,
          expand=("sub", ("mul", ("sigmoid", ("mul", "x", 2.0)), 2.0), 1.0)),
    OpDef("silu", "unary", 1, "x * sigmoid(x)", sim=lambda x: x * _sigmoid(x),
          expand=("mul", "x", ("sigmoid", "x"))),
    OpDef("gelu", "unary", 1, "tanh-approximated GELU: x * sigmoid(1.5957691 * (x + 0.044715 x^3))",
          sim=lambda x: x * _sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x)),
          expand=("mul", "x", ("sigmoid", ("mul", ("add", "x", ("mul", ("mul", ("mul", "x", "x"), "x"),
                                                                     0.044715)), 1.5957691216057308)))),
    OpDef("erf", "unary", 1, "the error function, as tanh(x * S(x^2)) with a fitted S (|error| < 3e-7)",
          sim=_erf, expand=("let", "c", ("minimum", ("maximum", "x", -4.0), 4.0),
                            ("let", "u", ("mul", "c", "c"), ("tanh", ("mul", "c", _horner(_ERF_S, "u")))))),
    # ---- issue 23: the elementwise ops of PyPTO's models (rounding, powers, trig, logic, clip)
    # rounding to an integral value in the same dtype: TCVT float -> float under a RoundMode
    OpDef("round", "unary", 1, "round to the nearest integer, ties to even (torch.round)", "TCVT", sim=np.rint,
          round_mode="rint"),
    OpDef("floor", "unary", 1, "the largest integer <= x", "TCVT", sim=np.floor, round_mode="floor"),
    OpDef("ceil", "unary", 1, "the smallest integer >= x", "TCVT", sim=np.ceil, round_mode="ceil"),
    OpDef("trunc", "unary", 1, "x rounded toward zero", "TCVT", sim=np.trunc, round_mode="trunc"),
    OpDef("pow", "binary", 2, "x ** y, as C's pow (NaN for x < 0 and a y that is not an integer)", "TPOW", "TPOWS",
          sim=np.power),
    OpDef("exp2", "unary", 1, "2 ** x, as exp(n HI) exp(n LO + f ln 2) (relative error < 4e-7)", sim=np.exp2,
          expand=_EXP2),
    OpDef("log1p", "unary", 1, "log(1 + x), accurate near 0 (relative error < 4e-7)", sim=np.log1p, expand=_LOG1P),
    OpDef("sin", "unary", 1, "sine, reduced by pi and a fitted polynomial (|error| < 2e-7 for |x| <= 1e4)",
          sim=np.sin, expand=_SIN),
    OpDef("cos", "unary", 1, "cosine, reduced by pi and a fitted polynomial (|error| < 2e-7 for |x| <= 1e4)",
          sim=np.cos, expand=_COS),
    OpDef("sign", "unary", 1, "-1, 0 or 1 by the sign of x (NaN stays NaN)", sim=np.sign, dtypes=SIGNED,
          expand=("where", ("gt", "x", 0.0), 1.0, ("where", ("lt", "x", 0.0), -1.0, "x"))),
    OpDef("clip", "ternary", 3, "min(max(x, lo), hi), as torch.clamp", dtypes=NUMBERS,
          sim=lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), expand=("minimum", ("maximum", "x", "y"), "z")),
    # logic on bool tensors (comparison masks): bitwise on the packed mask bytes
    OpDef("logical_and", "binary", 2, "x and y, elementwise on bool tensors", "TAND", sim=np.logical_and,
          dtypes=BOOL, commutative=True),
    OpDef("logical_or", "binary", 2, "x or y, elementwise on bool tensors", "TOR", sim=np.logical_or,
          dtypes=BOOL, commutative=True),
    OpDef("logical_not", "unary", 1, "not x, elementwise on a bool tensor", "TNOT", sim=np.logical_not,
          dtypes=BOOL),
    # ---- end of issue 23's elementwise ops
    # reductions over one axis; partial results across tiles are merged with ``combine``
    OpDef("sum", "reduce", 1, "sum over one axis", sim=np.sum, identity=0.0, combine="add",
          row_pto="TROWSUM", col_pto="TCOLSUM", dtypes=ANY),
    OpDef("amax", "reduce", 1, "maximum over one axis", sim=np.max, identity=float("-inf"),
          combine="maximum", row_pto="TROWMAX", col_pto="TCOLMAX", dtypes=ANY),
    OpDef("amin", "reduce", 1, "minimum over one axis", sim=np.min, identity=float("inf"),
          combine="minimum", row_pto="TROWMIN", col_pto="TCOLMIN", dtypes=ANY),
    OpDef("mean", "reduce", 1, "mean over one axis (sum, then scaled by 1/extent)", sim=np.mean,
          identity=0.0, combine="add", mean_of="sum"),
    # conversions, comparisons, selection
    OpDef("cast", "cast", 1, "convert to another dtype", "TCVT", dtypes=ANY),
    OpDef("cmp", "compare", 2, "elementwise comparison, giving bool", "TCMP", "TCMPS", dtypes=ANY),
    OpDef("where", "select", 3, "where(cond, x, y)", "TSEL", dtypes=ANY, sim=np.where),
    # cube
    OpDef("matmul", "matmul", 2, "matrix product on the cube unit", "TMATMUL", pipe="M", acc_pto="TMATMUL_ACC",
          bias_pto="TMATMUL_BIAS", dtypes=tuple(MATMUL_ACCUMULATOR)),
]

OPS: dict[str, OpDef] = {row.name: row for row in _ROWS}


def check_table(ops: dict[str, OpDef]) -> None:
    """What one row cannot check alone: the ops a row names exist and agree with it."""
    for od in ops.values():
        if od.combine is not None:
            merge = ops.get(od.combine)
            if merge is None or not merge.commutative:
                raise ValueError(f"op {od.name}: combine {od.combine!r} is not a commutative binary op of the table")
        if od.mean_of is not None:
            base = ops.get(od.mean_of)
            if base is None or base.kind != "reduce" or base.mean_of is not None:
                raise ValueError(f"op {od.name}: mean_of {od.mean_of!r} is not a plain reduction of the table")
            if (od.identity, od.combine) != (base.identity, base.combine):
                raise ValueError(f"op {od.name}: a mean merges partials as {od.mean_of} does")


check_table(OPS)

# Comparison spellings of the language and their ``cmp`` modes.
COMPARE_MODES = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
COMPARE_SIM = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
               "eq": np.equal, "ne": np.not_equal}
BINARY_SPELLING = {"+": "add", "-": "sub", "*": "mul", "/": "div"}

# Builtins that are structure, not arithmetic; the checker knows their signatures.
STRUCTURE_BUILTINS = ("view", "transpose", "reshape", "permute", "unsqueeze", "squeeze", "concat", "expand",
                      "clone", "tensor", "zeros", "ones", "full", "loop",
                      "loop_unroll", "is_loop_begin", "is_loop_end", "print")
# Builtins on scalars (dims, loop indices, values read from tensors), evaluated by the control program.
SCALAR_BUILTINS = ("cdiv", "min", "max")


def describe_op(od: OpDef) -> str:
    """An op's row, for ``ptodsl explain NAME``."""
    lines = [f"{od.name}: {od.kind} op taking {od.arity} operand{'s' if od.arity != 1 else ''}: {od.doc}"]
    forms = [f"{what} {ins}" for what, ins in (("tile-tile", od.pto), ("tile-scalar", od.pto_scalar),
                                                ("per row", od.row_pto), ("per column", od.col_pto),
                                                ("accumulating", od.acc_pto), ("with a bias", od.bias_pto))
             if ins]
    if forms:
        lines.append(f"pto-isa instruction{'s' if len(forms) > 1 else ''}: " + ", ".join(forms)
                     + f"; runs on the {od.pipe} pipe")
    if od.round_mode is not None:
        lines.append(f"a TCVT from its dtype to the same dtype, rounding to an integral value (mode {od.round_mode})")
    if od.expand is not None:
        lines.append("a composite: lowering expands it into the primitive ops of its template")
    if od.mean_of is not None:
        lines.append(f"computed as `{od.mean_of}`, then scaled by 1 / the extent reduced")
    if od.commutative and od.dtypes != BOOL:
        lines.append("commutative: a scalar operand may stand on either side")
    lines.append("every dtype" if od.dtypes == ANY else "float dtypes only" if od.dtypes == FLOATS
                 else "dtypes " + ", ".join(od.dtypes))
    return "\n".join(lines)


# ------------------------------------------------------------------ indexing builtins (issue 23 §2)
# Structure rather than elementwise arithmetic: each has its own signature (typed by
# ptodsl/check/indexing.py), IR ops (ptodsl/ir/opdefs.py, the `_indexing` block) and lowering.
# Every index a kernel reads from data (gather, index_select, scatter_update) is checked against
# the dim it indexes before the op runs: a value outside [0, dim) stops the call (E0730).


@dataclass(frozen=True)
class IndexOp:
    name: str
    signature: str  # how it is called
    doc: str
    pto: tuple[str, ...]  # the pto-isa instructions its lowering emits
    torch: str  # its eager-torch spelling, for docs and `ptodsl explain`
    keywords: tuple[str, ...] = ()
    statement: bool = False  # a statement writing its first argument, not a value


INDEXING: dict[str, IndexOp] = {row.name: row for row in [
    IndexOp("index_select", "index_select(t, dim, index)",
            "the slices of t along dim at the positions a 1-D index tensor holds, in index order",
            ("MGATHER",), "torch.index_select(t, dim, index)"),
    IndexOp("gather", "gather(t, dim, index)",
            "out[i][j] = t[i][index[i][j]] along the last dim (index has t's rank)",
            ("MGATHER",), "torch.gather(t, dim, index)"),
    IndexOp("scatter_update", "scatter_update(dst, dim, index, src, unique_indices=False)",
            "writes the slices of src along dim into dst at the positions index holds (a later "
            "position wins a repeated index; with unique_indices=True the positions must be distinct, "
            "which the call checks, and the rows are written in any order, on many cores)",
            ("MSCATTER",), "dst.index_copy_(dim, index, src)", keywords=("unique_indices",), statement=True),
    IndexOp("arange", "arange(n, dtype) / arange(start, stop, dtype)", "start, start + 1, ..., stop - 1",
            ("TCI",), "torch.arange(start, stop, dtype=dtype)"),
    IndexOp("triu", "triu(x, diagonal=0)", "x with the elements below the diagonal-th diagonal set to 0",
            ("TTRI", "TCMPS", "TSEL"), "torch.triu(x, diagonal)", keywords=("diagonal",)),
    IndexOp("tril", "tril(x, diagonal=0)", "x with the elements above the diagonal-th diagonal set to 0",
            ("TTRI", "TCMPS", "TSEL"), "torch.tril(x, diagonal)", keywords=("diagonal",)),
    IndexOp("argmax", "argmax(x, dim=-1, keepdim=False)",
            "the index of the maximum along the last dim (the first one among equal values), as i32",
            ("TROWARGMAX", "TROWMAX"), "torch.argmax(x, dim, keepdim)", keywords=("dim", "keepdim")),
    IndexOp("argmin", "argmin(x, dim=-1, keepdim=False)",
            "the index of the minimum along the last dim (the first one among equal values), as i32",
            ("TROWARGMIN", "TROWMIN"), "torch.argmin(x, dim, keepdim)", keywords=("dim", "keepdim")),
    IndexOp("topk", "v, i = topk(x, k, dim=-1, largest=True)",
            "the k largest (largest=False: smallest) values along the last dim in order, and their i32 "
            "indices; among equal values the lower index comes first",
            ("TCI", "TROWMAX", "TROWMIN", "TCMP", "TSEL"), "torch.topk(x, k, dim, largest)",
            keywords=("dim", "largest")),
    IndexOp("argsort", "argsort(x, dim=-1, descending=False)",
            "the i32 indices that sort x along the last dim; equal values keep their index order (stable)",
            ("TCI", "TROWMAX", "TROWMIN", "TCMP", "TSEL"), "torch.argsort(x, dim, descending, stable=True)",
            keywords=("dim", "descending")),
]}


def describe_index_op(io: IndexOp) -> str:
    """An indexing builtin, for ``ptodsl explain NAME``."""
    return "\n".join([f"{io.signature}: {io.doc}", f"pto-isa instructions: {', '.join(io.pto)}",
                      f"torch: {io.torch}"])


# ------------------------------------------------------------------ end of indexing builtins
