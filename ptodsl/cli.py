"""The ``ptodsl`` command line.

User errors print diagnostics and exit 1; they never show a traceback. An internal error prints a
short banner (exit 2) and its traceback only with ``--debug``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

from . import __version__
from .diagnostics import CompileError, Diagnostic, DiagnosticError, Diagnostics, code_registry
from .diagnostics.portnotes import with_port_notes
from .diagnostics.render import render_all, use_color
from .ops import INDEXING, OPS, describe_index_op, describe_op
from .progress import Progress

EXIT_OK, EXIT_USER, EXIT_INTERNAL = 0, 1, 2


# The version of the JSON documents `--format json` writes (docs/CLI-JSON.md); raised when a field
# changes meaning or goes away, not when one is added.
JSON_VERSION = 1


class _Out:
    """Where a command's output goes, in the format the user asked for.

    Text: diagnostics on stderr, the report (``say``) on stdout. JSON: nothing is written while
    the command runs; :meth:`flush` writes one document to stdout holding the diagnostics and the
    command's ``result`` fields.
    """

    def __init__(self, fmt: str, color: str, command: str = "", quiet: bool = False):
        self.fmt = fmt
        self.command = command
        self.quiet = quiet
        self.color = use_color(sys.stderr) if color == "auto" else color == "always"
        self.collected: list[Diagnostic] = []
        self.fields: dict[str, Any] = {}
        self.stdout = sys.stdout  # main() sends stray prints to stderr in JSON mode; the document comes here

    @property
    def json(self) -> bool:
        return self.fmt == "json"

    def diagnostics(self, diags: Sequence[Diagnostic]) -> None:
        diags = with_port_notes(diags)  # the PyPTO line of a line `ptodsl port` wrote
        if self.json:
            self.collected.extend(diags)
        elif diags:
            sys.stderr.write(render_all(diags, color=self.color))

    def error(self, message: str, help: str, code: str = "E0250") -> None:
        """A mistake on the command line itself, which has no place in a spec."""
        d = Diagnostics()
        d.error(code, message, None, help=help)
        self.diagnostics(d.items)

    def say(self, text: str = "", end: str = "\n") -> None:
        """A line of the human-readable report: stdout in text mode, left out of JSON."""
        if not self.json:
            sys.stdout.write(text + end)

    def result(self, **fields: Any) -> None:
        """Fields of the command's JSON document."""
        self.fields.update(fields)

    def progress(self, total: int, verb: str) -> Progress:
        return Progress(total, verb, quiet=self.quiet)

    def document(self, exit_code: int) -> dict[str, Any]:
        return {"version": JSON_VERSION, "command": self.command, "ptodsl": __version__, "exit_code": exit_code,
                "diagnostics": [d.to_json() for d in self.collected], **self.fields}

    def flush(self, exit_code: int) -> None:
        if self.json:
            self.stdout.write(json.dumps(self.document(exit_code), indent=2) + "\n")
            self.stdout.flush()


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Everything the command prints goes to stderr: Python's prints, and what kernels write to file
    descriptor 1 (``print`` in a kernel is ``printf`` on the cpu backend), so that stdout holds
    the JSON document alone."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all: nothing to keep clean
        saved = None
    if saved is not None:
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            _flush_c_stdio()  # a kernel's buffered printf output must land before the swap back
            os.dup2(saved, 1)
            os.close(saved)


def _flush_c_stdio() -> None:
    import ctypes

    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to flush (not a POSIX libc)
        pass


def _specs(paths: Sequence[str], out: _Out) -> list[str]:
    from .golden import spec_paths

    found: list[str] = []
    for p in paths:
        if not os.path.exists(p):
            d = Diagnostics()
            d.error("E0203", f"no such file or directory: `{p}`", None,
                    help="pass a spec file (NAME.yaml) or a folder of specs")
            out.diagnostics(d.items)
            continue
        found.extend(spec_paths(p))
    return found


def cmd_check(args, out: _Out) -> int:
    from .driver import compile_spec

    paths = _specs(args.paths, out)
    missing = len(args.paths) - sum(os.path.exists(p) for p in args.paths)
    variants = 0
    specs: list[dict[str, Any]] = []
    with out.progress(len(paths), "check") as progress:
        for path in paths:
            progress.step(path)
            diags = Diagnostics()
            try:
                c = compile_spec(path, diags)
                variants += len(c.checked)
                found = []
                if args.target_rules:
                    from .backends.cpp.rules import spec_violations

                    found = spec_violations(c)
                    diags.extend(found)
                specs.append({"path": path, "ok": not found, "variants": [ck.variant for ck in c.checked]})
            except CompileError:
                specs.append({"path": path, "ok": False, "variants": []})
            out.diagnostics(diags.items)
    ok = sum(s["ok"] for s in specs)
    out.result(specs=specs, summary={"specs": len(paths), "ok": ok, "with_errors": len(paths) - ok,
                                     "variants": variants})
    if not out.json:
        print(f"checked {len(paths)} spec{'s' if len(paths) != 1 else ''} ({variants} kernel variants): "
              f"{ok} ok, {len(paths) - ok} with errors", file=sys.stderr)
    return EXIT_USER if missing or ok < len(paths) or not paths else EXIT_OK


def cmd_test(args, out: _Out) -> int:
    from .golden import case_id, load, run_case

    paths = _specs(args.paths, out)
    passed = failed = skipped = 0
    start = time.perf_counter()
    failures: list[tuple[str, str]] = []
    cases: list[dict[str, Any]] = []  # the JSON document's per-case records
    shown: set[tuple[str, ...]] = set()  # build failures already printed (a variant's cases share one)
    from .frontend.spec import load_spec

    progress = out.progress(len(paths), "test")
    for path in paths:
        progress.step(path)
        try:
            # the spec alone names the cases: skip compiling specs that -k filters out entirely
            if args.k and not any(args.k in case_id(spec, c) for spec in [load_spec(path)] for c in spec.tests):
                continue
            op = load(path)
        except CompileError as e:
            out.diagnostics(e.diagnostics)
            failed += 1
            failures.append((path, "does not compile"))
            cases.append({"id": None, "spec": path, "backend": args.backend, "status": "error", "seconds": 0.0,
                          "error": "the spec does not compile (see diagnostics)"})
            continue
        built = args.backend != "cpu"
        for case in op.spec.tests:
            cid = case_id(op.spec, case, None)
            if args.k and args.k not in cid:
                continue
            # the spec's C++ is built (g++, unless cached) inside its first case's run
            progress.status(cid if built else f"{cid}: building the C++ kernels")
            built = True
            t0 = time.perf_counter()
            reason = _unbuildable(op, case) if args.backend == "cpu" else None
            if reason:
                progress.clear()
                out.say(f"SKIP {cid}: {reason}")
                cases.append({"id": cid, "spec": path, "backend": args.backend, "status": "skip", "seconds": 0.0,
                              "error": reason})
                skipped += 1
                continue
            try:
                r = run_case(op, case, backend=args.backend, poison=not args.no_poison)
                ok, report = r.ok, r.report
            except DiagnosticError as e:  # inputs refused, a guard or a kernel check (cpu or sim) stopped it
                ok, report = False, str(e)
            except CompileError as e:
                if all(d.code.startswith(("E08", "E09")) for d in e.diagnostics):
                    # the emitter or the C++ build refused the case's variant: say so once per variant
                    key = tuple(d.message for d in e.diagnostics)
                    if key not in shown:
                        shown.add(key)
                        out.diagnostics(e.diagnostics)
                    ok, report = False, "the C++ of this case's variant does not build (see above)"
                else:  # a mistake in the case or its reference
                    out.diagnostics(e.diagnostics)
                    ok, report = False, "the case or its reference is wrong (see above)"
            dt = time.perf_counter() - t0
            mark = "PASS" if ok else "FAIL"
            progress.clear()
            out.say(f"{mark} {cid} ({dt * 1000:.0f} ms)")
            cases.append({"id": cid, "spec": path, "backend": args.backend, "status": "pass" if ok else "fail",
                          "seconds": dt, "error": None if ok else report})
            if ok:
                passed += 1
            else:
                failed += 1
                failures.append((cid, report))
    progress.clear()
    for cid, report in failures:
        out.say(f"\n--- {cid}\n{report}")
    total = time.perf_counter() - start
    out.say(f"\n{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else "") + f" in {total:.2f}s")
    out.result(cases=cases, summary={"passed": passed, "failed": failed, "skipped": skipped, "seconds": total})
    return EXIT_USER if failed or not paths else EXIT_OK


def stats_json(v: Any) -> dict[str, Any]:
    """One variant of ``ptodsl ir --stats`` as JSON (a :class:`ptodsl.stats.VariantStats`)."""
    return {"variant": v.variant, "paths": v.paths, "vector_kernels": v.vector_kernels,
            "cube_kernels": v.cube_kernels, "mixed_kernels": v.mixed_kernels, "peak_bytes": dict(v.peak),
            "stack_bytes": dict(v.stack), "stack_limit_bytes": v.stack_limit,
            "traffic": [{"case": cid, "moved": moved, "minimum": minimum,
                         "ratio": moved / minimum if minimum else None} for cid, moved, minimum in v.traffic],
            "cycles": [{"case": cid, "estimate": est, "roofline": bound, "bound_pipe": pipe}
                       for cid, est, bound, pipe in v.cycles],
            "chip": [c.to_json() for c in v.chip], "bench": v.bench}


def _unbuildable(op, case) -> str | None:
    """Why the cpu backend cannot build this case's variant faithfully here, or None."""
    from .backends.cpp.run import unbuildable_reason
    from .golden import case_variant

    try:
        return unbuildable_reason(op.compiled, case_variant(op, case))
    except (CompileError, DiagnosticError):
        return None  # running the case reports it


def cmd_ir(args, out: _Out) -> int:
    from .driver import compile_spec, lower_ir, pass_names

    diags = Diagnostics()
    if (args.spec is None) == (args.ir_file is None):
        out.error("give either a spec or printed IR, not both or neither",
                  "`ptodsl ir NAME.yaml`, or `ptodsl ir --from NAME.tile.ir` on IR it printed")
        return EXIT_USER
    if args.bench and not args.stats:
        out.error("`--bench` models the spec's bench cases for `--stats`", "add `--stats`")
        return EXIT_USER
    if args.ir_file is not None and (args.stats or args.variant):
        out.error("`--stats` and `--variant` read the spec, which printed IR does not carry",
                  "run them on the spec the IR came from")
        return EXIT_USER
    if args.spec is not None and os.path.isdir(args.spec):
        if not args.stats:
            out.error(f"`{args.spec}` is a folder: the IR is printed one spec at a time",
                      "pass one spec (NAME.yaml), or add `--stats` for a summary of every spec in the folder")
            return EXIT_USER
        return _library_stats(args.spec, out, args.bench)
    try:
        last = None if args.stats else args.after
        if args.ir_file is not None:
            c = lower_ir(args.ir_file, diags, verify_ir=not args.no_verify, stop_after=last)
        else:
            c = compile_spec(args.spec, diags, verify_ir=not args.no_verify, stop_after=last)
    except CompileError:
        out.diagnostics(diags.items)
        return EXIT_USER
    out.diagnostics(diags.items)
    if args.stats:
        from .api import Operator
        from .stats import collect, render

        op = Operator(c)
        stats = collect(op, bench=args.bench)
        out.say(render(op, stats), end="")
        out.result(op=op.spec.op, spec=op.spec.path, target=op.spec.target, stats=[stats_json(v) for v in stats])
        return EXIT_OK
    if args.after:
        if args.after not in c.after:
            d = Diagnostics()
            d.error("E0206", f"no pass named `{args.after}`", None, help="passes: " + ", ".join(pass_names()))
            out.diagnostics(d.items)
            return EXIT_USER
        module = c.after[args.after]
    else:
        if args.stage not in c.stages:
            d = Diagnostics()
            d.error("E0800", f"the `{args.stage}` stage is not built yet", None,
                    help="stages: " + ", ".join(c.stages))
            out.diagnostics(d.items)
            return EXIT_USER
        module = c.stages[args.stage]
    if args.variant:
        want = dict(kv.split("=", 1) for kv in args.variant.split(",") if "=" in kv)
        try:
            index = c.kernel_for({**{k: v[0] for k, v in c.spec.dtypes.items()}, **want})
        except KeyError:
            d = Diagnostics()
            d.error("E0217", f"no dtype variant {args.variant}", None,
                    help="variants: " + "; ".join(ck.variant_name for ck in c.checked))
            out.diagnostics(d.items)
            return EXIT_USER
        from .ir import Module

        wanted = c.stages["tensor"].funcs[index].name
        funcs = [f for f in module.funcs if f.name == wanted or f.name.startswith(wanted + "_k")]
        module = Module(module.name, module.level, funcs, module.attrs)
    text = str(module)
    out.say(text, end="")
    out.result(level=module.level, module=text)
    return EXIT_OK


def _library_stats(folder: str, out: _Out, bench: bool = False) -> int:
    from .api import Operator
    from .driver import compile_spec
    from .stats import NEAR_ROOFLINE, collect, render_bench_summary, render_summary

    rows, failed = [], []
    for path in _specs([folder], out):
        diags = Diagnostics()
        try:
            op = Operator(compile_spec(path, diags))
        except CompileError:
            out.diagnostics(diags.items)
            failed.append(path)
            continue
        try:
            rows.append((op, collect(op, bench=bench)))
        except CompileError as exc:  # a case of the spec is wrong: the rest of the library is still summarised
            out.diagnostics(exc.diagnostics)
            failed.append(path)
    out.say((render_bench_summary if bench else render_summary)(rows, failed), end="")
    extra = {}
    if bench:
        worst = {op.spec.op: max(ratios) for op, stats in rows
                 if (ratios := [c.roofline_ratio for s in stats for c in s.chip if c.roofline_ratio is not None])}
        extra["bench_summary"] = {"worst_ratio": worst, "near_factor": NEAR_ROOFLINE,
                                  "near": sum(r <= NEAR_ROOFLINE for r in worst.values()), "ops": len(worst),
                                  "without_bench_cases": [op.spec.op for op, stats in rows
                                                          if not any(s.chip for s in stats)]}
    out.result(specs=[{"op": op.spec.op, "spec": op.spec.path, "target": op.spec.target,
                       "stats": [stats_json(v) for v in stats]} for op, stats in rows], failed=failed, **extra)
    return EXIT_USER if failed else EXIT_OK


def cmd_explain(args, out: _Out) -> int:
    reg = code_registry()
    code = args.code.upper()
    info = reg.get(code)
    if info is None and (args.code in OPS or args.code in INDEXING):
        text = describe_op(OPS[args.code]) if args.code in OPS else describe_index_op(INDEXING[args.code])
        out.say(text)
        out.result(kind="op", name=args.code, text=text)
        return EXIT_OK
    if info is None:
        import difflib

        close = difflib.get_close_matches(code, list(reg), n=3, cutoff=0.5)
        out.error(f"no diagnostic code or op named `{args.code}`",
                  f"did you mean {', '.join(close)}?" if close else
                  "`ptodsl explain` takes a code such as E0400 or an op name such as exp")
        return EXIT_USER
    out.say(f"{info.code}: {info.title}\n\n{info.explain}")
    out.result(kind="code", code=info.code, title=info.title, explain=info.explain)
    return EXIT_OK


def cmd_schema(args, out: _Out) -> int:
    from .frontend.schema import json_schema

    schema = json_schema()
    out.say(json.dumps(schema, indent=2, sort_keys=False))  # text mode: the schema itself, for a file
    out.result(schema=schema)
    return EXIT_OK


def cmd_fmt(args, out: _Out) -> int:
    """Format .pto files (or every .pto file under a folder) in place, or with ``--check`` only say
    which would change (exit 1)."""
    from .fmt import run

    return run(args.paths, args.check, out)


def cmd_lsp(args, out: _Out) -> int:
    """Serve the Language Server Protocol on stdin/stdout until the client goes away."""
    from .lsp import serve

    return serve(out)


def cmd_run(args, out: _Out) -> int:
    """Run an op on .npy inputs; outputs go to .npy files."""
    import numpy as np

    from .api import load

    try:
        op = load(args.spec)
    except CompileError as e:
        out.diagnostics(e.diagnostics)
        return EXIT_USER
    kwargs = {}
    for item in args.args:
        name, _, value = item.partition("=")
        if not value:
            d = Diagnostics()
            d.error("E0704", f"argument `{item}` is not NAME=VALUE", None,
                    help="tensors: `x=input.npy`; scalars: `alpha=2.0`")
            out.diagnostics(d.items)
            return EXIT_USER
        if value.endswith(".npy"):
            try:
                kwargs[name] = np.load(value)
            except (OSError, ValueError) as e:
                d = Diagnostics()
                d.error("E0705", f"cannot read `{value}`: {e}", None, help="pass a .npy file written by numpy.save")
                out.diagnostics(d.items)
                return EXIT_USER
        else:
            try:
                kwargs[name] = float(value) if any(c in value for c in ".eE") else int(value)
            except ValueError:
                kwargs[name] = value
    try:
        with out.progress(1, "run") as progress:  # a first cpu run builds the C++ (seconds)
            progress.step(args.spec + (" (building the C++ kernels unless cached)" if args.backend == "cpu" else ""))
            result = op(**kwargs, backend=args.backend)
    except DiagnosticError as e:
        out.diagnostics([e.diagnostic])
        return EXIT_USER
    results = result if isinstance(result, tuple) else (result,)
    names = [p.name for p in op.outputs]
    os.makedirs(args.output, exist_ok=True)
    written = []
    for name, value in zip(names, results):
        path = os.path.join(args.output, f"{name}.npy")
        np.save(path, value)
        out.say(f"wrote {path} {list(value.shape)} {value.dtype}")
        written.append({"name": name, "path": path, "shape": list(value.shape), "dtype": str(value.dtype)})
    out.result(outputs=written)
    return EXIT_OK


def cmd_bench(args, out: _Out) -> int:
    """Kernel time vs numpy and torch, and GM traffic vs the minimum, per spec case."""
    from .bench import bench

    paths = _specs(args.paths, out)
    if not paths:
        return EXIT_USER
    rows: list[Any] = []
    # JSON mode: the table still prints as rows are measured, on stderr, and the rows go in the document
    failed = bench(paths, backend=args.backend, k=args.k, out=sys.stderr if out.json else None, rows=rows,
                   bench_cases=args.bench)
    out.result(backend=args.backend, rows=[dataclasses.asdict(r) for r in rows],
               summary={"cases": len(rows), "errors": failed})
    return EXIT_USER if failed else EXIT_OK


def cmd_tune(args, out: _Out) -> int:
    """Search a spec's tiles by the cost model; show the candidates; optionally write the best."""
    from .tune import describe, measure, render, replace_text, tune, write_tiles

    # the total grows as each stage of the search adds its candidates
    with out.progress(0, "tune: modelled") as progress:
        try:
            base, best, rows = tune(args.spec, jobs=args.jobs, ray_address=args.ray, progress=progress)
        except CompileError as e:
            progress.clear()
            out.diagnostics(e.diagnostics)
            return EXIT_USER
        except RuntimeError as e:  # --ray without ray
            progress.clear()
            out.error(str(e), "install ray, or leave out `--ray` to use a process pool on this machine")
            return EXIT_USER
    if args.measure:
        timed = [r for r in rows if r.candidate.cycles is not None]
        with out.progress(len(timed), "tune: timing on cpu") as progress:
            for r in timed:
                progress.step(describe(r.candidate.schedule))
                r.measured_s = measure(base, r.candidate.schedule)
    out.say(render(args.spec, rows), end="")
    compiled = next(r for r in rows if r.compiled)
    out.result(spec=args.spec, candidates=[tune_json(r) for r in rows], chosen=describe(best),
               compiled=describe(compiled.candidate.schedule))
    if args.write:
        with open(args.spec, encoding="utf-8") as f:
            text = f.read()
        try:
            new = write_tiles(text, args.spec, best)
        except ValueError as e:
            out.error(str(e), "write `schedule:` as a block mapping (one key per line), or edit it by hand")
            return EXIT_USER
        if new != text:
            replace_text(args.spec, new)
        print(f"wrote the chosen tiles into {args.spec}", file=sys.stderr)
    return EXIT_OK


def tune_json(r: Any) -> dict[str, Any]:
    from .tune import describe

    c = r.candidate
    return {"schedule": describe(c.schedule), "pipe_work": c.cycles, "gm_bytes": c.gm_bytes,
            "gm_ratio": c.gm_bytes / r.minimum if r.minimum and c.cycles is not None else None,
            "on_chip_bytes": c.on_chip, "cpu_seconds": r.measured_s, "problem": c.problem or None,
            "label": r.label or None, "compiled": r.compiled, "best": r.best}


def cmd_gen(args, out: _Out) -> int:
    from .gen.cli import run

    return run(args, out)


def cmd_port(args, out: _Out) -> int:
    from .port.cli import run

    return run(args, out)


def cmd_fuzz(args, out: _Out) -> int:
    """Differential random-program testing: interpreter vs simulator vs CPU backend."""
    from .fuzz.cli import main as fuzz_main

    report: dict[str, Any] = {}
    code = fuzz_main(args, report=report, stream=sys.stderr if out.json else None)
    if "error" in report:
        message, help = report.pop("error")
        out.error(message, help)
    out.result(**report)
    return code


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ptodsl", description="Compile and test ptodsl operator specs.")
    p.add_argument("--version", action="version", version=f"ptodsl {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--format", choices=("text", "json"), default="text",
                        help="json: one JSON document on stdout (docs/CLI-JSON.md); text goes to stderr")
    common.add_argument("-q", "--quiet", action="store_true", help="no progress line on stderr")
    # lsp's stdout is the protocol stream and it shows no progress: it takes only --color and --debug
    basic = argparse.ArgumentParser(add_help=False)
    for parser in (common, basic):
        parser.add_argument("--color", choices=("auto", "always", "never"), default="auto")
        parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("check", parents=[common], help="parse and type-check specs")
    s.add_argument("paths", nargs="+", metavar="PATH")
    s.add_argument("--target-rules", action="store_true",
                   help="also emit every variant's kernels and report each instruction use the target's "
                        "rules (pto-isa's dtype and layout asserts) reject (E0810)")
    s.set_defaults(fn=cmd_check)

    s = sub.add_parser("test", parents=[common], help="run the golden tests of specs")
    s.add_argument("paths", nargs="+", metavar="PATH")
    s.add_argument("--backend", choices=("sim", "cpu"), default="sim")
    s.add_argument("-k", default=None, metavar="NAME", help="only cases whose id contains NAME")
    s.add_argument("--no-poison", action="store_true", help="zero-fill instead of NaN-poisoning invalid data")
    s.set_defaults(fn=cmd_test)

    s = sub.add_parser("ir", parents=[common], help="print the IR of a spec, or resume from printed IR")
    s.add_argument("spec", nargs="?", default=None)
    s.add_argument("--from", dest="ir_file", default=None, metavar="IR_FILE",
                   help="run the passes a printed module (`ptodsl ir ... > NAME.tile.ir`) has not had yet")
    s.add_argument("--stage", choices=("tensor", "tile", "block"), default="tile")
    s.add_argument("--after", default=None, metavar="PASS", help="print the IR after this pass")
    s.add_argument("--no-verify", action="store_true",
                   help="skip the IR verifier (to look at the IR of a pass that breaks an invariant)")
    s.add_argument("--variant", default=None, metavar="T=f32", help="only this dtype variant")
    s.add_argument("--stats", action="store_true",
                   help="paths, kernels, peak on-chip bytes and GM traffic vs the minimum, per variant; "
                   "of a folder, one summary of every spec in it")
    s.add_argument("--bench", action="store_true",
                   help="with --stats: model the spec's chip-filling `bench:` cases (dry run, no data) "
                   "instead of simulating its test cases")
    s.set_defaults(fn=cmd_ir)

    s = sub.add_parser("tune", parents=[common], help="search a spec's tiles by the cost model")
    s.add_argument("spec")
    s.add_argument("--measure", action="store_true", help="also time every candidate on the cpu backend")
    s.add_argument("--write", action="store_true", help="write the chosen tiles into the YAML (comments kept)")
    s.add_argument("--jobs", type=int, default=0, help="worker processes (default: one per core)")
    s.add_argument("--ray", default=None, metavar="ADDRESS", help="evaluate on an existing Ray cluster instead")
    s.set_defaults(fn=cmd_tune)

    s = sub.add_parser("explain", parents=[common], help="explain a diagnostic code")
    s.add_argument("code")
    s.set_defaults(fn=cmd_explain)

    s = sub.add_parser("schema", parents=[common], help="print the JSON Schema of spec files")
    s.set_defaults(fn=cmd_schema)

    s = sub.add_parser("fmt", parents=[common], help="lay out .pto files (indentation, spacing); meaning kept")
    s.add_argument("paths", nargs="+", metavar="PATH", help=".pto files, or folders: every .pto file under them")
    s.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    s.set_defaults(fn=cmd_fmt)

    s = sub.add_parser("lsp", parents=[basic], help="a language server for editors, over stdin/stdout")
    s.set_defaults(fn=cmd_lsp, format="text", quiet=True)

    s = sub.add_parser("run", parents=[common], help="run an op on .npy inputs")
    s.add_argument("spec")
    s.add_argument("args", nargs="*", metavar="NAME=VALUE", help="x=input.npy, alpha=2.0")
    s.add_argument("-o", "--output", default=".", help="folder for the outputs' .npy files")
    s.add_argument("--backend", choices=("sim", "cpu"), default="sim")
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("bench", parents=[common], help="time kernels against numpy and torch")
    s.add_argument("paths", nargs="+", metavar="PATH")
    s.add_argument("--backend", choices=("sim", "cpu"), default="cpu")
    s.add_argument("-k", default=None, metavar="NAME", help="only cases whose id contains NAME")
    s.add_argument("--bench", action="store_true",
                   help="time the specs' chip-filling `bench:` cases instead of their test cases")
    s.set_defaults(fn=cmd_bench)

    s = sub.add_parser("fuzz", parents=[common], help="differential testing with random programs")
    from .fuzz.cli import add_arguments as add_fuzz_arguments

    add_fuzz_arguments(s)
    s.set_defaults(fn=cmd_fuzz)

    from .gen.cli import add_parser as add_gen_parser

    add_gen_parser(sub, common, cmd_gen)

    from .port.cli import add_parser as add_port_parser

    add_port_parser(sub, common, cmd_port)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return EXIT_USER
    out = _Out(args.format, args.color, args.command, quiet=args.quiet)
    try:
        # JSON mode: stdout holds the document alone, so whatever else prints goes to stderr
        with _stdout_to_stderr() if out.json else contextlib.nullcontext():
            code = args.fn(args, out)
    except CompileError as e:
        out.diagnostics(e.diagnostics)
        code = EXIT_USER
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        out.result(interrupted=True)
        code = 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception as e:  # noqa: BLE001 - the last line of defence: a banner, not a traceback
        print(f"internal compiler error: {e.__class__.__name__}: {e}", file=sys.stderr)
        print("this is a bug in ptodsl, not in your spec; please report it with the spec that caused it",
              file=sys.stderr)
        if args.debug:
            traceback.print_exc()
        else:
            print("rerun with --debug to see the traceback", file=sys.stderr)
        out.result(internal_error={"type": e.__class__.__name__, "message": str(e)})
        code = EXIT_INTERNAL
    try:
        out.flush(code)
    except BrokenPipeError:
        return _reader_gone()
    return code


def _reader_gone() -> int:
    """The reader of stdout went away (`ptodsl explain E0400 | head -1`): not an error of ours."""
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
