"""How a composite's template (``ptodsl.ops.Template``) binds the operands of the op it expands.

A template names the op's operands "x", "y", "z" in order. An operand the program gives as a
scalar arrives in the op's attributes, as tensorize records it: for a binary op in ``scalar``
(with ``side="left"`` when it is the first operand of an op that does not commute), for a
three-operand op or a select in ``scalar`` (the second operand) and ``scalar2`` (the third). The
template then uses the scalar where it names that operand, so ``clip(x, -1.0, 1.0)`` becomes
TMAXS and TMINS. Inside a template, an op node whose argument is a scalar gets the attributes of
its scalar form the same way (:func:`template_scalars`).
"""

from __future__ import annotations

from typing import Any

from ..ir import Value
from ..ops import OPS, OpDef

SLOTS = "xyz"


def scalar_slots(od: OpDef, attrs: dict[str, Any]) -> dict[str, Any]:
    """The template names of ``od``'s operands given as scalars, with their values."""
    if od.kind in ("ternary", "select"):
        return {slot: attrs[key] for slot, key in (("y", "scalar"), ("z", "scalar2")) if key in attrs}
    if "scalar" in attrs:
        return {"x" if attrs.get("side") == "left" and od.arity == 2 else "y": attrs["scalar"]}
    return {}


def template_names(od: OpDef, tiles: list[Value], attrs: dict[str, Any]) -> dict[str, Any]:
    """Each operand name of ``od``'s template bound to its tile or scalar."""
    scalars = scalar_slots(od, attrs)
    rest = iter(tiles)
    return {slot: scalars[slot] if slot in scalars else next(rest) for slot in SLOTS[:od.arity]}


def template_scalars(name: str, args: list[Any]) -> dict[str, Any]:
    """The scalar attributes of op node ``name`` of a template applied to ``args`` (tiles and
    scalars); ``name`` is an op of the table (``cmp`` for a comparison)."""
    od = OPS[name]
    at = [k for k, a in enumerate(args) if not isinstance(a, Value)]
    if not at:
        return {}
    if od.kind == "select":
        if 0 in at:
            raise ValueError(f"template: a `{name}` with a scalar condition")
        return {"scalar" if k == 1 else "scalar2": args[k] for k in at}
    if len(at) > 1:
        raise ValueError(f"template: `{name}` of scalars only")
    out: dict[str, Any] = {"scalar": args[at[0]]}
    if at[0] == 0 and not od.commutative:
        out["side"] = "left"
    return out


__all__ = ["SLOTS", "scalar_slots", "template_names", "template_scalars"]
