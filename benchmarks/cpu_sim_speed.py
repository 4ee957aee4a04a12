"""How fast the cpu backend and the simulator run large inputs, against torch eager and numpy.

    python benchmarks/cpu_sim_speed.py [--threads 1,2] [--only softmax,matmul] [--no-sim] [--rounds 3]

For each case (16M f32 elements for the row-wise and element-wise ops, matmul at 512^3 and
1024^3, flash attention at a moderate size, and softmax and rmsnorm at 4M elements where the
simulator's figure matters) it prints, measured in the same process: the emitted C++ on the cpu
backend (the operator's public call, which allocates its outputs as torch does) against the spec's
torch equivalent (torch eager, the `torch:` function of the spec), and
the simulator (``backend="sim"``, poison on, as the golden tests run it) against the spec's numpy
reference (the `reference:` function, which computes in float64). Every thread count runs in a
fresh process with OMP_NUM_THREADS, the BLAS thread counts and torch's set to it: the cpu backend
uses OpenMP for the parallel loops of a control program, torch its own pool, numpy's matmul its
BLAS; the simulator is single-threaded Python over numpy. Times are the best of a few rounds, the
rounds of the cpu backend, torch and numpy taken in turn so that a change in the machine's load
falls on all three (``ptodsl.bench.measure_together``; the first call builds the kernel and is
not counted). Ratios above 1
mean ptodsl is slower. Nothing is asserted: the machine's load decides much of it, so the header
prints the load average, the CPU and the instruction set the kernels were built for.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (spec, shapes, scalars, label): f32 variants throughout
CASES = [
    ("softmax", {"B": 16384, "N": 1024}, {}, "16384x1024"),
    ("layernorm", {"R": 16384, "H": 1024}, {}, "16384x1024"),
    ("rmsnorm", {"R": 16384, "H": 1024}, {}, "16384x1024"),
    ("silu", {"M": 4096, "N": 4096}, {}, "4096x4096"),
    ("matmul", {"M": 512, "K": 512, "N": 512}, {}, "512^3"),
    ("matmul", {"M": 1024, "K": 1024, "N": 1024}, {}, "1024^3"),
    ("flash_attn", {"S": 1024, "L": 1024, "D": 64, "BL": 64}, {"scale": 0.125}, "S=L=1024 D=64"),
    ("softmax", {"B": 4096, "N": 1024}, {}, "4096x1024"),
    ("rmsnorm", {"R": 4096, "H": 1024}, {}, "4096x1024"),
]
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def measure_cases(threads: int, only: set[str] | None, sim: bool, rounds: int, sim_limit_s: float) -> list[dict]:
    """Run in a process whose thread counts are already set."""
    sys.path.insert(0, str(ROOT))
    from ptodsl.bench import passive_openmp

    passive_openmp()
    import torch

    torch.set_num_threads(threads)
    rows = []
    for spec, shapes, scalars, label in CASES:
        if only and spec not in only:
            continue
        row = {"op": spec, "size": label, "threads": threads} | measure_case(spec, shapes, scalars, sim, rounds,
                                                                             sim_limit_s)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def measure_case(spec: str, shapes: dict, scalars: dict, sim: bool, rounds: int, sim_limit_s: float) -> dict:
    import numpy as np
    import torch

    import ptodsl
    from ptodsl.api import run_kernel
    from ptodsl.bench import measure, measure_together
    from ptodsl.dtypes import numpy_dtype
    from ptodsl.golden import load_reference, load_torch

    op = ptodsl.load(str(ROOT / "specs" / f"{spec}.yaml"))
    rng = np.random.default_rng(0)
    inputs = {}
    for p in op.inputs:
        shape = tuple(int(d) if isinstance(d, int) else shapes[str(d)] for d in p.dims or ())
        inputs[p.name] = rng.standard_normal(shape).astype(np.float32)
    ordered = [inputs[p.name] for p in op.inputs]
    index, arrays, symbols = op.resolve(dict(inputs))
    for s, v in shapes.items():
        symbols.setdefault(s, v)
    full = {p.name: scalars.get(p.name, p.default) for p in op.scalars}
    # the public call, which allocates its outputs as torch eager does
    fn = load_torch(op.spec)
    tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in ordered]
    reference = load_reference(op.spec)
    out = measure_together({"cpu_s": lambda: op(*ordered, backend="cpu", **scalars),
                            "torch_s": lambda: fn(*tensors, **scalars),
                            "numpy_s": lambda: reference(*ordered, **scalars)}, 0.0, rounds)
    if sim:
        def simulate() -> None:  # poison on, as the golden tests run it, into fresh outputs
            fresh = dict(arrays)
            for p in op.outputs:
                dtype, shape = op.output_shape(index, p, symbols)
                fresh[p.name] = np.empty(shape, numpy_dtype(dtype))
            run_kernel(op.compiled, index, fresh, full, symbols, "sim", poison=True)

        start = time.perf_counter()
        simulate()
        once = time.perf_counter() - start
        out["sim_s"] = once if once > sim_limit_s else min(once, measure(simulate, 0.0, rounds))
    return out


def machine() -> str:
    from ptodsl.backends.cpp import build

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "?") if Path("/proc/cpuinfo").exists() else "?"
    chosen = build.target_arch(build.find_toolchain()).label
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    return (f"{model}, {os.cpu_count()} cores, kernels built for {chosen}, "
            f"load average {' '.join(f'{x:.1f}' for x in load)}")


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def table(rows: list[dict]) -> str:
    head = f"{'op':<11} {'size':<14} {'thr':>3} {'cpu s':>9} {'torch s':>9} {'cpu/torch':>9} " \
           f"{'sim s':>9} {'numpy s':>9} {'sim/numpy':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        sim = r.get("sim_s")
        sim_text = "-" if sim is None else f"{sim:.4f}"
        lines.append(f"{r['op']:<11} {r['size']:<14} {r['threads']:>3} {r['cpu_s']:>9.4f} {r['torch_s']:>9.4f} "
                     f"{ratio(r['cpu_s'], r['torch_s']):>9} {sim_text:>9} "
                     f"{r['numpy_s']:>9.4f} {ratio(sim, r['numpy_s']):>9}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--only", default="", help="comma-separated spec names")
    ap.add_argument("--no-sim", action="store_true", help="leave the simulator out")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sim-limit", type=float, default=20.0, help="a simulator run longer than this is run once")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    only = {s for s in args.only.split(",") if s} or None
    if args.worker is not None:
        measure_cases(args.worker, only, not args.no_sim, args.rounds, args.sim_limit)
        return 0
    sys.path.insert(0, str(ROOT))
    print(machine(), flush=True)
    rows: list[dict] = []
    for threads in (int(t) for t in args.threads.split(",")):
        env = {**os.environ, **{v: str(threads) for v in THREAD_VARS}}
        command = [sys.executable, __file__, "--worker", str(threads), "--rounds", str(args.rounds),
                   "--sim-limit", str(args.sim_limit), "--only", args.only] + (["--no-sim"] if args.no_sim else [])
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        for line in done.stdout.splitlines():
            if line.startswith("{"):
                rows.append(json.loads(line))
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return done.returncode
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
