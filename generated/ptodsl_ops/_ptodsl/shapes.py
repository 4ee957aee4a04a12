"""Reshapes and permutations over symbolic dims.

A reshape keeps the elements in row-major order. :func:`reshape_groups` pairs the dims of the
source with those of the result: each group is a run of source dims whose element count equals a
run of result dims (``[B, S, H * D] -> [B, S, H, D]`` is ``B | S | H * D -> H, D``), the finest
such split. The checker carries valid shapes through the groups; a group it cannot prove (``[E]``
against ``[H, D]`` with three free symbols) is left for the call to check (``E == H * D``).

:func:`reshape_strides` is numpy's rule for a reshape without a copy: inside each group the
source dims must be laid out one after the other in memory (a view of whole inner rows, not a
window cut across them); the result's dims then get strides within the group's memory.

Products are compared as multisets of factors (``H * D`` and ``D * H`` are equal, ``H * D`` and
``E`` are not, whatever the dims are at run time): a proof, never a guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from . import sym

Group = tuple[tuple[int, ...], tuple[int, ...], bool]  # source dims, result dims, proven equal


def factors(e: sym.Expr) -> tuple[sym.Number, Counter]:
    """``e`` as (constant, {factor text: power}): a product of constants and other expressions."""
    if sym.is_const(e):
        return e, Counter()
    if isinstance(e, sym.BinExpr) and e.op == "*":
        (ca, fa), (cb, fb) = factors(e.left), factors(e.right)
        return ca * cb, fa + fb
    return 1, Counter({sym.to_text(e): 1})


def product(dims: Sequence[sym.Expr]) -> sym.Expr:
    out: sym.Expr = 1
    for d in dims:
        out = sym.mul(out, d)
    return out


def same_product(a: Sequence[sym.Expr], b: Sequence[sym.Expr]) -> bool:
    """Whether the products of ``a`` and ``b`` are provably equal."""
    return factors(product(a)) == factors(product(b))


def differ(a: Sequence[sym.Expr], b: Sequence[sym.Expr]) -> bool:
    """Whether the products are provably different: both constant and unequal."""
    pa, pb = product(a), product(b)
    return sym.is_const(pa) and sym.is_const(pb) and pa != pb


def reshape_groups(src: Sequence[sym.Expr], dst: Sequence[sym.Expr]) -> list[Group]:
    """The finest pairing of runs of ``src`` dims with runs of ``dst`` dims of equal element
    counts, in order. A dim of 1 on one side only is a group of its own (a dim added or dropped);
    ones on both sides pair up. Where no proven pairing exists, the remaining dims form one last
    group marked unproven (its counts must be checked when the dims are known)."""
    n, m = len(src), len(dst)
    out: list[Group] = []
    i = j = 0
    while i < n or j < m:
        one_i, one_j = i < n and src[i] == 1, j < m and dst[j] == 1
        if one_i and one_j:
            out.append(((i,), (j,), True))
            i, j = i + 1, j + 1
            continue
        if one_i:
            out.append(((i,), (), True))
            i += 1
            continue
        if one_j:
            out.append(((), (j,), True))
            j += 1
            continue
        found = None
        if i < n and j < m:
            for total in range(2, (n - i) + (m - j) + 1):
                for k in range(1, total):
                    ell = total - k
                    if i + k <= n and j + ell <= m and same_product(src[i:i + k], dst[j:j + ell]):
                        found = (k, ell)
                        break
                if found:
                    break
        if found is None:
            out.append((tuple(range(i, n)), tuple(range(j, m)), False))
            break
        k, ell = found
        out.append((tuple(range(i, i + k)), tuple(range(j, j + ell)), True))
        i, j = i + k, j + ell
    return out


def reshape_strides(shape: Sequence[sym.Expr], strides: Sequence[sym.Expr],
                    new_shape: Sequence[sym.Expr]) -> tuple[sym.Expr, ...] | None:
    """The strides of ``new_shape`` over the memory of a tensor of ``shape`` with ``strides``,
    or None when the reshape needs a copy (a group's source dims are not contiguous)."""
    out: list[sym.Expr] = [1] * len(new_shape)
    groups = reshape_groups(shape, new_shape)
    for gi, (a, b, _) in enumerate(groups):
        real = [d for d in a if shape[d] != 1]
        for p, q in zip(real, real[1:]):
            if not same_product([strides[p]], [strides[q], shape[q]]):
                return None
        if real:
            inner = strides[real[-1]]
        else:
            # dims of 1 only: their stride never matters; keep it dense with what follows
            later = [d for g in groups[gi + 1:] for d in g[0]]
            inner = sym.mul(strides[later[0]], shape[later[0]]) if later else 1
        acc = inner
        for d in reversed(b):
            out[d] = acc
            acc = sym.mul(acc, new_shape[d])
    return tuple(out)


def _terms(e: sym.Expr, sign: int, out: dict[str, list], const: list[sym.Number]) -> None:
    if sym.is_const(e):
        const[0] += sign * e
    elif isinstance(e, sym.BinExpr) and e.op in "+-" and len(e.op) == 1:
        _terms(e.left, sign, out, const)
        _terms(e.right, sign if e.op == "+" else -sign, out, const)
    elif isinstance(e, sym.NegExpr):
        _terms(e.operand, -sign, out, const)
    else:
        entry = out.setdefault(sym.to_text(e), [e, 0])
        entry[1] += sign


def total(extents: Sequence[sym.Expr]) -> sym.Expr:
    """The sum of ``extents`` with terms that cancel dropped (``(D - D // 2) + D // 2`` is ``D``),
    so that a concat of a split gives back the extent it was split from."""
    terms: dict[str, list] = {}
    const: list[sym.Number] = [0]
    for e in extents:
        _terms(e, 1, terms, const)
    out: sym.Expr = 0
    for e, count in terms.values():
        for _ in range(abs(count)):
            out = sym.add(out, e) if count > 0 else sym.sub(out, e)
    return sym.add(out, const[0])


def permute(values: Sequence, perm: Sequence[int]) -> tuple:
    """``values`` in the order of ``perm``: result dim k is source dim ``perm[k]``."""
    return tuple(values[p] for p in perm)


def inverse(perm: Sequence[int]) -> tuple[int, ...]:
    out = [0] * len(perm)
    for k, p in enumerate(perm):
        out[p] = k
    return tuple(out)


__all__ = ["Group", "differ", "factors", "total", "inverse", "permute", "product", "reshape_groups", "reshape_strides",
           "same_product"]
