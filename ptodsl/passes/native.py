"""Which dtype an elementwise op is computed in on a target: its own, or f32 between two casts.

The target file lists, per pto-isa vector instruction, the dtypes its implementation accepts
(``vector_instructions`` in ``targets/*.yaml``). An op whose instructions all take its dtype is
computed as written. Otherwise, when they all take the dtype's accumulator (f32 for the half
floats) and TCVT converts both ways, tiling computes it there and casts the result back: bf16 on
Ascend 910B has no arithmetic, unary or compare instruction, and users expect bf16 softmax to
work. When neither holds, the variant cannot run on the target (E0608).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..dtypes import accumulator_dtype
from ..ir import TileType, Value
from ..ops import OPS, TEMPLATE_COMPARES, Template
from ..targets import Target
from .templates import scalar_slots, template_scalars

FILL = "TEXPANDS"  # a select's scalar operand is spread over a tile first
# Ops whose scalar-first form has no instruction: the scalar is spread over a tile (FILL) and the
# tile-tile instruction runs (TPOWS takes the exponent as its scalar, never the base).
LEFT_SCALAR_BY_FILL = ("pow",)
_TILE = Value("_tile", TileType("ub", "f32", (1,), (1,)))  # a tile operand, for template_scalars

# Other forms of an op, used when the target has no instruction for the op's own form in the dtype
# but has all of these: TABS is float-only on Ascend 910B, and |x| == max(x, -x) exactly.
FALLBACKS: dict[str, Template] = {"abs": ("maximum", "x", ("neg", "x"))}


def instructions(name: str, attrs: Mapping[str, Any]) -> set[str]:
    """The pto-isa instructions the tile op ``name`` (with ``attrs``) becomes, as the emitter
    chooses them; a composite's are those of its template."""
    od = OPS[name]
    if od.expand is not None:
        return _template(od.expand, frozenset(scalar_slots(od, attrs)))
    scalar = "scalar" in attrs or "scalar2" in attrs
    if od.kind == "select":
        return {od.pto, FILL} if scalar else {od.pto}
    if not scalar:
        return {od.pto} if od.pto else set()
    if attrs.get("side") == "left" and name in LEFT_SCALAR_BY_FILL:
        return {FILL, od.pto}  # the scalar spread over a tile, then the tile-tile form
    out = {od.pto_scalar} if od.pto_scalar else set()
    if attrs.get("side") == "left" and name == "sub":
        out.add(OPS["neg"].pto)  # s - x is emitted as -(x - s)
    return out


def _template(node: Template, scalars: frozenset[str] = frozenset()) -> set[str]:
    """The instructions of a template whose operand names in ``scalars`` are scalars."""
    if isinstance(node, (str, float)):
        return set()
    name, *args = node
    if name == "let":
        var, value, body = args
        return _template(value, scalars) | _template(body, scalars - {var})
    out: set[str] = set()
    for a in args:
        out |= _template(a, scalars)
    # a scalar argument stands for itself here; only its position matters
    shapes = [0.0 if isinstance(a, float) or (isinstance(a, str) and a in scalars) else _TILE for a in args]
    if name in TEMPLATE_COMPARES:
        name = "cmp"
    return out | instructions(name, template_scalars(name, shapes))


def fallback(target: Target, name: str, attrs: Mapping[str, Any], dtype: str) -> Template | None:
    """The other form of op ``name`` to lower to on ``target`` in ``dtype``, when its own form has no
    instruction there and the other has."""
    alt = FALLBACKS.get(name)
    if alt is None or all(target.computes(i, dtype) for i in instructions(name, attrs)):
        return None
    return alt if all(target.computes(i, dtype) for i in _template(alt)) else None


def compute_dtype(target: Target, name: str, attrs: Mapping[str, Any], dtype: str) -> str | None:
    """The dtype the elementwise op ``name`` on data of ``dtype`` is computed in on ``target``:
    ``dtype`` itself (maybe in the op's :data:`FALLBACKS` form), its accumulator dtype (with a
    TCVT each way), or None when neither works."""
    needed = instructions(name, attrs)
    if all(target.computes(i, dtype) for i in needed) or fallback(target, name, attrs, dtype) is not None:
        return dtype
    wide = accumulator_dtype(dtype)
    back = OPS[name].kind != "compare"  # a comparison's result is a mask, never cast back
    if (wide != dtype and all(target.computes(i, wide) for i in needed) and target.converts(wide, dtype)
            and (not back or target.converts(dtype, wide))):
        return wide
    return None


def cast_route(target: Target, to: str, src: str) -> tuple[str, ...] | None:
    """The dtypes a conversion from ``src`` to ``to`` passes through on ``target``: ``(to,)`` when
    one TCVT does it, ``(f32, to)`` through f32, None when neither does."""
    if to == src or target.converts(to, src):
        return (to,)
    if target.converts("f32", src) and target.converts(to, "f32"):
        return ("f32", to)
    return None


def unsupported_instructions(target: Target, name: str, attrs: Mapping[str, Any], dtype: str) -> list[str]:
    """The instructions of the op that do not take ``dtype`` on ``target``, sorted."""
    return sorted(i for i in instructions(name, attrs) if not target.computes(i, dtype))


__all__ = ["FALLBACKS", "LEFT_SCALAR_BY_FILL", "cast_route", "compute_dtype", "fallback", "instructions", "unsupported_instructions"]
