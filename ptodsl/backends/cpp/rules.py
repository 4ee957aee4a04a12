"""The target's instruction rules applied to emitted kernels: every pto-isa instruction use whose
dtypes or layouts the target's implementation headers reject (``vector_instructions`` and
``cube_dtypes`` in ``targets/*.yaml``).

The CPU build cannot show these: the project's CPU header implements every instruction for every
dtype, so a kernel that passes all its golden tests on the CPU can still fail to compile for the
NPU. ``ptodsl check --target-rules`` runs this over every variant of every spec.
"""

from __future__ import annotations

from ...diagnostics import CompileError, Diagnostic
from ...driver import Compiled
from ...ops import OPS
from ...targets import Target
from .emit import EmittedVariant, emit_variant
from .kernel import MOVE, InstructionUse

E_RULE = "E0810"
CUBE = (OPS["matmul"].pto, OPS["matmul"].acc_pto)
MOVES = (MOVE,)  # cube data movement between L1 and L0; no vector rule applies


def _problems(use: InstructionUse, target: Target) -> list[str]:
    ops = use.operands
    if use.instruction in CUBE:
        c, a, b = (o.dtype for o in ops[-3:]) if len(ops) >= 3 else ("?", "?", "?")
        if not target.supports_matmul(c, a, b):
            return [f"takes no ({c}, {a}, {b}) (accumulator, left, right) dtypes: the target's cube_dtypes "
                    f"are {', '.join('(' + ', '.join(t) + ')' for t in target.cube_dtypes)}"]
        return []
    if use.instruction in MOVES:
        return []
    rule = target.vector_rule(use.instruction)
    if rule is None:
        return [f"has no rule in the target file (`vector_instructions` lists no {use.instruction})"]
    out = []
    if rule.casts is not None:
        to, src = ops[0].dtype, ops[1].dtype
        if not rule.converts(to, src):
            out.append(f"does not convert {src} to {to}")
    else:
        bad = sorted({o.dtype for o in ops if o.dtype != "bool" and not rule.takes(o.dtype)})
        if bad:
            out.append(f"does not take {', '.join(bad)} (takes {', '.join(sorted(rule.dtypes or ()))})")
    for k, o in enumerate(ops):
        allowed = rule.layouts_of(k)
        if allowed is not None and o.layout not in allowed:
            out.append(f"operand {k} is {o.layout}, but the header asserts {' or '.join(allowed)}")
    return out


def _where(use: InstructionUse, target: Target) -> str:
    rule = target.vector_rule(use.instruction)
    if use.instruction in CUBE:
        return "cube_dtypes"
    return f"pto-isa {rule.header}" if rule is not None else "no rule"


def variant_violations(emitted: EmittedVariant, target: Target) -> list[Diagnostic]:
    """One error per distinct rejected instruction use of one emitted variant."""
    out: list[Diagnostic] = []
    seen: set[tuple] = set()
    for kernel, uses in emitted.uses.items():
        for use in uses:
            problems = _problems(use, target)
            key = (use.instruction, use.operands, use.span, tuple(problems))
            if not problems or key in seen:
                continue
            seen.add(key)
            dtypes = ", ".join(f"{o.dtype} {o.layout}" for o in use.operands)
            out.append(Diagnostic(
                E_RULE, f"`{use.instruction}` ({dtypes}) is rejected by target `{target.name}`", use.span,
                f"{use.instruction} {problems[0]}", (),
                (*[f"{use.instruction} {p}" for p in problems[1:]],
                 f"in kernel `{kernel}` of variant {emitted.variant or '(single)'}; rule from {_where(use, target)}"),
                "the emitted kernel would not compile for this target's NPU; please report it with the spec"))
    return out


def spec_violations(compiled: Compiled, target: Target | None = None) -> list[Diagnostic]:
    """Every rejected instruction use of every variant of a compiled spec (on its own target
    unless ``target`` is given); what the emitter cannot express is reported as it is (E0800)."""
    target = target or compiled.target
    out: list[Diagnostic] = []
    for index in range(len(compiled.checked)):
        try:
            emitted = emit_variant(compiled, index)
        except CompileError as exc:
            out.extend(exc.diagnostics)
            continue
        out.extend(variant_violations(emitted, target))
    return out


__all__ = ["E_RULE", "spec_violations", "variant_violations"]
