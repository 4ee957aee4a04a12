"""Mutation fuzzing of the front end with hostile specs: only diagnostics may come out.

Each mutant starts from a spec of the library (``specs/`` of a checkout, or ``--specs``) and
applies one to four random edits: tokens deleted, duplicated or swapped, lines moved or
re-indented, numbers replaced by edge values (0, -1, 2**31, 2**63, 1e309, 5000 digits), junk
characters, and hostile text: control characters and comment or string terminators in docs, test
names and file names, names that are C++ macros or pto-isa API names, paths out of the spec's
folder, YAML tags and alias bombs, deep nesting and huge strings.

Every mutant is compiled (``compile_spec``) and, when it compiles, its C++ is emitted. The outcome
is one of: *ok* (compiled), *diagnostic* (a CompileError whose diagnostics render), *internal
error* (any other exception, or more than ``CASE_SECONDS``) or *crash* (the process died). The
mutants run in a child process, so a crash is counted and the run goes on with the next one.

``run(count, seed)`` prints one summary line and returns 0 when there was no internal error and no
crash, else 1; ``python -m ptodsl.fuzz.mutate --count N --seed S [-v]`` runs it from a shell and
prints each finding with its reproducer (``--keep DIR`` also writes them as files).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

CASE_SECONDS = 30  # a hang is a finding too; a normal case takes well under a second


def default_specs() -> Path:
    """The library to mutate: ``specs/`` of the checkout ptodsl runs from, else of the working
    directory (an installed ptodsl ships no specs)."""
    checkout = Path(__file__).resolve().parents[2] / "specs"
    return checkout if checkout.is_dir() else Path.cwd() / "specs"

TOKEN = re.compile(r"\w+|[^\w\s]")
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.])")
EDGE_NUMBERS = ["0", "-1", "1", "2", "7", "33", "4096", "2147483647", "2147483648", "-2147483649",
                "9223372036854775807", "9223372036854775808", "1e309", "-1e309", "1e-400", "3.5e38",
                "65505", "0.0", "1" * 400, "9" * 5000, "0x10", "1_000", ".5", "1e"]
JUNK = [":", "[", "]", "{", "}", "-", ",", "'", '"', "#", "&a", "*a", "!!str", "\t", "    ", "if", "for",
        "(", ")", "\\", "%", "\x00", "\ufeff", "\u2028", "é", "\U0001f600"]
# Text that ends a C++ comment or string, a Python docstring or a line, or injects code after it.
HOSTILE_TEXT = ["\r#include <cstdlib>\nstatic int x = std::system(\"false\");\n//", '"""; import os #', 'a"',
                "\\", "*/", "??/", "\n", "\r", "\x0b", "\x0c", "\x1b[2J", "\u2028", "\x85", "{{ x }}", "%n%s",
                "'''", "\\x00", "$(false)", "`false`", "<script>", "x" * 20000]
HOSTILE_NAMES = ["NAN", "INFINITY", "M_PI", "HUGE_VAL", "EVENT_ID0", "PIPE_V", "TASSIGN", "Tile", "set_flag",
                 "EOF", "stdin", "errno", "assert", "std", "pto", "main", "DYNAMIC", "half", "np", "torch",
                 "PackagedOp", "_PTODSL_OP", "self", "None", "print", "class", "__init__", "_X", "x-y", "1x", ""]
HOSTILE_PATHS = ["../outside.pto", "/etc/passwd.pto", "..\\x.pto", "sub/../../x.pto", "x\r.pto", "x\n.pto",
                 "../refs.py:add_one", "/tmp/x.py:f", "refs.py:__import__", "refs.py:../f", "a\x00b.py:f"]
YAML_ATTACKS = ["!!python/object/apply:os.system ['false']", "!!python/name:os.system", "&a [*a]",
                "[" * 300 + "]" * 300, "{" * 300 + "}" * 300, "? [a, b]\n: c", "<<: {op: x}", "!!binary aGk=",
                "'" + "a" * 200000 + "'", "\"\\ud800\"", "\"\\x00\"", "'a\r\nb'", "|\n  multi\r\n  line"]
YAML_KEYS = ["doc", "source", "reference", "op", "name", "target"]


@dataclass(frozen=True)
class Case:
    name: str
    pto: str
    yaml: str


def sources(specs: Path | None = None) -> list[Case]:
    out = []
    for spec in sorted((specs or default_specs()).glob("*.yaml")):
        pto = spec.with_suffix(".pto")
        if pto.exists():
            out.append(Case(spec.stem, pto.read_text("utf-8"), spec.read_text("utf-8")))
    return out


# ------------------------------------------------------------------ mutations


def _tokens(rng: random.Random, text: str) -> str:
    toks = list(TOKEN.finditer(text))
    if not toks:
        return text
    t = rng.choice(toks)
    action = rng.randrange(3)
    if action == 0:
        return text[:t.start()] + text[t.end():]
    if action == 1:
        return text[:t.end()] + " " + t.group() + text[t.end():]
    return text[:t.start()] + rng.choice(toks).group() + text[t.end():]


def _lines(rng: random.Random, text: str) -> str:
    lines = text.splitlines()
    if len(lines) < 2:
        return text
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    action = rng.randrange(4)
    if action == 0:
        lines[i], lines[j] = lines[j], lines[i]
    elif action == 1:
        del lines[i]
    elif action == 2:
        lines.insert(j, lines[i])
    else:
        lines[i] = " " * rng.choice([0, 2, 4, 8, 12]) + lines[i].lstrip()
    return "\n".join(lines) + "\n"


def _numbers(rng: random.Random, text: str) -> str:
    nums = list(NUMBER.finditer(text))
    if not nums:
        return text
    n = rng.choice(nums)
    return text[:n.start()] + rng.choice(EDGE_NUMBERS) + text[n.end():]


def _junk(rng: random.Random, text: str) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + rng.choice(JUNK) + text[at:]


def _rename(rng: random.Random, text: str) -> str:
    """Every occurrence of one name of the file becomes a hostile name (so the program stays valid)."""
    names = sorted({m.group() for m in re.finditer(r"\b[A-Za-z_]\w*\b", text)})
    if not names:
        return text
    old, new = rng.choice(names), rng.choice(HOSTILE_NAMES)
    return re.sub(rf"\b{re.escape(old)}\b", new, text)


def _pto_string(rng: random.Random, text: str) -> str:
    """A print statement with a hostile string, or a hostile string in place of an existing one."""
    body = json.dumps(rng.choice(HOSTILE_TEXT), ensure_ascii=rng.random() < 0.5)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("    ") and line.strip() and rng.random() < 0.5:
            lines.insert(i, f"    print({body})")
            break
    return "\n".join(lines) + "\n"


def _yaml_value(rng: random.Random, text: str) -> str:
    """One top-level key set to a hostile value (quoted as YAML would, or raw)."""
    key = rng.choice(YAML_KEYS)
    pool = HOSTILE_PATHS if key in ("source", "reference") and rng.random() < 0.7 else HOSTILE_TEXT + HOSTILE_NAMES
    value = rng.choice(pool)
    written = json.dumps(value) if rng.random() < 0.7 else value
    kept = [line for line in text.splitlines() if not line.startswith(f"{key}:")]
    return "\n".join([f"{key}: {written}", *kept]) + "\n"


def _test_name(rng: random.Random, text: str) -> str:
    value = json.dumps(rng.choice(HOSTILE_TEXT))
    return text.replace("tests:\n", f"tests:\n  - {{shapes: {{}}, name: {value}}}\n", 1)


def _yaml_attack(rng: random.Random, text: str) -> str:
    key = rng.choice(YAML_KEYS + ["schedule", "tests", "symbols", "dtypes"])
    kept = [line for line in text.splitlines() if not line.startswith(f"{key}:")]
    return "\n".join(kept + [f"{key}: {rng.choice(YAML_ATTACKS)}"]) + "\n"


def _default(rng: random.Random, text: str) -> str:
    """A scalar parameter with an edge default added to the kernel's signature."""
    dtype = rng.choice(["f32", "f16", "bf16", "i32", "i8", "u8", "i64", "bool"])
    value = rng.choice(EDGE_NUMBERS + ["-" + rng.choice(EDGE_NUMBERS), "True", "-True", "\"s\""])
    return re.sub(r"\)\s*:\s*\n", f", zz: {dtype} = {value}):\n", text, count=1)


PTO_MUTATIONS: list[Callable[[random.Random, str], str]] = [_tokens, _lines, _numbers, _numbers, _junk, _rename,
                                                             _pto_string, _default]
YAML_MUTATIONS: list[Callable[[random.Random, str], str]] = [_tokens, _lines, _numbers, _junk, _yaml_value,
                                                              _yaml_value, _test_name, _yaml_attack]


def mutate(rng: random.Random, case: Case) -> Case:
    pto, yml = case.pto, case.yaml
    for _ in range(rng.randrange(1, 5)):
        if rng.random() < 0.5:
            pto = rng.choice(PTO_MUTATIONS)(rng, pto)
        else:
            yml = rng.choice(YAML_MUTATIONS)(rng, yml)
    return Case(case.name, pto, yml)


def mutants(count: int, seed: int, specs: Path | None = None, start: int = 0) -> Iterator[tuple[int, Case]]:
    """The mutants ``start`` .. ``count - 1`` of a seed; each depends only on (seed, index)."""
    base = sources(specs)
    if not base:
        raise SystemExit(f"no specs (NAME.yaml beside NAME.pto) in {specs or default_specs()}")
    for i in range(start, count):
        rng = random.Random(f"{seed}:{i}")
        yield i, mutate(rng, rng.choice(base))


# ------------------------------------------------------------------ running one case


def run_case(case: Case, folder: Path) -> tuple[str, str]:
    """(outcome, detail) of one mutant: ok | diagnostic | internal."""
    from ..backends.cpp.emit import emit_variant
    from ..diagnostics import CompileError, Diagnostics
    from ..diagnostics.render import render_all
    from ..driver import compile_spec
    from .run import time_limit

    name = re.sub(r"\W", "_", case.name)
    (folder / f"{name}.pto").write_text(case.pto, encoding="utf-8", errors="surrogatepass")
    yml = case.yaml if "source:" in case.yaml else f"source: {name}.pto\n" + case.yaml
    path = folder / f"{name}.yaml"
    path.write_text(yml, encoding="utf-8", errors="surrogatepass")
    diags = Diagnostics()
    try:
        with time_limit(CASE_SECONDS):  # a hang is a finding: it ends as Hang, counted internal
            try:
                compiled = compile_spec(str(path), diags)
                for index in range(len(compiled.checked)):
                    emit_variant(compiled, index)
            except CompileError as exc:
                if not any(d.is_error for d in exc.diagnostics):
                    return "internal", "CompileError without an error"
                render_all(exc.diagnostics, color=False)
                return "diagnostic", exc.diagnostics[0].code if exc.diagnostics else ""
            render_all(diags.items, color=False)
            return "ok", ""
    except Exception as exc:  # noqa: BLE001 - any other exception is the finding
        return "internal", "".join(traceback.format_exception(exc)[-3:])


def worker(count: int, seed: int, start: int, specs: Path) -> None:
    """Child process: one JSON line per mutant on stdout, flushed before the next one starts."""
    # Lets the tests check that a dying worker is counted as a crash and the run resumes after it.
    crash_at = int(os.environ.get("PTODSL_FUZZ_TEST_CRASH_AT", "-1"))
    with tempfile.TemporaryDirectory(prefix="ptodsl-mutate-") as tmp:
        for i, case in mutants(count, seed, specs, start):
            print(json.dumps({"i": i, "start": True}), flush=True)
            if i == crash_at:
                os.abort()
            outcome, detail = run_case(case, Path(tmp))
            print(json.dumps({"i": i, "outcome": outcome, "detail": detail}), flush=True)


# ------------------------------------------------------------------ the driver


def run(count: int, seed: int, specs: Path | None = None, verbose: bool = False, keep: Path | None = None) -> int:
    """Compile ``count`` mutants of ``seed``; print a summary line; 0 when nothing but diagnostics came out."""
    specs = specs or default_specs()
    tally = {"ok": 0, "diagnostic": 0, "internal": 0, "crash": 0}
    findings: list[tuple[int, str, str]] = []
    start = 0
    while start < count:
        cmd = [sys.executable, "-m", "ptodsl.fuzz.mutate", "--worker", "--count", str(count), "--seed", str(seed),
               "--start", str(start), "--specs", str(specs)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                                       os.environ.get("PYTHONPATH")) if p))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        current = None
        for line in proc.stdout:
            msg = json.loads(line)
            if msg.get("start"):
                current = msg["i"]
                continue
            tally[msg["outcome"]] += 1
            if msg["outcome"] == "internal":
                findings.append((msg["i"], "internal", msg["detail"]))
            current = None
            start = msg["i"] + 1
        code = proc.wait()
        if current is not None:  # the child died inside a case
            tally["crash"] += 1
            findings.append((current, "crash", f"the process ended with status {code}"))
            start = current + 1
        elif code != 0 and start < count:
            raise RuntimeError(f"the fuzz worker failed with status {code} before mutant {start}")
    print(f"mutate: {count} mutated specs (seed {seed}): {tally['diagnostic']} clean diagnostics, "
          f"{tally['ok']} compiled, {tally['internal']} internal errors, {tally['crash']} crashes")
    by_index = dict(mutants(count, seed, specs)) if findings and (verbose or keep) else {}
    for i, kind, detail in findings[:20]:
        print(f"--- mutant {i} ({kind}):\n{detail}")
        if verbose and i in by_index:
            print(f".pto:\n{by_index[i].pto!r}\n.yaml:\n{by_index[i].yaml!r}")
        if keep is not None and i in by_index:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"m{i}.pto").write_text(by_index[i].pto, "utf-8", errors="surrogatepass")
            (keep / f"m{i}.yaml").write_text(by_index[i].yaml, "utf-8", errors="surrogatepass")
    return 1 if tally["internal"] or tally["crash"] else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ptodsl.fuzz.mutate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--specs", type=Path, default=None, help="folder of specs to mutate (default: specs/)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each finding's spec")
    parser.add_argument("--keep", type=Path, help="write the specs of the findings into this folder")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.count, args.seed, args.start, args.specs)
        return 0
    return run(args.count, args.seed, args.specs, args.verbose, args.keep)


if __name__ == "__main__":
    sys.exit(main())
