"""How much of PyPTO's examples `ptodsl port` translates, and how much of that passes its tests.

    python benchmarks/port_examples.py PYPTO_CHECKOUT [--backends sim,cpu] [--keep DIR] [--only TEXT]

Ports every ``@pypto.frontend.jit`` kernel under ``PYPTO_CHECKOUT/examples``, checks each one
that translated with no diagnostic, and runs its golden cases with the numpy reference written
for it in ``tests/port/example_refs.py`` (from the example's own golden function; a kernel with
no reference there is counted as such), with the entries its ``CASES`` adds to the cases.
Prints the counts and one line per reason a kernel does not pass, with how many kernels it
stops. Re-run it when the language grows: a kernel that now
translates and has a reference is counted without any change here. Nothing of the checkout is
copied into this repository.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "port"))

import example_refs  # noqa: E402  (tests/port: the references and their case entries)

from ptodsl.port import port_source  # noqa: E402
from ptodsl.port.emit import write_all  # noqa: E402

REFS = ROOT / "tests" / "port" / "example_refs.py"


def ref_name(py: Path, kernel: str) -> str:
    return f"{py.stem}__{kernel}"


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def cli(*args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "ptodsl", *args, "--format", "json", "-q"], capture_output=True,
                       text=True, env=env, cwd=ROOT, check=False)
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"exit_code": r.returncode, "diagnostics": [], "internal": r.stderr[-400:]}


def reason_of(doc: dict, what: str) -> str:
    for d in doc.get("diagnostics", []):
        if d["severity"] == "error":
            return f"{what}: {d['code']} {re.sub(r'`[^`]*`', '`...`', d['message'])}"
    for c in doc.get("cases", []):
        if c["status"] != "pass":
            return f"{what}: {c['status']} ({first_line(c.get('error') or '')[:80]})"
    return f"{what}: exit {doc.get('exit_code')}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", help="a checkout of PyPTO (its examples/ folder is read)")
    ap.add_argument("--backends", default="sim,cpu")
    ap.add_argument("--keep", default=None, metavar="DIR", help="write the ported specs here (default: a temp dir)")
    ap.add_argument("--only", default=None, metavar="TEXT",
                    help="only the example files whose path under examples/ contains TEXT (to iterate on one)")
    args = ap.parse_args(argv)
    examples = Path(args.checkout) / "examples"
    if not examples.is_dir():
        print(f"no examples/ folder in {args.checkout}", file=sys.stderr)
        return 2
    refs_text = REFS.read_text(encoding="utf-8")
    have_refs = set(re.findall(r"^def (\w+)\(", refs_text, re.M))
    out_root = Path(args.keep or tempfile.mkdtemp(prefix="port-examples-"))
    backends = [b for b in args.backends.split(",") if b]
    files = sorted(p for p in examples.rglob("*.py") if args.only is None or args.only in str(p.relative_to(examples)))
    counts = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    rows = []
    for py in files:
        counts["files"] += 1
        result = port_source(py.read_text(encoding="utf-8"), str(py))
        if not result.attempts:
            continue
        kernels = {k.py_name: k for k in result.kernels}
        for fn, line, diags in result.attempts:
            counts["kernels"] += 1
            key = f"{py.relative_to(examples)}:{line} {fn}"
            errs = [d for d in diags if d.is_error]
            if errs:
                d = errs[0]
                # an op's name says what the language lacks; other names are the example's own
                msg = d.message if d.code == "E1002" else re.sub(r"`[^`]*`", "`...`", d.message)
                reasons[f"port: {d.code} {msg}"] += 1
                rows.append((key, "not translated", f"{d.code} {d.message}"))
                continue
            counts["translated"] += 1
            k = kernels[fn]
            folder = out_root / py.stem / k.name
            single = type(result)(result.source, result.text, [k], result.diags, [])
            write_all(single, str(folder), keep_refs=False)
            chk = cli("check", str(folder / f"{k.name}.yaml"))
            if chk.get("exit_code") != 0:
                reasons[reason_of(chk, "check")] += 1
                rows.append((key, "check fails", reason_of(chk, "check")))
                continue
            counts["checked"] += 1
            rname = ref_name(py, fn)
            if rname not in have_refs:
                reasons["no reference written in tests/port/example_refs.py"] += 1
                rows.append((key, "no reference", rname))
                continue
            (folder / "example_refs.py").write_text(refs_text, encoding="utf-8")
            yml = folder / f"{k.name}.yaml"
            text = re.sub(r"^reference: .*$", f"reference: example_refs.py:{rname}",
                          yml.read_text(encoding="utf-8"), flags=re.M)
            extra = "".join(f"{key}: {json.dumps(v)}, " for key, v in example_refs.CASES.get(rname, {}).items())
            yml.write_text(re.sub(r"^  - \{", "  - {" + extra, text, flags=re.M) if extra else text, encoding="utf-8")
            bad = None
            for b in backends:
                doc = cli("test", str(yml), "--backend", b)
                if doc.get("exit_code") != 0:
                    bad = reason_of(doc, f"test --backend {b}")
                    break
            if bad:
                reasons[bad] += 1
                rows.append((key, "tests fail", bad))
                continue
            counts["passing"] += 1
            rows.append((key, "passes", ", ".join(backends)))
    for key, status, detail in rows:
        print(f"{status:15} {key}  {detail}")
    print()
    print(f"files {counts['files']}, kernels {counts['kernels']}, translated {counts['translated']}, "
          f"checked {counts['checked']}, passing ({'+'.join(backends)}) {counts['passing']}")
    for why, n in sorted(reasons.items(), key=lambda x: (-x[1], x[0])):
        print(f"  {n:3}  {why}")
    print(f"specs in {out_root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
