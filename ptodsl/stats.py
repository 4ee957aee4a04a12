"""``ptodsl ir --stats``: numbers computed from the IR, per kernel variant.

- compiled paths: the most distinct launch sequences one loop body of the control program can
  take (runtime branches add, consecutive branches multiply);
- compute kernels, vector and cube;
- peak bytes of UB, L1, L0A/L0B/L0C over the kernels, from the memory plan;
- per compute kernel, the estimate of its scalar stack frame (``passes/stack.py``) against the
  NPU compiler's limit;
- GM bytes moved by the Block IR for each test case, counted while the simulator runs it, next to
  the compulsory minimum (every input read once, every output written once; a tensor touched only
  through an index, only the slices it names: ``cost/minimum.py``);
- estimated cycles from the pipeline cost model (``cost/timeline.py``, target ``timing:``
  data), the roofline bound (the busiest pipe's work), the pipe that bounds it and their ratio;
- the chip model (``cost/chip.py``, target ``chip:`` data): launches, the most blocks of one
  launch, the most cores one launch keeps busy, the modelled time, the chip's roofline (the
  compulsory GM traffic through the shared HBM, or each kind's compute work spread over all its cores),
  their ratio and what bounds the time.

With ``bench=True`` the spec's ``bench:`` cases, far too large to simulate, are modelled by the dry
run (``cost/dryrun.py``) instead of running its ``tests:`` on the simulator: GM bytes are the
modelled ones and there is no per-tensor breakdown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api import Operator
from .check import paths
from .cost.chip import Chip
from .cost.dryrun import REPORT_MAX_OPS, TooLong, estimate
from .cost.minimum import compulsory_bytes
from .driver import case_symbols, explicit_inputs
from .golden import case_id, run_case, test_error
from .ir import Func, Module, Op
from .passes import stack

# An op whose worst bench case is modelled within this factor of the chip's roofline counts as
# using the chip well in the library summary of `ptodsl ir specs/ --stats --bench`.
NEAR_ROOFLINE = 1.3


@dataclass
class ChipStats:
    """The chip model's account of one case (``cost/chip.py``), as ``--stats`` prints it."""

    case: str
    launches: int
    block_dim: int  # the most blocks of one launch
    cores_used: int  # the most cores one launch keeps busy
    modelled_us: float
    chip_roofline_us: float
    bound: str | None  # "HBM", a pipe or "launch": what the modelled time is mostly spent on

    @property
    def roofline_ratio(self) -> float | None:
        return self.modelled_us / self.chip_roofline_us if self.chip_roofline_us else None

    @classmethod
    def of(cls, case: str, chip: Chip, minimum: int) -> ChipStats:
        """``chip`` after the run of ``case``, whose compulsory GM traffic is ``minimum`` bytes."""
        return cls(case, int(round(chip.launches)), chip.block_dim, chip.cores_used, chip.us(chip.time),
                   chip.us(chip.roofline(minimum)), chip.bound)

    def to_json(self) -> dict:
        return {"case": self.case, "launches": self.launches, "block_dim": self.block_dim,
                "cores_used": self.cores_used, "modelled_us": self.modelled_us,
                "chip_roofline_us": self.chip_roofline_us, "roofline_ratio": self.roofline_ratio, "bound": self.bound}


def max_body_paths(ops: list[Op]) -> int:
    """Compiled paths of a control program, by the model the checker's E0509 uses."""
    return paths.max_body_paths(paths.from_ops(ops))


@dataclass
class VariantStats:
    variant: str
    paths: int
    vector_kernels: int
    cube_kernels: int
    peak: dict[str, int]
    stack: dict[str, int] = field(default_factory=dict)  # compute kernel -> estimated stack frame bytes
    stack_limit: int = 0  # the target's limit on a kernel's frame
    traffic: list[tuple[str, int, int]] = field(default_factory=list)  # (case, moved, minimum)
    # (case, estimated cycles, roofline cycles, the bound pipe) from the cost model
    cycles: list[tuple[str, float, float, str | None]] = field(default_factory=list)
    # case -> tensor -> (bytes loaded, bytes stored, bytes of the tensor; 0 for workspaces)
    by_tensor: dict[str, dict[str, tuple[int, int, int]]] = field(default_factory=dict)
    # input -> (grid nests that read it one after another, the loop around them or None): its passes
    passes: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    chip: list[ChipStats] = field(default_factory=list)
    bench: bool = False  # the cases are the spec's bench cases, modelled (not simulated)
    mixed_kernels: int = 0  # kernels with a cube part and a vector part
    unmodelled: list[str] = field(default_factory=list)  # bench cases too long to walk


def input_passes(func: Func) -> dict[str, tuple[int, str | None]]:
    """Per tensor parameter, the most grid nests of one region that read it, and the user loop
    whose body that region is. After fusion, grid nests of one region stay apart only where the
    later one needs a result the earlier one completes (a reduction over the whole extent), so
    this is the fewest passes the kernel as written allows; reads beyond it repeat per iteration
    of the loop around them."""
    base: dict[str, str] = {p.name: p.name for p in func.params if p.is_tensor}
    for o in func.walk():
        if o.name in ("view", "reshape", "permute") and o.operands[0].name in base:
            base[o.result.name] = base[o.operands[0].name]
    out: dict[str, tuple[int, str | None]] = {}

    def region(ops: list[Op], around: str | None) -> None:
        count: dict[str, int] = {}
        for op in ops:
            # vector passes only: a cube operand (loaded to L1) is re-read per output block by design
            loads = [o for o in op.walk() if o.name == "tile.load" and o.operands[1].name in base]
            read = {base[o.operands[1].name] for o in loads if o.operands[0].type.space == "ub"}
            if op.name == "loop" and op.attrs.get("kind") == "grid" or op.name == "tile.load":
                for b in read:
                    count[b] = count.get(b, 0) + 1
                for b in {base[o.operands[1].name] for o in loads} - read:
                    count.setdefault(b, 1)
            elif op.regions:
                name = op.attrs.get("name") if op.name == "loop" else around
                for r in op.regions:
                    region(r, name)
        for b, n in count.items():
            # a one-pass version beside the loop (passes/tile_fit.py) reads it outside any loop: the
            # loop that repeats it is the better account of a case over the minimum
            have = out.get(b, (0, None))
            if n > have[0] or (n == have[0] and have[1] is None and around is not None):
                out[b] = (n, around)

    region(func.body, None)
    return out


def _kernels_of(block: Module, control: Func) -> list[Func]:
    names = {o.attrs["kernel"] for o in control.walk() if o.name == "launch"}
    return [f for f in block.funcs if f.name in names]


def collect(op: Operator, bench: bool = False) -> list[VariantStats]:
    """Per variant: its kernels and, per case, the traffic and the models; ``bench`` models the
    spec's bench cases instead of simulating its test cases."""
    block = op.compiled.stages["block"]
    frames = {e.kernel: e.bytes for e in stack.estimates(block, op.compiled.target)}
    out = []
    for index, ck in enumerate(op.compiled.checked):
        control = block.func(op.compiled.stages["tensor"].funcs[index].name)
        kernels = _kernels_of(block, control)
        peak: dict[str, int] = {}
        for k in kernels:
            for key, value in k.attrs.items():
                if key.endswith("_bytes"):
                    space = key[: -len("_bytes")]
                    peak[space] = max(peak.get(space, 0), value)
        # the program's paths, wherever they run: partitioning may move a branch into a kernel
        tile = op.compiled.stages["tile"].funcs[index]
        vs = VariantStats(ck.variant_name or "-", max_body_paths(tile.body),
                          sum(k.kind == "vector" for k in kernels), sum(k.kind == "cube" for k in kernels), peak,
                          {k.name: frames[k.name] for k in kernels}, op.compiled.target.stack.limit_bytes)
        vs.passes = input_passes(tile)
        vs.mixed_kernels = sum(k.kind == "mixed" for k in kernels)
        if bench:
            vs.bench = True
            for case in op.spec.bench:
                if op.spec.variant_of(case) == ck.variant:
                    try:
                        _model_case(op, block, control.name, case, vs)
                    except TooLong:  # iterations that differ on shapes this large: no estimate, said so
                        vs.unmodelled.append(case_id(op.spec, case))
            out.append(vs)
            continue
        for case in op.spec.tests:
            if op.spec.variant_of(case) != ck.variant or case.refuses is not None:
                continue  # (a call the case expects refused moves nothing worth counting)
            r = run_case(op, case)
            moved = r.traffic.get("load", 0) + r.traffic.get("store", 0)
            minimum = compulsory_bytes(op.compiled.stages["tensor"].func(control.name), case_symbols(op.spec, case))
            vs.traffic.append((case_id(op.spec, case), moved, minimum))
            t = r.timeline
            if t is not None:
                vs.cycles.append((case_id(op.spec, case), t.estimate, t.bound, t.bound_pipe))
                vs.chip.append(ChipStats.of(case_id(op.spec, case), t.chip, minimum))
            sizes = {name: a.nbytes for name, a in [*r.inputs.items(), *r.outputs.items()]}
            vs.by_tensor[case_id(op.spec, case)] = {
                name: (t["load"], t["store"], sizes.get(name, 0)) for name, t in r.traffic_by_tensor.items()}
        out.append(vs)
    return out


def _model_case(op: Operator, block: Module, control: str, case, vs: VariantStats) -> None:
    """One bench case through the dry run: its GM traffic against the minimum, and both models."""
    cid = case_id(op.spec, case)
    symbols = case_symbols(op.spec, case)
    for p in [*op.inputs, *op.outputs]:
        for d in p.dims or ():
            if not isinstance(d, int) and d not in symbols:
                raise test_error(op.spec, ("bench", case.index), f"the bench case gives no size for the dim symbol `{d}`",
                                 "this case", f"add it to the case: `shapes: {{{d}: ...}}`", "E0233")
    scalars = {p.name: case.scalars.get(p.name, p.default) for p in op.scalars}
    func = block.func(control)
    reads = {p.name: int((case.ranges.get(p.name) or case.data_range)[1])
             for p in func.params if p.is_tensor and (case.ranges.get(p.name) or case.data_range)}
    reads |= explicit_inputs(op.compiled.stages["tensor"].func(control), op.spec, case)
    e = estimate(block, control, symbols, op.compiled.target, {k: v for k, v in scalars.items() if v is not None},
                 reads, REPORT_MAX_OPS)
    minimum = compulsory_bytes(op.compiled.stages["tensor"].func(control), symbols)
    t = e.timeline
    vs.traffic.append((cid, e.gm_bytes, minimum))
    vs.cycles.append((cid, t.estimate, t.bound, t.bound_pipe))
    vs.chip.append(ChipStats.of(cid, t.chip, minimum))


def chip_line(c: ChipStats) -> str:
    ratio = c.roofline_ratio
    return (f"{c.launches} launch{'es' if c.launches != 1 else ''}, block_dim {c.block_dim}, "
            f"{c.cores_used} core{'s' if c.cores_used != 1 else ''} used; modelled {c.modelled_us:.2f} us, "
            f"chip roofline {c.chip_roofline_us:.2f} us, {'-' if ratio is None else f'{ratio:.2f}x'}, "
            f"bound: {c.bound or '-'}")


def render(op: Operator, stats: list[VariantStats]) -> str:
    lines = [f"stats of {op.spec.op} ({op.spec.path}), target {op.spec.target}"]
    for s in stats:
        peak = ", ".join(f"{k.upper()} {v} B" for k, v in sorted(s.peak.items())) or "none"
        lines.append(f"  variant {s.variant}: {s.paths} compiled path{'s' if s.paths != 1 else ''}, "
                     f"{s.vector_kernels} vector + {s.cube_kernels} cube"
                     f"{f' + {s.mixed_kernels} mixed' if s.mixed_kernels else ''} kernels; peak {peak}")
        if s.stack:
            # kernels are named <control>_k<n>: the suffix is enough beside the variant
            frames = ", ".join(f"{k[k.rfind('_') + 1:]} {v}" for k, v in s.stack.items())
            lines.append(f"    stack bytes per kernel (estimate; limit {s.stack_limit}): {frames}")
        cycles = {c[0]: c[1:] for c in s.cycles}
        chip = {c.case: c for c in s.chip}
        for cid, moved, minimum in s.traffic:
            ratio = moved / minimum if minimum else float("nan")
            line = (f"    {cid}: GM bytes {'modelled' if s.bench else 'moved'} {moved}, minimum {minimum}, "
                    f"ratio {ratio:.2f}")
            if cid in cycles:
                est, bound, pipe = cycles[cid]
                line += (f"; est. {est:.0f} cycles, roofline {bound:.0f} ({pipe}-bound), "
                         f"{est / bound if bound else float('nan'):.2f}x")
            lines.append(line)
            if cid in chip:
                lines.append(f"      chip: {chip_line(chip[cid])}")
        for cid in s.unmodelled:
            lines.append(f"    {cid}: not modelled (the dry run would walk over {REPORT_MAX_OPS} ops)")
        if s.bench and not s.traffic and not s.unmodelled:
            lines.append("    no bench cases")
    return "\n".join(lines) + "\n"


# A case within this factor of the compulsory minimum needs no explanation in the library summary.
AT_MINIMUM = 1.05


def excess(by_tensor: dict[str, tuple[int, int, int]], passes: dict[str, tuple[int, str | None]]) -> list[str]:
    """Where one case moves more than the minimum, tensor by tensor, from the simulator's counts: an
    input read more than once, with its passes (``input_passes``: the minimum the kernel as written
    allows) and the loop whose iterations repeat them; an output written or read back more than
    once; and the bytes that go through GM workspaces (locals, and values handed between kernels)."""
    out = []
    for name, (loaded, stored, size) in sorted(by_tensor.items()):
        if size == 0:
            if loaded or stored:
                out.append(f"{loaded + stored} B through GM workspaces (locals, values handed between kernels)")
            continue
        if loaded > AT_MINIMUM * size and not stored:
            n, around = passes.get(name, (1, None))
            why = [f"{n} pass{'es' if n != 1 else ''}, each after a reduction it needs" if n > 1 else "1 pass"]
            if loaded > AT_MINIMUM * n * size:
                # "_" names are the compiler's loops around a grid: each output block of the grid
                # loads its part of the input again (a broadcast operand, a matmul panel)
                why.append(f"repeated per iteration of loop `{around}`" if around and not around.startswith("_")
                           else "re-read by each output block of the grid")
            out.append(f"`{name}` read {loaded / size:.2f}x ({', '.join(why)})")
        if stored > AT_MINIMUM * size:
            out.append(f"`{name}` written {stored / size:.2f}x")
        if stored and loaded:
            out.append(f"`{name}` read back {loaded / size:.2f}x")
    return out


def render_summary(rows: list[tuple[Operator, list[VariantStats]]], failed: list[str]) -> str:
    """The library at a glance: per case the GM ratio, the UB peak and the largest estimated kernel
    stack frame of its variant, then the largest frame of all, and, for each op with a case over
    ``AT_MINIMUM`` x the minimum, where the extra bytes go."""
    lines = [f"{'case':44} {'GM moved':>10} {'minimum':>10} {'ratio':>6} {'UB peak':>9} {'stack':>7} "
             f"{'est. cyc':>9} {'roofline':>9} {'x':>5} bound"]
    reasons: list[str] = []
    largest: tuple[int, str, int] | None = None  # (bytes, kernel, limit): the largest stack frame estimate
    for op, stats in rows:
        worst: tuple[float, str, list[str]] | None = None
        for s in stats:
            ub = s.peak.get("ub")
            frame = max(s.stack.values(), default=None)
            for kernel, n in s.stack.items():
                if largest is None or n > largest[0]:
                    largest = (n, kernel, s.stack_limit)
            cycles = {c[0]: c[1:] for c in s.cycles}
            for cid, moved, minimum in s.traffic:
                ratio = moved / minimum if minimum else float("nan")
                est, bound, pipe = cycles.get(cid, (None, None, None))
                model = (f"{est:>9.0f} {bound:>9.0f} {est / bound:>5.2f} {pipe}" if est is not None and bound
                         else f"{'-':>9} {'-':>9} {'-':>5}")
                lines.append(f"{cid:44} {moved:>10} {minimum:>10} {ratio:>6.2f} "
                             f"{'-' if ub is None else f'{ub} B':>9} {'-' if frame is None else f'{frame} B':>7} {model}")
                if ratio > AT_MINIMUM and (worst is None or ratio > worst[0]):
                    worst = (ratio, cid, excess(s.by_tensor.get(cid, {}), s.passes))
        if worst is not None:
            ratio, cid, why = worst
            reasons.append(f"  {op.spec.op} ({ratio:.2f}x at {cid}): " + ("; ".join(why) or "small tails"))
    ops = len(rows)
    over = len(reasons)
    lines.append(f"\n{ops} specs, {ops - over} at <= {AT_MINIMUM:.2f}x the minimum GM traffic in every case")
    if largest is not None:
        n, kernel, limit = largest
        lines.append(f"largest estimated stack frame of a compute kernel: {n} B (`{kernel}`), limit {limit} B")
    if reasons:
        lines.append("over the minimum (worst case of each op; a pass reads a whole input, and the passes named are the fewest the op as written allows):")
        lines += reasons
    if failed:
        lines.append("not compiled: " + ", ".join(failed))
    return "\n".join(lines) + "\n"


def render_bench_summary(rows: list[tuple[Operator, list[VariantStats]]], failed: list[str]) -> str:
    """The library on chip-filling shapes: per bench case the chip model's columns, then per spec
    its worst ratio to the chip roofline, and how many ops come within ``NEAR_ROOFLINE`` of it."""
    lines = [f"{'case':44} {'launches':>8} {'blocks':>6} {'cores':>5} {'modelled us':>12} {'roofline us':>12} "
             f"{'ratio':>8} bound"]
    worst: list[tuple[str, float, str]] = []
    without: list[str] = []
    unmodelled: list[str] = []
    for op, stats in rows:
        cases = [c for s in stats for c in s.chip]
        if any(s.unmodelled for s in stats):
            unmodelled.append(op.spec.op)
        if not cases:
            if not any(s.unmodelled for s in stats):
                without.append(op.spec.op)
            continue
        for c in cases:
            ratio = c.roofline_ratio
            lines.append(f"{c.case:44} {c.launches:>8} {c.block_dim:>6} {c.cores_used:>5} {c.modelled_us:>12.2f} "
                         f"{c.chip_roofline_us:>12.2f} {'-' if ratio is None else f'{ratio:.2f}x':>8} {c.bound or '-'}")
        rated = [c for c in cases if c.roofline_ratio is not None]
        if rated:
            w = max(rated, key=lambda c: c.roofline_ratio)
            worst.append((op.spec.op, w.roofline_ratio, w.case))
    lines.append("\nworst ratio to the chip roofline, per spec:")
    lines += [f"  {name:28} {ratio:>10.2f}x  ({case})" for name, ratio, case in worst]
    near = sum(r <= NEAR_ROOFLINE for _, r, _ in worst)
    lines.append(f"\n{near} of {len(worst)} ops within {NEAR_ROOFLINE:.1f}x of the chip roofline in every bench case")
    if unmodelled:
        lines.append(f"bench cases not modelled (the dry run would walk over {REPORT_MAX_OPS} ops): " + ", ".join(unmodelled))
    if without:
        lines.append("no bench cases: " + ", ".join(without))
    if failed:
        lines.append("not compiled: " + ", ".join(failed))
    return "\n".join(lines) + "\n"


__all__ = ["AT_MINIMUM", "NEAR_ROOFLINE", "ChipStats", "VariantStats", "chip_line", "collect", "excess", "render",
           "render_bench_summary", "render_summary"]
