"""Dims defined by other dims: ``symbols: {D: 2*H}`` (docs/LANGUAGE.md §2).

A ``symbols:`` entry whose value is an expression defines that dim as a linear combination, with
integer coefficients, of other dims (``2*H``, ``H + 64``, ``Q + K``). The checker substitutes the
definition for the dim, so ``x[:, H:2*H]`` of an ``x: f32[B, D]`` checks without fixing D; a call
binds the dims from the arguments and checks the definition holds (or, when D is given and H is
not, solves it). This module validates the definitions on their own, at their YAML key (E0865):
parse, linearity and cycles; :mod:`ptodsl.check.relations` checks them against the kernel.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import sym
from ..diagnostics import Diagnostics, Label

E_DEFINITION = "E0865"


def parse_definition(text: str) -> tuple[sym.Expr | None, str | None]:
    """The expression of a definition, or why it is none (not an expression, not linear)."""
    try:
        e = sym.parse(text)
    except (ValueError, IndexError):
        return None, f"`{text}` is not an expression over dims"
    if isinstance(e, bool) or not _integer_linear(e):
        return None, (f"`{text}` is not a linear combination of dims with integer coefficients "
                      "(sums, differences and integer multiples only)")
    if not sym.free_symbols(e):
        return None, f"`{text}` names no dim"
    return e, None


def _integer_linear(e: sym.Expr) -> bool:
    """Whether ``e`` is built of symbols and integers with +, - and integer products only (so
    ``H * W`` and ``D / 2`` are not: the first is no linear form, the second need not be whole)."""
    if isinstance(e, bool) or isinstance(e, float):
        return False
    if isinstance(e, int | sym.Sym):
        return True
    if isinstance(e, sym.NegExpr):
        return _integer_linear(e.operand)
    if isinstance(e, sym.BinExpr) and e.op in ("+", "-"):
        return _integer_linear(e.left) and _integer_linear(e.right)
    if isinstance(e, sym.BinExpr) and e.op == "*":
        return (_integer_linear(e.left) and _integer_linear(e.right)
                and (sym.is_const(e.left) or sym.is_const(e.right)))
    return False


def definitions(given: Mapping[str, str], fixed: Mapping[str, int], spans, diags: Diagnostics) -> dict[str, sym.Expr]:
    """The definitions of ``symbols:`` in terms of dims no definition defines (each dim defined by
    others substituted in, the fixed values too), in the order given; E0865 for each that cannot be
    used (``spans`` locates the YAML keys)."""
    parsed: dict[str, sym.Expr] = {}
    for name, text in given.items():
        e, problem = parse_definition(text)
        if problem is not None:
            diags.error(E_DEFINITION, f"`symbols: {{{name}: {text}}}` cannot define `{name}`: {problem}",
                        spans.at(("symbols", name)), "not a usable definition",
                        help=f"fix it as an integer, unquoted: `{name}: {text.strip()}`" if "names no dim" in problem
                        else "write a sum of dims times integers, e.g. `D: 2*H` or `S: Q + K`; a product "
                             "of dims or a division is no definition ptodsl can solve")
            continue
        parsed[name] = e
    out: dict[str, sym.Expr] = {}
    visiting: list[str] = []
    bad: set[str] = set()

    def resolve(name: str) -> sym.Expr | None:
        if name in out:
            return out[name]
        if name in bad:
            return None
        if name in visiting:
            cycle = visiting[visiting.index(name):] + [name]
            first = cycle[0]
            diags.error(E_DEFINITION, f"the definitions of {', '.join(f'`{c}`' for c in cycle[:-1])} form a "
                        f"cycle: {' -> '.join(cycle)}", spans.at(("symbols", first)), "defined through itself",
                        secondary=[Label(spans.at(("symbols", c)), f"`{c}` is defined here")
                                   for c in cycle[1:-1]],
                        help="define each dim from dims that are bound by arguments, never from itself")
            bad.update(cycle)
            return None
        visiting.append(name)
        e = parsed[name]
        env: dict[str, sym.Expr] = {}
        for free in sym.free_symbols(e):
            if free in parsed:
                sub = resolve(free)
                if sub is None:
                    bad.add(name)
                    visiting.pop()
                    return None
                env[free] = sub
            elif free in fixed:
                env[free] = fixed[free]
        visiting.pop()
        done = sym.substitute(e, env)
        if not sym.free_symbols(done):
            diags.error(E_DEFINITION, f"`{name}` is defined as `{given[name]}`, which the fixed symbols make "
                        f"the constant {done}", spans.at(("symbols", name)), "a constant",
                        help=f"fix it as an integer: `{name}: {done}`")
            bad.add(name)
            return None
        out[name] = done
        return done

    for name in parsed:
        resolve(name)
    return {k: out[k] for k in given if k in out}


__all__ = ["E_DEFINITION", "definitions", "parse_definition"]
