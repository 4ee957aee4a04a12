"""``ptodsl fuzz``: run many random programs in a worker process, shrink and report the failures.

Programs run in chunks in a child process, so that a hang (no progress within the time limit) or a
crash of the process itself (a segfault in a CPU kernel) is recorded against the program that was
running, and the rest of its chunk is run again in a fresh worker.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from dataclasses import asdict
from typing import Any

from ..progress import Progress
from .gen import ALL_FEATURES, SAFE_FEATURES, generate
from .run import DEFAULT_TIMEOUT_S, KINDS, Outcome

CHUNK = 25
FAIL_KINDS = tuple(k for k in KINDS if k != "ok")


def parse_features(text: str) -> frozenset[str]:
    """``all``, ``safe``, feature names to add and ``-name`` to remove, comma-separated, in order."""
    out: set[str] = set()
    for tok in (t.strip() for t in text.split(",")):
        if not tok:
            continue
        if tok == "all":
            out |= ALL_FEATURES
        elif tok == "safe":
            out |= SAFE_FEATURES
        elif tok.startswith("-") and tok[1:] in ALL_FEATURES:
            out.discard(tok[1:])
        elif tok in ALL_FEATURES:
            out.add(tok)
        else:
            raise ValueError(f"unknown feature `{tok}`; features: {', '.join(sorted(ALL_FEATURES))}")
    return frozenset(out)


def features_text(features: frozenset[str]) -> str:
    if features == ALL_FEATURES:
        return "all"
    if features == SAFE_FEATURES:
        return "safe"
    if features < ALL_FEATURES and len(ALL_FEATURES - features) < len(features):
        return ",".join(["all"] + [f"-{f}" for f in sorted(ALL_FEATURES - features)])
    return ",".join(sorted(features))


# ------------------------------------------------------------------------------------ worker


def _worker(conn) -> None:
    from .run import run_programs

    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg[0] == "stop":
            return
        if msg[0] == "run":
            _, seeds, features, backends, folder, timeout, max_blocks = msg

            def started(seed: int, phase: str) -> None:
                conn.send(("start", seed, phase))

            outs = run_programs([generate(s, features, max_blocks) for s in seeds], backends, folder, timeout,
                                on_start=started)
            conn.send(("done", [asdict(o) for o in outs]))
        elif msg[0] == "shrink":
            conn.send(_shrink_request(*msg[1:]))


def _shrink_request(seed: int, features: frozenset[str], backends: tuple[str, ...], folder: str, timeout: float,
                    signature: list[str], seconds: float, max_blocks: int) -> tuple:
    from .run import run_programs
    from .shrink import shrink

    deadline = time.monotonic() + seconds

    def fails(cand) -> bool:
        if time.monotonic() > deadline:
            return False
        return run_programs([cand], backends, folder, timeout)[0].signature() == tuple(signature)

    best = shrink(generate(seed, features, max_blocks), fails)
    final = run_programs([best], backends, folder, timeout)[0]
    return ("shrunk", best.pto(), best.yaml(), asdict(final))


class Pool:
    """One worker process, restarted after it hangs or dies."""

    def __init__(self) -> None:
        self.ctx = mp.get_context("fork")
        self.proc = None
        self.conn = None

    def start(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            return
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(("stop",))
            except OSError:
                pass
            self.proc.join(5)
            if self.proc.is_alive():
                self.kill()

    def recv(self, timeout: float) -> Any:
        """The next message; ("hang",) after ``timeout`` seconds without one, ("died", code) if the worker exits."""
        if not self.conn.poll(timeout):
            return ("hang",)
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            return ("died", self.proc.exitcode)


def run_chunk(pool: Pool, seeds: list[int], features: frozenset[str], backends: tuple[str, ...], folder: str,
              timeout: float, max_blocks: int = 3) -> list[Outcome]:
    results: dict[int, Outcome] = {}
    pending = list(seeds)
    while pending:
        pool.start()
        pool.conn.send(("run", pending, features, backends, folder, timeout, max_blocks))
        last: tuple[int, str] | None = None
        while True:
            wait = timeout * 10 if last and last[1] == "build" else timeout + 30
            msg = pool.recv(wait)
            if msg[0] == "start":
                last = (msg[1], msg[2])
                continue
            if msg[0] == "done":
                for d in msg[1]:
                    results[d["seed"]] = Outcome(**d)
                pending = []
                break
            # hang or death: blame the program that was running, run the others again
            pool.kill()
            culprits = [last[0]] if last and last[0] >= 0 else []
            if last and last[1] == "build":
                culprits = list(pending)  # the batch build itself; rare, and not one program's fault
            kind = "hang" if msg[0] == "hang" else "crash"
            what = (f"no progress within {wait:g} s" if kind == "hang"
                    else f"the worker process died (exit code {msg[1]})")
            for s in culprits or pending[:1]:
                results[s] = Outcome(s, kind, last[1] if last else "compile", f"{what} during {last[1] if last else 'start'}")
            pending = [s for s in pending if s not in results]
            break
    return [results[s] for s in seeds]


def shrink_failure(pool: Pool, o: Outcome, features: frozenset[str], backends: tuple[str, ...], folder: str,
                   timeout: float, seconds: float, max_blocks: int = 3) -> tuple[str, str, Outcome] | None:
    if o.kind == "hang" or (o.kind == "crash" and "worker process died" in o.detail):
        return None  # each try could take the worker down again: report the program as generated
    pool.start()
    pool.conn.send(("shrink", o.seed, features, backends, folder, timeout, list(o.signature()), seconds,
                    max_blocks))
    msg = pool.recv(seconds + timeout * 5 + 60)
    if msg[0] != "shrunk":
        pool.kill()
        return None
    return msg[1], msg[2], Outcome(**msg[3])


# ------------------------------------------------------------------------------------ command


def fuzz(count: int, seed: int, features: frozenset[str], backends: tuple[str, ...], out: str | None,
         timeout: float = DEFAULT_TIMEOUT_S, shrink_seconds: float = 90.0, max_shrink: int = 12,
         stream=None, max_blocks: int = 3, report: dict[str, Any] | None = None, quiet: bool = False) -> int:
    """Run ``count`` programs from ``seed`` on; print each distinct failure shrunk, then a summary
    line. Returns the exit status: 1 when anything failed. ``report`` receives the same as data
    (the fields of ``ptodsl fuzz --format json``). A progress line is shown on a terminal's stderr
    unless ``quiet``."""
    report = report if report is not None else {}
    found: list[dict[str, Any]] = []
    stream = stream or sys.stdout
    folder = out or tempfile.mkdtemp(prefix="ptodsl-fuzz-")
    programs_dir = os.path.join(folder, "programs")
    os.makedirs(programs_dir, exist_ok=True)
    started = time.perf_counter()
    pool = Pool()
    outcomes: list[Outcome] = []
    seeds = list(range(seed, seed + count))
    try:
        with Progress(count, "fuzz", quiet=quiet) as progress:
            for k in range(0, len(seeds), CHUNK):
                outcomes += run_chunk(pool, seeds[k:k + CHUNK], features, backends, programs_dir, timeout,
                                      max_blocks)
                bad = sum(o.kind in FAIL_KINDS for o in outcomes)
                progress.update(len(outcomes), f"programs, {bad} failing, {time.perf_counter() - started:.0f} s")
        failures = [o for o in outcomes if o.kind in FAIL_KINDS]
        groups: dict[tuple[str, str], list[Outcome]] = {}
        for o in failures:
            groups.setdefault(o.signature(), []).append(o)
        feat = features_text(features)
        be = "both" if set(backends) == {"sim", "cpu"} else backends[0]
        shrunk_dir = os.path.join(folder, "shrunk")
        for n, members in enumerate(groups.values()):
            first = members[0]
            print(f"\n=== {first.kind} ({first.backend}) in {len(members)} program(s): seeds "
                  f"{', '.join(str(o.seed) for o in members[:12])}{' ...' if len(members) > 12 else ''}", file=stream)
            print(_indent(first.detail.strip(), 12), file=stream)
            shrunk = None
            if n < max_shrink:
                shrunk = shrink_failure(pool, first, features, backends, os.path.join(folder, "shrinking"),
                                        timeout, shrink_seconds, max_blocks)
            finding: dict[str, Any] = {"kind": first.kind, "backend": first.backend,
                                       "seeds": [o.seed for o in members], "detail": first.detail, "shrunk": None}
            found.append(finding)
            if shrunk is not None:
                pto, yaml, final = shrunk
                os.makedirs(shrunk_dir, exist_ok=True)
                base = os.path.join(shrunk_dir, f"fz{first.seed}")
                with open(base + ".pto", "w", encoding="utf-8") as f:
                    f.write(pto)
                with open(base + ".yaml", "w", encoding="utf-8") as f:
                    f.write(yaml)
                print(f"--- shrunk ({base}.pto / .yaml): {final.kind} ({final.backend})", file=stream)
                print(_indent(final.detail.strip(), 6), file=stream)
                print(pto + "--- yaml\n" + yaml, file=stream, end="")
                finding["shrunk"] = {"pto": base + ".pto", "yaml": base + ".yaml", "kind": final.kind,
                                     "backend": final.backend, "detail": final.detail}
            else:
                print(f"--- as generated: {os.path.join(programs_dir, f'fz{first.seed}')}.pto", file=stream)
            blocks = f" --max-blocks {max_blocks}" if max_blocks != 3 else ""
            finding["repro"] = f"ptodsl fuzz --count 1 --seed {first.seed} --features {feat} --backend {be}{blocks}"
            print(f"repro: {finding['repro']}", file=stream)
    finally:
        pool.stop()
    seconds = time.perf_counter() - started
    counts = {k: sum(o.kind == k for o in outcomes) for k in ("ok",) + FAIL_KINDS}
    print(f"\nfuzz: {len(outcomes)} programs, {counts['mismatch']} mismatches, {counts['crash']} crashes, "
          f"{counts['hang']} hangs, {counts['rejected']} rejected, {counts['interp']} interpreter errors, "
          f"{seconds:.1f} s", file=stream)
    report.update(programs=len(outcomes), counts=counts, failures=found, folder=folder, seconds=seconds)
    return 1 if any(counts[k] for k in FAIL_KINDS) else 0


def _indent(text: str, lines: int) -> str:
    rows = text.splitlines()
    cut = rows[-lines:] if len(rows) > lines else rows
    return "\n".join("    " + r for r in cut)


def add_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--count", type=int, default=100, help="how many programs (default 100)")
    s.add_argument("--seed", type=int, default=0, help="the first program's seed (default 0)")
    s.add_argument("--backend", choices=("sim", "cpu", "both"), default="both")
    s.add_argument("--out", default=None, metavar="DIR", help="keep the programs and the shrunk failures here")
    s.add_argument("--features", default="all", metavar="LIST",
                   help="all, safe, or feature names (-name removes one), comma-separated; default all")
    s.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per program and side")
    s.add_argument("--shrink-seconds", type=float, default=90.0, help="time spent shrinking each failure")
    s.add_argument("--max-blocks", type=int, default=3, help="statement groups per program (default 3)")
    s.add_argument("--mutate", action="store_true",
                   help="run the mutation fuzzer (ptodsl.fuzz.mutate) instead of random programs")


def main(args: argparse.Namespace, report: dict[str, Any] | None = None, stream=None) -> int:
    """``ptodsl fuzz``; ``report`` receives the results as data, or ``error``, a usage error as
    (message, help) for the caller to report, and ``stream`` the human report (default stdout)."""
    report = report if report is not None else {}
    if args.count < 0:
        report["error"] = (f"`--count {args.count}`: the count of programs cannot be negative", "pass `--count 0` or more")
        return 1
    if args.mutate:
        import importlib

        try:
            mutate = importlib.import_module("ptodsl.fuzz.mutate")
        except ModuleNotFoundError as exc:
            if exc.name != "ptodsl.fuzz.mutate":
                raise
            report["error"] = ("the mutation fuzzer (ptodsl.fuzz.mutate) is not installed in this ptodsl",
                               "install a ptodsl that ships it, or drop `--mutate`")
            return 1
        code = int(mutate.run(count=args.count, seed=args.seed))
        report.update(mode="mutate", programs=args.count)
        return code
    try:
        features = parse_features(args.features)
    except ValueError as exc:
        report["error"] = (str(exc), "`--features all`, `safe`, or feature names; `-name` drops one")
        return 1
    backends = ("sim", "cpu") if args.backend == "both" else (args.backend,)
    report["mode"] = "programs"
    return fuzz(args.count, args.seed, features, backends, args.out, args.timeout, args.shrink_seconds,
                stream=stream, max_blocks=max(1, args.max_blocks), report=report,
                quiet=getattr(args, "quiet", False))


__all__ = ["add_arguments", "fuzz", "main", "parse_features", "run_chunk"]
