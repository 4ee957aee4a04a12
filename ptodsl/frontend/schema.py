"""The spec file format (docs/LANGUAGE.md §2), described once as data.

:func:`spec_schema` describes ``NAME.yaml`` with the combinators of :mod:`ptodsl.yamlio.schema`: the
same description validates a located YAML tree (every problem at its line and column) and
generates the JSON Schema that ``ptodsl schema`` prints for editors.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ..dtypes import DIM_MAX, DTYPE_NAMES
from ..schedule import MAX_UNROLL_FACTOR, PASS_OPTION_DEFAULTS
from ..targets import target_names
from ..yamlio.schema import (
    E_REFERENCE,
    E_TARGET,
    IDENT_PATTERN,
    Bool,
    Enum,
    Float,
    Ident,
    Int,
    ListOf,
    MapOf,
    Obj,
    OneOf,
    Str,
    dtype_name,
    to_json_schema,
)
from .input_schema import NESTED_NUMBERS, InputEntry

# ------------------------------------------------------------------ the spec file format

DTYPE_VAR_RESERVED_WHY = "a dtype variable cannot be called like a built-in dtype"

DEFAULT_TARGET = "ascend910b"

# Bounds the checker reports with its own codes (``checked_by``); the JSON Schema states them too.
_TILE_DIM = Int(min=1, checked_by=("E0602",))
_TILE = ListOf(item=_TILE_DIM, min_len=1, desc="tile shape, one entry per dimension of the op's output")
_CUBE_LEVEL = ListOf(item=Int(min=1, checked_by=("E0604",)), min_len=2, max_len=2,
                     desc="[L0 tile, L1 tile] along this matmul axis")
_UNROLL = ListOf(item=Int(min=1, max=MAX_UNROLL_FACTOR, checked_by=("E0504", "E0510")), min_len=1, unique=True,
                 checked_by=("E0505",), desc="unroll factors, largest first; the remainder falls to smaller ones")
CUBE_AXES = ("m", "k", "n")
# More partials than this would mostly hold workspace: each is a full copy of the product in f32.
MAX_SPLIT_K = 64
# Dims of a valid shape: an integer, or an expression over symbols and runtime scalars (`N`, `cur_seq`).
_DIM_EXPR = Str(pattern=r"(?=.*[A-Za-z0-9_])[A-Za-z0-9_ +\-*/()%]+", what="a symbol expression",
                form="an integer or an expression over symbols", example="N", desc="a symbol expression")

PASS_OPTIONS = Obj(
    desc="options for the compiler passes; omitted options take their default",
    fields={
        "cycle_upper_bound": Int(min=1, max=DIM_MAX, default=PASS_OPTION_DEFAULTS["cycle_upper_bound"],
                                 desc="estimated cycles above which a compute kernel is split in two"),
        "max_paths": Int(min=1, max=DIM_MAX, default=PASS_OPTION_DEFAULTS["max_paths"],
                         desc="most compiled paths one loop body may have (branches x unrolled copies)"),
        "double_buffer": Bool(default=bool(PASS_OPTION_DEFAULTS["double_buffer"]),
                              desc="alternate two sets of tiles on the iterations of each grid loop of a vector "
                                   "kernel, where they fit on chip"),
        "fused_ops": Bool(default=bool(PASS_OPTION_DEFAULTS["fused_ops"]),
                          desc="use pto-isa's fused vector instructions (a broadcast with a binary op, "
                               "exp(x - y)) where the target has them"),
        "multiply_add": Bool(default=bool(PASS_OPTION_DEFAULTS["multiply_add"]),
                             desc="with fused_ops, a product read only by an addition becomes one multiply-add "
                                  "(TMULADDDST, TFUSEDMULADD; pto-isa's CPU simulation has neither)"),
        "split_reduction": Bool(default=bool(PASS_OPTION_DEFAULTS["split_reduction"]),
                                desc="a loop whose only carried state is a sum, maximum or minimum accumulation "
                                     "runs as partial accumulations on all cores, then one combine"),
        "row_interchange": Bool(default=bool(PASS_OPTION_DEFAULTS["row_interchange"]),
                                desc="make the output's row blocks the outer loop of a body whose user loops "
                                     "carry state, or of a run of statements doing cube and vector work, when "
                                     "every op in it is row-wise"),
        "row_fusion": Bool(default=bool(PASS_OPTION_DEFAULTS["row_fusion"]),
                           desc="with row_interchange, run consecutive statements it proves over the same row "
                                "blocks (a KV loop and its peeled first and last blocks) in one row block loop, "
                                "one kernel"),
        "aiv_split": Bool(default=bool(PASS_OPTION_DEFAULTS["aiv_split"]),
                          desc="share a mixed kernel's row-wise vector work between the two vector cores of "
                               "its block, each on half of every tile's rows"),
        "skew": Bool(default=bool(PASS_OPTION_DEFAULTS["skew"]),
                     desc="run a parallel loop of a mixed kernel whose body is cube, vector, then cube work "
                          "with the cube one iteration ahead of the vector cores, on two sets of its workspaces"),
    },
)


@cache
def spec_schema() -> Obj:
    """The ``NAME.yaml`` format (docs/LANGUAGE.md §2)."""
    loop = Obj(
        desc="schedule of one named loop of the kernel",
        fields={
            "unroll": _UNROLL,
            "vec_tile": _TILE,
            "submit_before_loop": Bool(desc="PyPTO's submission hint; only false is accepted (E0235)"),
        },
    )
    schedule = Obj(
        desc="how the kernel is tiled and scheduled; never changes what it computes",
        fields={
            "vec_tile": ListOf(item=_TILE_DIM, min_len=1, desc="default vector tile shape for tensor ops"),
            "cube_tile": Obj(
                desc="matmul tiles: [L0, L1] per axis",
                fields={"m": _CUBE_LEVEL, "k": _CUBE_LEVEL, "n": _CUBE_LEVEL,
                        "split_k": Int(min=1, max=MAX_SPLIT_K, default=1,
                                       desc="partial products a matmul's k tiles are split over (disjoint k "
                                            "ranges, each into its own accumulator), summed at the end")},
                required=CUBE_AXES,
            ),
            "loops": MapOf(key=Ident(role="loop name"), value=loop, placeholder="<loop>",
                           desc="per-loop schedules, by the loop's `name=`"),
            "valid_shapes": MapOf(key=Ident(role="view name"),
                                  value=ListOf(item=OneOf(alts=(Int(min=0), _DIM_EXPR)), min_len=1),
                                  placeholder="<view>", desc="valid shapes of named views, one entry per dim"),
            "pass_options": PASS_OPTIONS,
        },
    )
    test = Obj(
        desc="one golden test case, checked against the reference",
        fields={
            "shapes": MapOf(key=Ident(role="symbol name"), value=Int(min=0, max=DIM_MAX), placeholder="<symbol>",
                            desc="values of the runtime symbols"),
            "dtypes": MapOf(key=Ident(role="dtype variable"), value=dtype_name(), placeholder="<T>",
                            desc="the dtype variant under test"),
            "scalars": MapOf(key=Ident(role="scalar parameter name"),
                             value=OneOf(alts=(Bool(), Int(), Float()), what="a number or a boolean"),
                             placeholder="<param>",
                             desc="values of scalar parameters"),
            "rtol": Float(min=0, desc="relative tolerance"),
            "atol": Float(min=0, desc="absolute tolerance"),
            "seed": Int(min=0, max=2**32 - 1, desc="random seed of the inputs"),
            "data_range": ListOf(item=Float(), min_len=2, max_len=2, desc="[low, high) of the random inputs"),
            "ranges": MapOf(key=Ident(role="tensor parameter name"),
                            value=ListOf(item=Float(), min_len=2, max_len=2),
                            placeholder="<param>",
                            desc="[low, high] of one input's random values, overriding data_range"),
            "name": Str(desc="test name shown in reports"),
            "inputs": MapOf(key=Ident(role="tensor parameter name"), value=InputEntry(), placeholder="<param>",
                            desc="explicit values of inputs: a nested list, a .npy file of the spec's folder, or "
                                 "a generator (permutation, arange, full, randint, cumsum)"),
            "refuses": Str(pattern=r"E[0-9]{4}", form="a diagnostic code", example="E0730",
                           desc="the code of the diagnostic the call must stop with (inputs it refuses); the case "
                           "passes when it does, on every backend"),
        },
    )
    return Obj(
        fields={
            "op": Ident(role="op name", exported=True, desc="the kernel to compile; defaults to the file stem"),
            "doc": Str(desc="one-line description of the operator", multiline=True),
            "source": Str(pattern=r".+\.pto", form="a path ending in `.pto`", example="softmax.pto",
                          desc="the algorithm file, relative to this file; defaults to <op>.pto"),
            "dtypes": MapOf(
                key=Ident(role="dtype variable", reserved=DTYPE_NAMES, reserved_why=DTYPE_VAR_RESERVED_WHY),
                value=OneOf(alts=(ListOf(item=dtype_name(), min_len=1, unique=True), dtype_name()),
                            what="a list of dtypes"),
                placeholder="<T>", desc="dtype variables and their variants; one kernel per binding",
            ),
            "symbols": MapOf(key=Ident(role="symbol name"),
                             value=OneOf(alts=(Int(min=1, max=DIM_MAX),
                                               Str(pattern=r"[A-Za-z0-9_ +\-*/%()]+", what="a dim expression",
                                                   form="an integer or a linear expression over dims",
                                                   example="2*H")),
                                         what="an integer or a dim expression"),
                             placeholder="<symbol>",
                             desc="symbols fixed at compile time (an integer), or defined by other dims "
                                  "(a linear expression such as `2*H`, checked at every call)"),
            "max_dims": MapOf(key=Ident(role="dim name"), value=Int(min=1, max=DIM_MAX),
                              placeholder="<dim>",
                              desc="the largest value a dim of the parameters' shapes takes at a call (each call "
                                   "is checked: 1 <= dim <= max); tiles along it then span the whole dim, so "
                                   "what a row of it holds can stay on chip"),
            "nondecreasing": ListOf(item=Ident(role="tensor parameter name"), unique=True,
                                    desc="integer input tensors of rank 1 whose elements never decrease (cumulative "
                                         "lengths such as cu_seqlens): every call checks it (E0732), and the "
                                         "compiler may then run the row ranges they bound at once"),
            "schedule": schedule,
            "target": Enum(values=target_names, what="target", code=E_TARGET, default=DEFAULT_TARGET,
                           desc="hardware model (a file in ptodsl/targets)"),
            "reference": Str(pattern=r"[^:\s][^:]*\.py:" + IDENT_PATTERN, form="`FILE.py:FUNCTION`",
                             code=E_REFERENCE, example="softmax_ref.py:softmax",
                             desc="numpy reference: file relative to this one, and function"),
            "torch": Ident(role="function name",
                           desc="torch equivalent for `ptodsl bench`: a function of the reference file"),
            "tests": ListOf(item=test, keep_valid=True, desc="golden test cases"),
            "bench": ListOf(item=test, keep_valid=True, desc="chip-filling cases that `ptodsl ir --stats --bench` "
                            "models and `ptodsl bench --bench` times; never run by `ptodsl test`"),
            "backward": Obj(
                desc="the spec computing this op's gradients (docs/LANGUAGE.md §2.1)",
                fields={
                    "spec": Str(pattern=r".+\.yaml", form="a path ending in `.yaml`", example="softmax_bwd.yaml",
                                desc="the backward spec's YAML, relative to this file"),
                    "saves": ListOf(item=Ident(role="parameter name"), unique=True,
                                    desc="forward tensors (inputs or outputs) the backward kernel reads"),
                },
                required=("spec",),
            ),
        },
    )


# The schema's identity, for editors that cache schemas by `$id`; a URN because the schema ships with
# ptodsl (`ptodsl schema`) rather than being served from a web address. Raised with the format.
SPEC_SCHEMA_ID = "urn:ptodsl:schema:spec:1"


def json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the spec file format, for editors and external validators."""
    schema = to_json_schema(spec_schema(), "ptodsl operator spec",
                            "The NAME.yaml beside NAME.pto: dtypes, symbols, schedule, target, reference, "
                            "torch equivalent, tests and backward spec.")
    schema["$defs"]["nested_numbers"] = NESTED_NUMBERS
    return {"$schema": schema.pop("$schema"), "$id": SPEC_SCHEMA_ID, **schema}


__all__ = ["DEFAULT_TARGET", "PASS_OPTIONS", "SPEC_SCHEMA_ID", "json_schema", "spec_schema"]
