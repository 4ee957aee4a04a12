"""``ptodsl ir --stats``: numbers computed from the IR, per kernel variant.

- compiled paths: the most distinct launch sequences one loop body of the control program can
  take (runtime branches add, consecutive branches multiply);
- compute kernels, vector and cube;
- peak bytes of UB, L1, L0A/L0B/L0C over the kernels, from the memory plan;
- GM bytes moved by the Block IR for each test case, counted while the simulator runs it, next to
  the compulsory minimum (every input read once, every output written once);
- estimated cycles from the pipeline cost model (``backends/sim/timing.py``, target ``timing:``
  data), the roofline bound (the busiest pipe's work), the pipe that bounds it and their ratio.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api import Operator
from .check import paths
from .golden import case_id, run_case
from .ir import Func, Module, Op


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
    traffic: list[tuple[str, int, int]] = field(default_factory=list)  # (case, moved, minimum)
    # (case, estimated cycles, roofline cycles, the bound pipe) from the cost model
    cycles: list[tuple[str, float, float, str | None]] = field(default_factory=list)


def _kernels_of(block: Module, control: Func) -> list[Func]:
    names = {o.attrs["kernel"] for o in control.walk() if o.name == "launch"}
    return [f for f in block.funcs if f.name in names]


def collect(op: Operator) -> list[VariantStats]:
    block = op.compiled.stages["block"]
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
                          sum(k.kind == "vector" for k in kernels), sum(k.kind == "cube" for k in kernels), peak)
        for case in op.spec.tests:
            variant = {k: case.dtypes.get(k, v[0]) for k, v in op.spec.dtypes.items()}
            if variant != ck.variant:
                continue
            r = run_case(op, case)
            moved = r.traffic.get("load", 0) + r.traffic.get("store", 0)
            minimum = sum(a.nbytes for name, a in r.inputs.items()) + sum(
                a.nbytes for name, a in r.outputs.items())
            vs.traffic.append((case_id(op.spec, case), moved, minimum))
            t = r.timeline
            if t is not None:
                vs.cycles.append((case_id(op.spec, case), t.estimate, t.bound, t.bound_pipe))
        out.append(vs)
    return out


def render(op: Operator, stats: list[VariantStats]) -> str:
    lines = [f"stats of {op.spec.op} ({op.spec.path}), target {op.spec.target}"]
    for s in stats:
        peak = ", ".join(f"{k.upper()} {v} B" for k, v in sorted(s.peak.items())) or "none"
        lines.append(f"  variant {s.variant}: {s.paths} compiled path{'s' if s.paths != 1 else ''}, "
                     f"{s.vector_kernels} vector + {s.cube_kernels} cube kernels; peak {peak}")
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


__all__ = ["VariantStats", "collect", "render"]
