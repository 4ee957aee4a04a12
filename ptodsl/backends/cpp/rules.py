"""The target's instruction rules applied to emitted kernels: every pto-isa instruction use whose
dtypes or layouts the target's implementation headers reject (``vector_instructions``,
``cube_dtypes``, ``cube_stores`` and ``bias_moves`` in ``targets/*.yaml``).

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
from .kernel import LOAD, MOVE, STORE, InstructionUse

E_RULE = "E0810"
MM = OPS["matmul"]
CUBE = (MM.pto, MM.acc_pto, MM.bias_pto)
TRANSFERS = (LOAD, STORE, MOVE)  # checked by the cube's rules where they touch a cube buffer


def _pairs(pairs) -> str:
    return ", ".join("(" + ", ".join(t) + ")" for t in pairs)


def _cube_problems(use: InstructionUse, target: Target) -> list[str]:
    ops = use.operands
    if len(ops) < 3:
        return ["has fewer operands than a matmul takes"]
    # TMATMUL (c, a, b), TMATMUL_ACC (c_out, c_in, a, b), TMATMUL_BIAS (c, a, b, bias)
    c, a, b = (o.dtype for o in (ops[:3] if use.instruction == MM.bias_pto else ops[-3:]))
    out = []
    if not target.supports_matmul(c, a, b):
        out.append(f"takes no ({c}, {a}, {b}) (accumulator, left, right) dtypes: the target's cube_dtypes "
                   f"are {_pairs(target.cube_dtypes)}")
    if use.instruction == MM.bias_pto and (len(ops) < 4 or ops[3].dtype != c or ops[3].kind != "Bias"):
        out.append(f"needs a Bias tile of the accumulator's dtype {c}")
    return out


def _transfer_problems(use: InstructionUse, target: Target) -> list[str]:
    """TSTORE out of L0C converts only the (accumulator, GM) pairs of ``cube_stores``; TMOV into
    the bias table only the pairs of ``bias_moves``; other transfers keep their dtype."""
    ops = use.operands
    if use.instruction == STORE and len(ops) == 2 and ops[1].kind == "Acc":
        gm, acc = ops
        if not target.stores_from_acc(acc.dtype, gm.dtype):
            return [f"does not write a {acc.dtype} accumulator as {gm.dtype}: the target's cube_stores are "
                    f"{_pairs(target.cube_stores)}"]
    if use.instruction == MOVE and len(ops) == 2 and ops[0].kind == "Bias":
        dst, src = ops
        if not target.moves_bias(dst.dtype, src.dtype):
            return [f"does not move a {src.dtype} row into a {dst.dtype} bias table: the target's bias_moves are "
                    f"{_pairs(target.bias_moves)}"]
    return []


def _problems(use: InstructionUse, target: Target) -> list[str]:
    ops = use.operands
    if use.instruction in CUBE:
        return _cube_problems(use, target)
    if use.instruction in TRANSFERS:
        return _transfer_problems(use, target)
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
    if use.instruction in TRANSFERS:
        return "cube_stores" if use.instruction == STORE else "bias_moves"
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
