"""The schedule against the hardware: vec tiles, cube tiles and an estimate of the UB in use.

Every limit comes from the spec's target (``ptodsl/targets/*.yaml``); nothing here is a literal.

* E0602 — a vec tile (the kernel default or a loop's) has 1 to 4 dims, each positive.
* E0603 — a vec tile's last dim times the element size must be a multiple of ``ub_block_bytes``
  for every dtype of the tensors that tile covers, per dtype variant. Only tensors whose last dim
  is not statically smaller than the tile are counted: for those the tile row is clipped to the
  tensor and the tile's own last dim never reaches the hardware.
* E0604, E0605, E0822 — the cube tile and split_k: ``cube_schedule.py``.
The UB a kernel needs is not estimated here: memory planning, which sees the tiles the passes
really keep and how long each lives, checks it per compute kernel (E0611). ``ptodsl check`` runs
the passes, so it reports that too. (E0606, an all-tiles-live estimate made here, is retired.)

E0603 walks the tensors each loop body tiles, at the vec tile in effect for it (the innermost
enclosing loop's ``vec_tile``, else the kernel's, else the lowering's default; each tile dim
clipped to a static tensor dim): every vector op's result, every distinct tensor region an op
reads from memory, each region copied or filled without an op, and each reduction's scratch (in
the accumulation dtype). Both branches of an ``if`` count; nested loops are bodies of their own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import sym
from ..diagnostics import Diagnostics, Label, Span, source_line
from ..dtypes import DTYPES, accumulator_dtype, itemsize
from ..frontend import ast
from ..frontend.spec import Spec
from ..ops import OPS
from ..targets import Target
from .cube_schedule import check_cube
from .loops import LoopSite, loop_sites
from .types import CheckedKernel, TensorTy

E_TILE_SHAPE = "E0602"
E_TILE_ALIGN = "E0603"

Path = tuple[str, ...]


def run(checked: Sequence[CheckedKernel], spec: Spec, target: Target, diags: Diagnostics,
        kernel: ast.Kernel | None = None) -> None:
    """Schedule rules for one spec; ``checked`` holds the variants that type-checked cleanly.

    The rules that read only the YAML and the syntax (of ``kernel``, by default the checked one's)
    run even when no variant is clean; the rest look at every variant together, so that one
    misaligned tile gives one error naming every variant it breaks.
    """
    kernel = kernel if kernel is not None else checked[0].kernel if checked else None
    tiles = _valid_vec_tiles(spec, target, diags)
    if checked:
        sites = loop_sites(checked[0].kernel)
        _check_alignment(checked, sites, tiles, spec, target, diags)
    if kernel is not None:
        check_cube(kernel, checked, spec, target, diags)


# ------------------------------------------------------------------ vec tiles: shape (E0602)


def _valid_vec_tiles(spec: Spec, target: Target, diags: Diagnostics) -> dict[Path, tuple[int, ...]]:
    """The vec tiles of the spec that are well formed, by their YAML path; reports the others."""
    entries: list[tuple[Path, tuple[int, ...]]] = []
    if spec.schedule.vec_tile is not None:
        entries.append((("schedule", "vec_tile"), spec.schedule.vec_tile))
    for name, ls in spec.schedule.loops.items():
        if ls.vec_tile is not None:
            entries.append((("schedule", "loops", name, "vec_tile"), ls.vec_tile))
    ok: dict[Path, tuple[int, ...]] = {}
    for path, tile in entries:
        key = spec.spans.key(path) or spec.spans.at(path)
        if not 1 <= len(tile) <= target.max_tile_rank:
            diags.error(E_TILE_SHAPE, f"vec tile {list(tile)} has {len(tile)} dims; tiles have 1 to {target.max_tile_rank}",
                        key, f"{len(tile)} dims",
                        secondary=[Label(spec.spans.at(path), "the tile")],
                        help=f"keep the last {target.max_tile_rank} dims, e.g. {list(tile[-target.max_tile_rank:])}; "
                        "leading dims of a tensor beyond the tile's rank are iterated one by one")
            continue
        bad = [i for i, d in enumerate(tile) if d <= 0]
        if bad:
            i = bad[0]
            diags.error(E_TILE_SHAPE, f"vec tile {list(tile)} has a dim of {tile[i]}; every dim must be positive",
                        key, f"dim {i} is {tile[i]}",
                        secondary=[Label(spec.spans.at((*path, i)), "this dim")],
                        help="use 1 for a dim the tile does not split")
            continue
        ok[path] = tuple(tile)
    return ok


def _tile_in_effect(site: LoopSite | None, spec: Spec,
                    target: Target) -> tuple[Path | None, tuple[int, ...] | None]:
    """The vec tile the lowering uses in a body: its YAML path (None: the built-in default)."""
    while site is not None:
        ls = spec.schedule.loops.get(site.name)
        if ls is not None and ls.vec_tile is not None:
            return ("schedule", "loops", site.name, "vec_tile"), ls.vec_tile
        site = site.parent
    if spec.schedule.vec_tile is not None:
        return ("schedule", "vec_tile"), spec.schedule.vec_tile
    return None, target.default_vec_tile


# ------------------------------------------------------------------ walking the tensor ops


@dataclass
class _Buffer:
    what: str
    span: Span
    dtype: str
    shape: tuple[sym.Expr, ...]  # of the tensor the tile covers


@dataclass
class _BodyTiles:
    buffers: list[_Buffer] = field(default_factory=list)


class _Ops:
    """The tensors one body of one variant tiles, as the module docstring lists them."""

    def __init__(self, ck: CheckedKernel, tile: tuple[int, ...], target: Target):
        self.ck = ck
        self.t = ck.typing
        self.tile = tile
        self.target = target
        self.loaded: set[tuple] = set()
        self.computed: set[str] = set()  # values whose tile an op of this body already holds

    def body(self, stmts: Sequence[ast.Stmt]) -> _BodyTiles:
        """The body's tiles, of both sides of every `if`."""
        out = _BodyTiles()
        for s in stmts:
            if isinstance(s, ast.If):
                out.buffers += self.body(s.body).buffers + self.body(s.orelse).buffers
            elif not isinstance(s, ast.For):
                self.stmt(s, out.buffers)
        return out

    def stmt(self, s: ast.Stmt, out: list[_Buffer]) -> None:
        if isinstance(s, ast.Assign):
            self.value(s.value, out)
            if isinstance(s.target, ast.Name):
                self.fill(s.value, out)
                b = self.t.defines.get(id(s))
                if b is not None and b.kind == "value" and self.is_op(s.value):
                    self.computed.add(b.ir_name)
            else:
                self.written(s, s.value, out)
        elif isinstance(s, ast.ExprStmt):
            e = s.expr
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.args:
                self.value(e.args[0], out)
                self.written(s, e.args[0], out)
            elif isinstance(e, ast.Call) and e.func_name != "print":
                self.value(e, out)

    def written(self, s: ast.Stmt, value: ast.Expr, out: list[_Buffer]) -> None:
        """A write whose value no op produced is a copy (or a fill) through one tile."""
        w = self.t.write.get(id(s))
        if w is None or self.is_op(value):
            return
        ty = self.t.ty.get(id(value))
        if isinstance(ty, TensorTy):
            self.load(value, ty, out)
        else:
            tensors = [*self.ck.params.values(), *self.t.defines.values()]
            target = next((b for b in tensors if b.ir_name == w.target), None)
            if target is not None and isinstance(target.ty, TensorTy):
                out.append(self.buffer(target.ty.dtype, w.shape, f"fill of `{target.name}`", s.span))

    def fill(self, value: ast.Expr, out: list[_Buffer]) -> None:
        call = self.t.call.get(id(value))
        ty = self.t.ty.get(id(value))
        if call is not None and call.op in ("zeros", "ones", "full") and isinstance(ty, TensorTy):
            out.append(self.buffer(ty.dtype, ty.shape, f"`{call.op}` fill", value.span))

    def is_op(self, e: ast.Expr) -> bool:
        call = self.t.call.get(id(e))
        return call is not None and call.op in OPS and OPS[call.op].kind != "matmul"

    def value(self, e: ast.Expr, out: list[_Buffer]) -> None:
        """Buffers of the vector ops inside ``e``; loads of the tensors they read."""
        call = self.t.call.get(id(e))
        if call is not None and call.op == "matmul":
            for a in _tensor_children(e, self.t):
                if not self.loads_directly(a):
                    self.value(a, out)  # vector ops feeding the cube still run in UB
            return
        if not self.is_op(e):
            for a in _tensor_children(e, self.t):
                self.value(a, out)
            return
        ty = self.t.ty.get(id(e))
        if not isinstance(ty, TensorTy):
            return
        out.append(self.buffer(ty.dtype, ty.shape, f"result of `{call.op}`", e.span))
        for a in _tensor_children(e, self.t):
            aty = self.t.ty.get(id(a))
            if not isinstance(aty, TensorTy):
                continue
            if self.loads_directly(a):
                self.load(a, aty, out)
            else:
                self.value(a, out)
            if OPS[call.op].kind == "reduce":
                out.append(self.buffer(accumulator_dtype(aty.dtype), aty.shape, f"scratch of `{call.op}`", e.span))

    def loads_directly(self, e: ast.Expr) -> bool:
        """Whether ``e`` reads memory rather than computing: a tensor, a view, a matmul result."""
        call = self.t.call.get(id(e))
        if call is not None:
            return call.op == "matmul"
        if isinstance(e, ast.Name):
            b = self.t.binding.get(id(e))
            return b is not None and b.ir_name not in self.computed
        return isinstance(e, ast.Subscript) or id(e) in self.t.view

    def load(self, e: ast.Expr, ty: TensorTy, out: list[_Buffer]) -> None:
        view = self.t.view.get(id(e))
        binding = self.t.binding.get(id(e)) if isinstance(e, ast.Name) else None
        if view is not None:
            key: tuple = (view.base, view.offsets, view.shape)
        elif binding is not None:
            key = (binding.ir_name,)
        else:
            key = (id(e),)
        if key in self.loaded:
            return
        self.loaded.add(key)
        what = f"`{_text(e.span) or 'tensor'}` loaded"
        out.append(self.buffer(ty.dtype, ty.shape, what, e.span))

    def buffer(self, dtype: str, shape: Sequence[sym.Expr], what: str, span: Span) -> _Buffer:
        dims = tile_dims(shape, self.tile)
        return _Buffer(f"{what}, tile {list(dims)} {dtype}", span, dtype, tuple(shape))


def tile_dims(shape: Sequence[sym.Expr], tile: Sequence[int]) -> list[int]:
    """The tile a tensor of ``shape`` is cut into: the tile's last dims, clipped to static dims."""
    rank = max(len(shape), 1)
    dims = list(tile[-rank:]) if len(tile) >= rank else [1] * (rank - len(tile)) + list(tile)
    return [min(t, s) if sym.is_const(s) and s >= 1 else t for t, s in zip(dims, list(shape) or [1])]


def _tensor_children(e: ast.Expr, t) -> list[ast.Expr]:
    if isinstance(e, ast.BinOp | ast.Compare | ast.BoolOp):
        kids: list[ast.Expr] = [e.left, e.right]
    elif isinstance(e, ast.UnaryOp):
        kids = [e.operand]
    elif isinstance(e, ast.Call) and e.func_name is not None:
        kids = list(e.args)
    else:
        kids = []
    return [k for k in kids if isinstance(t.ty.get(id(k)), TensorTy)]


def _text(span: Span) -> str | None:
    line = source_line(span.file, span.line)
    if line is None or span.end_line != span.line:
        return None
    return line[span.col - 1:span.end_col - 1] or None


# ------------------------------------------------------------------ vec tiles: alignment (E0603)


def _bodies(sites: list[LoopSite], kernel: ast.Kernel) -> list[tuple[LoopSite | None, Sequence[ast.Stmt]]]:
    return [(None, kernel.body), *((s, s.node.body) for s in sites)]


def _check_alignment(checked: Sequence[CheckedKernel], sites: list[LoopSite],
                     tiles: dict[Path, tuple[int, ...]], spec: Spec, target: Target, diags: Diagnostics) -> None:
    block = target.ub_block_bytes
    # tile path -> dtype -> variant names in which a tensor of that dtype uses the tile's row
    failing: dict[Path, dict[str, set[str]]] = {}
    for ck in checked:
        for site, stmts in _bodies(sites, ck.kernel):
            path, _ = _tile_in_effect(site, spec, target)
            if path is None or path not in tiles:
                continue
            last = tiles[path][-1]
            for buf in _Ops(ck, tiles[path], target).body(stmts).buffers:
                if buf.dtype == "bool":
                    # a comparison's mask: the compiler's own buffer, whose row memory planning pads
                    # to whole blocks; the user chose the tile for the data, which is checked
                    continue
                s = buf.shape[-1] if buf.shape else 1
                if sym.is_const(s) and s < last:
                    continue  # the row is clipped to the tensor; this tile's row is never used
                if last * itemsize(buf.dtype) % block:
                    failing.setdefault(path, {}).setdefault(buf.dtype, set()).add(ck.variant_name)
    all_variants = {ck.variant_name for ck in checked}
    for path, by_dtype in failing.items():
        tile = tiles[path]
        last = tile[-1]
        dtypes = sorted(by_dtype, key=lambda d: (itemsize(d), list(DTYPES).index(d)))
        quantum = math.lcm(*(block // math.gcd(block, itemsize(d)) for d in dtypes))
        below, above = last // quantum * quantum, (last // quantum + 1) * quantum
        parts = []
        for d in dtypes:
            where = "" if by_dtype[d] == all_variants or all_variants == {""} else \
                f" (variant {', '.join(sorted(by_dtype[d]))})"
            parts.append(f"{d}{where}")
        first = dtypes[0]
        sizes = f": {below} or {above}" if below else f", e.g. {above}"
        diags.error(
            E_TILE_ALIGN, f"vec tile {list(tile)}: a row of {last} elements is not {block}-byte aligned for "
            + _join(parts),
            spec.spans.key(path) or spec.spans.at(path),
            f"{last} × {itemsize(first)} bytes ({first}) = {last * itemsize(first)} bytes",
            secondary=[Label(spec.spans.at((*path, len(tile) - 1)), "the row length")],
            notes=[f"{target.name} needs every UB tile row to be a multiple of {block} bytes"],
            help=f"make the last dim a multiple of {quantum}{sizes}")


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
