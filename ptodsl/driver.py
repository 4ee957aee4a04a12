"""The pipeline as an ordered list of stages: parse -> check -> Tensor IR -> passes -> Tile IR.

``compile_spec`` runs every stage and keeps each stage's IR, so any of them can be printed
(``ptodsl ir --stage``/``--after``). Stages stop at the first stage that reports an error, after that
stage has reported all it found.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .check import CheckedKernel, check
from .diagnostics import CompileError, Diagnostic, Diagnostics
from .frontend import ast
from .frontend.parser import parse_module
from .frontend.spec import Spec, load_spec
from .ir import Module
from .ir.verify import VerifyError, verify
from .passes import PIPELINE, check_pipeline, tensorize
from .passes.context import Pass, PassContext
from .targets import Target, load_target

# The passes after tensorize, in order: one list, in ptodsl.passes, that every reader shares.
PASSES: list[Pass] = PIPELINE


@dataclass
class Compiled:
    spec: Spec
    target: Target
    module: ast.Module
    checked: list[CheckedKernel]
    stages: dict[str, Module] = field(default_factory=dict)  # level -> final IR of that level
    after: dict[str, Module] = field(default_factory=dict)  # pass name -> IR after it
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    verify_seconds: float = 0.0  # time spent verifying the IR after each pass (reported by bench)

    def kernel_for(self, variant: dict[str, str]) -> int:
        for i, ck in enumerate(self.checked):
            if ck.variant == variant:
                return i
        raise KeyError(variant)


def read_text(path: str, diags: Diagnostics) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        diags.error("E0118", f"cannot read `{path}`: no such file", None,
                    help="check the path; the .pto file sits beside its YAML unless `source:` says otherwise")
    except (OSError, UnicodeDecodeError) as exc:
        diags.error("E0118", f"cannot read `{path}`: {exc.__class__.__name__}", None, help="check the file")
    return None


def compile_spec(yaml_path: str, diags: Diagnostics | None = None, verify_ir: bool = True) -> Compiled:
    """Parse, check and lower one spec; raises CompileError with every diagnostic on failure.

    ``verify_ir=False`` skips the invariant checks after each pass; only for looking at the IR of
    a pass that breaks one (``ptodsl ir --after PASS --no-verify``)."""
    diags = diags if diags is not None else Diagnostics()
    spec = load_spec(yaml_path, diags)
    text = read_text(spec.source, diags)
    module = parse_module(text, spec.source, diags) if text is not None else None
    if module is None:
        raise CompileError(diags.items)
    checked = check(module, spec, diags)
    if diags.has_errors or not checked:
        raise CompileError(diags.items)
    target = load_target(spec.target)
    ctx = PassContext(spec, target, diags)
    name = _module_name(spec, yaml_path)
    ir = tensorize.run(checked, name)
    compiled = Compiled(spec, target, module, checked, diagnostics=diags)
    compiled.stages["tensor"] = ir
    compiled.after["tensorize"] = ir
    if verify_ir:
        _verified(compiled, "tensorize", ir, None)
    try:
        check_pipeline(PASSES)  # once more here: the list may have been edited (tests do)
    except ValueError as exc:
        raise CompileError([Diagnostic("E0990", f"internal compiler error: {exc}", None, "", (), (),
                                       "this is a bug in ptodsl: please report it with the spec")]) from None
    for p in PASSES:
        ir = p.run(ir, ctx)
        if diags.has_errors:
            raise CompileError(diags.items)
        compiled.after[p.name] = ir
        compiled.stages[p.gives] = ir
        if verify_ir:
            _verified(compiled, p.name, ir, p.check)
    return compiled


def _verified(compiled: Compiled, pass_name: str, ir: Module, proof: Callable | None) -> None:
    """Every user spec gets the checks the tests run: the IR verifier after each pass and the pass's
    own proof (the sync checker after sync). A broken invariant is the compiler's bug, reported as
    one (E0990) with a command that shows the IR it broke, rather than a kernel that computes garbage."""
    start = time.perf_counter()
    span = None
    try:
        verify(ir)
        problem = None
        found = proof(ir, compiled.target) if proof is not None else []
        problem = str(found[0]) if found else None
    except VerifyError as exc:
        problem, span = str(exc), exc.span
    finally:
        compiled.verify_seconds += time.perf_counter() - start
    if problem is None:
        return
    repro = f"ptodsl ir {shlex.quote(compiled.spec.path)} --after {pass_name} --no-verify"
    diags = compiled.diagnostics
    diags.add(Diagnostic(
        "E0990", f"internal compiler error: the IR after `{pass_name}` breaks an invariant: {problem}", span,
        "the broken op was compiled from here" if span is not None else "", (), (f"repro: {repro}",),
        "this is a bug in ptodsl, not in the spec: please report it with the spec and the repro command"))
    raise CompileError(diags.items)


def pass_names() -> list[str]:
    return ["tensorize"] + [p.name for p in PASSES]


def _module_name(spec: Spec, path: str) -> str:
    return spec.op or os.path.splitext(os.path.basename(path))[0]
