"""The schedule of a spec: how its loops are tiled and unrolled and the options of the passes.

It is written in the YAML (``schedule:``), read by the checker and carried by the IR as module
attributes (:mod:`ptodsl.ir.schedule`), so passes take it from the module they compile, never from
the spec: a printed module holds everything the remaining passes need."""

from __future__ import annotations

from dataclasses import dataclass, field

# The one place the pass options and their defaults are defined; the spec schema reads it.
PASS_OPTION_DEFAULTS: dict[str, int] = {
    "cycle_upper_bound": 10000,  # estimated cycles above which a compute kernel is split in two
    "max_paths": 64,  # most compiled paths one loop body may have (branches x unrolled copies)
    # 1: innermost grid loops alternate two sets of tiles where they fit (a cube kernel's K loops),
    # so the loads of one iteration overlap the compute of the other (passes/dbuf.py). It doubles
    # kernel bodies: compiling the library takes about 1.6 times as long, and its C++ build longer
    "double_buffer": 1,
    # 1: pto-isa's fused instructions (a broadcast with a binary op, exp(x - y)) where the target has
    # them (passes/fusedops.py); 0 keeps one instruction per tile op
    "fused_ops": 1,
    # 1 (with fused_ops): a product read only by an add as one multiply-add (TMULADDDST,
    # TFUSEDMULADD). Opt-in: pto-isa's CPU simulation has neither, so such kernels do not build
    # against a pto-isa checkout, and how vmla / vmadd round on the NPU is not documented
    "multiply_add": 0,
    # 1: a user loop whose only carried state is a sum / maximum / minimum accumulation runs as
    # partial accumulations on all cores plus one combine (passes/splitred.py); 0 keeps it sequential
    "split_reduction": 1,
    # 1: a parallel loop of a mixed kernel whose body is cube work, vector work, cube work runs
    # skewed, the cube one iteration ahead of the vector cores (passes/skew.py)
    "skew": 1,
    # 1: the grid over an output's row blocks becomes the outer loop of a body whose user loops carry
    # state (attention's KV loop), when every op is row-wise (passes/rowgrid.py). Opt-in until a
    # loop mixing cube and vector work runs as one kernel: before that it launches per row block
    "row_interchange": 0,
    # 1 (with row_interchange): consecutive statements that row_interchange proves one at a time over
    # the same row blocks (a KV loop and its peeled first and last blocks) share one row block loop,
    # so one kernel runs them, launched once, not one kernel each (passes/rowgrid.py).
    # Opt-in: the kernel holding all three has a larger stack frame, so passes/skew.py may no
    # longer pipeline its KV loop (the library's online_softmax_attn models slower fused)
    "row_fusion": 0,
    # 1: a mixed kernel's row-wise vector work is shared by the two vector cores of its block, each
    # on half of every tile's rows (passes/aivsplit.py); 0 runs it all on sub-block 0
    "aiv_split": 1,
}

# The sub-loop of factor f holds f copies of the body, and every copy is compiled (and later
# scheduled and synchronised) on its own, so compile time and kernel size grow with the factor.
# Far below this, unrolling has stopped paying: the loop overhead it saves is a few scalar
# instructions per iteration. The checker refuses more (E0510); the spec schema states it.
MAX_UNROLL_FACTOR = 256


@dataclass(frozen=True)
class LoopSchedule:
    unroll: tuple[int, ...] | None = None
    vec_tile: tuple[int, ...] | None = None
    submit_before_loop: bool | None = None


@dataclass(frozen=True)
class Schedule:
    vec_tile: tuple[int, ...] | None = None
    cube_tile: dict[str, tuple[int, int]] | None = None  # "m"/"k"/"n" -> (L0 tile, L1 tile)
    # a matmul's k tiles split over this many partial products (``cube_tile.split_k``), summed at the end
    split_k: int = 1
    loops: dict[str, LoopSchedule] = field(default_factory=dict)
    valid_shapes: dict[str, tuple[int | str, ...]] = field(default_factory=dict)
    pass_options: dict[str, int] = field(default_factory=lambda: dict(PASS_OPTION_DEFAULTS))
    # the spec's `max_dims:`: dim -> its largest value at a call, which tiling may rely on
    max_dims: dict[str, int] = field(default_factory=dict)
    # the spec's `nondecreasing:`: input tensors whose elements never decrease (checked at each
    # call), so rows [t[b], t[b + 1]) of different b never meet
    nondecreasing: tuple[str, ...] = ()
