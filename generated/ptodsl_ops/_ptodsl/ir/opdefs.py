"""The IR's ops, each declared once with its signature.

A declaration names the levels an op may appear at, its operands (name, kind, whether it is the
destination, optional or repeated), its results, its attributes (kind, required or not), its
regions, the type relations between operands (``Rule``), the pipe it runs on, what it reads and
writes, and its **family**: the meaning the backends give it. The verifier checks every op against
its declaration (count, kinds, attributes and rules), so a pass that drops an operand of
``tile.add`` breaks at the pass, not in a backend. The simulator, the C++ emitters, the cost model
and the tiling pass each keep one table from family to handler; ``tests/ir/test_op_signatures.py``
fails while a family lacks a handler in any of them.

Language ops (``ptodsl.ops``) appear twice: as whole-tensor ops at the tensor level and as
``tile.NAME`` destination-passing ops at the tile and block levels, both derived from the op
table's ``kind``, so a new elementwise op needs no declaration here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..ops import OPS
from .core import Op, TensorType, TileType

LEVELS = ("tensor", "tile", "block")
ALL = LEVELS
TILE_LEVELS = ("tile", "block")
# Operand and result kinds.
TENSOR, TILE = "tensor", "tile"
# Attribute kinds: ``expr`` a symbolic scalar (``sym`` expression or number), ``exprs`` a tuple of
# them, ``name`` an identifier the op binds or refers to, ``int``/``bool``/``text`` literals,
# ``dtype`` a dtype name, ``any`` structured values the op's family interprets.
ATTR_KINDS = ("expr", "exprs", "name", "int", "bool", "text", "dtype", "any")
# Attributes whose values are names rather than expressions (the verifier checks no symbols in them).
NAME_KINDS = ("name", "text", "dtype", "bool", "int", "any")


@dataclass(frozen=True)
class Arg:
    """One operand: ``role`` is ``in`` (read), ``dst`` (written) or ``acc`` (read and written)."""

    name: str
    kind: str
    role: str = "in"
    optional: bool = False
    many: bool = False  # any number of them (only the last operand)


@dataclass(frozen=True)
class Attr:
    name: str
    kind: str = "expr"
    required: bool = False
    choices: tuple = ()
    doc: str = ""


# Any tile op of a mixed kernel: the vector core (sub-block 0 or 1) that runs it, or whose UB holds
# the tile it allocates (passes/aivsplit.py)
AIV_ATTR = Attr("aiv", "int", choices=(0, 1), doc="the vector core of its block that runs this op, "
                "or whose UB holds the tile a tile.alloc places (passes/aivsplit.py); absent: vector core 0, "
                "or the cube core")


@dataclass(frozen=True)
class Rule:
    """A relation between an op's operands, results and attributes; ``check`` returns what is
    wrong, or None."""

    text: str
    check: Callable[[Op, dict], str | None]


@dataclass(frozen=True)
class IROp:
    name: str
    levels: tuple[str, ...]
    family: str  # the meaning backends dispatch on
    args: tuple[Arg, ...] = ()
    results: tuple[str, ...] = ()  # kinds of the results
    attrs: tuple[Attr, ...] = ()
    rules: tuple[Rule, ...] = ()
    regions: int = 0
    # The pipe it runs on (block level), by the memory space of operand ``pipe_space_of`` when the
    # pipe depends on it (stores from L0C leave through FIX); None for ops that run on no pipe.
    pipe: str | None = None
    pipe_by_space: tuple[tuple[str, str], ...] = ()
    pipe_space_of: int = 0
    control: bool = False  # partitioning keeps it in the control program (scalar and GM bookkeeping)
    doc: str = ""

    def __post_init__(self) -> None:
        bad = set(self.levels) - set(LEVELS)
        if bad:
            raise ValueError(f"IR op {self.name}: unknown levels {sorted(bad)}")
        for a in self.args:
            if a.kind not in (TENSOR, TILE) or a.role not in ("in", "dst", "acc"):
                raise ValueError(f"IR op {self.name}: operand {a.name} has kind {a.kind!r}, role {a.role!r}")
        if any(a.many for a in self.args[:-1]):
            raise ValueError(f"IR op {self.name}: only the last operand may repeat")
        seen_optional = False
        for a in self.args:
            if seen_optional and not (a.optional or a.many):
                raise ValueError(f"IR op {self.name}: operand {a.name} follows an optional one")
            seen_optional |= a.optional
        if [a.name for a in self.args if a.role != "in"][1:]:
            raise ValueError(f"IR op {self.name}: at most one destination")
        for a in self.attrs:
            if a.kind not in ATTR_KINDS:
                raise ValueError(f"IR op {self.name}: attribute {a.name} has kind {a.kind!r}")
        if self.pipe_by_space and self.pipe is None:
            raise ValueError(f"IR op {self.name}: a per-space pipe needs a default pipe")
        if len({a.name for a in self.args} | {a.name for a in self.attrs}) != len(self.args) + len(self.attrs):
            raise ValueError(f"IR op {self.name}: an operand and an attribute share a name")

    # ------------------------------------------------------------ derived facts
    @property
    def dest(self) -> int | None:
        """Index of the operand it writes (destination passing), if any."""
        return next((i for i, a in enumerate(self.args) if a.role != "in"), None)

    @property
    def reads_dest(self) -> bool:
        d = self.dest
        return d is not None and self.args[d].role == "acc"

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs if a.required)

    def attr(self, name: str) -> Attr | None:
        found = next((a for a in self.attrs if a.name == name), None)
        if found is None and name == AIV_ATTR.name and self.name.startswith("tile."):
            return AIV_ATTR
        return found

    def pipe_for(self, operand_spaces: list[str | None]) -> str | None:
        if self.pipe_by_space and self.pipe_space_of < len(operand_spaces):
            return dict(self.pipe_by_space).get(operand_spaces[self.pipe_space_of], self.pipe)
        return self.pipe

    def reads_writes(self, n_operands: int) -> tuple[list[int], list[int]]:
        """Operand indices the op reads and writes."""
        d = self.dest
        if d is None:
            return list(range(n_operands)), []
        reads = [i for i in range(n_operands) if i != d or self.reads_dest]
        return reads, [d]

    def bind(self, op: Op) -> dict:
        """Operand and result values by declared name (a repeated operand: a list); raises
        ValueError when the operands do not fit the declaration."""
        n, args = len(op.operands), self.args
        fixed = [a for a in args if not a.optional and not a.many]
        most = None if any(a.many for a in args) else len(args)
        if n < len(fixed) or (most is not None and n > most):
            want = f"{len(fixed)}" if most == len(fixed) else f"{len(fixed)} to {most}" if most else f"{len(fixed)}+"
            raise ValueError(f"takes {want} operands, has {n}")
        out: dict = {}
        rest = list(op.operands)
        optional_slots = n - len(fixed)
        for a in args:
            if a.many:
                out[a.name] = rest
                rest = []
                break
            if a.optional:
                if optional_slots <= 0 or not rest:
                    out[a.name] = None
                    continue
                optional_slots -= 1
            out[a.name] = rest.pop(0)
        for k, v in out.items():
            a = next(x for x in args if x.name == k)
            for x in v if isinstance(v, list) else [] if v is None else [v]:
                if not isinstance(x.type, TileType if a.kind == TILE else TensorType):
                    raise ValueError(f"operand `{k}` must be a {a.kind}, is a "
                                     f"{'tile' if isinstance(x.type, TileType) else 'tensor'}")
        if len(op.results) != len(self.results):
            raise ValueError(f"defines {len(self.results)} results, has {len(op.results)}")
        for i, (kind, r) in enumerate(zip(self.results, op.results)):
            if not isinstance(r.type, TileType if kind == TILE else TensorType):
                raise ValueError(f"result {i} must be a {kind}")
            out[f"result{i}" if len(self.results) > 1 else "result"] = r
        return out

    def check(self, op: Op) -> str | None:
        """What is wrong with ``op`` against this declaration, or None."""
        try:
            bound = self.bind(op)
        except ValueError as exc:
            return str(exc)
        for key in op.attrs:
            if self.attr(key) is None:
                return f"has no attribute {key!r}"
        for a in self.attrs:
            if a.name not in op.attrs:
                if a.required:
                    return f"missing attribute {a.name!r}"
                continue
            value = op.attrs[a.name]
            if a.choices and value not in a.choices:
                return f"attribute {a.name} = {value!r} is not one of {list(a.choices)}"
            if a.kind == "exprs" and not isinstance(value, (tuple, list)):
                return f"attribute {a.name} must be a list"
        if len(op.regions) != self.regions:
            return f"has {len(op.regions)} regions, not {self.regions}"
        for rule in self.rules:
            problem = rule.check(op, bound)
            if problem is not None:
                return f"{problem} ({rule.text})"
        return None


# ------------------------------------------------------------------ rules


def _types(bound: dict, names: tuple[str, ...]) -> list[tuple[str, TensorType | TileType]]:
    out = []
    for n in names:
        v = bound.get(n)
        for x in v if isinstance(v, list) else [] if v is None else [v]:
            out.append((n, x.type))
    return out


def same_dtype(*names: str) -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        ts = _types(bound, names)
        dtypes = {t.dtype for _, t in ts}
        if len(dtypes) > 1:
            return "dtypes " + ", ".join(f"{n} {t.dtype}" for n, t in ts) + " differ"
        return None

    return Rule(f"{', '.join(names)} have one dtype", check)


def dtype_is(name: str, *dtypes: str) -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        bad = [t.dtype for _, t in _types(bound, (name,)) if t.dtype not in dtypes]
        return f"{name} is {bad[0]}" if bad else None

    return Rule(f"{name} is {' or '.join(dtypes)}", check)


def dtype_from(name: str, attr: str) -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        want = op.attrs.get(attr)
        bad = [t.dtype for _, t in _types(bound, (name,)) if want is not None and t.dtype != want]
        return f"{name} is {bad[0]}, {attr} is {want}" if bad else None

    return Rule(f"{name} has the dtype `{attr}` names", check)


def same_shape(*names: str) -> Rule:
    """Static tile shapes are equal (tensors: equal ranks; their dims are symbolic)."""

    def check(op: Op, bound: dict) -> str | None:
        ts = _types(bound, names)
        shapes = {tuple(t.shape) if isinstance(t, TileType) else len(t.shape) for _, t in ts}
        if len(shapes) > 1:
            return "shapes " + ", ".join(f"{n} {list(t.shape)}" for n, t in ts) + " differ"
        return None

    return Rule(f"{', '.join(names)} have one shape", check)


def same_rank(*names: str) -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        ts = _types(bound, names)
        if len({len(t.shape) for _, t in ts}) > 1:
            return "ranks " + ", ".join(f"{n} {len(t.shape)}" for n, t in ts) + " differ"
        return None

    return Rule(f"{', '.join(names)} have one rank", check)


def one_of(operand: str, attr: str) -> Rule:
    """A second operand or a scalar attribute standing for it, exactly one."""

    def check(op: Op, bound: dict) -> str | None:
        has_operand, has_attr = bound.get(operand) is not None, attr in op.attrs
        if has_operand == has_attr:
            return f"{'both' if has_operand else 'neither'} {operand} and {attr}"
        return None

    return Rule(f"{operand} or {attr}, not both", check)


def offsets_of(tensor: str, attr: str = "offsets") -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        t = bound[tensor].type
        n = len(op.attrs.get(attr, ()))
        return f"{n} {attr} for a tensor of rank {t.rank}" if n != t.rank else None

    return Rule(f"one entry of {attr} per dim of {tensor}", check)


def reduced_shape(dst: str, src: str) -> Rule:
    """A reduction's destination is its source with the reduced axis of extent 1."""

    def check(op: Op, bound: dict) -> str | None:
        d, s = bound[dst].type, bound[src].type
        axis = op.attrs.get("axis", -1)
        if len(d.shape) != len(s.shape):
            return f"ranks {dst} {len(d.shape)}, {src} {len(s.shape)} differ"
        if not isinstance(d, TileType):
            return None
        want = list(s.shape)
        want[int(axis) % len(want)] = 1
        return None if list(d.shape) == want else f"{dst} {list(d.shape)} is not {src} {list(s.shape)} reduced on {axis}"

    return Rule(f"{dst} is {src} with the axis reduced to 1", check)


def broadcasts_to(src: str, dst: str) -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        s, d = bound[src].type.shape, bound[dst].type.shape
        if len(s) > len(d):
            return f"{src} has more dims than {dst}"
        pad = (1,) * (len(d) - len(s)) + tuple(s)
        if isinstance(bound[dst].type, TileType) and not all(a == b or a == 1 for a, b in zip(pad, d)):
            return f"{src} {list(s)} does not broadcast to {dst} {list(d)}"
        return None

    return Rule(f"{src} broadcasts to {dst}", check)


def moved_shape(dst: str, src: str) -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        d, s = tuple(bound[dst].type.shape), tuple(bound[src].type.shape)
        want = (*s[:-2], s[-1], s[-2]) if op.attrs.get("transpose") else s
        return None if d == want else f"{dst} {list(d)} is not {src} {list(s)}{' transposed' if s != want else ''}"

    return Rule(f"{dst} has {src}'s shape (its last two dims swapped when transposed)", check)


def moved_dtype(dst: str, src: str) -> Rule:
    """A move keeps the dtype, except into the bias table, which takes a half-float L1 row widened
    to the f32 accumulator's dtype (whether the target converts it is a target rule)."""

    def check(op: Op, bound: dict) -> str | None:
        d, s = bound[dst].type, bound[src].type
        if d.dtype == s.dtype:
            return None
        if d.space == "bt" and s.space == "l1" and d.dtype == "f32" and s.dtype in ("f16", "bf16"):
            return None
        return f"dtypes {dst} {d.dtype}, {src} {s.dtype} differ"

    return Rule(f"{dst} has {src}'s dtype (an f16 / bf16 row may widen to f32 into the bias table)", check)


def stored_dtype(dst: str, src: str) -> Rule:
    """A store keeps the dtype, except out of L0C, whose fixpipe narrows an f32 accumulator to
    f16 / bf16 on the way (whether the target does is a target rule)."""

    def check(op: Op, bound: dict) -> str | None:
        d, s = bound[dst].type, bound[src].type
        if d.dtype == s.dtype:
            return None
        if s.space == "l0c" and s.dtype == "f32" and d.dtype in ("f16", "bf16"):
            return None
        return f"dtypes {dst} {d.dtype}, {src} {s.dtype} differ"

    return Rule(f"{dst} has {src}'s dtype (an f32 accumulator may narrow to f16 / bf16)", check)


def matmul_shapes(dst: str, a: str, b: str) -> Rule:
    """The last two dims multiply; dims before them (a batch index fixed by the tiles' offsets)
    are 1."""

    def check(op: Op, bound: dict) -> str | None:
        for x in (dst, a, b):
            lead = bound[x].type.shape[:-2]
            if any(d != 1 for d in lead):
                return f"{x} has leading dims {list(lead)}, not 1"
        (m, n), (am, ak), (bk, bn) = (bound[x].type.shape[-2:] for x in (dst, a, b))
        if (am, bn, ak) != (m, n, bk):
            return f"[{am}, {ak}] x [{bk}, {bn}] does not give [{m}, {n}]"
        return None

    return Rule(f"{dst}[m, n] = {a}[m, k] x {b}[k, n], any leading dims 1", check)


def bias_row(bias: str, dst: str) -> Rule:
    """A bias row: one dim covering the accumulator's columns."""

    def check(op: Op, bound: dict) -> str | None:
        s, n = bound[bias].type.shape, bound[dst].type.shape[-1]
        return None if len(s) == 1 and s[0] >= n else f"{bias} {list(s)} is not a row of at least {n}"

    return Rule(f"{bias} is one row covering {dst}'s columns", check)


def matmul_ranks(a: str, b: str, result: str, bias: str) -> Rule:
    """A batched product: operands of rank 2 to 4, the result of the larger rank, a bias of rank 1."""

    def check(op: Op, bound: dict) -> str | None:
        ra, rb, rr = (bound[x].type.rank for x in (a, b, result))
        if not (2 <= ra <= 4 and 2 <= rb <= 4):
            return f"{a} has rank {ra}, {b} rank {rb}"
        if rr != max(ra, rb):
            return f"{result} has rank {rr}, not {max(ra, rb)}"
        if bound.get(bias) is not None and bound[bias].type.rank != 1:
            return f"{bias} has rank {bound[bias].type.rank}"
        return None

    return Rule(f"{a}, {b} of rank 2 to 4, {result} of the larger rank, {bias} of rank 1", check)


def _repeat_guard() -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        index = bound.get("index")
        if (index is not None) != (op.attrs.get("access") == "repeat"):
            return "a guard takes an index tensor exactly when its access is `repeat`"
        if index is not None and index.type.rank != 1:
            return f"index has rank {index.type.rank}"
        return None

    return Rule("an index tensor of rank 1 exactly when access is `repeat`", check)


def relu_from_acc(src: str) -> Rule:
    """Only the fixpipe applies a relu on the way to GM: a store with ``relu`` moves an accumulator."""

    def check(op: Op, bound: dict) -> str | None:
        if op.attrs.get("relu") and bound[src].type.space != "l0c":
            return f"{src} is in {bound[src].type.space}"
        return None

    return Rule(f"a store with relu moves {src} out of l0c", check)


def in_space(name: str, *spaces: str) -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        bad = [t.space for _, t in _types(bound, (name,)) if t.space not in spaces]
        return f"{name} is in {bad[0]}" if bad else None

    return Rule(f"{name} is in {' or '.join(spaces)}", check)


# ------------------------------------------------------------------ declarations

# grid: a tile grid of one op; implicit: the loop(1) around top-level work; peeled: a first or last
# iteration split off a loop; split: the partial products of a split-K matmul, over disjoint k
# ranges, each into its own slice of a GM workspace (iterations independent of each other)
LOOP_KINDS = ("grid", "implicit", "peeled", "split")
# Loops that run inside a compute kernel rather than in the control program.
KERNEL_LOOP_KINDS = frozenset({"grid", "split"})


def in_kernel_loop(op: Op) -> bool:
    """A loop the tiling pass made over tiles: it stays inside its compute kernel."""
    return op.name == "loop" and op.attrs.get("kind") in KERNEL_LOOP_KINDS
SCALAR = Attr("scalar", "expr")
SIDE = Attr("side", "name", choices=("left",))
AXIS = Attr("axis", "int", required=True)
OFFSETS = Attr("offsets", "exprs", required=True)
ROUND = Attr("mode", "name", choices=("none", "rint", "round", "floor", "ceil", "trunc", "odd"))


def _structural() -> list[IROp]:
    return [
        # structure, at every level
        IROp("loop", ALL, "loop", attrs=(Attr("index", "name", True), Attr("lo", required=True),
                                         Attr("hi", required=True), Attr("step", required=True),
                                         Attr("name", "name", True), Attr("kind", "name", choices=LOOP_KINDS),
                                         Attr("unroll_var", "name"), Attr("unrolled", "int"),
                                         Attr("double_buffered", "int", doc="the loop runs its iterations in groups of this many "
                                              "copies, each with its own buffers (passes/dbuf.py)"),
                                         Attr("fit", "name", doc="the one-pass version of a row loop for rows "
                                              "whose extent along this dim fits on chip (passes/tile_fit.py)"),
                                         Attr("parallel", "int", doc="1: no iteration depends on another "
                                              "(passes/parallel.py; the grid loop passes/blocks.py shares "
                                              "out), so they may run as blocks on many cores"),
                                         Attr("rows_interchanged", "int", doc="1: the row blocks of a kernel "
                                              "whose user loops run inside (passes/rowgrid.py): every iteration "
                                              "touches its own rows of each tensor written, workspaces included"),
                                         Attr("skewed", "int", doc="1: iteration i runs the cube's first part "
                                              "of i, its last part of i - 1, then the vector part of i "
                                              "(passes/skew.py)")),
             regions=1, control=True, doc="for index in [lo, hi) by step; a `grid` loop walks a tile grid"),
        IROp("if", ALL, "if", attrs=(Attr("cond", required=True),), regions=2, control=True),
        IROp("print", ALL, "print", attrs=(Attr("format", "text", True), Attr("args", "exprs", True)), control=True),
        IROp("read", ALL, "read", (Arg("src", TENSOR),),
             attrs=(Attr("index", "exprs", True), Attr("sym", "name", True), Attr("dtype", "dtype", True)),
             rules=(offsets_of("src", "index"),), control=True, doc="one element of a tensor as a scalar symbol"),
        # an access's bounds (E0730: `tensor`, `axis`; for an index read from data, `source` names the
        # tensor holding it), or a loop's trip count read from data against the call's largest dim
        # (E0870: access `trips`, `loop`, the count as `offset`, the bound as `dim`), or, access
        # `repeat` with a 1-D index tensor as its operand and `cond` 1, that the valid elements of an
        # index declared unique are distinct (E0731: `dim` the positions they index, `tensor`, `source`)
        IROp("guard", ALL, "guard", (Arg("index", TENSOR, optional=True),),
             attrs=(Attr("cond", required=True), Attr("tensor", "name"),
                    Attr("axis", "int"), Attr("offset", required=True),
                    Attr("extent", required=True), Attr("dim", required=True),
                    Attr("access", "name", choices=("write", "read", "view", "index", "trips", "repeat")),
                    Attr("loop", "name"), Attr("source", "name")),
             rules=(_repeat_guard(),), control=True),
        # GM tensors
        IROp("view", ALL, "view", (Arg("src", TENSOR),), (TENSOR,),
             (OFFSETS, Attr("valid_given", "exprs", doc="the valid shape as written, read by E0711's check")),
             (same_dtype("src", "result"), same_rank("src", "result"), offsets_of("src")), control=True),
        IROp("reshape", ALL, "reshape", (Arg("src", TENSOR),), (TENSOR,), rules=(same_dtype("src", "result"),),
             control=True),
        IROp("alloc", ALL, "alloc", (), (TENSOR,), (Attr("fill", "expr"), Attr(
            "within", "any", doc="the indices of the loops of a kernel this workspace was allocated inside "
            "before partitioning hoisted it above the launch (passes/persistent.py): each of their "
            "iterations has a workspace of its own, so blocks sharing one of them out may each take "
            "a copy (passes/blocks.py); passes/rowgrid.py records the loops of a row block's work it "
            "hoists one out of, and the skew pass reads it (passes/skew.py)"), Attr(
            "row_block", "name", doc="the row block loop one of whose row blocks this workspace holds "
            "(passes/rowgrid.py): blocks sharing that loop out each take a copy (passes/blocks.py)")),
            control=True),
        IROp("assemble", ("tensor",), "assemble", (Arg("dst", TENSOR, "dst"), Arg("src", TENSOR)), (),
             (OFFSETS,), (same_dtype("dst", "src"), same_rank("dst", "src"), offsets_of("dst"))),
        IROp("fill", ("tensor",), "fill", (Arg("dst", TENSOR, "dst"),), (),
             (OFFSETS, Attr("shape", "exprs", True), Attr("scalar", required=True)), (offsets_of("dst"),)),
        IROp("broadcast", ("tensor",), "broadcast", (Arg("src", TENSOR),), (TENSOR,),
             rules=(same_dtype("src", "result"), broadcasts_to("src", "result"))),
        # tiles
        IROp("tile.alloc", TILE_LEVELS, "tile_alloc", (), (TILE,),
             (Attr("offset", "int"), Attr("bytes", "int"), Attr("layout", "name", choices=("row", "col")),
              Attr("rows", "int"), Attr("cols", "int"), Attr("buffer", "int"), Attr("buffer_of", "name"))),
        IROp("tile.load", TILE_LEVELS, "load", (Arg("dst", TILE, "dst"), Arg("src", TENSOR)), (), (OFFSETS,),
             (same_dtype("dst", "src"), same_rank("dst", "src"), offsets_of("src")), pipe="MTE2"),
        IROp("tile.store", TILE_LEVELS, "store", (Arg("dst", TENSOR, "dst"), Arg("src", TILE)), (),
             (OFFSETS, Attr("relu", "bool", doc="true: the fixpipe applies relu as an accumulator leaves L0C "
                            "(passes/epilogue.py)")),
             (stored_dtype("dst", "src"), same_rank("dst", "src"), offsets_of("dst"), relu_from_acc("src")),
             pipe="MTE3",
             pipe_by_space=(("l0c", "FIX"),), pipe_space_of=1),
        IROp("tile.fill", TILE_LEVELS, "fill_tile", (Arg("dst", TILE, "dst"),), (), (Attr("scalar", required=True),),
             pipe="V"),
        IROp("tile.expand", TILE_LEVELS, "expand", (Arg("dst", TILE, "dst"), Arg("src", TILE)), (), (),
             (same_dtype("dst", "src"), broadcasts_to("src", "dst")), pipe="V"),
        IROp("tile.mov", TILE_LEVELS, "mov", (Arg("dst", TILE, "dst"), Arg("src", TILE)), (),
             (Attr("transpose", "bool"),), (moved_dtype("dst", "src"), moved_shape("dst", "src")), pipe="MTE1"),
        IROp("tile.matmul_acc", TILE_LEVELS, "matmul_acc",
             (Arg("dst", TILE, "acc"), Arg("acc", TILE), Arg("a", TILE), Arg("b", TILE)), (), (),
             (same_dtype("dst", "acc"), same_dtype("a", "b"), same_shape("dst", "acc"), matmul_shapes("dst", "a", "b"),
              in_space("dst", "l0c"), in_space("a", "l0a"), in_space("b", "l0b")), pipe=OPS["matmul"].pipe),
        IROp("tile.matmul_bias", TILE_LEVELS, "matmul_bias",
             (Arg("dst", TILE, "dst"), Arg("a", TILE), Arg("b", TILE), Arg("bias", TILE)), (), (),
             (same_dtype("dst", "bias"), same_dtype("a", "b"), matmul_shapes("dst", "a", "b"), bias_row("bias", "dst"),
              in_space("dst", "l0c"), in_space("a", "l0a"), in_space("b", "l0b"), in_space("bias", "bt")),
             pipe=OPS["matmul"].pipe, doc="dst = a x b + bias, one bias value per column"),
        # the block level: launches from the control program, synchronisation inside compute kernels
        IROp("launch", ("block",), "launch", (Arg("tensors", TENSOR, many=True),), (),
             (Attr("kernel", "name", True), Attr("scalars", "exprs", True),
              Attr("block_dim", "expr", doc="how many blocks run the kernel, each with its own block index "
                   "(the kernel's `block_index` and `block_count` attributes); absent: 1"),
              Attr("footprint", "expr", doc="the bytes of the distinct tensors it touches, where it passes "
                   "two views of one (the cost model's L2 term); absent: the bytes of the tensors it passes")),
             control=True, doc="start a compute kernel; `scalars` fill its scalar parameters in order, "
             "except the ones its `block_index` and `block_count` attributes name"),
        IROp("sync.set", ("block",), "sync_set", attrs=_SYNC),
        IROp("sync.wait", ("block",), "sync_wait", attrs=_SYNC),
        IROp("sync.barrier", ("block",), "sync_barrier", attrs=(Attr("pipe", "name", True),)),
    ]


_SYNC = (Attr("src", "name", True), Attr("dst", "name", True), Attr("event", "int", True))


@dataclass(frozen=True)
class FuncAttr:
    """An attribute of a function (``Func.attrs``) whose meaning every backend shares. ``kinds``
    are the function kinds that may carry it; a ``param`` attribute names one of the function's
    scalar parameters. Attributes not declared here (the memory plan's ``*_bytes``, a control
    program's ``variant``) are bookkeeping of the pass that writes them."""

    name: str
    kinds: tuple[str, ...]
    param: bool = False
    doc: str = ""


# Blocks: a launch with ``block_dim`` runs its kernel once per block, on as many cores as the chip
# has of the kernel's kind, each block with fresh on-chip buffers. The parameters these name are
# not passed by the launch: each block receives its own index (0 .. block_dim - 1) and the count.
FUNC_ATTRS: dict[str, FuncAttr] = {a.name: a for a in (
    FuncAttr("block_index", ("vector", "cube", "mixed"), param=True, doc="the scalar parameter that receives the block's index"),
    FuncAttr("block_count", ("vector", "cube", "mixed"), param=True, doc="the scalar parameter that receives the number of blocks"),
)}


def block_params(kernel) -> tuple[str, ...]:
    """The scalar parameters of ``kernel`` (a ``Func``) that each block receives rather than the launch."""
    return tuple(kernel.attrs[k] for k in ("block_index", "block_count") if k in kernel.attrs)


def launched_params(kernel) -> list:
    """The scalar parameters of ``kernel`` a launch's ``scalars`` fill, in order."""
    own = block_params(kernel)
    return [p for p in kernel.params if not p.is_tensor and p.name not in own]


def _language(name: str) -> list[IROp]:
    """The whole-tensor op and the tile op of a language op, from its op table kind."""
    od = OPS[name]
    T = f"tile.{name}"
    if od.kind == "unary":
        return [IROp(name, ("tensor",), "unary", (Arg("x", TENSOR),), (TENSOR,),
                     rules=(same_dtype("x", "result"), same_rank("x", "result"))),
                IROp(T, TILE_LEVELS, "unary", (Arg("dst", TILE, "dst"), Arg("x", TILE)),
                     rules=(same_dtype("dst", "x"), same_shape("dst", "x")), pipe=od.pipe)]
    if od.kind == "binary":
        attrs = (SCALAR, SIDE)
        return [IROp(name, ("tensor",), "binary", (Arg("x", TENSOR), Arg("y", TENSOR, optional=True)), (TENSOR,),
                     attrs, (same_dtype("x", "y", "result"), one_of("y", "scalar"))),
                IROp(T, TILE_LEVELS, "binary", (Arg("dst", TILE, "dst"), Arg("x", TILE), Arg("y", TILE, optional=True)),
                     (), attrs, (same_dtype("dst", "x", "y"), same_shape("dst", "x", "y"), one_of("y", "scalar")),
                     pipe=od.pipe)]
    if od.kind == "ternary":
        # always a composite: tiling expands it into the primitives of its template, so it has no
        # tile-level op; a scalar operand stands in `scalar` (the second) or `scalar2` (the third)
        return [IROp(name, ("tensor",), "ternary", (Arg("x", TENSOR), Arg("yz", TENSOR, many=True)), (TENSOR,),
                     (SCALAR, Attr("scalar2", "expr")), (same_dtype("x", "yz", "result"), _operand_count("yz")))]
    if od.kind == "reduce":
        return [IROp(name, ("tensor",), "reduce", (Arg("x", TENSOR),), (TENSOR,),
                     (AXIS, Attr("keepdim", "bool")), (same_dtype("x", "result"),)),
                IROp(T, TILE_LEVELS, "reduce", (Arg("dst", TILE, "dst"), Arg("x", TILE)), (), (AXIS,),
                     (same_dtype("dst", "x"), reduced_shape("dst", "x")), pipe=od.pipe)]
    if od.kind == "cast":
        attrs = (Attr("to", "dtype", True), ROUND)
        return [IROp(name, ("tensor",), "cast", (Arg("x", TENSOR),), (TENSOR,), attrs,
                     (dtype_from("result", "to"), same_rank("x", "result"))),
                IROp(T, TILE_LEVELS, "cast", (Arg("dst", TILE, "dst"), Arg("x", TILE)), (), attrs,
                     (dtype_from("dst", "to"), same_shape("dst", "x")), pipe=od.pipe)]
    if od.kind == "compare":
        attrs = (Attr("mode", "name", True, ("lt", "le", "gt", "ge", "eq", "ne")), SCALAR, SIDE)
        return [IROp(name, ("tensor",), "compare", (Arg("x", TENSOR), Arg("y", TENSOR, optional=True)), (TENSOR,),
                     attrs, (same_dtype("x", "y"), dtype_is("result", "bool"), one_of("y", "scalar"))),
                IROp(T, TILE_LEVELS, "compare", (Arg("dst", TILE, "dst"), Arg("x", TILE), Arg("y", TILE, optional=True)),
                     (), attrs, (same_dtype("x", "y"), dtype_is("dst", "bool"), same_shape("dst", "x", "y"),
                                 one_of("y", "scalar")), pipe=od.pipe)]
    if od.kind == "select":
        attrs = (SCALAR, Attr("scalar2", "expr"))
        rules = (dtype_is("cond", "bool"),)
        return [IROp(name, ("tensor",), "select", (Arg("cond", TENSOR), Arg("xy", TENSOR, many=True)), (TENSOR,),
                     attrs, (*rules, same_dtype("xy", "result"), _select_arity("xy"))),
                IROp(T, TILE_LEVELS, "select", (Arg("dst", TILE, "dst"), Arg("cond", TILE), Arg("xy", TILE, many=True)),
                     (), attrs, (*rules, same_dtype("dst", "xy"), same_shape("dst", "cond", "xy"), _select_arity("xy")),
                     pipe=od.pipe)]
    if od.kind == "matmul":
        return [IROp(name, ("tensor",), "matmul", (Arg("a", TENSOR), Arg("b", TENSOR), Arg("bias", TENSOR, optional=True)),
                     (TENSOR,), (Attr("trans_a", "bool"), Attr("trans_b", "bool"), Attr("out_dtype", "dtype"),
                                 Attr("in_dtype", "dtype"),
                                 Attr("relu", "bool", doc="true: relu of the product, applied by the fixpipe "
                                      "(passes/epilogue.py)")),
                     (same_dtype("a", "b"), dtype_from("result", "out_dtype"), matmul_ranks("a", "b", "result", "bias"))),
                IROp(T, TILE_LEVELS, "matmul", (Arg("dst", TILE, "dst"), Arg("a", TILE), Arg("b", TILE)), (), (),
                     (same_dtype("a", "b"), matmul_shapes("dst", "a", "b"), in_space("dst", "l0c"),
                      in_space("a", "l0a"), in_space("b", "l0b")), pipe=od.pipe)]
    raise ValueError(f"op {name}: no IR declaration for kind {od.kind!r}")


# ------------------------------------------------------------------ layout ops (issue 23 §2)


def permuted_shape(dst: str, src: str, attr: str = "perm") -> Rule:
    """The result's dims are the source's in the order ``perm`` gives (result dim k = source dim
    ``perm[k]``), its valid extents too."""

    def check(op: Op, bound: dict) -> str | None:
        s, d = bound[src].type, bound[dst].type
        perm = [int(p) for p in op.attrs.get(attr, ())]
        if sorted(perm) != list(range(len(s.shape))):
            return f"{attr} {perm} is not an order of {len(s.shape)} dims"
        if tuple(d.shape) != tuple(s.shape[p] for p in perm):
            return f"{dst} {list(d.shape)} is not {src} {list(s.shape)} in the order {perm}"
        return None

    return Rule(f"{dst} is {src} with its dims in the order `{attr}`", check)


def swapped_last(dst: str, src: str) -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        s, d = tuple(bound[src].type.shape), tuple(bound[dst].type.shape)
        if len(s) < 2:
            return f"{src} has rank {len(s)}; a transpose swaps its last two dims"
        want = s[:-2] + (s[-1], s[-2])
        return None if d == want else f"{dst} {list(d)} is not {src} {list(s)} with its last two dims swapped"

    return Rule(f"{dst} is {src} with its last two dims swapped", check)


def concat_shapes(dst: str, a: str, b: str) -> Rule:
    """Tiles joined along their last dim: the rows agree and the destination holds both rows."""

    def check(op: Op, bound: dict) -> str | None:
        d, x, y = (tuple(bound[n].type.shape) for n in (dst, a, b))
        if not (d[:-1] == x[:-1] == y[:-1]) or d[-1] < x[-1] + y[-1]:
            return f"{dst} {list(d)} does not hold {a} {list(x)} and {b} {list(y)} side by side"
        return None

    return Rule(f"{dst} holds {a} and {b} side by side along the last dim", check)


def _layout() -> list[IROp]:
    """Reshape (declared with the GM ops above), permute, transpose, concat and clone."""
    perm = Attr("perm", "exprs", True)
    return [
        # a relabelling of GM memory: the source's dims in another order, its last dim staying last
        IROp("permute", ALL, "permute", (Arg("src", TENSOR),), (TENSOR,), (perm,),
             (same_dtype("src", "result"), same_rank("src", "result"), permuted_shape("result", "src")),
             control=True, doc="the source's dims in the order `perm`; no data moves"),
        IROp("transpose", ("tensor",), "transpose", (Arg("src", TENSOR),), (TENSOR,), (),
             (same_dtype("src", "result"), same_rank("src", "result"), swapped_last("result", "src")),
             doc="the last two dims swapped: data moves through tiles (TTRANS)"),
        IROp("concat", ("tensor",), "concat", (Arg("parts", TENSOR, many=True),), (TENSOR,), (AXIS,),
             (same_dtype("parts", "result"), same_rank("parts", "result")),
             doc="the parts one after the other along `axis`"),
        IROp("clone", ("tensor",), "broadcast", (Arg("src", TENSOR),), (TENSOR,), (),
             (same_dtype("src", "result"), same_rank("src", "result"), broadcasts_to("src", "result")),
             doc="a copy of the source in a tensor of its own"),
        IROp("tile.trans", TILE_LEVELS, "trans", (Arg("dst", TILE, "dst"), Arg("src", TILE)), (), (),
             (same_dtype("dst", "src"), swapped_last("dst", "src")), pipe="V"),
        IROp("tile.concat", TILE_LEVELS, "concat_tile", (Arg("dst", TILE, "dst"), Arg("a", TILE), Arg("b", TILE)),
             (), (), (same_dtype("dst", "a", "b"), concat_shapes("dst", "a", "b")), pipe="V",
             doc="b's valid columns right after a's valid columns, row by row"),
    ]


# ------------------------------------------------------------------ end of layout ops


# ------------------------------------------------------------------ fused vector instructions


@dataclass(frozen=True)
class Fused:
    """A pto-isa instruction that does the work of several tile ops in one (``passes/fusedops.py``
    selects it). ``op`` is the language op it applies (``expdif``: exp(x - y)); ``spread`` is how
    its broadcast operand covers the destination: ``row`` (one value per row, the TROWEXPAND*
    forms), ``col`` (one value per column, TCOLEXPAND*) or None (no broadcast: a multiply-add)."""

    instruction: str
    op: str
    spread: str | None = None


# The binary ops a row or column broadcast fuses into, by their pto-isa suffix.
EXPAND_SUFFIX = {"add": "ADD", "sub": "SUB", "mul": "MUL", "div": "DIV", "maximum": "MAX", "minimum": "MIN",
                 "expdif": "EXPDIF"}
FUSED: dict[str, Fused] = {
    **{f"tile.{spread}expand_{op}": Fused(f"T{spread.upper()}EXPAND{suffix}", op, spread)
       for spread in ("row", "col") for op, suffix in EXPAND_SUFFIX.items()},
    # dst = a * b + dst (TMULADDDST) and dst = a * dst + b (TFUSEDMULADD): the destination is read
    "tile.muladddst": Fused("TMULADDDST", "muladddst"),
    "tile.fusedmuladd": Fused("TFUSEDMULADD", "fusedmuladd"),
}


def spread_operand(op: Op) -> int | None:
    """The operand index (1 or 2) of a fused broadcast op's broadcast operand: the one whose shape
    is not the destination's (the second when both are, a broadcast of a single row)."""
    if FUSED[op.name].spread is None:
        return None
    d = tuple(op.operands[0].type.shape)
    return 1 if tuple(op.operands[1].type.shape) != d and tuple(op.operands[2].type.shape) == d else 2


def spread_in_blocks(op: Op) -> bool:
    """Whether a row broadcast op's per-row operand goes to its instruction as a 32-byte block per
    row (a TROWEXPAND into a scratch tile first) rather than as one column-major column (read in
    place, the instruction alone). A column must be contiguous, which a per-row tile of one row is
    (its rows are a block apart otherwise), and must come second: when both operands cover a one-
    column destination, pto-isa's implementations take the full operand differently (its CPU
    simulation src0, A2/A3 the one with the longer rows), and the blocks hold every value either
    reads."""
    if FUSED[op.name].spread != "row":
        return False
    return spread_operand(op) == 1 or _logical_rows(tuple(op.operands[0].type.shape))[0] != 1


def _logical_rows(shape) -> tuple:
    rows = 1
    for d in shape[:-1]:
        rows *= d
    return rows, shape[-1]


def spreads(dst: str, x: str, y: str, spread: str) -> Rule:
    """One of ``x``, ``y`` has the destination's shape; the other holds one value per row of it
    (``row``: the destination's rows, one column) or one row of it (``col``: its last dim, every
    other dim 1; it may have fewer dims)."""

    def check(op: Op, bound: dict) -> str | None:
        d = tuple(bound[dst].type.shape)
        sx, sy = tuple(bound[x].type.shape), tuple(bound[y].type.shape)
        if d not in (sx, sy):
            return f"neither {x} {list(sx)} nor {y} {list(sy)} has {dst}'s shape {list(d)}"
        other = sy if sx == d else sx
        (rd, cd), (ro, co) = _logical_rows(d), _logical_rows(other)
        if len(other) > len(d):
            return f"the broadcast operand {list(other)} has more dims than {dst}"
        if spread == "row" and (ro, co) != (rd, 1):
            return f"{list(other)} is not one value per row of {list(d)}"
        if spread == "col" and (ro, co) != (1, cd):
            return f"{list(other)} is not one row of {list(d)}"
        return None

    return Rule(f"{x} or {y} has {dst}'s shape, the other one value per {spread} of it", check)


def _fused() -> list[IROp]:
    out = []
    for name, f in FUSED.items():
        args = (Arg("dst", TILE, "dst" if f.spread else "acc"), Arg("x", TILE), Arg("y", TILE))
        rules = ((same_dtype("dst", "x", "y"), spreads("dst", "x", "y", f.spread)) if f.spread
                 else (same_dtype("dst", "x", "y"), same_shape("dst", "x", "y")))
        doc = {"muladddst": "dst = x * y + dst", "fusedmuladd": "dst = x * dst + y",
               "expdif": "dst = exp(x - y)"}.get(f.op, f"dst = {f.op}(x, y)")
        out.append(IROp(name, TILE_LEVELS, "expand_binary" if f.spread else "muladd", args, (), (), rules,
                        pipe="V", doc=f"{doc}, one operand spread over dst ({f.instruction})" if f.spread
                        else f"{doc} ({f.instruction})"))
    return out


# ------------------------------------------------------------------ indexing ops (issue 23 §2)

INDEX_DTYPES = ("i32", "i64")  # what an index tensor may hold


def rank_is(name: str, *ranks: int) -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        bad = [len(t.shape) for _, t in _types(bound, (name,)) if len(t.shape) not in ranks]
        return f"{name} has rank {bad[0]}" if bad else None

    return Rule(f"{name} has rank {' or '.join(map(str, ranks))}", check)


def _indexing() -> list[IROp]:
    """Gathers, scatters, index generation, triangular masks, arg-reductions and top-k. The
    tensor-level ops read index tensors whose values the control program has checked against the
    dims they index (``guard``s ahead of them); the tile-level ops that read or write GM through
    an index tile (``tile.gather_rows``, ``tile.gather_elem``, ``tile.scatter_rows``) take the GM
    tensor as an operand, at ``offsets``."""
    axis = AXIS
    return [
        IROp("index_select", ("tensor",), "index_select", (Arg("src", TENSOR), Arg("index", TENSOR)), (TENSOR,),
             (axis,), (same_dtype("src", "result"), same_rank("src", "result"), dtype_is("index", *INDEX_DTYPES),
                       rank_is("index", 1)),
             doc="src's slices along `axis` at the positions `index` holds, in index order"),
        IROp("gather", ("tensor",), "gather", (Arg("src", TENSOR), Arg("index", TENSOR)), (TENSOR,), (axis,),
             (same_dtype("src", "result"), same_rank("src", "index", "result"), dtype_is("index", *INDEX_DTYPES)),
             doc="result[i][j] = src[i][index[i][j]] (axis 1), as torch.gather"),
        IROp("scatter_update", ("tensor",), "scatter_update",
             (Arg("dst", TENSOR, "dst"), Arg("index", TENSOR), Arg("src", TENSOR)), (),
             (axis, Attr("unique", "bool", doc="the positions are distinct (a `repeat` guard checked them): "
                         "the rows may be written in any order")),
             (same_dtype("dst", "src"), same_rank("dst", "src"), dtype_is("index", *INDEX_DTYPES),
              rank_is("index", 1)),
             doc="dst's slices along `axis` at the positions `index` holds become src's, in order"),
        IROp("arange", ("tensor",), "arange", (), (TENSOR,), (Attr("start", required=True),),
             (rank_is("result", 1),), doc="start, start + 1, ..."),
        IROp("tri", ("tensor",), "tri", (), (TENSOR,),
             (Attr("lower", "bool", True), Attr("diagonal", required=True)), (rank_is("result", 2, 3, 4),),
             doc="over the last two dims, 1 where col - row <= diagonal (lower) or >= diagonal (upper), else 0"),
        IROp("argmax", ("tensor",), "argreduce", (Arg("x", TENSOR),), (TENSOR,), (axis, Attr("keepdim", "bool")),
             (dtype_is("result", "i32"), same_rank("x", "result")), doc="the first index of the maximum"),
        IROp("argmin", ("tensor",), "argreduce", (Arg("x", TENSOR),), (TENSOR,), (axis, Attr("keepdim", "bool")),
             (dtype_is("result", "i32"), same_rank("x", "result")), doc="the first index of the minimum"),
        IROp("topk", ("tensor",), "topk", (Arg("x", TENSOR),), (TENSOR, TENSOR),
             (Attr("k", required=True), axis, Attr("largest", "bool", True)),
             (same_dtype("x", "result0"), dtype_is("result1", "i32"), same_rank("x", "result0", "result1")),
             doc="the k largest (smallest) values along `axis` in order, and their indices; equal values in "
                 "index order"),
        # tiles
        IROp("tile.gather_rows", TILE_LEVELS, "gather_rows",
             (Arg("dst", TILE, "dst"), Arg("table", TENSOR), Arg("index", TILE)), (), (OFFSETS,),
             (same_dtype("dst", "table"), dtype_is("index", "i32"), offsets_of("table")), pipe="V",
             doc="dst row r = the table row index[r] (the table starts at `offsets`), MGATHER<Row>"),
        IROp("tile.gather_elem", TILE_LEVELS, "gather_elem",
             (Arg("dst", TILE, "dst"), Arg("table", TENSOR), Arg("index", TILE)), (), (OFFSETS,),
             (same_dtype("dst", "table"), dtype_is("index", "i32"), offsets_of("table")), pipe="V",
             doc="dst[0][c] = table[offsets][index[0][c]] along the last dim, MGATHER<Elem> over one row"),
        IROp("tile.scatter_rows", TILE_LEVELS, "scatter_rows",
             (Arg("table", TENSOR, "dst"), Arg("src", TILE), Arg("index", TILE)), (),
             (OFFSETS, Attr("unique", "bool", doc="its scatter's positions are distinct over the whole index "
                            "tensor, so tiles of distinct index rows write distinct table rows")),
             (same_dtype("table", "src"), dtype_is("index", "i32"), offsets_of("table")), pipe="V",
             doc="the table row index[r] (the table starts at `offsets`) = src row r, MSCATTER<Row>"),
        IROp("tile.ci", TILE_LEVELS, "ci", (Arg("dst", TILE, "dst"),), (), (Attr("start", required=True),),
             pipe="V", doc="dst[..., j] = start + j along the last dim (TCI)"),
        IROp("tile.tri", TILE_LEVELS, "tri_tile", (Arg("dst", TILE, "dst"),), (),
             (Attr("lower", "bool", True), Attr("diagonal", required=True)), pipe="V",
             doc="1 where col - row <= diagonal (lower) or >= diagonal (upper), else 0 (TTRI)"),
        IROp("tile.argmax", TILE_LEVELS, "argreduce_tile", (Arg("dst", TILE, "dst"), Arg("x", TILE)), (), (AXIS,),
             (dtype_is("dst", "i32"), reduced_shape("dst", "x")), pipe="V",
             doc="per row, the first column holding the row's maximum (TROWARGMAX)"),
        IROp("tile.argmin", TILE_LEVELS, "argreduce_tile", (Arg("dst", TILE, "dst"), Arg("x", TILE)), (), (AXIS,),
             (dtype_is("dst", "i32"), reduced_shape("dst", "x")), pipe="V",
             doc="per row, the first column holding the row's minimum (TROWARGMIN)"),
    ]


# ------------------------------------------------------------------ end of indexing ops


def _select_arity(name: str) -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        given = len(bound[name]) + ("scalar" in op.attrs) + ("scalar2" in op.attrs)
        return None if given == 2 else f"{given} values to select from"

    return Rule("two values to select from: operands or scalar / scalar2", check)


def _operand_count(name: str) -> Rule:
    def check(op: Op, bound: dict) -> str | None:
        given = len(bound[name]) + ("scalar" in op.attrs) + ("scalar2" in op.attrs)
        return None if given == 2 else f"{given} operands besides the first"

    return Rule("two operands besides the first: tensors or scalar / scalar2", check)


def _table() -> dict[str, IROp]:
    out: dict[str, IROp] = {}
    for d in _structural() + _layout() + _fused() + _indexing() + [d for name in OPS for d in _language(name)]:
        if d.name in out:
            raise ValueError(f"IR op {d.name} is declared twice")
        out[d.name] = d
    return out


IR_OPS: dict[str, IROp] = _table()
LEVEL_OPS: dict[str, frozenset[str]] = {lv: frozenset(n for n, d in IR_OPS.items() if lv in d.levels) for lv in LEVELS}
FAMILIES: frozenset[str] = frozenset(d.family for d in IR_OPS.values())


def family(op: Op) -> str:
    return IR_OPS[op.name].family


def families_at(level: str, control: bool | None = None) -> frozenset[str]:
    """The families of the ops of ``level`` (only control ops, or only the others, when asked)."""
    return frozenset(d.family for d in IR_OPS.values()
                     if level in d.levels and (control is None or d.control == control))


def indexed_gm(op: Op) -> tuple[list, list]:
    """The GM tensors a tile op reads and writes through an index tile (gathers and scatters; not
    ``tile.load``/``tile.store``, whose regions their offsets give): which rows they touch only the
    data knows, so passes treat them as touching the whole tensor."""
    if not op.name.startswith("tile.") or op.name in ("tile.load", "tile.store") or op.name not in IR_OPS:
        return [], []
    r, w = IR_OPS[op.name].reads_writes(len(op.operands))
    return ([op.operands[i] for i in r if isinstance(op.operands[i].type, TensorType)],
            [op.operands[i] for i in w if isinstance(op.operands[i].type, TensorType)])


@dataclass
class Handlers:
    """A backend's table from family to handler, filled by the ``on`` decorator; ``missing``
    lists the families of a level it has no handler for (the completeness tests ask)."""

    what: str
    table: dict[str, Callable] = field(default_factory=dict)

    def on(self, *families: str) -> Callable:
        def register(fn: Callable) -> Callable:
            for f in families:
                if f not in FAMILIES:
                    raise ValueError(f"{self.what}: no IR op has the family {f!r}")
                if f in self.table:
                    raise ValueError(f"{self.what}: family {f!r} has two handlers")
                self.table[f] = fn
            return fn

        return register

    def __getitem__(self, op: Op) -> Callable:
        return self.table[IR_OPS[op.name].family]

    def get(self, op: Op) -> Callable | None:
        d = IR_OPS.get(op.name)
        return None if d is None else self.table.get(d.family)

    def missing(self, families: frozenset[str]) -> set[str]:
        return set(families) - set(self.table)
