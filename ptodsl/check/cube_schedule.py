"""The cube tile and split-K against the hardware (part of the schedule rules, ``schedule.py``).

* E0604 — a cube tile ``{m, k, n: [L0, L1]}``: positive extents, L1 a multiple of L0, L0 at most
  ``max_mkn``, and the k and n L0 extents ``cube_c0_bytes``-aligned for the matmul's input dtype.
* E0605 — a cube tile over the L0A (m×k×in), L0B (k×n×in), L0C (m×n×4) or L1 ((m×k + k×n)×in at
  the L1 extents) capacity of the target, or, for a matmul with a bias, a bias row of the n L0
  extent (in whole ``bias_row_bytes`` bursts) over the bias table. Checked only when the kernel
  has a matmul.
* E0822 — ``cube_tile.split_k`` above the k tiles of a matmul whose K is known at compile time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .. import sym
from ..diagnostics import Diagnostics, Label, Span
from ..dtypes import itemsize
from ..frontend import ast
from ..frontend.spec import Spec
from ..ops import MATMUL_ACCUMULATOR
from ..targets import Target
from .types import CheckedKernel, TensorTy

E_CUBE_TILE = "E0604"
E_CUBE_CAPACITY = "E0605"
E_SPLIT_K = "E0822"


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# ------------------------------------------------------------------ cube tiles (E0604, E0605)


def _has_matmul(kernel: ast.Kernel) -> bool:
    return any(isinstance(n, ast.Call) and n.func_name == "matmul" for n in ast.walk(kernel))


def _matmul_in_dtypes(checked: Iterable[CheckedKernel]) -> dict[str, set[str]]:
    """Input dtype of the kernel's matmuls -> the variants in which it occurs."""
    out: dict[str, set[str]] = {}
    for ck in checked:
        for info in ck.typing.call.values():
            if info.op == "matmul" and "in_dtype" in info.attrs:
                out.setdefault(info.attrs["in_dtype"], set()).add(ck.variant_name)
    return out


def check_cube(kernel: ast.Kernel, checked: Sequence[CheckedKernel], spec: Spec, target: Target,
                diags: Diagnostics) -> None:
    cube = spec.schedule.cube_tile
    if cube is None or not _has_matmul(kernel):
        return
    ok = True
    for axis in ("m", "k", "n"):
        if axis not in cube:
            ok = False
            continue
        ok &= _check_cube_axis(axis, cube[axis], spec, target, diags)
    if not ok:
        return
    in_dtypes = _matmul_in_dtypes(checked)
    _check_cube_alignment(cube, in_dtypes, spec, target, diags)
    _check_cube_capacity(cube, in_dtypes, spec, target, diags)
    matmuls = _matmuls(checked)
    _check_bias_table(cube, matmuls, spec, target, diags)
    _check_split_k(cube, matmuls, spec, diags)


@dataclass(frozen=True)
class _Matmul:
    """What the schedule rules need of one matmul call of one variant."""

    k: object  # the inner dim (a number when known at compile time)
    acc: str  # the accumulator's dtype
    bias: str | None  # the bias dtype, if any
    span: Span
    variant: str


def _matmuls(checked: Iterable[CheckedKernel]) -> list[_Matmul]:
    out = []
    for ck in checked:
        for node in ast.walk(ck.kernel):
            info = ck.typing.call.get(id(node))
            if not isinstance(node, ast.Call) or info is None or info.op != "matmul":
                continue
            a = ck.typing.ty.get(id(node.args[0]))
            kw = node.keyword("bias")
            bias = ck.typing.ty.get(id(kw.value)) if kw is not None else None
            if not isinstance(a, TensorTy):
                continue
            k = a.shape[-2] if info.attrs.get("trans_a") else a.shape[-1]
            out.append(_Matmul(k, MATMUL_ACCUMULATOR.get(info.attrs["in_dtype"], "f32"),
                               bias.dtype if isinstance(bias, TensorTy) else None, node.span, ck.variant_name))
    return out


def _check_bias_table(cube: dict[str, tuple[int, int]], matmuls: list[_Matmul], spec: Spec, target: Target,
                      diags: Diagnostics) -> None:
    """A bias row of the n L0 extent, padded to whole bursts for both its dtypes, fits the bias table."""
    n0 = cube["n"][0]
    burst = target.bias_row_bytes
    for mm in matmuls:
        if mm.bias is None:
            continue
        quantum = math.lcm(*(max(1, burst // itemsize(d)) for d in (mm.bias, mm.acc)))
        need = -(-n0 // quantum) * quantum * itemsize(mm.acc)
        if need > target.bias_bytes:
            per = target.bias_bytes // itemsize(mm.acc)
            diags.error(E_CUBE_CAPACITY, f"the bias row of an n tile of {n0} needs {need} bytes of the bias table, "
                        f"but {target.name} has {target.bias_bytes}", spec.spans.at(("schedule", "cube_tile", "n")),
                        f"{n0} columns of {mm.acc}", secondary=[Label(mm.span, "this matmul has a bias")],
                        help=f"use an L0 extent of `n` of at most {per}")
            return


def _check_split_k(cube: dict[str, tuple[int, int]], matmuls: list[_Matmul], spec: Spec,
                   diags: Diagnostics) -> None:
    split = spec.schedule.split_k
    if split <= 1:
        return
    k0 = cube["k"][0]
    for mm in matmuls:
        if not sym.is_const(mm.k):
            continue
        tiles = -(-mm.k // min(k0, mm.k))
        if split > tiles:
            path = ("schedule", "cube_tile", "split_k")
            notes = [f"in the dtype variant {mm.variant}"] if mm.variant else []
            diags.error(E_SPLIT_K, f"split_k {split} is more partial products than the {tiles} k tile"
                        f"{'s' if tiles != 1 else ''} of this matmul", spec.spans.value(path) or spec.spans.at(path),
                        f"K = {mm.k} in k tiles of {min(k0, mm.k)}", secondary=[Label(mm.span, "this matmul")],
                        notes=notes, help=f"use split_k of at most {tiles}, or a smaller L0 extent of `k`")
            return


def _check_cube_axis(axis: str, levels: tuple[int, int], spec: Spec, target: Target, diags: Diagnostics) -> bool:
    path = ("schedule", "cube_tile", axis)
    l0, l1 = levels
    span = spec.spans.at(path)
    if l0 <= 0 or l1 <= 0:
        diags.error(E_CUBE_TILE, f"cube tile `{axis}: [{l0}, {l1}]` has an extent that is not positive", span,
                    "[L0, L1] extents must be positive", help=f"e.g. `{axis}: [128, 256]`")
        return False
    if l1 % l0:
        lo, hi = l1 // l0 * l0, (l1 // l0 + 1) * l0
        sizes = f": {lo} or {hi}" if lo else f", e.g. {hi}"
        diags.error(E_CUBE_TILE, f"the L1 tile of `{axis}` ({l1}) is not a multiple of its L0 tile ({l0})", span,
                    "L1 is split into whole L0 tiles",
                    help=f"make the L1 extent a multiple of {l0}{sizes}")
        return False
    if l0 > target.max_mkn:
        diags.error(E_CUBE_TILE, f"the L0 tile of `{axis}` ({l0}) is larger than one matmul instruction takes "
                    f"({target.max_mkn} on {target.name})", span, "too large",
                    help=f"use an L0 extent of at most {target.max_mkn}")
        return False
    return True


def _check_cube_alignment(cube: dict[str, tuple[int, int]], in_dtypes: dict[str, set[str]], spec: Spec,
                          target: Target, diags: Diagnostics) -> None:
    c0 = target.cube_c0_bytes
    reported = set()
    for axis in ("k", "n"):
        l0 = cube[axis][0]
        bad = sorted((d for d in in_dtypes if l0 * itemsize(d) % c0), key=itemsize)
        if not bad:
            continue
        reported.add(axis)
        quantum = math.lcm(*(c0 // math.gcd(c0, itemsize(d)) for d in bad))
        lo, hi = l0 // quantum * quantum, (l0 // quantum + 1) * quantum
        sizes = f": {lo} or {hi}" if lo else f", e.g. {hi}"
        variants = sorted(set().union(*(in_dtypes[d] for d in bad)) - {""})
        notes = [f"a cube fractal row is {c0} bytes on {target.name}"]
        if variants:
            notes.append("in the dtype variant" + ("s " if len(variants) > 1 else " ") + ", ".join(variants))
        diags.error(E_CUBE_TILE, f"the L0 tile of `{axis}` ({l0}) is not {c0}-byte aligned for matmul inputs of "
                    + _join(bad), spec.spans.at(("schedule", "cube_tile", axis)),
                    f"{l0} × {itemsize(bad[0])} bytes ({bad[0]}) = {l0 * itemsize(bad[0])} bytes", notes=notes,
                    help=f"make the L0 extent of `{axis}` a multiple of {quantum}{sizes}")
    # Every L0 extent is also a whole number of fractal rows: m rows of the left operand and the
    # accumulator, k rows of the right operand's L1 tile, n columns the accumulator boxes by rows.
    rows = target.cube_fractal_rows
    for axis in ("m", "k", "n"):
        l0 = cube[axis][0]
        if axis in reported or l0 % rows == 0:
            continue
        lo, hi = l0 // rows * rows, (l0 // rows + 1) * rows
        sizes = f": {lo} or {hi}" if lo else f", e.g. {hi}"
        diags.error(E_CUBE_TILE, f"the L0 tile of `{axis}` ({l0}) is not a whole number of {rows}-row cube fractals",
                    spec.spans.at(("schedule", "cube_tile", axis)), f"{l0} is not a multiple of {rows}",
                    notes=[f"the cube's tiles are boxes of {rows}-row fractals on {target.name}"],
                    help=f"make the L0 extent of `{axis}` a multiple of {rows}{sizes}")


def _check_cube_capacity(cube: dict[str, tuple[int, int]], in_dtypes: dict[str, set[str]], spec: Spec,
                         target: Target, diags: Diagnostics) -> None:
    if not in_dtypes:
        return
    dtype = max(in_dtypes, key=itemsize)  # the widest input fills the buffers first
    size = itemsize(dtype)
    acc = itemsize(target.accumulator_of(dtype) or "f32")
    (m0, m1), (k0, k1), (n0, n1) = cube["m"], cube["k"], cube["n"]
    needs = [
        ("L0A", "m × k", f"{m0} × {k0} × {size}", m0 * k0 * size, target.l0a_bytes, "m or k"),
        ("L0B", "k × n", f"{k0} × {n0} × {size}", k0 * n0 * size, target.l0b_bytes, "k or n"),
        ("L0C", "m × n", f"{m0} × {n0} × {acc}", m0 * n0 * acc, target.l0c_bytes, "m or n"),
        ("L1", "(m × k + k × n)", f"({m1} × {k1} + {k1} × {n1}) × {size}", (m1 * k1 + k1 * n1) * size,
         target.l1_bytes, "the L1 extents"),
    ]
    key = spec.spans.key(("schedule", "cube_tile")) or spec.spans.at(("schedule", "cube_tile"))
    variants = sorted(in_dtypes[dtype] - {""})
    for buf, formula, numbers, need, have, shrink in needs:
        if need <= have:
            continue
        notes = [f"{formula} elements of {dtype}" + (" (the accumulator is 4 bytes)" if buf == "L0C" else "")]
        if variants:
            notes.append("in the dtype variant" + ("s " if len(variants) > 1 else " ") + ", ".join(variants))
        diags.error(E_CUBE_CAPACITY, f"the cube tile needs {need} bytes of {buf}, but {target.name} has {have}",
                    key, f"{numbers} = {need} bytes", secondary=[Label(spec.spans.at(("schedule", "cube_tile")),
                                                                      "the cube tile")],
                    notes=notes, help=f"shrink {shrink} so that the tile fits in {have} bytes")
