"""Typing of the layout builtins: ``reshape``, ``unsqueeze``, ``squeeze``, ``transpose``,
``permute``, ``concat``, ``expand`` and ``clone``. Mixed into the checker's Typer.

Each gives a new tensor value at the statement it appears in, as every other op does: a later write
into its source does not change it (lowering relabels the source's memory where nothing can change
it afterwards, and copies otherwise). Valid shapes go through: a permutation permutes them, a
reshape carries them through the groups of dims it splits and merges (``ptodsl.shapes``), and
refuses to split a dim of partial valid extent (the valid region would not be a box).
"""

from __future__ import annotations

from .. import shapes, sym
from ..diagnostics import Label
from ..frontend import ast
from .types import CallInfo, Requirement, TensorTy, Ty

# The layout builtins and the keywords each takes.
LAYOUT_BUILTINS = ("reshape", "unsqueeze", "squeeze", "transpose", "permute", "concat", "expand", "clone")
LAYOUT_KEYWORDS: dict[str, tuple[str, ...]] = {"concat": ("dim",)}

E_COUNT = "E0830"  # a reshape to another number of elements
E_RUNTIME_COUNT = "E0831"  # a reshape whose counts only the running kernel knows
E_PARTIAL_SPLIT = "E0832"  # a reshape that would split or drop a dim of partial valid extent
E_PERM = "E0834"  # not a permutation of the dims
E_CONCAT_SHAPE = "E0835"  # concat parts whose other dims differ
E_CONCAT_VALID = "E0836"  # concat of a part with a partial valid extent before another part
E_EXPAND = "E0837"  # expand to a shape the tensor does not broadcast to
E_SQUEEZE = "E0838"  # squeeze of a dim that is not 1


def _fmt(shape) -> str:
    return "[" + ", ".join(sym.to_text(s) for s in shape) + "]"


class LayoutTyping:
    """Needs from the Typer: err, expr, arity, dim_list, const_int, int_value, ranges, symbols
    and the typing tables ``t``."""

    def layout_call(self, e: ast.Call, fn: str) -> Ty | None:
        if fn == "concat":
            return self.concat_call(e)
        lo, hi = {"reshape": (2, 2), "unsqueeze": (2, 2), "squeeze": (2, 2), "transpose": (3, 3),
                  "permute": (2, 2), "expand": (2, 2), "clone": (1, 1)}[fn]
        if not self.arity(e, fn, lo, hi):
            return None
        t = self.expr(e.args[0])
        if t is None:
            return None
        if not isinstance(t, TensorTy):
            self.err("E0311", f"`{fn}` takes a tensor", e.args[0].span,
                     help=f"pass a tensor: `{fn}(x, ...)`")
            return None
        return getattr(self, f"_{fn}")(e, t)

    # ------------------------------------------------------------ reshapes
    def _reshape(self, e: ast.Call, t: TensorTy) -> Ty | None:
        shape = self.dim_list(e.args[1], "the new shape")
        if shape is None:
            return None
        if not 1 <= len(shape) <= 4 or any(sym.is_const(s) and s <= 0 for s in shape):
            self.err("E0310", f"a reshape gives 1 to 4 positive dims, got {_fmt(shape)}", e.args[1].span,
                     help="give every dim explicitly (there is no -1 to infer one)")
            return None
        return self.reshaped(e, t, shape, e.args[1].span)

    def _unsqueeze(self, e: ast.Call, t: TensorTy) -> Ty | None:
        dim = self.layout_dim(e.args[1], t.rank + 1, "unsqueeze")
        if dim is None:
            return None
        if t.rank >= 4:
            self.err("E0310", "`unsqueeze` of a rank-4 tensor gives 5 dims; tensors have at most 4", e.span)
            return None
        shape = list(t.shape)
        shape.insert(dim, 1)
        return self.reshaped(e, t, tuple(shape), e.span)

    def _squeeze(self, e: ast.Call, t: TensorTy) -> Ty | None:
        dim = self.layout_dim(e.args[1], t.rank, "squeeze")
        if dim is None:
            return None
        if t.shape[dim] != 1:
            self.err(E_SQUEEZE, f"`squeeze` drops dim {dim}, whose extent is {sym.to_text(t.shape[dim])}, not 1",
                     e.args[1].span, secondary=[Label(e.args[0].span, f"shape {_fmt(t.shape)}")],
                     help="only a dim of extent 1 can be dropped; `reshape(x, [...])` merges dims")
            return None
        if t.rank == 1:
            self.err(E_SQUEEZE, "`squeeze` of a rank-1 tensor would leave no dims", e.span,
                     help="a tensor keeps at least one dim")
            return None
        shape = list(t.shape)
        del shape[dim]
        return self.reshaped(e, t, tuple(shape), e.span)

    def layout_dim(self, node: ast.Expr, rank: int, fn: str) -> int | None:
        d = self.const_int(node, f"the dim of `{fn}`")
        if d is None:
            return None
        if not -rank <= d < rank:
            self.err("E0308", f"dim {d} is out of range for `{fn}` here", node.span,
                     help=f"use a dim in [{-rank}, {rank - 1}]")
            return None
        return d % rank

    def reshaped(self, e: ast.Call, t: TensorTy, shape, span) -> Ty | None:
        """``t`` under ``shape``: the element counts must agree (proven, or checked by the call),
        and the valid shape must map onto a box of the new shape."""
        groups = shapes.reshape_groups(t.shape, shape)
        dims = set(self.symbols)
        for a, b, proven in groups:
            if proven:
                continue
            src, dst = [t.shape[i] for i in a], [shape[j] for j in b]
            if shapes.differ(src, dst) or (not b and src) or (not a and dst):
                self.err(E_COUNT, f"a reshape of {_fmt(t.shape)} to {_fmt(shape)} changes the number of "
                         f"elements: {sym.to_text(shapes.product(t.shape))} to "
                         f"{sym.to_text(shapes.product(shape))}", span,
                         secondary=[Label(e.args[0].span, f"shape {_fmt(t.shape)}")],
                         help="the new shape must hold exactly the elements of the old one")
                return None
            left, right = shapes.product(src), shapes.product(dst)
            runtime = (sym.free_symbols(left) | sym.free_symbols(right)) - dims
            if runtime:
                self.err(E_RUNTIME_COUNT, f"a reshape of {_fmt(t.shape)} to {_fmt(shape)} whose element counts "
                         "depend on a value known only while the kernel runs", span,
                         f"this depends on `{sorted(runtime)[0]}`",
                         help="reshape with dims of the arguments (or fixed symbols), which the call checks "
                         "before any kernel runs")
                return None
            self.t.requires.append(Requirement("equal", left, right, span, "a reshape's element counts"))
        valid = self.reshaped_valid(e, t, shape, groups, span)
        if valid is None:
            return None
        self.t.call[id(e)] = CallInfo("reshape", {"shape": tuple(shape)})
        return TensorTy(t.dtype, tuple(shape), None if valid == tuple(shape) else valid)

    def running_ranges(self) -> dict[str, sym.Bounds]:
        """The checker's ranges, with dims of at least 1: a call with a zero dim runs no kernel
        (it returns empty outputs at once or is refused, E0710)."""
        r = dict(self.ranges())
        for s, info in self.symbols.items():
            if info.value is None and r.get(s) == (0, None):
                r[s] = (1, None)
        return r

    def whole_at_call(self, v: sym.Expr, s: sym.Expr, span, what: str) -> bool:
        """Whether an extent ``s`` with valid extent ``v`` is whole: proven here, or (over dims
        only) checked by the call before any kernel runs (E0839: ``max(v, 0) == s``, so a
        negative extent is never whole); False when neither."""
        r = self.running_ranges()
        # proved whole only with the extent proved non-negative too: ``s <= v`` alone holds of a
        # negative extent whose valid extent is clamped the same way (``min(max(E - 3, 0), E - 3)``)
        if (v == s or sym.prove_le(s, v, r)) and sym.prove_le(0, s, r):
            return True
        if (sym.free_symbols(v) | sym.free_symbols(s)) - set(self.symbols):
            return False
        self.t.requires.append(Requirement("whole", v, s, span, what))
        return True

    def reshaped_valid(self, e: ast.Call, t: TensorTy, shape, groups, span):
        r = self.running_ranges()
        out: list[sym.Expr] = [1] * len(shape)

        def proven(i: int) -> bool:
            return t.valid_shape[i] == t.shape[i] or sym.prove_le(t.shape[i], t.valid_shape[i], r)

        def required(dims) -> int | None:
            """The first dim of ``dims`` that can be neither proven nor checked whole, or None."""
            for i in dims:
                if not proven(i) and not self.whole_at_call(t.valid_shape[i], t.shape[i], span,
                                                            f"dim {i} of the reshaped tensor"):
                    return i
            return None

        for a, b, _ in groups:
            if all(proven(i) for i in a):
                for j in b:
                    out[j] = shape[j]
            elif len(a) == 1 and len(b) == 1:
                out[b[0]] = t.valid_shape[a[0]]
            elif len(b) == 1 and required(a[1:]) is None:
                # merged dims: a partial outermost dim covers that many whole rows of the others
                out[b[0]] = sym.mul(t.valid_shape[a[0]], shapes.product([t.shape[i] for i in a[1:]]))
            elif (bad := required(a)) is None:
                for j in b:
                    out[j] = shape[j]
            elif not b:
                self.err(E_PARTIAL_SPLIT, f"this reshape drops dim {bad}, whose valid extent "
                         f"`{sym.to_text(t.valid_shape[bad])}` may be 0", span,
                         secondary=[Label(e.args[0].span, f"valid shape {_fmt(t.valid_shape)}")],
                         help="drop the dim from a tensor whose extent there is certainly valid")
                return None
            else:
                self.err(E_PARTIAL_SPLIT, f"this reshape turns dims {', '.join(map(str, a))} of {_fmt(t.shape)} "
                         f"into {_fmt([shape[j] for j in b])}, but dim {bad} is valid only up to "
                         f"`{sym.to_text(t.valid_shape[bad])}`", span,
                         "the valid elements would not form a box of the new shape",
                         secondary=[Label(e.args[0].span, f"valid shape {_fmt(t.valid_shape)}")],
                         help="reshape the whole tensor and take the partial view afterwards, or keep the "
                         "partial dim whole in the new shape")
                return None
        return tuple(out)

    # ------------------------------------------------------------ permutations
    def _transpose(self, e: ast.Call, t: TensorTy) -> Ty | None:
        d0 = self.layout_dim(e.args[1], t.rank, "transpose")
        d1 = self.layout_dim(e.args[2], t.rank, "transpose") if d0 is not None else None
        if d0 is None or d1 is None:
            return None
        perm = list(range(t.rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return self.permuted(e, t, tuple(perm))

    def _permute(self, e: ast.Call, t: TensorTy) -> Ty | None:
        node = e.args[1]
        if not isinstance(node, ast.ListExpr):
            self.err("E0302", "the order of `permute` is a list of dims, e.g. `[0, 2, 1, 3]`", node.span)
            return None
        perm = []
        for item in node.items:
            d = self.const_int(item, "an entry of the order of `permute`")
            if d is None:
                return None
            perm.append(d % t.rank if -t.rank <= d < t.rank else d)
        if sorted(perm) != list(range(t.rank)):
            self.err(E_PERM, f"{[int(p) for p in perm]} is not an order of the {t.rank} dims of this tensor",
                     node.span, secondary=[Label(e.args[0].span, f"shape {_fmt(t.shape)}")],
                     help=f"name each dim from 0 to {t.rank - 1} exactly once, e.g. "
                     f"{list(range(t.rank))[::-1]}")
            return None
        return self.permuted(e, t, tuple(perm))

    def permuted(self, e: ast.Call, t: TensorTy, perm: tuple[int, ...]) -> Ty:
        self.t.call[id(e)] = CallInfo("permute", {"perm": perm})
        shape, valid = shapes.permute(t.shape, perm), shapes.permute(t.valid_shape, perm)
        return TensorTy(t.dtype, shape, None if valid == shape else valid)

    # ------------------------------------------------------------ concat, expand, clone
    def concat_call(self, e: ast.Call) -> Ty | None:
        if not self.arity(e, "concat", 1):
            return None
        node = e.args[0]
        if not isinstance(node, ast.ListExpr) or not node.items:
            self.err("E0302", "`concat` takes a list of tensors, e.g. `concat([a, b], dim=-1)`", node.span)
            return None
        parts = []
        for item in node.items:
            ty = self.expr(item)
            if ty is None:
                return None
            if not isinstance(ty, TensorTy):
                self.err("E0311", "`concat` joins tensors", item.span, help="every entry of the list is a tensor")
                return None
            parts.append((item, ty))
        first_node, first = parts[0]
        kw = e.keyword("dim")
        d = self.const_int(kw.value, "`dim`") if kw else 0
        if d is None:
            return None
        if not -first.rank <= d < first.rank:
            self.err("E0308", f"`dim={d}` is out of range for tensors of rank {first.rank}",
                     kw.value.span if kw else e.span, help=f"use a dim in [{-first.rank}, {first.rank - 1}]")
            return None
        axis = d % first.rank
        for item, ty in parts[1:]:
            if ty.dtype != first.dtype:
                self.err("E0303", f"mixed dtypes: {first.dtype} and {ty.dtype}", e.span,
                         secondary=[Label(first_node.span, f"this is {first.dtype}"),
                                    Label(item.span, f"this is {ty.dtype}")], help="cast one of them")
                return None
            bad = ty.rank != first.rank or any(a != b for k, (a, b) in enumerate(zip(ty.shape, first.shape))
                                                if k != axis)
            if bad:
                self.err(E_CONCAT_SHAPE, f"`concat` along dim {axis} joins tensors that agree on every other "
                         f"dim, but these are {_fmt(first.shape)} and {_fmt(ty.shape)}", item.span,
                         secondary=[Label(first_node.span, f"shape {_fmt(first.shape)}")],
                         help="distinct symbols are never assumed equal; slice or reshape the parts to agree")
                return None
        r = self.running_ranges()
        for k, (item, ty) in enumerate(parts):
            v, s = ty.valid_shape[axis], ty.shape[axis]
            # every part but the last is whole along the dim (a later part starts where the earlier
            # ones end), and the last has an extent of at least 0
            what = f"part {k} of a concat along dim {axis}"
            ok = self.whole_at_call(v, s, item.span, what) if k < len(parts) - 1 else \
                sym.prove_le(0, s, r) or self.whole_at_call(s, s, item.span, what)
            if not ok:
                self.err(E_CONCAT_VALID, f"this part is valid only up to `{sym.to_text(v)}` of its "
                         f"{sym.to_text(s)} along dim {axis}, and another part follows it", item.span,
                         "the parts after it would start past a gap",
                         help="put the partial part last, or concatenate whole tensors and take a view after")
                return None
        shape = list(first.shape)
        valid = list(first.valid_shape)
        shape[axis] = shapes.total([ty.shape[axis] for _, ty in parts])
        valid[axis] = shapes.total([ty.shape[axis] for _, ty in parts[:-1]] + [parts[-1][1].valid_shape[axis]])
        for k in range(first.rank):
            if k != axis:
                for _, ty in parts[1:]:
                    valid[k] = sym.min_(valid[k], ty.valid_shape[k], r)
        self.t.call[id(e)] = CallInfo("concat", {"axis": axis})
        return TensorTy(first.dtype, tuple(shape), None if tuple(valid) == tuple(shape) else tuple(valid))

    def _expand(self, e: ast.Call, t: TensorTy) -> Ty | None:
        node = e.args[1]
        if not isinstance(node, ast.ListExpr):
            self.err("E0302", "the shape of `expand` is a list, e.g. `[B, S, H]`", node.span)
            return None
        n = len(node.items)
        if not t.rank <= n <= 4:
            self.err(E_EXPAND, f"`expand` of a rank-{t.rank} tensor to {n} dims", node.span,
                     help=f"give {t.rank} to 4 dims: new dims go in front, as in torch")
            return None
        pad = n - t.rank
        shape, valid = [], []
        for k, item in enumerate(node.items):
            src = t.shape[k - pad] if k >= pad else None
            keep = isinstance(item, ast.UnaryOp) and item.op == "-" and isinstance(item.operand, ast.Num) \
                and item.operand.value == 1
            if keep:
                if src is None:
                    self.err(E_EXPAND, f"dim {k} is new, so -1 cannot keep it", item.span,
                             help="give the new dim's extent")
                    return None
                shape.append(src)
                valid.append(t.valid_shape[k - pad])
                continue
            d = self.int_value(item, "an entry of the shape of `expand`")
            if d is None:
                return None
            if sym.is_const(d) and d <= 0:
                self.err(E_EXPAND, f"dim {k} of `expand` is {d}; dims are positive (-1 keeps one)", item.span)
                return None
            if src is not None and src != 1 and src != d:
                self.err(E_EXPAND, f"`expand` cannot spread dim {k - pad} of extent {sym.to_text(src)} over "
                         f"{sym.to_text(d)}", item.span, secondary=[Label(e.args[0].span, f"shape {_fmt(t.shape)}")],
                         help="only a dim of 1 is repeated; keep the others with -1 or their own extent")
                return None
            v = 1 if src is None else t.valid_shape[k - pad]
            shape.append(d)
            valid.append(v if src == d else d if v == 1 else sym.min_(sym.mul(v, d), d))
        self.t.call[id(e)] = CallInfo("expand", {})
        return TensorTy(t.dtype, tuple(shape), None if valid == shape else tuple(valid))

    def _clone(self, e: ast.Call, t: TensorTy) -> Ty:
        self.t.call[id(e)] = CallInfo("clone", {})
        return t


__all__ = ["LAYOUT_BUILTINS", "LAYOUT_KEYWORDS", "LayoutTyping"]
