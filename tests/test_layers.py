"""Imports flow one way through the pipeline: a module imports only its own stage and earlier ones.

The stages, in order: the shared leaves (symbolic expressions, dtypes, the op table, diagnostics,
targets), ``frontend``, ``check``, ``ir``, ``passes``, ``driver`` (which runs them), ``backends``,
``runtime`` (calling a compiled program: what generated packages carry), ``api``/``golden`` (the
compiler's side of a call), ``gen``, and the tools on top (cli, the pytest plugin, bench,
stats, fuzz). The test reads every ``from .x import`` of the package, lazy ones included."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ptodsl"

STAGES = [
    {"sym", "shapes", "dtypes", "ops", "diagnostics", "targets", "escape", "cxx_names", "yamlio", "schedule", "progress",
     "staging",
     "cases", "__version__"},
    {"frontend"},
    {"check"},
    {"ir"},
    {"passes"},
    {"cost"},
    {"driver"},
    {"backends"},
    {"runtime", "inputs"},
    {"api", "golden"},
    {"gen"},
    {"cli", "testing", "bench", "stats", "fuzz", "tune", "fmt", "lsp", "port", "__main__", ""},
]
RANK = {name: i for i, names in enumerate(STAGES) for name in names}


def stage_of(module: str) -> int:
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else ""
    assert head in RANK, f"ptodsl.{head} belongs to no stage: add it to STAGES"
    return RANK[head]


def imports() -> list[tuple[str, str, int]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(rel.parts)
        package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        module = module.removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                if node.module:
                    targets = [".".join(base + [node.module])]
                else:
                    targets = [".".join(base + [a.name]) for a in node.names]
                out.extend((module, t, node.lineno) for t in targets)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ptodsl"):
                out.append((module, node.module, node.lineno))
    return out


def test_no_module_imports_a_later_stage():
    bad = [f"{m} (line {line}) imports {t}" for m, t, line in imports()
           if stage_of(t) > stage_of(m)]
    assert not bad, "imports against the pipeline:\n" + "\n".join(bad)


def test_the_rule_sees_imports():
    found = {(m, t) for m, t, _ in imports()}
    assert ("ptodsl.passes.tile", "ptodsl.ir") in found
    assert stage_of("ptodsl.passes.tile") > stage_of("ptodsl.check.types")


def test_passes_take_the_schedule_from_the_ir_not_the_spec():
    """So that compilation can resume from a printed module (``ptodsl ir --from``)."""
    bad = [f"{m} (line {line})" for m, t, line in imports()
           if m.startswith("ptodsl.passes") and t.startswith("ptodsl.frontend.spec")]
    assert not bad, "passes that read the spec: " + ", ".join(bad)


def test_the_runtime_reaches_no_compiler_stage():
    """What a generated package carries (gen/vendor.py) is found from the runtime's imports; it
    must stop short of the front end, the checker, the passes and the emitters."""
    from ptodsl.gen.vendor import FORBIDDEN, closure

    files = closure()
    assert "runtime/package.py" in files and "backends/sim/__init__.py" in files and "ir/parser.py" in files
    assert not [f for f in files if f.split("/")[0] in FORBIDDEN]
    assert not [f for f in files if f.startswith(("backends/cpp/emit", "backends/cpp/kernel", "cost/dryrun"))]


def test_nothing_imports_the_port_tool():
    """``ptodsl port`` is a tool on top: the command line registers it, nothing else reaches it."""
    found = [(m, t) for m, t, _ in imports() if t.startswith("ptodsl.port")]
    assert ("ptodsl.cli", "ptodsl.port.cli") in found
    bad = [f"{m} imports {t}" for m, t in found if not m.startswith("ptodsl.port") and m != "ptodsl.cli"]
    assert not bad, "modules that import the port tool: " + ", ".join(bad)
