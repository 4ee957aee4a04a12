"""Random well-typed programs: a ``.pto`` kernel and its ``.yaml`` spec from a seed.

A program is a kernel made of independent *blocks*, each writing outputs of its own: a top-level
elementwise chain, a reduction, a row loop, an accumulation carried in a local across iterations
with ``is_loop_begin``/``is_loop_end``, runtime branches on scalars read from a tensor, views with
static or data-dependent valid shapes, nested loops, ``loop_unroll``, ... Expressions are trees of
:class:`Ex` so that the shrinker can replace a subtree by one of its operands.

Values stay finite and well conditioned by construction (every input lies in [-1, 1], divisors and
arguments of ``log``/``sqrt``/``rsqrt`` are ``abs(e) + 1``, ``exp`` only sees bounded arguments, and
comparisons that pick a branch of ``where`` look only at unrounded inputs), so that a difference
beyond the per-dtype tolerance is a wrong answer rather than rounding noise.

``features`` switches parts of the language on and off; :data:`KNOWN_BUG_FEATURES` are the ones
that exercise compiler bugs known and being fixed, which a fixed regression seed set leaves out.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..frontend.schema import DEFAULT_TARGET
from ..targets import load_target
from .gen_accum import split_accum_block
from .gen_index import INDEX_FEATURES, index_block
from .gen_matmul import MATMUL_FEATURES, cube_tile, matmul_block, matmul_shapes, wants_matmul

# Every switch of the generator. A program uses a random subset of the enabled ones.
ALL_FEATURES: frozenset[str] = frozenset({
    "elementwise",  # top-level elementwise chains
    "scalars",  # a scalar attribute `s: f32` and float literals
    "bcast_row",  # a [N] input broadcast along rows
    "bcast_col",  # a [M, 1] input broadcast along columns
    "reduce_row",  # sum/amax/amin/mean over the last axis, keepdim
    "reduce_col",  # ... over the first axis
    "reduce_nokeep",  # reductions written straight to a rank-reduced output
    "row_loop",  # for r in loop(M): y[r, :] = ...
    "locals",  # locals carried across iterations (accumulators)
    "loop_begin_end",  # is_loop_begin / is_loop_end branches
    "branches",  # runtime if/elif/else on a scalar read from an i32 tensor
    "views_static",  # views with a static valid shape (inline or from the YAML), sometimes through a local
    "views_dynamic",  # views whose valid shape is a scalar read at runtime
    "slices",  # static-offset slices x[:, c:N]
    "nested_loops",  # two nested loops over a rank-3 tensor
    "radix_rows",  # ... or three writing rows in mixed radix, c * P + h * (P // B) + g
    "loop_unroll",  # for i, k in loop_unroll(...)
    "unroll_lists",  # `unroll: [4, 2, 1]` on loops
    "casts",  # f32 <-> T casts
    "where",  # comparisons and where(...)
    "where_scalars",  # where(cond, a, b) with two scalar arms (an f32 tensor of the condition's shape)
    "f16", "bf16",  # dtype variants other than f32
    "tails",  # tile shapes that do not divide the dims
    "loop_tiles",  # per-loop vec_tile overrides
    "loop_forms",  # loop(start, stop[, step]) besides loop(stop)
    "move_assemble",  # t.move(e) and t.assemble(e, [offsets]) besides t[...] = e
    "scalar_reads",  # a float scalar read from a tensor, used as a tensor-scalar operand
    "zeros_init",  # locals from zeros(...) accumulated in a loop and read after it
    "split_accum",  # loops carrying only sum/maximum/minimum accumulations (gen_accum.py, passes/splitred.py)
    "chains",  # a block reads the output an earlier block wrote
    "gather",  # a row view and an element read at a row index read from a tensor, sometimes out of range
    "math_ops",  # sin, cos, exp2, log1p, pow (tensor and scalar forms), clip (scalar and tensor bounds)
    "rounding",  # round/floor/ceil/trunc/sign of inputs scaled by a power of two (exact everywhere)
    "logic",  # `and`/`or`/`not` of comparisons in the condition of `where`
    "reduce_rank34",  # reductions over any axis of rank-3 and rank-4 tensors, tiles with middle tails
    "reduce_multi",  # ... over several axes at once, dim=[...]
    "data_trips",  # loops whose trip count, valid extents (min) and offsets come from lengths read from a tensor
    "data_conds",  # inline conditions on values read from tensors (`if x1[r, 0] > 0.0:`)
    "data_cu",  # cumulative offsets read in an outer loop driving an inner loop's bound, offsets and extents
    # (half the programs declare them `nondecreasing:`; with `matmul`, a segment's rows sometimes
    # go through a product on the cube: a mixed kernel whose tiles of every segment share the cores)
    # Indexing builtins (gen_index.py): index tensors with in-range and out-of-range values.
    "index_gather",  # index_select along dim 0 or -1, gather along -1
    "scatter",  # scatter_update of rows into an inout tensor
    "scatter_unique",  # ... with unique_indices=True: distinct positions, shared out; a repeat refused (E0731)
    "arange",  # arange ramps added to an input
    "triu",  # triu / tril with literal and symbolic diagonals
    "argmax",  # argmax / argmin along the last dim, keepdim or not, ties from small integers
    "topk",  # v, i = topk(x, k) and argsort, ties from small integers
    "pass_options",  # multiply-adds, double buffering, no fused instructions, row interchange (drawn apart)
    "max_dims",  # `max_dims:` bounds on N and M at or above the case's (tiles span a bounded dim; drawn apart)
    "kernel_budget",  # a small `cycle_upper_bound`: tile work cut into several kernels, loops launched per step
    "ub_pressure",  # vector tiles of 16 to 48 KB: kernels near a vector core's UB, so partitioning falls back
    # Known compiler bug classes (see KNOWN_BUG_FEATURES).
    "stale_index",
    "int_div",
    "bcast_write",
    "dyn_valid_oob",
    "unroll_k",
    # Compiler bugs this fuzzer found (see FOUND_BUG_FEATURES).
    "low_rank_write",
    "where_any_tile",
    # The layout builtins and rank-3/4 broadcasts (fuzz/gen_layout.py).
    "reshape", "transpose", "concat", "expand", "clone", "bcast_rank3", "bcast_rank4",
}) | MATMUL_FEATURES

# Features that hit known compiler bugs, each with the bug; the regression seed set leaves them out
# until the fix lands. Empty: the classes the fuzzer was built against (stale loop indices in
# unrolled copies, flooring `/`, one-row broadcast writes, valid extents outside their view,
# loop_unroll bodies ignoring k, lower-rank writes, bool mask tiles under unaligned vec tiles) are
# fixed, and their switches now run in every seed set.
KNOWN_BUG_FEATURES: dict[str, str] = {}

# Bugs the fuzzer finds that are not fixed yet, in the same form.
FOUND_BUG_FEATURES: dict[str, str] = {}

SAFE_FEATURES: frozenset[str] = ALL_FEATURES - set(KNOWN_BUG_FEATURES) - set(FOUND_BUG_FEATURES)

UNARY_SAFE = ("abs", "neg", "relu", "sigmoid", "tanh", "silu", "gelu")
UNARY_GUARDED = ("exp", "log", "sqrt", "rsqrt", "reciprocal")  # their operand is kept in their domain
REDUCERS = ("sum", "amax", "amin", "mean")
# Generated by the features math_ops, rounding and logic (the rounding ops only of exact values:
# a computed value may round to either side of a step).
MATH_OPS = ("sin", "cos", "exp2", "log1p", "pow", "clip")
ROUNDING = ("round", "floor", "ceil", "trunc", "sign")
LOGIC = ("logical_and", "logical_or", "logical_not")


# ------------------------------------------------------------------------------- expressions

@dataclass
class Ex:
    """An expression tree node. ``form`` is a format string over the children's texts."""

    form: str
    kids: tuple[Ex, ...] = ()
    dtype: str = "T"  # "T", "f32" or "bool"
    cls: str = "full"  # full | row | col | scalar
    bound: float = 1.0  # an upper bound of |value|

    def render(self) -> str:
        return self.form.format(*(k.render() for k in self.kids))

    def nodes(self):
        yield self
        for k in self.kids:
            yield from k.nodes()


# The most rows M a program is drawn with: an accumulation over the rows may reach this many times
# its row's bound, which the expressions reading it must know (math() squashes what is large, so
# that sin of a long sum does not turn rounding in the sum's order into a wrong-looking answer)
MAX_ROWS = 150


def accumulated(form: str, row_bound: float, init: float = 0.0) -> float:
    """The bound of an accumulator combining rows of ``row_bound`` by ``form`` over up to MAX_ROWS
    rows, from ``init``: a sum grows with the rows, a maximum or minimum does not, and ``a * 0.5 +
    x`` stays below twice a row."""
    if "imum" in form:
        return max(abs(init), row_bound)
    if "0.5" in form:
        return abs(init) + 2.0 * row_bound
    return abs(init) + MAX_ROWS * row_bound


def leaf(text: str, dtype: str = "T", cls: str = "full", bound: float = 1.0) -> Ex:
    return Ex(text.replace("{", "{{").replace("}", "}}"), (), dtype, cls, bound)


# --------------------------------------------------------------------------------- programs

@dataclass
class Param:
    name: str
    decl: str  # e.g. "T[M, N]" or "out T[M, N]" or "f32 = 0.5"
    kind: str  # in | out | inout | scalar
    dtype: str
    dims: tuple[str, ...] = ()
    lo: float = -1.0  # input data range
    hi: float = 1.0
    role: str = ""  # "index": an i32 tensor of row indices into [M, N] inputs (see run.make_inputs)
    index_of: str | None = None  # an index tensor: its values lie in [0, this dim) ...
    oob: bool = False  # ... but for one of them, maybe, which the call must refuse (E0730)
    distinct: bool = False  # ... and distinct (a scatter's unique_indices), but maybe one repeat (E0731)
    ints: tuple[int, int] | None = None  # small integer data in [lo, hi] (ties for argmax / topk)


@dataclass
class Block:
    """A group of statements writing its own outputs. ``lines`` hold (indent, text or [prefix, Ex, suffix])."""

    kind: str
    lines: list[tuple[int, Any]]
    params: list[str]
    loops: dict[str, dict[str, Any]] = field(default_factory=dict)  # loop name -> YAML settings
    valid_shapes: dict[str, list[int]] = field(default_factory=dict)

    def render(self) -> list[str]:
        out = []
        for indent, item in self.lines:
            text = item if isinstance(item, str) else item[0] + item[1].render() + item[2]
            out.append("    " * indent + text)
        return out

    def exprs(self) -> list[tuple[int, Ex]]:
        return [(i, item[1]) for i, (_, item) in enumerate(self.lines) if not isinstance(item, str)]


@dataclass
class Program:
    seed: int
    dtype: str
    features: frozenset[str]
    params: dict[str, Param]
    blocks: list[Block]
    shapes: dict[str, int]
    fixed: dict[str, int]  # symbols bound in the YAML
    vec_tile: list[int]
    scalars: dict[str, float]
    expect_reject: bool = False  # the generator knowingly wrote an invalid program
    cube: dict[str, Any] | None = None  # the cube_tile of a program with matmul blocks
    options: dict[str, Any] = field(default_factory=dict)  # pass_options besides max_paths
    bounds: dict[str, int] = field(default_factory=dict)  # `max_dims:`
    ordered: list[str] = field(default_factory=list)  # `nondecreasing:`
    # diagnostics a valid program may be refused with: only these, and nothing else, then count as ok
    tolerated: tuple[str, ...] = ()

    @property
    def op(self) -> str:
        return f"fz{self.seed}"

    def used_params(self) -> list[Param]:
        """Parameters named by some block's text, in declaration order (outputs of a block first)."""
        used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", "\n".join(line for b in self.blocks for line in b.render())))
        return [p for n, p in self.params.items() if n in used]

    def pto(self) -> str:
        ps = []
        for p in self.used_params():
            ps.append(f"{p.name}: {p.decl}")
        lines = [f"# random program, seed {self.seed}, T={self.dtype}",
                 f"kernel {self.op}({', '.join(ps)}):"]
        for b in self.blocks:
            lines.extend("    " + line for line in b.render())
        return "\n".join(lines) + "\n"

    def yaml(self) -> str:
        lines = [f"op: {self.op}", f"dtypes: {{T: [{self.dtype}]}}"]
        if self.fixed:
            lines.append("symbols: {" + ", ".join(f"{k}: {v}" for k, v in self.fixed.items()) + "}")
        bounds = {k: v for k, v in self.bounds.items() if any(k in p.dims for p in self.used_params())}
        if bounds:
            lines.append("max_dims: {" + ", ".join(f"{k}: {v}" for k, v in bounds.items()) + "}")
        ordered = [n for n in self.ordered if n in {p.name for p in self.used_params()}]
        if ordered:
            lines.append(f"nondecreasing: [{', '.join(ordered)}]")
        lines.append("schedule:")
        lines.append(f"  vec_tile: {self.vec_tile}")
        if self.cube:
            lines.append("  cube_tile: {" + ", ".join(f"{k}: {v}" for k, v in self.cube.items()) + "}")
        loops = {k: v for b in self.blocks for k, v in b.loops.items() if v}
        if loops:
            lines.append("  loops:")
            for name, settings in loops.items():
                inner = ", ".join(f"{k}: {v}" for k, v in settings.items())
                lines.append(f"    {name}: {{{inner}}}")
        options = dict(self.options)
        if any("unroll" in settings for settings in loops.values()):
            # Unrolled branchy bodies compile p^f paths (E0509 counts them as the passes do): the
            # generator keeps f <= 4 and allows up to 4^4, so such programs are meant to compile.
            options["max_paths"] = 256
        if options:
            def text(v: Any) -> str:  # (1 == True: not a dict lookup)
                return ("true" if v else "false") if isinstance(v, bool) else str(v)
            lines.append("  pass_options: {" + ", ".join(f"{k}: {text(v)}" for k, v in options.items()) + "}")
        vs = {k: v for b in self.blocks for k, v in b.valid_shapes.items()}
        if vs:
            lines.append("  valid_shapes:")
            for name, shape in vs.items():
                lines.append(f"    {name}: {shape}")
        shapes = ", ".join(f"{k}: {v}" for k, v in self.shapes.items() if k not in self.fixed)
        case = [f"shapes: {{{shapes}}}"] if shapes else []
        scalars = {k: v for k, v in self.scalars.items() if k in {p.name for p in self.used_params()}}
        if scalars:
            case.append("scalars: {" + ", ".join(f"{k}: {v}" for k, v in scalars.items()) + "}")
        if case:
            lines.append("tests:")
            lines.append("  - {" + ", ".join(case) + "}")
        return "\n".join(lines) + "\n"

    def copy(self) -> Program:
        blocks = [replace(b, lines=list(b.lines), loops={k: dict(v) for k, v in b.loops.items()},
                          valid_shapes=dict(b.valid_shapes), params=list(b.params)) for b in self.blocks]
        return replace(self, blocks=blocks, shapes=dict(self.shapes), fixed=dict(self.fixed),
                       params=dict(self.params), vec_tile=list(self.vec_tile), scalars=dict(self.scalars),
                       cube=None if self.cube is None else dict(self.cube), options=dict(self.options), bounds=dict(self.bounds),
                       ordered=list(self.ordered))


# ---------------------------------------------------------------------------------- generator

class Context:
    """The operands an expression may use where it is written."""

    def __init__(self, full: list[Ex], row: list[Ex], col: list[Ex], scalars: list[Ex],
                 reduce_full_to: dict[str, str], conds: list[Ex], no_reduce: bool = False):
        self.full, self.row, self.col, self.scalars = full, row, col, scalars
        self.reduce_full_to = reduce_full_to  # "row"/"col" -> (dim text)
        self.conds = conds  # unrounded full inputs, fit for comparisons
        self.no_reduce = no_reduce


class Gen:
    def __init__(self, seed: int, features: frozenset[str], max_blocks: int = 3):
        self.max_blocks = max_blocks
        self.seed = seed
        self.rng = random.Random(seed)
        self.f = features
        self.params: dict[str, Param] = {}
        self.nblock = 0
        self.full_outs: list[str] = []  # [M, N] outputs written whole by an earlier block
        self.fixed_extra: dict[str, int] = {}  # symbols a block needs fixed in the YAML (topk rows)
        self.varlen_mm = False  # a segments block multiplies its rows on the cube (needs a cube_tile)
        self.topk_rows = 0  # the longest row a top-k block ranks: the vec tile's last dim must hold it

    def has(self, name: str) -> bool:
        return name in self.f

    # ---------------------------------------------------------------- params
    def param(self, name: str, decl: str, kind: str, dtype: str, dims: tuple[str, ...] = (),
              lo: float = -1.0, hi: float = 1.0, role: str = "") -> str:
        if name not in self.params:
            self.params[name] = Param(name, decl, kind, dtype, dims, lo, hi, role)
        return name

    def out(self, dims: str, mode: str = "out", dtype: str = "T") -> str:
        name = f"y{self.nblock}"
        d = tuple(x.strip() for x in dims.split(","))
        return self.param(name, f"{mode} {dtype}[{dims}]", mode, dtype, d)

    # ---------------------------------------------------------------- expressions
    def literal(self) -> Ex:
        v = self.rng.choice([0.5, 2.0, 1.5, 0.25, 3.0, 0.75, 1.0, 0.1])
        return leaf(repr(v), "lit", "scalar", v)

    def scalar_operand(self, ctx: Context) -> Ex:
        if ctx.scalars and self.rng.random() < 0.4:
            return self.rng.choice(ctx.scalars)
        return self.literal()

    def pick_leaf(self, ctx: Context, dtype: str, cls: str) -> Ex | None:
        pool = {"full": ctx.full, "row": ctx.row, "col": ctx.col}[cls]
        cands = [e for e in pool if e.dtype == dtype]
        if not cands:
            return None
        return self.rng.choice(cands)

    def expr(self, ctx: Context, dtype: str = "T", cls: str = "full", depth: int = 3) -> Ex:
        e = self._expr(ctx, dtype, cls, depth)
        if e.bound > 16:
            e = Ex("tanh({})", (e,), dtype, e.cls, 1.0)
        return e

    def _expr(self, ctx: Context, dtype: str, cls: str, depth: int) -> Ex:
        r = self.rng
        lf = self.pick_leaf(ctx, dtype, cls)
        if depth <= 0 or (lf is not None and r.random() < 0.2):
            if lf is not None:
                return lf
            if dtype != "T":
                inner = self.pick_leaf(ctx, "T", cls)
                if inner is not None:
                    return Ex("cast({}, " + dtype + ")", (inner,), dtype, cls, inner.bound)
            if dtype == "T":
                inner = self.pick_leaf(ctx, "f32", cls)
                if inner is not None:
                    return Ex("cast({}, T)", (inner,), dtype, cls, inner.bound)
            depth = max(depth, 1)
        choices = ["unary", "binary", "binary", "scalar_op"]
        if self.has("casts"):
            choices.append("cast")
        if self.has("where") and ctx.conds and cls == "full":
            choices.append("where")
        if cls in ("row", "col") and not ctx.no_reduce and ctx.reduce_full_to.get(cls):
            choices += ["reduce", "reduce"]
        if cls == "full" and ctx.row and ctx.col and self.has("bcast_row") and self.has("bcast_col"):
            choices.append("outer")
        if self.has("math_ops"):
            choices.append("math")
        if self.has("rounding") and cls == "full" and any(c.dtype == dtype for c in ctx.conds):
            choices.append("rounding")
        kind = r.choice(choices)
        if kind == "math":
            return self.math(ctx, dtype, cls, depth)
        if kind == "rounding":
            c = r.choice([c for c in ctx.conds if c.dtype == dtype])
            op = r.choice(ROUNDING)
            if op == "sign":
                return Ex("sign({})", (c,), dtype, cls, 1.0)
            return Ex(op + "({} * 4.0)", (c,), dtype, cls, c.bound * 4.0 + 1.0)
        if kind == "unary":
            a = self.expr(ctx, dtype, cls, depth - 1)
            op = r.choice(UNARY_SAFE + UNARY_GUARDED)
            if op == "exp":
                if a.bound > 4:
                    a = Ex("tanh({})", (a,), dtype, a.cls, 1.0)
                return Ex("exp({})", (a,), dtype, a.cls, math.exp(a.bound))
            if op in ("log", "sqrt", "rsqrt", "reciprocal"):
                return Ex(op + "(abs({}) + 1.0)", (a,), dtype, a.cls, max(1.0, a.bound))
            bound = 1.0 if op in ("sigmoid", "tanh") else a.bound + 0.2
            return Ex(op + "({})", (a,), dtype, a.cls, bound)
        if kind in ("binary", "scalar_op"):
            a = self.expr(ctx, dtype, cls, depth - 1)
            if kind == "scalar_op" and self.has("scalars"):
                b = self.scalar_operand(ctx)
            else:
                ocls = cls if cls != "full" else r.choice(["full", "full"] + (["row"] if ctx.row else [])
                                                           + (["col"] if ctx.col else []))
                b = self.expr(ctx, dtype, ocls, depth - 1)
            if r.random() < 0.5 and b.cls != "scalar":
                a, b = b, a
            op = r.choice(["+", "-", "*", "/", "maximum", "minimum"])
            if op == "/":
                if b.cls == "scalar":
                    return Ex("{} / {}", (a, b), dtype, cls, a.bound / max(abs(b.bound), 0.1))
                return Ex("{} / (abs({}) + 1.0)", (a, b), dtype, cls, a.bound)
            if op in ("maximum", "minimum"):
                if b.cls == "scalar" and b.dtype == "lit":
                    return Ex(op + "({}, {})", (a, b), dtype, cls, max(a.bound, b.bound))
                if b.cls == "scalar":
                    return Ex(f"({{}} {r.choice('+-')} {{}})", (a, b), dtype, cls, a.bound + b.bound)
                return Ex(op + "({}, {})", (a, b), dtype, cls, max(a.bound, b.bound))
            bound = a.bound * b.bound if op == "*" else a.bound + b.bound
            return Ex("({} " + op + " {})", (a, b), dtype, cls, bound)
        if kind == "cast":
            other = "f32" if dtype == "T" else "T"
            a = self.expr(ctx, other, cls, depth - 1)
            return Ex("cast({}, " + dtype + ")", (a,), dtype, cls, a.bound)
        if kind == "where":
            c = r.choice(ctx.conds)
            thr = r.choice(["0.0", "0.5", "-0.25"])
            if self.has("where_scalars") and (dtype == "f32" or self.has("casts")) and r.random() < 0.3:
                # two scalar arms: the select makes a tensor of the condition's shape, of the dtype
                # of its arm that is not a literal (f32 for two literals: an element read of T and
                # 2.0 select in T, seed 7974019)
                a, b = self.scalar_operand(ctx), self.scalar_operand(ctx)
                if "lit" not in (a.dtype, b.dtype) and a.dtype != b.dtype:
                    b = self.literal()  # the arms must agree: an element read of T and the f32 scalar s do not
                arm = next((x.dtype for x in (a, b) if x.dtype != "lit"), "f32")
                if arm != dtype and not self.has("casts"):
                    a, b, arm = self.literal(), self.literal(), "f32"  # (dtype is f32 here)
                sel = Ex("where({} " + r.choice([">", "<", ">="]) + " " + thr + ", {}, {})", (c, a, b), arm,
                         cls, max(abs(a.bound), abs(b.bound)))
                return sel if arm == dtype else Ex("cast({}, " + dtype + ")", (sel,), dtype, cls, sel.bound)
            a = self.expr(ctx, dtype, "full", depth - 1)
            b = self.expr(ctx, dtype, r.choice(["full", "full"] + (["row"] if ctx.row else [])), depth - 1)
            cond, kids = "{} " + r.choice([">", "<", ">="]) + " " + thr, (c,)
            if self.has("logic") and r.random() < 0.5:
                cond, kids = self.logic(ctx, cond, kids)
            return Ex("where(" + cond + ", {}, {})", (*kids, a, b), dtype, cls, max(a.bound, b.bound))
        if kind == "reduce":
            a = self.expr(ctx, dtype, "full", depth - 1)
            op = r.choice(REDUCERS)
            dim = ctx.reduce_full_to[cls]
            extent = 128.0 if op == "sum" else 1.0
            return Ex(op + "({}, dim=" + dim + ", keepdim=True)", (a,), dtype, cls, a.bound * extent)
        # outer: a row operand against a column operand
        a = self.expr(ctx, dtype, "row", depth - 1)
        b = self.expr(ctx, dtype, "col", depth - 1)
        op = r.choice(["+", "-", "*"])
        bound = a.bound * b.bound if op == "*" else a.bound + b.bound
        return Ex("({} " + op + " {})", (a, b), dtype, "full", bound)

    def math(self, ctx: Context, dtype: str, cls: str, depth: int) -> Ex:
        """One of MATH_OPS, its operands kept where the result is well conditioned."""
        r = self.rng
        op = r.choice(MATH_OPS)
        a = self.expr(ctx, dtype, cls, depth - 1)
        if a.bound > 4:
            a = Ex("tanh({})", (a,), dtype, a.cls, 1.0)
        if op in ("sin", "cos"):
            return Ex(op + "({})", (a,), dtype, a.cls, 1.0)
        if op == "exp2":
            return Ex("exp2({})", (a,), dtype, a.cls, 2.0 ** a.bound)
        if op == "log1p":
            return Ex("log1p(abs({}))", (a,), dtype, a.cls, a.bound)
        if op == "pow":
            form = r.choice(["lit", "tensor", "base"])
            if form == "lit":
                e = r.choice([0.5, 1.5, 2.0, -1.0])
                return Ex("pow(abs({}) + 0.5, " + repr(e) + ")", (a,), dtype, a.cls, max(2.0, (a.bound + 0.5) ** e))
            b = self.expr(ctx, dtype, cls, depth - 1)
            if form == "base":
                return Ex("pow(2.0, tanh({}))", (b,), dtype, cls, 2.0)
            return Ex("pow(abs({}) + 0.5, tanh({}))", (a, b), dtype, cls, max(2.0, a.bound + 0.5))
        if r.random() < 0.5:
            lo = r.choice([-1.0, -0.5, 0.0])
            return Ex("clip({}, " + repr(lo) + ", " + repr(lo + r.choice([0.5, 1.0, 2.0])) + ")", (a,), dtype,
                      a.cls, 2.0)
        lo, hi = (self.expr(ctx, dtype, cls, depth - 1) for _ in range(2))
        return Ex("clip({}, {}, {})", (a, lo, hi), dtype, cls, max(a.bound, lo.bound, hi.bound))

    def logic(self, ctx: Context, cond: str, kids: tuple[Ex, ...]) -> tuple[str, tuple[Ex, ...]]:
        """``cond`` joined to another comparison of an input by and / or, or negated."""
        r = self.rng
        c2 = r.choice(ctx.conds)
        other = "{} " + r.choice(["<", "<=", ">"]) + " " + r.choice(["0.25", "-0.5", "0.0"])
        form = r.choice(["and", "or", "not", "not_and"])
        if form == "not":
            return f"not ({cond})", kids
        if form == "not_and":
            return f"({cond}) and not ({other})", (*kids, c2)
        return f"({cond}) {form} ({other})", (*kids, c2)

    # ---------------------------------------------------------------- contexts
    def scalars(self) -> list[Ex]:
        if not self.has("scalars"):
            return []
        self.param("s", "f32 = 0.5", "scalar", "f32")
        return [leaf("s", "f32", "scalar", 2.0)]

    def input2(self, name: str, dtype: str = "T") -> str:
        return self.param(name, f"{dtype}[M, N]", "in", dtype, ("M", "N"))

    def top_ctx(self) -> Context:
        names = [self.input2("x0"), self.input2("x1")]
        full = [leaf(n) for n in names]
        conds = list(full)  # inputs only: computed values may round either way
        full += [leaf(n) for n in self.chained()]
        if self.has("casts"):
            full.append(leaf(self.input2("xf", "f32"), "f32"))
        row, col = [], []
        if self.has("bcast_row"):
            row.append(leaf(self.param("rv", "T[N]", "in", "T", ("N",)), "T", "row"))
        if self.has("bcast_col"):
            col.append(leaf(self.param("cv", "T[M, 1]", "in", "T", ("M", "1")), "T", "col"))
        red = {}
        if self.has("reduce_row"):
            red["col"] = "-1"
        if self.has("reduce_col"):
            red["row"] = "0"
        return Context(full, row, col, self.scalars(), red, conds)

    def row_ctx(self, r: str, full_override: list[Ex] | None = None, conds: bool = True) -> Context:
        names = [self.input2("x0"), self.input2("x1")]
        full = [leaf(f"{n}[{r}, :]") for n in names]
        cond = list(full) if conds else []  # inputs only: computed values may round either way
        full += [leaf(f"{n}[{r}, :]") for n in self.chained()]
        if self.has("casts"):
            full.append(leaf(f"{self.input2('xf', 'f32')}[{r}, :]", "f32"))
        if full_override is not None:
            full = full_override + [e for e in full if e.dtype != "T"]
        row = []
        if self.has("bcast_row"):
            row.append(leaf(self.param("rv", "T[N]", "in", "T", ("N",)), "T", "row"))
        col = []
        if self.has("bcast_col"):
            col.append(leaf(f"{self.param('cv', 'T[M, 1]', 'in', 'T', ('M', '1'))}[{r}, :]", "T", "col"))
        red = {"col": "-1"} if self.has("reduce_row") else {}
        return Context(full, row, col, self.scalars(), red, cond)

    def chained(self) -> list[str]:
        return list(self.full_outs) if self.has("chains") else []

    def idx(self) -> str:
        hi = 1.0 if not self.has("dyn_valid_oob") else 2.0
        return self.param("idx", "i32[M]", "in", "i32", ("M",), 0.0, hi)  # fractions of N, see run.py

    def unroll(self, loop: str, settings: dict[str, Any], index_reads: bool = False) -> None:
        """Maybe an unroll list; ``index_reads``: the body reads a scalar or takes a view at the loop
        index, or branches on is_loop_begin/is_loop_end (known bug: unrolled copies keep a stale
        index)."""
        if index_reads and not self.has("stale_index"):
            self.rng.random()
            return
        if self.has("unroll_lists") and self.rng.random() < 0.5:
            settings["unroll"] = self.rng.choice([[4, 2, 1], [2, 1], [3, 1], [4, 1], [4, 3, 1]])

    def loop_tile(self, settings: dict[str, Any], rank: int = 2) -> None:
        if self.has("loop_tiles") and self.rng.random() < 0.4:
            settings["vec_tile"] = [1] * (rank - 1) + [self.lastdim()]

    def lastdim(self) -> int:
        align = 8 if self.dtype == "f32" else 16
        opts = [align * k for k in (1, 2, 3, 4, 8)]
        return self.rng.choice(opts)

    # ---------------------------------------------------------------- blocks
    def block(self, kind: str) -> Block | None:
        self.nblock += 1
        k = self.nblock
        r = self.rng
        if kind in INDEX_FEATURES:
            return index_block(self, kind, k)
        if kind == "matmul":
            return matmul_block(self, k, self.mm_rng)
        if kind == "split_accum":
            return split_accum_block(self, k)
        if kind == "elementwise":
            y = self.out("M, N")
            ctx = self.top_ctx()
            e = self.expr(ctx)
            self.full_outs.append(y)
            if self.has("move_assemble") and r.random() < 0.3:
                return Block(kind, [(0, [f"{y}.move(", e, ")"])], [y, *self._names(ctx)])
            return Block(kind, [(0, [f"{y}[:] = ", e, ""])], [y, *self._names(ctx)])
        if kind == "reduce":
            ctx = self.top_ctx()
            op = r.choice(REDUCERS)
            axis = r.choice([a for a, f in (("row", "reduce_row"), ("col", "reduce_col")) if self.has(f)])
            dim = "-1" if axis == "row" else r.choice(["0", "-2"])
            keep = not (self.has("reduce_nokeep") and r.random() < 0.4)
            if keep:
                y = self.out("M, 1" if axis == "row" else "1, N")
            else:
                y = self.out("M" if axis == "row" else "N")
            e = self.expr(ctx, "T", "full", 2)
            lines: list[tuple[int, Any]] = []
            if r.random() < 0.5:
                lines.append((0, [f"t{k} = ", e, ""]))
                arg = f"t{k}"
                lines.append((0, f"{y}[:] = {op}({arg}, dim={dim}{', keepdim=True' if keep else ''})"))
            else:
                lines.append((0, [f"{y}[:] = {op}(", e, f", dim={dim}{', keepdim=True' if keep else ''})"]))
            return Block(kind, lines, [y, *self._names(ctx)])
        if kind == "reduce_nd":
            return self.reduce_nd()
        if kind == "row_loop":
            y = self.out("M, N")
            loop = f"L{k}"
            settings: dict[str, Any] = {}
            reads = self.has("scalar_reads") and r.random() < 0.3
            self.unroll(loop, settings, index_reads=reads)
            self.loop_tile(settings)
            ctx = self.row_ctx("r")
            head = "M"
            if self.has("loop_forms"):
                head = r.choice(["M", "M", "0, M", "1, M", "0, M, 2", "1, M, 3"])
            lines = [(0, f'for r in loop({head}, name="{loop}"):')]
            if r.random() < 0.4:
                lines.append((1, f"row{k} = x0[r, :]"))
                ctx.full.append(leaf(f"row{k}"))
                ctx.conds.append(leaf(f"row{k}"))
            if reads:
                lines.append((1, f"a{k} = x1[r, {r.choice(['0', 'N - 1'])}]"))
                ctx.scalars = ctx.scalars + [leaf(f"a{k}", "T", "scalar", 1.0)] * 3
            e = self.expr(ctx)
            if reads and f"a{k}" not in e.render():
                e = Ex("({} * {})", (e, leaf(f"a{k}", "T", "scalar", 1.0)), e.dtype, e.cls, e.bound)
            # a row statistic applied back over the row, a norm's shape, whose loop the compiler
            # compiles twice (passes/tile_fit.py); drawn from its own stream, so the rest of the
            # seed's program stays what it was
            norm = random.Random(self.seed * 1_000_003 + 29 + k)
            if self.has("reduce_row") and e.dtype == "T" and norm.random() < 0.4:
                stat = leaf(f"{norm.choice(['amax', 'amin', 'mean'])}(x0[r, :], dim=-1, keepdim=True)")
                comb = norm.choice(["-", "+", "*"])
                e = Ex("({} " + comb + " {})", (e, stat), e.dtype, e.cls, e.bound if comb == "*" else e.bound + 1.0)
            if self.has("move_assemble") and r.random() < 0.3:
                lines.append((1, [f"{y}.assemble(", e, ", [r, 0])"]))
            else:
                lines.append((1, [f"{y}[r, :] = ", e, ""]))
            if head in ("M", "0, M"):
                self.full_outs.append(y)
            return Block(kind, lines, [y, *self._names(ctx)], {loop: settings})
        if kind == "accum":
            y = self.out("1, N")
            loop = f"L{k}"
            settings = {}
            self.unroll(loop, settings)
            self.loop_tile(settings)
            ctx = self.row_ctx("r")
            if self.has("zeros_init") and r.random() < 0.4:
                init = r.choice(["zeros([1, N], f32)", "ones([1, N], f32)", "full(0.5, [1, N], f32)"])
                row = self.expr(ctx, "f32", "full", 2)
                lines = [(0, f"acc{k} = {init}"),
                         (0, f'for r in loop(M, name="{loop}"):'),
                         (1, [f"acc{k}[:] = acc{k} {r.choice('+-')} ", row, ""])]
                total = leaf(f"acc{k}", "f32", bound=accumulated("+", row.bound, 1.0))
                fin = self.expr(Context([total], [], [], self.scalars(), {}, []), "f32", "full", 1)
                lines.append((0, [f"{y}[:] = cast(", fin, ", T)"]))
                return Block(kind, lines, [y, *self._names(ctx)], {loop: settings})
            row = self.expr(ctx, "f32", "full", 2)
            lines = [(0, f"acc{k} = tensor([1, N], f32)"),
                     (0, f'for r in loop(M, name="{loop}"):'),
                     (1, [f"row{k} = ", row, ""]),
                     (1, "if is_loop_begin(r):"),
                     (2, f"acc{k}[:] = row{k}"),
                     (1, "else:")]
            comb = r.choice([f"acc{k} + row{k}", f"maximum(acc{k}, row{k})", f"acc{k} * 0.5 + row{k}"])
            lines.append((2, f"acc{k}[:] = {comb}"))
            lines.append((1, "if is_loop_end(r):"))
            total = leaf(f"acc{k}", "f32", bound=accumulated(comb, row.bound))
            fin = self.expr(Context([total], [], [], self.scalars(), {}, []), "f32", "full", 1)
            lines.append((2, [f"{y}[:] = cast(", fin, ", T)"]))
            return Block(kind, lines, [y, *self._names(ctx)], {loop: settings})
        if kind == "branch":
            y = self.out("M, N")
            loop = f"L{k}"
            settings = {}
            self.unroll(loop, settings, index_reads=True)
            self.loop_tile(settings)
            ctx = self.row_ctx("r")
            idx = self.idx()
            lines = [(0, f'for r in loop(M, name="{loop}"):'), (1, f"c{k} = {idx}[r]")]
            conds = [f"c{k} > {r.randint(0, 6)}", f"c{k} == {r.randint(0, 4)}", f"c{k} <= {r.randint(0, 8)}"]
            # A scalar read in a loop peeled for is_loop_begin/end: known bug class "stale_index".
            if self.has("loop_begin_end") and self.has("stale_index"):
                conds += ["is_loop_begin(r)", "is_loop_end(r)", f"is_loop_end(r) or c{k} < 2",
                          f"not is_loop_begin(r) and c{k} >= 1"]
            n = r.choice([1, 2, 3])
            for i in range(n):
                head = "if" if i == 0 else "elif"
                lines.append((1, f"{head} {r.choice(conds)}:"))
                lines.append((2, [f"{y}[r, :] = ", self.expr(ctx, depth=2), ""]))
            lines.append((1, "else:"))
            lines.append((2, [f"{y}[r, :] = ", self.expr(ctx, depth=2), ""]))
            uses = self._names(ctx) + [idx]
            return Block(kind, lines, [y, *uses], {loop: settings})
        if kind == "begin_end":
            # Per-row writes under is_loop_begin/is_loop_end: the loop index inside those branches.
            y = self.out("M, N")
            loop = f"L{k}"
            settings = {}
            self.unroll(loop, settings, index_reads=True)
            ctx = self.row_ctx("r")
            lines = [(0, f'for r in loop(M, name="{loop}"):'),
                     (1, "if is_loop_begin(r):"), (2, [f"{y}[r, :] = ", self.expr(ctx, depth=2), ""]),
                     (1, "elif is_loop_end(r):"), (2, [f"{y}[r, :] = ", self.expr(ctx, depth=2), ""]),
                     (1, "else:"), (2, [f"{y}[r, :] = ", self.expr(ctx, depth=2), ""])]
            return Block(kind, lines, [y, *self._names(ctx)], {loop: settings})
        if kind == "dyn_view":
            y = self.out("M, N", "inout")
            loop = f"L{k}"
            settings = {}
            self.unroll(loop, settings, index_reads=True)
            self.loop_tile(settings)
            idx = self.idx()
            v = f"v{k}"
            ctx = self.row_ctx("r", [leaf(v)], conds=False)
            ctx.no_reduce = True
            ctx.full.append(leaf("x1[r, :]"))
            lines = [(0, f'for r in loop(M, name="{loop}"):'), (1, f"n{k} = {idx}[r]"),
                     (1, f"{v} = view(x0, [1, N], [r, 0], valid_shape=[1, n{k}])"),
                     (1, [f"{y}[r, :] = ", self.use(v, self.expr(ctx, depth=2)), ""])]
            return Block(kind, lines, [y, "x0", "x1", *self._names(ctx), idx], {loop: settings})
        if kind == "gather":
            # Row r of the output from row gidx[r] of x0 (a view at an offset read from a tensor)
            # and an element of that row of x1. Most index tensors stay inside [0, M); some hold a
            # value outside (-1, M, M + 1, 2**31 - 1), and the call must stop at the access (E0730):
            # a view may start at M (it holds nothing), an element read may not.
            y = self.out("M, N", "inout")  # rows of an empty view are not written
            loop = f"L{k}"
            settings = {}
            self.unroll(loop, settings, index_reads=True)
            self.loop_tile(settings)
            gidx = self.param("gidx", "i32[M]", "in", "i32", ("M",), role="index")
            g, v = f"g{k}", f"v{k}"
            ctx = self.row_ctx("r", [leaf(v)], conds=False)
            ctx.no_reduce = True
            ctx.full.append(leaf("x1[r, :]"))
            view = r.choice([f"view(x0, [1, N], [{g}, 0])", f"x0[{g}, :]"])
            lines = [(0, f'for r in loop(M, name="{loop}"):'), (1, f"{g} = {gidx}[r]"), (1, f"{v} = {view}")]
            element = f"x1[{g}, {r.choice(['0', 'N - 1'])}]"
            form = r.choice(["bound", "computed", "inline", "none"])
            if form == "bound":  # a scalar local bound to the read
                lines.append((1, f"e{k} = {element}"))
                element = f"e{k}"
            elif form == "computed":  # a scalar local bound to a value computed from the read
                lines.append((1, f"e{k} = {element} * 0.5"))
                element = f"e{k}"
            if form != "none":  # "inline": the read inside the expression that uses it
                ctx.scalars = ctx.scalars + [leaf(element, "T", "scalar", 1.0)] * 3
            e = self.use(v, self.expr(ctx, depth=2))
            if form != "none" and element not in e.render():
                e = Ex("({} * {})", (e, leaf(element, "T", "scalar", 1.0)), e.dtype, e.cls, e.bound)
            lines.append((1, [f"{y}[r, :] = ", e, ""]))
            return Block(kind, lines, [y, "x0", "x1", *self._names(ctx), gidx], {loop: settings})
        if kind == "ragged":
            return self.ragged(k)
        if kind == "varlen":
            return self.varlen(k)
        if kind == "static_view":
            y = self.out("M, N", "inout")
            loop = f"L{k}"
            settings = {}
            self.unroll(loop, settings, index_reads=True)  # a view at the index: "stale_index" too
            v = f"v{k}"
            vs = self.fixed_n_valid
            ctx = self.row_ctx("r", [leaf(v)], conds=False)
            ctx.no_reduce = True
            ctx.full.append(leaf("x1[r, :]"))
            block = Block(kind, [(0, f'for r in loop(M, name="{loop}"):')], [], {loop: settings})
            if r.random() < 0.5:
                block.lines.append((1, f"{v} = view(x0, [1, N], [r, 0], valid_shape=[1, {vs}])"))
            else:
                block.lines.append((1, f"{v} = view(x0, [1, N], [r, 0])"))
                block.valid_shapes[v] = [1, vs]
            value = self.use(v, self.expr(ctx, depth=2))
            if random.Random(f"narrow:{self.seed}:{k}").random() < 0.4:
                # through a local: writing the narrow value initialises only its valid columns, so
                # the local is read back through a view of those (check/dataflow.py, `_narrowed`)
                t = f"t{k}"
                block.lines.append((1, f"{t} = tensor([1, N], T)"))
                block.lines.append((1, [f"{t}[:] = ", value, ""]))
                block.lines.append((1, f"{y}[r, :] = view({t}, [1, N], [0, 0], valid_shape=[1, {vs}])"))
            else:
                block.lines.append((1, [f"{y}[r, :] = ", value, ""]))
            block.params = [y, "x0", "x1", *self._names(ctx)]
            return block
        if kind == "slices":
            y = self.out("M, N", "inout")  # columns past N - c keep their values (an `out` would be E0401)
            c = r.randint(1, 3)
            ctx = self.top_ctx()
            ctx.full = [leaf(f"x0[:, {c}:N]"), leaf(f"x1[:, 0:N - {c}]")]
            ctx.conds = list(ctx.full)
            ctx.row = []
            ctx.no_reduce = True
            return Block(kind, [(0, [f"{y}[:, 0:N - {c}] = ", self.expr(ctx, depth=2), ""])],
                         [y, "x0", "x1", *self._names(ctx)])
        if kind == "nested":
            if self.has("radix_rows") and random.Random(f"radix:{self.seed}:{k}").random() < 0.4:
                return self.radix(k)
            y = self.out("B, M, N")
            x3 = self.param("x3", "T[B, M, N]", "in", "T", ("B", "M", "N"))
            lo, li = f"L{k}o", f"L{k}i"
            settings = {}
            dyn = self.has("views_dynamic") and r.random() < 0.4
            self.unroll(li, settings, index_reads=dyn)
            ctx = self.row_ctx("r", [leaf(f"{x3}[b, r, :]")])
            ctx.full += [leaf("x0[r, :]")]
            ctx.reduce_full_to = {}
            lines = [(0, f'for b in loop(B, name="{lo}"):'), (1, f'for r in loop(M, name="{li}"):')]
            if dyn:
                idx = self.idx()
                lines.append((2, f"n{k} = {idx}[r]"))
                lines.append((2, f"w{k} = view({x3}, [1, 1, N], [b, r, 0], valid_shape=[1, 1, n{k}])"))
                ctx.full = [leaf(f"w{k}")] + [e for e in ctx.full if e.dtype != "T"]
                ctx.conds = []
                ctx.no_reduce = True
                y = self.params.pop(y).name
                y = self.out("B, M, N", "inout")
                lines.append((2, [f"{y}[b, r, :] = ", self.use(f"w{k}", self.expr(ctx, depth=2)), ""]))
                if not self.has("low_rank_write"):
                    lines[-1] = (2, [f"{y}[b, r, :] = ", self.use(f"w{k}", lines[-1][1][1], force=True), ""])
                return Block(kind, lines, [y, x3, idx, *self._names(ctx)], {li: settings})
            e = self.expr(ctx, depth=2)
            if not self.has("low_rank_write") and x3 not in e.render():
                e = self.use(f"{x3}[b, r, :]", e, force=True)
            lines.append((2, [f"{y}[b, r, :] = ", e, ""]))
            return Block(kind, lines, [y, x3, "x0", *self._names(ctx)], {li: settings})
        if kind == "loop_unroll":
            y = self.out("M, N")
            loop = f"L{k}"
            full = [leaf("x0[i:i + k, :]"), leaf("x1[i:i + k, :]")]
            ctx = self.row_ctx("i:i + k", full)
            ctx.conds = list(full)
            if self.has("casts"):
                ctx.full = full + [leaf("xf[i:i + k, :]", "f32")]
            settings = {"unroll": r.choice([[4, 2], [2], [4, 2, 1], [3, 1], [8]])}
            body = (1, [f"{y}[i:i + k, :] = ", self.expr(ctx, depth=2), ""])
            if not self.has("unroll_k"):
                # With k ignored by the known bug, the group's first step alone would be computed;
                # factor 1 only keeps the construct without exercising that bug.
                settings = {"unroll": [1]}
            return Block(kind, [(0, f'for i, k in loop_unroll(0, M, 1, name="{loop}"):'), body],
                         [y, *self._names(ctx)], {loop: settings})
        if kind == "int_div":
            y = self.out("M, N")
            loop = f"L{k}"
            ctx = self.row_ctx("2 * j:2 * j + 2", [leaf("x0[2 * j:2 * j + 2, :]"), leaf("x1[2 * j:2 * j + 2, :]")])
            ctx.col = []
            ctx.conds = list(ctx.full[:2])
            return Block(kind, [(0, f'for j in loop(M // 2, name="{loop}"):'),
                                (1, [f"{y}[2 * j:2 * j + 2, :] = ", self.expr(ctx, depth=2), ""])],
                         [y, "x0", "x1", *self._names(ctx)], {loop: {}})
        if kind == "bcast_write":
            y = self.out("M, N")
            ctx = self.top_ctx()
            if r.random() < 0.5 or not ctx.row:
                ctx.row = [leaf("x0[0, :]", "T", "row")] + ctx.row
            e = self.expr(ctx, "T", "row", 2)
            return Block(kind, [(0, [f"{y}[:] = ", e, ""])], [y, "x0", *self._names(ctx)])
        if kind in gen_layout.KINDS.values():
            return gen_layout.block(self, kind)
        raise ValueError(kind)

    def radix(self, k: int) -> Block:
        """Rows in mixed radix, as paged attention's query rows: chunks ``c`` of P rows, in each
        ``B`` heads of ``P // B`` rows (none when ``B > P``). The chunks are disjoint only through
        ``(P // B) * B <= P`` (a floor product, ``passes/parallel.py``); rows past the last whole
        chunk, or past ``(P // B) * B`` in one, keep the inout output's values."""
        p = random.Random(f"radix_p:{self.seed}:{k}").choice([2, 3, 4, 6])
        y = self.out("M, N", "inout")
        hb = self.param("hb", "T[B, N]", "in", "T", ("B", "N"))  # a row per head
        row = f"c * {p} + h * ({p} // B) + g"
        ctx = self.row_ctx(row)
        ctx.full.append(leaf(f"{hb}[h, :]"))
        e = self.expr(ctx, depth=2)
        if hb not in e.render():
            e = self.use(f"{hb}[h, :]", e, force=True)
        lines = [(0, f'for c in loop(M // {p}, name="L{k}c"):'), (1, f'for h in loop(B, name="L{k}h"):'),
                 (2, f'for g in loop({p} // B, name="L{k}g"):'), (3, [f"{y}[{row}, :] = ", e, ""])]
        return Block("nested", lines, [y, hb, *self._names(ctx)])

    def reduce_nd(self) -> Block:
        """A reduction of a rank-3 or rank-4 input over any axis, or over several (reduce_multi),
        of the input or of an elementwise expression of it."""
        r = self.rng
        rank = r.choice([3, 4])
        dims = ("P", "B", "M", "N")[4 - rank:]
        x = self.param(f"x{rank}d", f"T[{', '.join(dims)}]", "in", "T", dims)
        if self.has("reduce_multi") and r.random() < 0.6:
            axes = sorted(r.sample(range(rank), r.randint(2, rank)))
            dim = "[" + ", ".join(str(a - rank if r.random() < 0.3 else a) for a in axes) + "]"
        else:
            axes = [r.randrange(rank)]
            dim = str(axes[0] - rank if r.random() < 0.3 else axes[0])
        op = r.choice(REDUCERS)
        keep = r.random() < 0.5
        out = [("1" if k in axes else d) for k, d in enumerate(dims)] if keep else \
            [d for k, d in enumerate(dims) if k not in axes] or ["1"]
        y = self.out(", ".join(out))
        arg = r.choice([x, f"{x} * 0.5 + 0.25", f"abs({x})", f"exp({x})"])
        keeps = ", keepdim=True" if keep else r.choice(["", ", keepdim=False"])
        return Block("reduce_nd", [(0, f"{y}[:] = {op}({arg}, dim={dim}{keeps})")], [y, x])
    def ragged(self, k: int) -> Block:
        """Row r holds lens[r] columns, walked in blocks of ``bw``: a trip count read from data (at
        the row loop's depth, used in the block loop's), a valid extent mixing the read with the
        block index through `min`, sometimes an inline condition on data, and the length written
        into an output (a fill). Lengths may be negative (an empty loop), past N (a view outside
        the row: E0730) or 2**31 - 1 (more trips than any dim: E0870)."""
        r = self.rng
        y = self.out("M, N", "inout")  # columns past a row's length keep their values
        lens = self.param("lens", "i32[M]", "in", "i32", ("M",), role="length")
        fill = self.param(f"c{k}", "out i32[M, 1]", "out", "i32", ("M", "1"))
        outer, inner = f"L{k}", f"L{k}j"
        settings: dict[str, Any] = {}
        self.unroll(inner, settings, index_reads=True)
        self.loop_tile(settings)
        bw = r.choice([4, 8, 16])
        n = f"n{k}" if r.random() < 0.6 else "lens[r]"  # bound in the outer body, or read inline
        trips = r.choice([f"cdiv({n}, {bw})", f"cdiv({n}, {bw})", f"cdiv(min({n}, N), {bw})"])
        v = f"v{k}"
        ctx = self.row_ctx("r", [leaf(v)], conds=False)
        cols = f"r:r + 1, j * {bw}:j * {bw} + {bw}"
        ctx.full = [e for e in ctx.full if e.dtype == "T"] + [leaf(f"x1[{cols}]")]
        if self.has("casts"):
            ctx.full.append(leaf(f"{self.input2('xf', 'f32')}[{cols}]", "f32"))
        ctx.row, ctx.col, ctx.no_reduce = [], [], True  # operands of the block's [1, bw] shape only
        lines: list[tuple[int, Any]] = [(0, f'for r in loop(M, name="{outer}"):')]
        if n != "lens[r]":
            lines.append((1, f"{n} = lens[r]"))
        lines += [(1, f"{fill}[r, 0] = {n} * 2 + 1"),
                  (1, f'for j in loop({trips}, name="{inner}"):'),
                  (2, f"w{k} = min({n} - j * {bw}, {bw})"),
                  (2, f"{v} = view(x0, [1, {bw}], [r, j * {bw}], valid_shape=[1, w{k}])")]
        target = f"{y}[r:r + 1, j * {bw}:j * {bw} + {bw}] = "
        e = self.use(v, self.expr(ctx, depth=2))
        if self.has("data_conds") and r.random() < 0.5:
            cond = r.choice(["x1[r, 0] > 0.0", f"{n} > {r.randint(0, 20)}", "x1[r, N - 1] < 0.25"])
            lines += [(2, f"if {cond}:"), (3, [target, e, ""])]
            if r.random() < 0.5:
                lines += [(2, "else:"), (3, [target, self.use(v, self.expr(ctx, depth=1)), ""])]
        else:
            lines.append((2, [target, e, ""]))
        return Block("ragged", lines, [y, fill, lens, "x0", "x1", *self._names(ctx)], {inner: settings})

    def varlen(self, k: int) -> Block:
        """Segments of rows located by cumulative offsets cu (S entries): each segment's rows in
        blocks of ``br``, the offsets read at the segment loop's depth and used in the block loop's
        bound, view offsets, valid extent and write region (the same read twice in one slice is one
        value). Offsets may go down (an empty segment, or E0732 where the program declares them
        nondecreasing), past M (E0730) or to 2**31 - 1 (E0870)."""
        r = self.rng
        y = self.out("M, N", "inout")  # rows outside every segment keep their values
        cu = self.param("cu", "i32[S]", "in", "i32", ("S",), role="cumulative")
        outer, inner = f"L{k}", f"L{k}q"
        settings: dict[str, Any] = {}
        self.unroll(inner, settings, index_reads=True)
        br = r.choice([2, 3, 4])
        st, rows, v, u = f"st{k}", f"rows{k}", f"v{k}", f"u{k}"
        ctx = self.row_ctx("r", [leaf(v), leaf(u)], conds=False)
        ctx.full = [e for e in ctx.full if "[r" not in e.form]
        if self.has("casts"):
            ctx.full.append(leaf(f"view({self.input2('xf', 'f32')}, [{br}, N], [{rows}, 0])", "f32"))
        ctx.col, ctx.no_reduce = [], True
        lines: list[tuple[int, Any]] = [
            (0, f'for sg in loop(S - 1, name="{outer}"):'), (1, f"{st} = cu[sg]"),
            (1, f'for q in loop(cdiv(cu[sg + 1] - {st}, {br}), name="{inner}"):'),
            (2, f"{rows} = {st} + q * {br}"),
            (2, f"{v} = view(x0, [{br}, N], [{rows}, 0], valid_shape=[min(cu[sg + 1] - {rows}, {br}), N])"),
            (2, f"{u} = view(x1, [{br}, N], [{rows}, 0])"),
            (2, [f"{y}[{st} + q * {br}:{st} + q * {br} + {br}, :] = ", self.use(v, self.expr(ctx, depth=2)), ""])]
        names = [y, cu, "x0", "x1", *self._names(ctx)]
        if self.has("matmul") and random.Random(f"varlen_mm:{self.seed}:{k}").random() < 0.4:
            # a segment's rows through a product on the cube (a stream of its own: other seeds keep
            # their programs): a mixed kernel whose tiles of every segment, with `nondecreasing:`,
            # run on every core (passes/blocks.py, passes/ordered.py)
            w = self.param(f"w{k}", "T[N, N]", "in", "T", ("N", "N"))
            prefix, e, _ = lines[-1][1]
            lines[-1] = (2, [prefix + "matmul(cast(", e, f", T), {w}, out_dtype=T) * 0.25"])
            names.append(w)
            self.varlen_mm = True
        return Block("varlen", lines, names, {inner: settings})

    def use(self, name: str, e: Ex, force: bool = False) -> Ex:
        """``e``, made to read the view ``name`` if it does not already (``force``: at top level)."""
        if not force and re.search(rf"\b{re.escape(name)}(?![\w\[])", e.render()):
            return e
        op = self.rng.choice(["+", "*", "-"])
        bound = e.bound if op == "*" else e.bound + 1.0
        return Ex("({} " + op + " {})", (leaf(name), e), e.dtype, "full", bound)

    @staticmethod
    def _names(ctx: Context) -> list[str]:
        names = []
        for e in ctx.full + ctx.row + ctx.col + ctx.scalars:
            base = e.form.split("[")[0]
            names.append(base)
        return names

    # ---------------------------------------------------------------- programs
    def program(self) -> Program:
        r = self.rng
        dts = ["f32"] + [d for d in ("f16", "bf16") if self.has(d)]
        self.dtype = r.choice(dts)
        kinds = []
        table = [("elementwise", "elementwise"), ("reduce", "reduce_row"), ("reduce", "reduce_col"),
                 ("row_loop", "row_loop"), ("accum", "locals"), ("branch", "branches"),
                 ("begin_end", "loop_begin_end"), ("dyn_view", "views_dynamic"),
                 ("static_view", "views_static"), ("slices", "slices"), ("nested", "nested_loops"),
                 ("gather", "gather"), ("ragged", "data_trips"), ("varlen", "data_cu"),
                 ("loop_unroll", "loop_unroll"), ("int_div", "int_div"), ("bcast_write", "bcast_write"),
                 ("reduce_nd", "reduce_rank34"), ("split_accum", "split_accum")]
        table += [(kind, f) for f, kind in gen_layout.KINDS.items()]
        table += list(INDEX_FEATURES.items())
        avail = [k for k, f in table if self.has(f)]
        if not avail:
            avail = ["elementwise"]
        kinds = [r.choice(avail) for _ in range(min(self.max_blocks, r.choice([1, 1, 2, 2, 3])))]
        self.mm_rng = wants_matmul(self.seed, self)
        if self.mm_rng is not None:
            kinds[-1] = "matmul"
        fixed: dict[str, int] = {}
        self.fixed_n_valid = 0
        align = 8 if self.dtype == "f32" else 16
        if "static_view" in kinds:
            n = r.choice([align * 2, align * 3, align * 4 + 5, 37, 50])
            fixed["N"] = n
            self.fixed_n_valid = r.randint(1, n - 1)
        self.need_rows = 1
        if "lay_concat" in kinds and "N" not in fixed and r.random() < 0.5:
            fixed["N"] = r.choice([align * 2, align * 3, 20, 37])  # static widths: TCONCAT joins rows on chip
        blocks = [b for b in (self.block(k) for k in kinds) if b is not None]
        m = r.randint(1, 12)
        if "int_div" in kinds or "loop_unroll" in kinds:
            m = r.randint(1, 13)
        if "split_accum" in kinds and r.random() < 0.4:
            m = r.randint(49, MAX_ROWS)  # more rows than cores: each partial accumulation runs a share of several
        m = max(m, self.need_rows)
        n = fixed.get("N") or r.choice([r.randint(4, 40), r.randint(4, 130), align * r.randint(1, 4)])
        shapes = {"M": m, "N": n}
        fixed.update(self.fixed_extra)
        shapes.update(self.fixed_extra)
        if any("K" in p.dims for p in self.params.values()):
            shapes["K"] = r.randint(1, 12)
        if any(b.kind == "nested" for b in blocks):
            shapes["B"] = r.randint(1, 3)
        if any(b.kind == "varlen" for b in blocks):
            shapes["S"] = r.randint(1, 5)
        if any(b.kind == "reduce_nd" for b in blocks):
            shapes["B"] = r.randint(1, 5)
            shapes["P"] = r.randint(1, 4)
        rank = max(4 if "P" in shapes else 3 if "B" in shapes else 2, gen_layout.rank_of(self))
        if rank > 2:
            shapes.setdefault("B", r.randint(1, 3))
        if gen_layout.rank_of(self) > 3:
            shapes["H"] = r.randint(1, 3)
        last = self.lastdim()
        if not self.has("tails"):
            last = n if n % align == 0 else align
            rows = 1
        else:
            rows = r.choice([1, 2, 3, 4, 8])
        if self.topk_rows > last:  # a top-k row is ranked within one tile
            last = -(-self.topk_rows // align) * align
        lead = [1] * (rank - 2)
        if (self.has("tails") and "P" in shapes  # middle dims that end in tails: rows fold (E0800 before)
                or any(b.kind in ("bcast3", "bcast4") for b in blocks)):  # leading tile dims past 1
            lead = [r.choice([1, 2, 3]) for _ in lead]
        vec_tile = lead + [rows, last]
        if not self.has("where_any_tile") and any("where(" in line for b in blocks for line in b.render()):
            vec_tile[-1] = -(-vec_tile[-1] // 32) * 32
            for b in blocks:
                for st in b.loops.values():
                    if "vec_tile" in st:
                        st["vec_tile"][-1] = -(-st["vec_tile"][-1] // 32) * 32
        tolerated: tuple[str, ...] = ()
        big = random.Random(f"ub_pressure:{self.seed}")  # a stream of its own: the program stays
        if self.has("ub_pressure") and big.random() < 0.25:
            # wide vector tiles: a few live at once pass a vector core's UB, so partitioning keeps
            # loops in the control program, or counts on a mixed kernel's vector work being split
            # between its two vector cores (passes/aivsplit.py); a kernel that fits no way is
            # refused with what does not fit (E0611), which is no failure here
            ub = load_target(DEFAULT_TARGET).ub_bytes  # the programs' target (the YAML names none)
            per_row = ub * big.choice([1, 2, 3]) // 12 // 4 // max(1, vec_tile[-2])  # f32 elements
            vec_tile[-1] = max(vec_tile[-1], -(-per_row // 32) * 32)
            tolerated = ("E0611",)
        scalars = {"s": round(r.uniform(-2.0, 2.0), 2)} if "s" in self.params else {}
        cube = None
        if self.varlen_mm and self.mm_rng is None:
            cube = cube_tile(self, random.Random(f"varlen_cube:{self.seed}"))
            cube.pop("split_k", None)
        if self.mm_rng is not None:
            matmul_shapes(self.mm_rng, shapes)
            cube = cube_tile(self, self.mm_rng)
            if "split_k" in cube and fixed:
                # a K the YAML fixes may have fewer k tiles than the split asks for (E0822): at most
                # one partial product per k tile of the smallest fixed size any matmul may take as K
                k0 = cube["k"][0]
                tiles = min(-(-v // min(k0, v)) for v in fixed.values() if v > 0)
                if tiles > 1:
                    cube["split_k"] = min(cube["split_k"], tiles)
                else:
                    del cube["split_k"]
        prog = Program(self.seed, self.dtype, self.f, self.params, blocks, shapes, fixed, vec_tile, scalars,
                       cube=cube, options=self.pass_options(), bounds=self.max_dims(shapes, fixed),
                       ordered=self.ordered(blocks), tolerated=tolerated)
        for p in prog.used_params():
            for d in p.dims:
                if not d.isdigit() and d not in shapes:
                    shapes[d] = 1
        return prog


    def ordered(self, blocks: list[Block]) -> list[str]:
        """``nondecreasing: [cu]`` for half the programs with segments (data_cu), from a random stream
        of its own (the program of a seed stays the same either way): the call then refuses offsets
        that go down (E0732), and the blocks share out each segment's row tiles over every core."""
        if not any(b.kind == "varlen" for b in blocks):
            return []
        return ["cu"] if random.Random(self.seed * 1_000_003 + 31).random() < 0.5 else []

    def max_dims(self, shapes: dict[str, int], fixed: dict[str, int]) -> dict[str, int]:
        """Bounds on N and M at or above the case's values, from their own random stream (the
        program of a seed stays the same with the feature on or off): tiling then spans a bounded
        last dim with one tile, and a loop's accumulators may stay on chip across it."""
        if not self.has("max_dims"):
            return {}
        r = random.Random(self.seed * 1_000_003 + 29)
        out = {}
        for dim in ("N", "M"):
            if dim in shapes and dim not in fixed and r.random() < (0.4 if dim == "N" else 0.2):
                out[dim] = shapes[dim] + r.choice([0, 0, 1, 7, 40])
        return out

    def pass_options(self) -> dict[str, bool | int]:
        """Compiler switches that must not change a result, from their own random stream (the
        program of a seed stays the same with the feature on or off)."""
        out: dict[str, bool | int] = {}
        r = random.Random(self.seed * 1_000_003 + 11)
        if self.has("pass_options"):
            if r.random() < 0.5:
                out["multiply_add"] = True
            if r.random() < 0.3:
                out["double_buffer"] = False  # on by default
            if r.random() < 0.15:
                out["fused_ops"] = False
            if r.random() < 0.4:
                out["row_interchange"] = True  # row blocks outside the user loops, mixed kernels
            if r.random() < 0.2:
                out["aiv_split"] = False  # on by default: a mixed kernel's vector rows on both vector cores
            if out.get("row_interchange") and r.random() < 0.5:
                out["row_fusion"] = True  # (drawn last: the draws above stay what they were)
        cut = random.Random(f"cycle_bound:{self.seed}")  # a stream of its own: the draws above stay
        if self.has("kernel_budget") and cut.random() < 0.1:
            # a small kernel budget: runs of tile work are cut into several kernels, and loops of
            # the user's stay in the control program, launching their bodies per iteration, cut by
            # kind of core where no tile lives across the cut (passes/partition.py)
            out["cycle_upper_bound"] = cut.choice([1, 40, 400])
        return out


def generate(seed: int, features: frozenset[str] | set[str] = SAFE_FEATURES, max_blocks: int = 3) -> Program:
    """The program of ``seed`` drawn with the given features switched on, of at most ``max_blocks``
    blocks (fewer blocks compile faster: the regression seed set uses 1)."""
    return Gen(seed, frozenset(features), max_blocks).program()


__all__ = ["ALL_FEATURES", "KNOWN_BUG_FEATURES", "LOGIC", "MATH_OPS", "ROUNDING", "SAFE_FEATURES", "Block", "Ex",
           "Param", "Program", "generate"]


from . import gen_layout  # noqa: E402  (the layout blocks build on the classes above)
