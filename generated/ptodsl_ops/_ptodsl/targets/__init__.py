"""Hardware models as data: one ``NAME.yaml`` per target in this folder, loaded into :class:`Target`.

Code never writes a buffer size or core count as a literal; it asks the spec's target. The files are
validated with the same schema machinery as spec files, so a broken target file is reported at its
line and column rather than failing somewhere in a pass.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

from ..diagnostics import CompileError, Diagnostics
from ..yamlio.nodes import YMap, compose
from ..yamlio.schema import (
    E_TARGET,
    Bool,
    Enum,
    Float,
    Int,
    ListOf,
    MapOf,
    Obj,
    Str,
    dtype_name,
    to_json_schema,
    validate,
)

E_READ = "E0203"
E_EMPTY = "E0204"
E_RULE = "E0209"  # a value the schema cannot express the constraint on


# Tiles: row-major; column-major with a single column. The GM table of a gather or scatter
# (MGATHER / MSCATTER): `packed` rows exactly as long as the columns moved, `strided` longer rows.
LAYOUTS = ("row", "col1", "packed", "strided")


@dataclass(frozen=True)
class InstructionRule:
    """What one pto-isa vector instruction accepts on a target, as its implementation header
    asserts at compile time."""

    header: str  # the pto-isa header the rule was read from
    dtypes: frozenset[str] | None  # dtypes of its data tiles; None when the rule lists casts
    casts: frozenset[tuple[str, str]] | None  # TCVT's (to, from) pairs
    layouts: tuple[tuple[str, ...], ...]  # per tile operand (the last repeats); empty: any layout
    max_elements: int | None = None  # the most elements a tile operand may span (index registers)
    # the most rows a tile of several rows may have, and the most 32-byte blocks its row may span
    # (8-bit repeat counts and strides)
    max_repeats: int | None = None
    cpu_sim: bool = True  # pto-isa's CPU simulation implements it (a PTO_ISA_ROOT build can use it)

    def layouts_of(self, k: int) -> tuple[str, ...] | None:
        """The layouts tile operand ``k`` may have, or None when the header asserts none."""
        if not self.layouts:
            return None
        return self.layouts[min(k, len(self.layouts) - 1)]

    def takes(self, dtype: str) -> bool:
        return self.dtypes is not None and dtype in self.dtypes

    def converts(self, to: str, src: str) -> bool:
        return self.casts is not None and (to, src) in self.casts


WIDTHS = {1: "b8", 2: "b16", 4: "b32"}  # element bytes -> the key the timing tables use


@dataclass(frozen=True)
class Timing:
    """How fast each pipe works, for the cost model of ``ptodsl ir --stats`` (sources in the file)."""

    clock_hz: int
    gib_per_s: dict[str, float]  # transfer path (gm_to_ub, ub_to_gm, ...) -> GiB/s of one core
    vector: dict[str, dict[str, tuple[float, float]]]  # instruction -> width -> (cycles/element, fixed)
    cube_head_cycles: int
    cube_fractal_cycles: dict[str, int]  # input width -> cycles per fractal product
    # instruction -> the instructions it costs as, summed (fused instructions pto-isa measured none of)
    composed: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def transfer_cycles(self, path: str, nbytes: int) -> float:
        return nbytes / (self.gib_per_s[path] * 2**30 / self.clock_hz)

    def vector_cycles(self, instruction: str, itemsize: int, elements: int) -> float:
        parts = self.composed.get(instruction)
        if parts:
            return sum(self.vector_cycles(p, itemsize, elements) for p in parts)
        width = WIDTHS.get(itemsize, "b32")
        default = self.vector["default"]
        slope, fixed = self.vector.get(instruction, {}).get(width) or default.get(width) or default["b32"]
        return slope * elements + fixed


@dataclass(frozen=True)
class StackModel:
    """The scalar stack frame of one compute kernel, as ``passes/stack.py`` estimates it: bisheng
    refuses a kernel whose frame passes ``limit_bytes``; the sizes of the objects an emitted kernel
    declares come from pto-isa's headers (sources in the file)."""

    limit_bytes: int  # bisheng's limit on a kernel's stack frame
    warn_bytes: int  # an estimate above this is warned about (W0613); above the limit, refused (E0613)
    tile_bytes: int  # one Tile object (its valid rows and cols, a flag and the buffer pointer)
    global_tensor_bytes: int  # one GlobalTensor (a GM pointer, its Shape and its Stride)
    shape_bytes: int  # a Shape temporary passed to a GlobalTensor's constructor
    stride_bytes: int  # a Stride temporary, likewise
    pointer_bytes: int  # a __gm__ pointer parameter
    scalar_bytes: int  # a scalar parameter (a symbol, a scalar, a stride)
    loop_bytes: int  # one `for` loop: its int64_t index and its bound


@dataclass(frozen=True)
class ChipModel:
    """The chip around the cores, for the chip model (``cost/chip.py``; sources in the file): how
    many cores of each kind run a launch's blocks, the HBM bandwidth they all share, and what a
    launch and a cross-core flag cost."""

    aic_cores: int  # cube cores
    aiv_cores: int  # vector cores
    hbm_gib_per_s: float  # GM (HBM) bandwidth of the whole chip, shared by every core
    launch_us: float  # one kernel launch on the stream, until the next kernel starts
    cross_core_flag_cycles: int  # one cross-core flag, from its set to the wait that sees it
    l2_bytes: int  # the L2 cache every core reads GM through (0: no L2 in the model)

    def cores(self, kind: str) -> int:
        """The cores a compute kernel of ``kind`` (``vector`` or ``cube``) runs its blocks on; a
        ``mixed`` kernel's block is one cube core with the vector cores beside it, so as many
        blocks run at once as there are cube cores."""
        return self.aic_cores if kind in ("cube", "mixed") else self.aiv_cores


@dataclass(frozen=True)
class Target:
    name: str  # the file stem
    description: str
    ub_bytes: int
    l1_bytes: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    ub_block_bytes: int
    max_event_ids: int
    cross_core_flags: int  # ids of the counting flags between a mixed kernel's cube and vector cores
    cube_dtypes: tuple[tuple[str, str, str], ...]  # (accumulator, left, right)
    cube_stores: tuple[tuple[str, str], ...]  # (accumulator, GM) dtypes TSTORE converts on the way out of L0C
    bias_bytes: int  # the bias table (BT) a TMATMUL_BIAS reads its bias row from
    bias_row_bytes: int  # a bias row (L1 and BT tile) is a whole number of these
    bias_moves: tuple[tuple[str, str], ...]  # (bias table, L1) dtypes TMOV converts into the bias table
    relu_stores: tuple[str, ...]  # accumulator dtypes TSTORE applies the fixpipe's relu to, out of L0C
    max_mkn: int
    cube_fractal_rows: int
    cube_c0_bytes: int
    vector_repeat_bytes: int
    default_vec_tile: tuple[int, ...]
    default_cube_tile: dict[str, int]  # "m"/"k"/"n" -> L0 extent
    max_tile_rank: int
    npu_vector_arch: str  # bisheng --cce-aicore-arch of vector kernels; empty when no NPU build is known
    npu_cube_arch: str  # the same for cube kernels
    npu_mixed_arch: str  # and for mixed kernels (pto-isa builds its mixed-kernel tests for dav-c220)
    vector_instructions: dict[str, InstructionRule]  # pto-isa instruction name -> what it accepts
    timing: Timing  # the pipes' speeds, for the cost model
    stack: StackModel  # a compute kernel's stack frame: its limit and the sizes of what it holds
    chip: ChipModel  # cores per kind, the shared HBM, launch and flag costs

    def supports_matmul(self, c: str, a: str, b: str) -> bool:
        return (c, a, b) in self.cube_dtypes

    def stores_from_acc(self, acc: str, gm: str) -> bool:
        """Whether TSTORE writes an ``acc`` accumulator to ``gm`` data (converting on the way)."""
        return (acc, gm) in self.cube_stores

    def moves_bias(self, to: str, src: str) -> bool:
        """Whether TMOV brings an L1 row of ``src`` into a bias table of ``to``."""
        return (to, src) in self.bias_moves

    def accumulator_of(self, dtype: str) -> str | None:
        """The L0C dtype a matmul of ``dtype`` inputs accumulates in, if the cube takes them."""
        return next((c for c, a, b in self.cube_dtypes if a == b == dtype), None)

    def vector_rule(self, instruction: str) -> InstructionRule | None:
        return self.vector_instructions.get(instruction)

    def computes(self, instruction: str, dtype: str) -> bool:
        """Whether the vector ``instruction`` takes data tiles of ``dtype`` on this target (for a
        conversion: converts ``dtype`` to itself, which rounds to an integral value)."""
        rule = self.vector_rule(instruction)
        if rule is not None and rule.casts is not None:
            return rule.converts(dtype, dtype)
        return rule is not None and rule.takes(dtype)

    def converts(self, to: str, src: str) -> bool:
        """Whether one TCVT converts ``src`` to ``to`` on this target."""
        rule = self.vector_rule("TCVT")
        return rule is not None and rule.converts(to, src)


TRANSFER_PATHS = ("gm_to_ub", "gm_to_l1", "ub_to_gm", "l0c_to_gm", "l1_to_l0a", "l1_to_l0b", "l1_to_bt",
                  "l0c_to_l1", "ub_to_ub")


def _WIDTH_TABLE(value) -> Obj:  # noqa: N802 - a schema constructor, named like the others
    return Obj(desc="by element width", fields={w: value for w in WIDTHS.values()})


def _bytes(desc: str) -> Int:
    return Int(min=1, desc=desc)


_STACK_FIELDS = {
    "limit_bytes": _bytes("the largest stack frame the NPU compiler accepts for a kernel"),
    "warn_bytes": _bytes("an estimated frame above this is warned about (W0613)"),
    "tile_bytes": _bytes("one pto-isa Tile object"),
    "global_tensor_bytes": _bytes("one pto-isa GlobalTensor object"),
    "shape_bytes": _bytes("one pto-isa Shape object"),
    "stride_bytes": _bytes("one pto-isa Stride object"),
    "pointer_bytes": _bytes("a GM pointer parameter"),
    "scalar_bytes": _bytes("a scalar parameter"),
    "loop_bytes": _bytes("the index and bound of one loop"),
}

_CHIP_FIELDS = {
    "aic_cores": Int(min=1, desc="cube (AIC) cores"),
    "aiv_cores": Int(min=1, desc="vector (AIV) cores"),
    "hbm_gib_per_s": Float(min=0, desc="HBM bandwidth of the chip, shared by all cores, GiB/s (above 0)"),
    "launch_us": Float(min=0, desc="microseconds from one kernel launch to the next kernel's start"),
    "cross_core_flag_cycles": Int(min=0, desc="cycles from a cross-core flag's set to the wait that sees it"),
    "l2_bytes": Int(min=0, desc="bytes of the L2 cache between the cores and HBM (0: no L2 in the model)"),
}

_TARGET_FIELDS = {
    "description": Str(desc="one line about the hardware"),
    "ub_bytes": _bytes("unified buffer bytes per vector core"),
    "l1_bytes": _bytes("L1 bytes per cube core"),
    "l0a_bytes": _bytes("L0A (left operand) bytes"),
    "l0b_bytes": _bytes("L0B (right operand) bytes"),
    "l0c_bytes": _bytes("L0C (accumulator) bytes"),
    "ub_block_bytes": _bytes("alignment of UB addresses and of a row-major tile row"),
    "max_event_ids": Int(min=1, desc="event ids per pipe pair for set_flag/wait_flag"),
    "cross_core_flags": Int(min=1, desc="flag ids between a cube core and its vector cores "
                            "(ffts_cross_core_sync / wait_flag_dev)"),
    "cube_dtypes": ListOf(item=ListOf(item=dtype_name(), min_len=3, max_len=3), min_len=1,
                          desc="(accumulator, left, right) dtype triples matmul supports"),
    "cube_stores": ListOf(item=ListOf(item=dtype_name(), min_len=2, max_len=2), min_len=1,
                          desc="(accumulator, GM) dtype pairs TSTORE writes out of L0C, converting on the way"),
    "bias_bytes": _bytes("bias table (BT) bytes, where TMATMUL_BIAS reads its bias row"),
    "bias_row_bytes": _bytes("a bias row in L1 and in the bias table is a whole number of these bytes"),
    "bias_moves": ListOf(item=ListOf(item=dtype_name(), min_len=2, max_len=2), min_len=1,
                         desc="(bias table, L1) dtype pairs TMOV moves into the bias table, converting"),
    "relu_stores": ListOf(item=dtype_name(), desc="accumulator dtypes TSTORE applies the fixpipe's relu to "
                          "on the way out of L0C (ReluPreMode::NormalRelu)"),
    "max_mkn": Int(min=1, desc="largest m, k, n of one matmul instruction"),
    "cube_fractal_rows": Int(min=1, desc="rows of a cube fractal"),
    "cube_c0_bytes": Int(min=1, desc="bytes of a cube fractal row"),
    "vector_repeat_bytes": Int(min=1, desc="bytes per vector instruction repeat"),
    "default_vec_tile": ListOf(item=Int(min=1), min_len=1, max_len=4,
                               desc="the vector tile of a spec that gives none"),
    "default_cube_tile": Obj(desc="the L0 extents of a spec that gives no cube_tile",
                             fields={"m": Int(min=1), "k": Int(min=1), "n": Int(min=1)}, required=("m", "k", "n")),
    "max_tile_rank": Int(min=1, desc="dims of a vector tile"),
    "npu_vector_arch": Str(desc="bisheng --cce-aicore-arch of vector kernels; empty when no NPU build is known"),
    "npu_cube_arch": Str(desc="bisheng --cce-aicore-arch of cube kernels; empty when no NPU build is known"),
    "npu_mixed_arch": Str(desc="bisheng --cce-aicore-arch of mixed kernels (a cube core and its vector cores); "
                          "empty when no NPU build is known"),
    "vector_instructions": MapOf(
        key=Str(desc="a pto-isa instruction name, e.g. TADD"),
        value=Obj(desc="what the instruction accepts, from its pto-isa implementation header", fields={
            "header": Str(desc="the pto-isa header its static_asserts are in"),
            "dtypes": ListOf(item=dtype_name(), min_len=1, desc="dtypes of its data tiles"),
            "casts": ListOf(item=ListOf(item=dtype_name(), min_len=2, max_len=2), min_len=1,
                            desc="(to, from) dtype pairs a conversion takes"),
            "layouts": ListOf(item=ListOf(item=Enum(values=LAYOUTS, what="tile layout"), min_len=1), min_len=1,
                              desc="per tile operand (the last repeating), the layouts it may have"),
            "max_repeats": Int(min=1, desc="for a tile of more than one row, the most rows it may have and the "
                               "most 32-byte blocks its row may span (8-bit repeat counts and strides)"),
            "max_elements": Int(min=1, desc="the most elements a tile operand may span (its storage, rows x "
                                "row stride), where the implementation indexes them in narrow registers"),
            "cpu_sim": Bool(default=True, desc="pto-isa's CPU simulation implements it (false: a kernel using it "
                            "builds against ptodsl's own CPU header and for the NPU, not against a pto-isa checkout)"),
        }, required=("header",)),
        placeholder="<instruction>",
        desc="per pto-isa vector instruction, the dtypes and layouts it accepts"),
    "timing": Obj(desc="pipe speeds for the cost model", fields={
        "clock_hz": Int(min=1, desc="core clock"),
        "gib_per_s": Obj(desc="per-core bandwidth of each transfer path, GiB/s",
                         fields={k: Float(min=0) for k in TRANSFER_PATHS}, required=TRANSFER_PATHS),
        "vector": MapOf(key=Str(), value=_WIDTH_TABLE(ListOf(item=Float(min=0), min_len=2, max_len=2)),
                        desc="vector instruction -> element width -> [cycles per element, fixed cycles]; "
                        "`default` for the rest"),
        "composed": MapOf(key=Str(), value=ListOf(item=Str(), min_len=1),
                          desc="instruction -> the instructions it costs as, summed (fused instructions "
                          "the vector table has no row for)"),
        "cube_head_cycles": Int(min=0, desc="fixed cycles of one matmul instruction"),
        "cube_fractal_cycles": _WIDTH_TABLE(Int(min=1)),
    }, required=("clock_hz", "gib_per_s", "vector", "composed", "cube_head_cycles", "cube_fractal_cycles")),
    "stack": Obj(desc="a compute kernel's scalar stack frame: the compiler's limit and the bytes of each object "
                 "an emitted kernel declares", fields=_STACK_FIELDS, required=tuple(_STACK_FIELDS)),
    "chip": Obj(desc="the chip around the cores: cores per kind, the shared HBM bandwidth, launch and flag costs",
                fields=_CHIP_FIELDS, required=tuple(_CHIP_FIELDS)),
}
# Every field of the file is required: a missing number would otherwise become a silent default.
TARGET_SCHEMA = Obj(desc="a hardware model", fields=_TARGET_FIELDS, required=tuple(_TARGET_FIELDS))

assert [f.name for f in fields(Target)] == ["name", *TARGET_SCHEMA.fields], "Target and its schema disagree"


def _folder() -> Traversable:
    return resources.files(__package__)


def target_names() -> list[str]:
    """Names of the targets shipped in this folder, sorted."""
    return sorted(e.name[: -len(".yaml")] for e in _folder().iterdir() if e.name.endswith(".yaml"))


def parse_target(text: str, name: str, file: str, diags: Diagnostics) -> Target | None:
    """A target from the text of its file; problems go to ``diags`` and give None."""
    before = len(diags.errors)
    root = compose(text, file, diags)
    if root is None:
        if len(diags.errors) == before:
            diags.error(E_EMPTY, f"target file for `{name}` is empty", None,
                        help="a target file lists every field of ptodsl.targets.Target")
        return None
    data = validate(TARGET_SCHEMA, root, diags)
    if len(diags.errors) == before and "default" not in data["timing"]["vector"]:
        vector = root.get("timing").value.get("vector")
        diags.error("E0208", "`timing.vector` is missing the required key `default`", vector.key.span,
                    "`default` is missing", help="add `default: {b16: [...], b32: [...]}`: the cost of "
                    "instructions the table does not list")
    if len(diags.errors) == before and data["stack"]["warn_bytes"] > data["stack"]["limit_bytes"]:
        node = root.get("stack").value.get("warn_bytes")
        diags.error(E_RULE, "`stack.warn_bytes` is above `stack.limit_bytes`", node.value.span, "warns past the limit",
                    help="warn somewhat below the limit, where a kernel's estimate is near it")
    if len(diags.errors) == before and not data["chip"]["hbm_gib_per_s"] > 0:
        node = root.get("chip").value.get("hbm_gib_per_s")
        diags.error(E_RULE, "`chip.hbm_gib_per_s` must be above 0", node.value.span, "no bandwidth",
                    help="the HBM bandwidth of the whole chip in GiB/s, e.g. 1490.1 for 1.6 TB/s")
    if len(diags.errors) > before:
        return None
    rules = {}
    for instr, entry in data["vector_instructions"].items():
        if ("dtypes" in entry) == ("casts" in entry):
            node = _entry_node(root, instr)
            diags.error(E_RULE, f"the rule of `{instr}` must give exactly one of `dtypes` and `casts`",
                        node.span if node is not None else None,
                        help="`dtypes` for an instruction whose tiles share a dtype, `casts` for a conversion")
            continue
        rules[instr] = InstructionRule(
            header=entry["header"],
            dtypes=frozenset(entry["dtypes"]) if "dtypes" in entry else None,
            casts=frozenset(tuple(p) for p in entry["casts"]) if "casts" in entry else None,
            layouts=tuple(tuple(ls) for ls in entry.get("layouts", ())),
            max_elements=entry.get("max_elements"),
            max_repeats=entry.get("max_repeats"),
            cpu_sim=bool(entry.get("cpu_sim", True)),
        )
    if len(diags.errors) > before:
        return None
    return Target(
        name=name,
        **{k: v for k, v in data.items() if k not in ("cube_dtypes", "cube_stores", "bias_moves", "relu_stores",
                                                       "default_vec_tile",
                                                       "vector_instructions", "timing", "stack", "chip")},
        cube_dtypes=tuple(tuple(t) for t in data["cube_dtypes"]),
        cube_stores=tuple(tuple(t) for t in data["cube_stores"]),
        bias_moves=tuple(tuple(t) for t in data["bias_moves"]),
        relu_stores=tuple(data["relu_stores"]),
        default_vec_tile=tuple(data["default_vec_tile"]),
        vector_instructions=rules,
        timing=_timing(data["timing"]),
        stack=StackModel(**data["stack"]),
        chip=ChipModel(**data["chip"]),
    )


def _timing(data: dict) -> Timing:
    vector = {ins: {w: (float(v[0]), float(v[1])) for w, v in rows.items()} for ins, rows in data["vector"].items()}
    return Timing(data["clock_hz"], dict(data["gib_per_s"]), vector, data["cube_head_cycles"],
                  dict(data["cube_fractal_cycles"]), {k: tuple(v) for k, v in data["composed"].items()})


def _entry_node(root, instr: str):
    """The YAML node of one instruction's rule, for a diagnostic's span."""
    section = next((p.value for p in getattr(root, "pairs", ()) if p.key.text == "vector_instructions"), None)
    if isinstance(section, YMap):
        return next((p.value for p in section.pairs if p.key.text == instr), None)
    return None


def load_target_file(path: str, name: str | None = None) -> Target:
    """Load a target from any file; raises :class:`CompileError` with every problem found."""
    import os

    diags = Diagnostics()
    name = name or os.path.splitext(os.path.basename(path))[0]
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        diags.error(E_READ, f"cannot read target file `{path}`: {exc}")
        raise CompileError(diags.items) from None
    target = parse_target(text, name, path, diags)
    if target is None:
        raise CompileError(diags.items)
    return target


@cache
def load_target(name: str) -> Target:
    """The shipped target called ``name``; raises :class:`CompileError` for an unknown name."""
    names = target_names()
    if name not in names:
        diags = Diagnostics()
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
        diags.error(E_TARGET, f"unknown target `{name}`", None,
                    help=f"did you mean `{close[0]}`?" if close else None,
                    notes=[f"known targets: {', '.join(names)}"])
        raise CompileError(diags.items)
    entry = _folder().joinpath(f"{name}.yaml")
    with resources.as_file(entry) as real:
        return load_target_file(str(real), name)


def target_json_schema() -> dict:
    """JSON Schema (draft 2020-12) of a target file."""
    return to_json_schema(TARGET_SCHEMA, "ptodsl hardware target")


__all__ = ["LAYOUTS", "ChipModel", "TARGET_SCHEMA", "InstructionRule", "StackModel", "Target", "load_target", "load_target_file", "parse_target", "target_json_schema",
           "target_names"]
