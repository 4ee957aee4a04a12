"""``ptodsl ir --stats``: numbers computed from the IR, per kernel variant.

- compiled paths: the most distinct launch sequences one loop body of the control program can
  take (runtime branches add, consecutive branches multiply);
- compute kernels, vector and cube;
- peak bytes of UB, L1, L0A/L0B/L0C over the kernels, from the memory plan;
- per compute kernel, the estimate of its scalar stack frame (``passes/stack.py``) against the
  NPU compiler's limit;
- GM bytes moved by the Block IR for each test case, counted while the simulator runs it, next to
  the compulsory minimum (every input read once, every output written once);
- estimated cycles from the pipeline cost model (``cost/timeline.py``, target ``timing:``
  data), the roofline bound (the busiest pipe's work), the pipe that bounds it and their ratio.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api import Operator
from .check import paths
from .golden import case_id, run_case
from .ir import Func, Module, Op
from .passes import stack


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


def input_passes(func: Func) -> dict[str, tuple[int, str | None]]:
    """Per tensor parameter, the most grid nests of one region that read it, and the user loop
    whose body that region is. After fusion, grid nests of one region stay apart only where the
    later one needs a result the earlier one completes (a reduction over the whole extent), so
    this is the fewest passes the kernel as written allows; reads beyond it repeat per iteration
    of the loop around them."""
    base: dict[str, str] = {p.name: p.name for p in func.params if p.is_tensor}
    for o in func.walk():
        if o.name in ("view", "reshape") and o.operands[0].name in base:
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
            if n > out.get(b, (0, None))[0]:
                out[b] = (n, around)

    region(func.body, None)
    return out


def _kernels_of(block: Module, control: Func) -> list[Func]:
    names = {o.attrs["kernel"] for o in control.walk() if o.name == "launch"}
    return [f for f in block.funcs if f.name in names]


def collect(op: Operator) -> list[VariantStats]:
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
        vs = VariantStats(ck.variant_name or "-", max_body_paths(control.body),
                          sum(k.kind == "vector" for k in kernels), sum(k.kind == "cube" for k in kernels), peak,
                          {k.name: frames[k.name] for k in kernels}, op.compiled.target.stack.limit_bytes)
        vs.passes = input_passes(op.compiled.stages["tile"].funcs[index])
        for case in op.spec.tests:
            if op.spec.variant_of(case) != ck.variant or case.refuses is not None:
                continue  # (a call the case expects refused moves nothing worth counting)
            r = run_case(op, case)
            moved = r.traffic.get("load", 0) + r.traffic.get("store", 0)
            minimum = sum(a.nbytes for name, a in r.inputs.items()) + sum(
                a.nbytes for name, a in r.outputs.items())
            vs.traffic.append((case_id(op.spec, case), moved, minimum))
            t = r.timeline
            if t is not None:
                vs.cycles.append((case_id(op.spec, case), t.estimate, t.bound, t.bound_pipe))
            sizes = {name: a.nbytes for name, a in [*r.inputs.items(), *r.outputs.items()]}
            vs.by_tensor[case_id(op.spec, case)] = {
                name: (t["load"], t["store"], sizes.get(name, 0)) for name, t in r.traffic_by_tensor.items()}
        out.append(vs)
    return out


def render(op: Operator, stats: list[VariantStats]) -> str:
    lines = [f"stats of {op.spec.op} ({op.spec.path}), target {op.spec.target}"]
    for s in stats:
        peak = ", ".join(f"{k.upper()} {v} B" for k, v in sorted(s.peak.items())) or "none"
        lines.append(f"  variant {s.variant}: {s.paths} compiled path{'s' if s.paths != 1 else ''}, "
                     f"{s.vector_kernels} vector + {s.cube_kernels} cube kernels; peak {peak}")
        if s.stack:
            # kernels are named <control>_k<n>: the suffix is enough beside the variant
            frames = ", ".join(f"{k[k.rfind('_') + 1:]} {v}" for k, v in s.stack.items())
            lines.append(f"    stack bytes per kernel (estimate; limit {s.stack_limit}): {frames}")
        cycles = {c[0]: c[1:] for c in s.cycles}
        for cid, moved, minimum in s.traffic:
            ratio = moved / minimum if minimum else float("nan")
            line = f"    {cid}: GM bytes moved {moved}, minimum {minimum}, ratio {ratio:.2f}"
            if cid in cycles:
                est, bound, pipe = cycles[cid]
                line += (f"; est. {est:.0f} cycles, roofline {bound:.0f} ({pipe}-bound), "
                         f"{est / bound if bound else float('nan'):.2f}x")
            lines.append(line)
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


__all__ = ["AT_MINIMUM", "VariantStats", "collect", "excess", "render", "render_summary"]
