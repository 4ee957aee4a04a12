"""The ``ptodsl`` command line.

User errors print diagnostics and exit 1; they never show a traceback. An internal error prints a
short banner (exit 2) and its traceback only with ``--debug``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence

from . import __version__
from .diagnostics import CompileError, Diagnostic, DiagnosticError, Diagnostics, code_registry
from .diagnostics.render import render_all, render_json, use_color
from .ops import OPS, describe_op

EXIT_OK, EXIT_USER, EXIT_INTERNAL = 0, 1, 2


class _Out:
    """Where diagnostics go, in the format the user asked for."""

    def __init__(self, fmt: str, color: str):
        self.fmt = fmt
        self.color = use_color(sys.stderr) if color == "auto" else color == "always"
        self.collected: list[Diagnostic] = []

    def diagnostics(self, diags: Sequence[Diagnostic]) -> None:
        if self.fmt == "json":
            self.collected.extend(diags)
        elif diags:
            sys.stderr.write(render_all(diags, color=self.color))

    def flush(self) -> None:
        if self.fmt == "json":
            sys.stdout.write(render_json(self.collected))


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
    failed = len(args.paths) - sum(os.path.exists(p) for p in args.paths)
    variants = 0
    for path in paths:
        diags = Diagnostics()
        try:
            c = compile_spec(path, diags)
            variants += len(c.checked)
        except CompileError:
            failed += 1
        out.diagnostics(diags.items)
    if args.format != "json":
        ok = len(paths) - (failed - (len(args.paths) - sum(os.path.exists(p) for p in args.paths)))
        print(f"checked {len(paths)} spec{'s' if len(paths) != 1 else ''} ({variants} kernel variants): "
              f"{ok} ok, {len(paths) - ok} with errors", file=sys.stderr)
    return EXIT_USER if failed or not paths else EXIT_OK


def cmd_test(args, out: _Out) -> int:
    from .backends.sim import SimError
    from .golden import case_id, load, run_case

    paths = _specs(args.paths, out)
    passed = failed = 0
    start = time.perf_counter()
    failures: list[tuple[str, str]] = []
    from .frontend.spec import load_spec

    for path in paths:
        try:
            # the spec alone names the cases: skip compiling specs that -k filters out entirely
            if args.k and not any(args.k in case_id(spec, c) for spec in [load_spec(path)] for c in spec.tests):
                continue
            op = load(path)
        except CompileError as e:
            out.diagnostics(e.diagnostics)
            failed += 1
            failures.append((path, "does not compile"))
            continue
        for case in op.spec.tests:
            cid = case_id(op.spec, case, None)
            if args.k and args.k not in cid:
                continue
            t0 = time.perf_counter()
            try:
                r = run_case(op, case, backend=args.backend, poison=not args.no_poison)
                ok, report = r.ok, r.report
            except DiagnosticError as e:  # inputs refused, a guard or a kernel check stopped the call
                ok, report = False, str(e)
            except SimError as e:
                ok, report = False, f"simulator: {e}"
            except CompileError as e:  # a mistake in the case or its reference
                out.diagnostics(e.diagnostics)
                ok, report = False, "the case or its reference is wrong (see above)"
            dt = time.perf_counter() - t0
            mark = "PASS" if ok else "FAIL"
            print(f"{mark} {cid} ({dt * 1000:.0f} ms)")
            if ok:
                passed += 1
            else:
                failed += 1
                failures.append((cid, report))
    for cid, report in failures:
        print(f"\n--- {cid}\n{report}")
    total = time.perf_counter() - start
    print(f"\n{passed} passed, {failed} failed in {total:.2f}s")
    return EXIT_USER if failed or not paths else EXIT_OK


def cmd_ir(args, out: _Out) -> int:
    from .driver import compile_spec, lower_ir, pass_names

    diags = Diagnostics()
    if (args.spec is None) == (args.ir_file is None):
        print("error: give either a spec (`ptodsl ir NAME.yaml`) or printed IR (`ptodsl ir --from NAME.tile.ir`)",
              file=sys.stderr)
        return EXIT_USER
    if args.ir_file is not None and (args.stats or args.variant):
        print("error: `--stats` and `--variant` read the spec: run them on the spec the IR came from",
              file=sys.stderr)
        return EXIT_USER
    if args.spec is not None and os.path.isdir(args.spec):
        if not args.stats:
            print("error: a folder of specs takes `--stats` (a summary of the library); print the IR of one spec",
                  file=sys.stderr)
            return EXIT_USER
        return _library_stats(args.spec, out)
    try:
        if args.ir_file is not None:
            c = lower_ir(args.ir_file, diags, verify_ir=not args.no_verify)
        else:
            c = compile_spec(args.spec, diags, verify_ir=not args.no_verify)
    except CompileError:
        out.diagnostics(diags.items)
        return EXIT_USER
    out.diagnostics(diags.items)
    if args.stats:
        from .api import Operator
        from .stats import collect, render

        op = Operator(c)
        sys.stdout.write(render(op, collect(op)))
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
    sys.stdout.write(str(module))
    return EXIT_OK


def _library_stats(folder: str, out: _Out) -> int:
    from .api import Operator
    from .driver import compile_spec
    from .stats import collect, render_summary

    rows, failed = [], []
    for path in _specs([folder], out):
        diags = Diagnostics()
        try:
            op = Operator(compile_spec(path, diags))
        except CompileError:
            out.diagnostics(diags.items)
            failed.append(path)
            continue
        rows.append((op, collect(op)))
    sys.stdout.write(render_summary(rows, failed))
    return EXIT_USER if failed else EXIT_OK


def cmd_explain(args, out: _Out) -> int:
    reg = code_registry()
    code = args.code.upper()
    info = reg.get(code)
    if info is None and args.code in OPS:
        print(describe_op(OPS[args.code]))
        return EXIT_OK
    if info is None:
        import difflib

        close = difflib.get_close_matches(code, list(reg), n=3, cutoff=0.5)
        print(f"error: no diagnostic code `{args.code}`" + (f"; did you mean {', '.join(close)}?" if close else ""),
              file=sys.stderr)
        return EXIT_USER
    print(f"{info.code}: {info.title}\n\n{info.explain}")
    return EXIT_OK


def cmd_schema(args, out: _Out) -> int:
    from .frontend.schema import json_schema

    print(json.dumps(json_schema(), indent=2, sort_keys=False))
    return EXIT_OK


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
        result = op(**kwargs, backend=args.backend)
    except DiagnosticError as e:
        out.diagnostics([e.diagnostic])
        return EXIT_USER
    results = result if isinstance(result, tuple) else (result,)
    names = [p.name for p in op.outputs]
    os.makedirs(args.output, exist_ok=True)
    for name, value in zip(names, results):
        path = os.path.join(args.output, f"{name}.npy")
        np.save(path, value)
        print(f"wrote {path} {list(value.shape)} {value.dtype}")
    return EXIT_OK


def cmd_bench(args, out: _Out) -> int:
    """Kernel time vs numpy and torch, and GM traffic vs the minimum, per spec case."""
    from .bench import bench

    paths = _specs(args.paths, out)
    if not paths:
        return EXIT_USER
    failed = bench(paths, backend=args.backend, k=args.k)
    return EXIT_USER if failed else EXIT_OK


def cmd_gen(args, out: _Out) -> int:
    from .gen.cli import run

    return run(args, out)


def cmd_fuzz(args, out: _Out) -> int:
    """Differential random-program testing: interpreter vs simulator vs CPU backend."""
    from .fuzz.cli import main as fuzz_main

    return fuzz_main(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ptodsl", description="Compile and test ptodsl operator specs.")
    p.add_argument("--version", action="version", version=f"ptodsl {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--format", choices=("text", "json"), default="text", help="diagnostics format")
    common.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    common.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("check", parents=[common], help="parse and type-check specs")
    s.add_argument("paths", nargs="+", metavar="PATH")
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
    s.set_defaults(fn=cmd_ir)

    s = sub.add_parser("explain", parents=[common], help="explain a diagnostic code")
    s.add_argument("code")
    s.set_defaults(fn=cmd_explain)

    s = sub.add_parser("schema", parents=[common], help="print the JSON Schema of spec files")
    s.set_defaults(fn=cmd_schema)

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
    s.set_defaults(fn=cmd_bench)

    s = sub.add_parser("fuzz", parents=[common], help="differential testing with random programs")
    from .fuzz.cli import add_arguments as add_fuzz_arguments

    add_fuzz_arguments(s)
    s.set_defaults(fn=cmd_fuzz)

    from .gen.cli import add_parser as add_gen_parser

    add_gen_parser(sub, common, cmd_gen)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return EXIT_USER
    out = _Out(args.format, args.color)
    try:
        code = args.fn(args, out)
    except CompileError as e:
        out.diagnostics(e.diagnostics)
        code = EXIT_USER
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`ptodsl explain E0400 | head -1`): not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet
        return EXIT_OK
    except Exception as e:  # noqa: BLE001 - the last line of defence: a banner, not a traceback
        print(f"internal compiler error: {e.__class__.__name__}: {e}", file=sys.stderr)
        print("this is a bug in ptodsl, not in your spec; please report it with the spec that caused it",
              file=sys.stderr)
        if args.debug:
            traceback.print_exc()
        else:
            print("rerun with --debug to see the traceback", file=sys.stderr)
        return EXIT_INTERNAL
    out.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
