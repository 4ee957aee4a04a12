"""Typing of the indexing builtins (docs/LANGUAGE.md §1.6): gathers and scatters through index
tensors, index generation, triangular masks, arg-reductions and top-k. Mixed into the Typer.

Every index a gather, index_select or scatter_update reads from data is checked before the op
runs (lowering puts the guards in the control program): the typer records here which tensor and
dim each index tensor indexes, and the bound its values must stay under.
"""

from __future__ import annotations

from .. import sym
from ..diagnostics import Label
from ..dtypes import DTYPES
from ..frontend import ast
from ..ops import INDEXING
from .calls import fmt_shape, is_float
from .types import Binding, CallInfo, DtypeTy, ScalarTy, TensorTy, Ty

E_INDEX = "E0850"  # an index tensor of the wrong dtype or rank
E_AXIS = "E0851"  # an indexing op along an axis it does not support
E_SHAPES = "E0852"  # the operands of a gather or scatter do not fit each other
E_TOPK = "E0853"  # topk / argsort: k or the row length is not what they need
E_ARANGE = "E0854"  # arange: a length not known before the kernel runs, or not positive
E_UNPACK = "E0855"  # a tuple binding whose names do not match the op's results
INDEX_DTYPES = ("i32", "i64")
MULTI_RESULT = {"topk": 2}  # builtins with several results, bound with `a, b = ...`


class IndexTyping:
    """Needs from the Typer: err, expr, const_int, const_bool, int_value, lookup, not_writable,
    ranges, symbols, fixed, t, check_name, ir_name, scope, arity and check_rebind (ScopeRules)."""

    # ------------------------------------------------------------ dispatch
    def index_call(self, e: ast.Call, fn: str, bind_name: str | None) -> Ty | None:
        if INDEXING[fn].statement:
            self.err("E0311", f"`{fn}` writes a tensor and gives no value", e.span,
                     help=f"use it as a statement: `{INDEXING[fn].signature}`")
            return None
        if fn in MULTI_RESULT:
            self.err(E_UNPACK, f"`{fn}` gives {MULTI_RESULT[fn]} results; bind one name to each", e.span,
                     help=f"write `{INDEXING[fn].signature}`")
            return None
        return getattr(self, f"_type_{fn}")(e)

    # ------------------------------------------------------------ helpers
    def _axis(self, e: ast.Call, node: ast.Expr | None, rank: int, default: int | None = None) -> int | None:
        """A `dim` given as an integer literal, normalised to [0, rank)."""
        if node is None:
            return None if default is None else default % rank
        dim = self.const_int(node, "`dim`")
        if dim is None:
            return None
        if not -rank <= dim < rank:
            self.err("E0308", f"`dim={dim}` is out of range for a tensor of rank {rank}", node.span,
                     help=f"use a dim in [{-rank}, {rank - 1}]")
            return None
        return dim % rank

    def _tensor(self, node: ast.Expr, what: str) -> TensorTy | None:
        t = self.expr(node)
        if t is None:
            return None
        if not isinstance(t, TensorTy):
            self.err("E0311", f"{what} must be a tensor", node.span,
                     "this is a scalar" if isinstance(t, ScalarTy) else "this is a dtype")
            return None
        return t

    def _index_tensor(self, node: ast.Expr, fn: str, rank: int | None = 1) -> TensorTy | None:
        t = self._tensor(node, f"the index of `{fn}`")
        if t is None:
            return None
        if t.dtype not in INDEX_DTYPES or (rank is not None and t.rank != rank):
            want = f"a {rank}-D " if rank is not None else "an "
            self.err(E_INDEX, f"the index of `{fn}` must be {want}i32 or i64 tensor", node.span,
                     f"this is {t.dtype}{fmt_shape(t.shape)}",
                     help="cast it: `cast(index, i32)`" if t.dtype not in INDEX_DTYPES else
                     f"index with a {rank}-D tensor: one position per slice taken")
            return None
        return t

    def _name_of(self, node: ast.Expr) -> str:
        """The user's name of the tensor an operand reads (for the run-time diagnostics)."""
        b = self.t.binding.get(id(node))
        if b is not None:
            return b.name
        view = self.t.view.get(id(node))
        if view is not None:
            return view.base
        return "the index"

    def _same_dims(self, e: ast.Call, what: str, got, want, node: ast.Expr) -> bool:
        if len(got) != len(want) or any(a != b for a, b in zip(got, want)):
            self.err(E_SHAPES, f"{what}: shape {fmt_shape(got)} does not fit {fmt_shape(want)}", node.span,
                     f"shape {fmt_shape(got)}", help="the slices must have the same dims (distinct symbols are "
                     "never assumed equal)")
            return False
        return True

    # ------------------------------------------------------------ gathers
    def _type_index_select(self, e: ast.Call) -> Ty | None:
        if not self.arity(e, "index_select", 3):
            return None
        src = self._tensor(e.args[0], "the source of `index_select`")
        if src is None:
            return None
        axis = self._axis(e, e.args[1], src.rank)
        idx = self._index_tensor(e.args[2], "index_select")
        if axis is None or idx is None:
            return None
        if 0 < axis < src.rank - 1:
            self.err(E_AXIS, f"`index_select` along dim {axis} of a rank-{src.rank} tensor is not supported",
                     e.args[1].span, "a middle dim",
                     help="select along the first dim (whole rows) or the last (elements of each row)")
            return None
        shape = list(src.shape)
        valid = list(src.valid_shape)
        shape[axis], valid[axis] = idx.shape[0], idx.valid_shape[0]
        self.t.call[id(e)] = CallInfo("index_select", {"axis": axis, "table": self._name_of(e.args[0]),
                                                       "source": self._name_of(e.args[2])})
        return TensorTy(src.dtype, tuple(shape), None if valid == shape else tuple(valid))

    def _type_gather(self, e: ast.Call) -> Ty | None:
        if not self.arity(e, "gather", 3):
            return None
        src = self._tensor(e.args[0], "the source of `gather`")
        if src is None:
            return None
        axis = self._axis(e, e.args[1], src.rank)
        idx = self._index_tensor(e.args[2], "gather", rank=None)
        if axis is None or idx is None:
            return None
        if idx.rank != src.rank:
            self.err(E_INDEX, f"the index of `gather` must have the source's rank {src.rank}, not {idx.rank}",
                     e.args[2].span, f"shape {fmt_shape(idx.shape)}",
                     help="gather takes one index per output element; for whole slices use `index_select`")
            return None
        if axis != src.rank - 1:
            self.err(E_AXIS, f"`gather` along dim {axis} of a rank-{src.rank} tensor is not supported", e.args[1].span,
                     "not the last dim", help="gather along the last dim (dim=-1); `index_select(t, 0, rows)` "
                     "takes whole rows")
            return None
        if not self._same_dims(e, "the index of `gather` outside the gathered dim", idx.shape[:-1], src.shape[:-1],
                               e.args[2]):
            return None
        self.t.call[id(e)] = CallInfo("gather", {"axis": axis, "table": self._name_of(e.args[0]),
                                                 "source": self._name_of(e.args[2])})
        valid = tuple(sym.min_(a, b, self.ranges()) for a, b in zip(idx.valid_shape[:-1], src.valid_shape[:-1])) + \
            (idx.valid_shape[-1],)
        return TensorTy(src.dtype, idx.shape, None if valid == idx.shape else valid)

    def scatter_stmt(self, s: ast.ExprStmt, e: ast.Call) -> None:
        """``scatter_update(dst, dim, index, src)``: the slices of src into dst at index's positions."""
        if not self.arity(e, "scatter_update", 4):
            return
        target = e.args[0]
        if not isinstance(target, ast.Name):
            self.err("E0319", "`scatter_update` writes a named tensor", target.span,
                     help="pass the `out`/`inout` parameter or local to update")
            for a in e.args:
                self.expr(a)
            return
        b = self.lookup(target)
        if b is None:
            return
        self.t.binding[id(target)] = b
        if not isinstance(b.ty, TensorTy):
            self.err("E0311", f"`{b.name}` is a scalar and cannot be updated", target.span)
            return
        if not b.writable:
            self.not_writable(b, target.span)
            return
        dst = b.ty
        axis = self._axis(e, e.args[1], dst.rank)
        idx = self._index_tensor(e.args[2], "scatter_update")
        src = self._tensor(e.args[3], "the source of `scatter_update`")
        if axis is None or idx is None or src is None:
            return
        if axis != 0 or dst.rank < 2:
            self.err(E_AXIS, f"`scatter_update` along dim {axis} of a rank-{dst.rank} tensor is not supported",
                     e.args[1].span, help="update whole rows: dim 0 of a tensor of rank 2 or more")
            return
        if src.dtype != dst.dtype:
            self.err("E0303", f"cannot write {src.dtype} rows into `{b.name}`, which is {dst.dtype}", e.args[3].span,
                     f"this is {src.dtype}", secondary=[Label(b.span, f"`{b.name}` is {dst.dtype}")],
                     help=f"convert it: `cast(..., {dst.dtype})`")
            return
        if src.rank != dst.rank:
            self.err(E_SHAPES, f"`scatter_update` into `{b.name}` (rank {dst.rank}) takes a source of rank "
                     f"{dst.rank}, not {src.rank}", e.args[3].span, f"shape {fmt_shape(src.shape)}",
                     secondary=[Label(b.span, f"`{b.name}` is {fmt_shape(dst.shape)}")],
                     help=f"give the source `{b.name}`'s rank: one row of `{b.name}` per index")
            return
        if not self._same_dims(e, "the rows of the source", src.shape[1:], dst.shape[1:], e.args[3]):
            return
        if src.shape[0] != idx.shape[0]:
            self.err(E_SHAPES, f"the source has {sym.to_text(src.shape[0])} rows but the index "
                     f"{sym.to_text(idx.shape[0])} positions", e.args[2].span, f"shape {fmt_shape(idx.shape)}",
                     secondary=[Label(e.args[3].span, f"shape {fmt_shape(src.shape)}")],
                     help="one index per row of the source")
            return
        unique = self._unique_indices(e)
        if unique is None:
            return
        self.t.call[id(e)] = CallInfo("scatter_update", {"axis": axis, "target": b.ir_name, "table": b.name,
                                                         "source": self._name_of(e.args[2]), "unique": unique})

    def _unique_indices(self, e: ast.Call) -> bool | None:
        """``unique_indices=True``: the caller promises distinct positions, so the rows may be written
        in any order, on many cores. The call checks the promise on the values it is given, which
        are the values the kernel reads only when the index is an input parameter (E0323)."""
        kw = e.keyword("unique_indices")
        if kw is None:
            return False
        unique = self.const_bool(kw.value, "`unique_indices`")
        if not unique:
            return unique
        b = self.t.binding.get(id(e.args[2])) if isinstance(e.args[2], ast.Name) else None
        if b is None or b.kind != "param" or b.param is None or b.param.mode != "in":
            self.err("E0323", "`unique_indices=True` needs the index to be an input parameter", e.args[2].span,
                     "not an `in` parameter of the kernel", secondary=[Label(kw.span, "promised here")],
                     help="pass the positions as an input tensor (the call checks that its values are "
                          "distinct), or drop `unique_indices` to write the rows in order")
            return None
        return True

    # ------------------------------------------------------------ generated tensors
    def _type_arange(self, e: ast.Call) -> Ty | None:
        if not self.arity(e, "arange", 1, 3):
            return None
        args = list(e.args)
        dtype = "i32"
        if args and self._peek_dtype(args[-1]) is not None:
            dtype = self.expr(args.pop()).dtype
        if not 1 <= len(args) <= 2:
            self.err("E0302", "`arange` takes a length, or a start and a stop, and an optional dtype", e.span,
                     help="write `arange(n, i32)` or `arange(start, stop, i32)`")
            return None
        vals = [self.int_value(a, "a bound of `arange`") for a in args]
        if any(v is None for v in vals):
            return None
        start, stop = (0, vals[0]) if len(vals) == 1 else vals
        n = sym.sub(stop, start)
        runtime = sym.free_symbols(n) - set(self.symbols)
        if runtime:
            self.err(E_ARANGE, "the length of `arange` must be known before the kernel runs", e.span,
                     f"it depends on `{sorted(runtime)[0]}`",
                     help="give a length over dims and constants; the start may move (`arange(i * B, i * B + B)`)")
            return None
        if sym.is_const(n) and n <= 0:
            self.err(E_ARANGE, f"`arange` of length {n}", e.span, "the length must be positive",
                     help="the stop must lie above the start")
            return None
        if dtype not in ("i16", "i32", "i64", "f16", "bf16", "f32"):
            self.err("E0307", f"`arange` makes i16, i32, i64 or float tensors, not {dtype}", e.span,
                     help="use i32 and cast")
            return None
        self.t.call[id(e)] = CallInfo("arange", {"start": start, "dtype": dtype})
        return TensorTy(dtype, (n,))

    def _peek_dtype(self, node: ast.Expr) -> DtypeTy | None:
        if isinstance(node, ast.Name) and (node.id in DTYPES or node.id in self.variant):
            return DtypeTy(self.variant.get(node.id, node.id))
        return None

    def _type_triu(self, e: ast.Call) -> Ty | None:
        return self._tri(e, "triu")

    def _type_tril(self, e: ast.Call) -> Ty | None:
        return self._tri(e, "tril")

    def _tri(self, e: ast.Call, fn: str) -> Ty | None:
        if not self.arity(e, fn, 1, 2):
            return None
        x = self._tensor(e.args[0], f"the argument of `{fn}`")
        if x is None:
            return None
        kw = e.keyword("diagonal")
        node = e.args[1] if len(e.args) > 1 else kw.value if kw is not None else None
        if len(e.args) > 1 and kw is not None:
            self.err("E0302", "`diagonal` is given twice", kw.span, help="give it once")
            return None
        diagonal = 0 if node is None else self.int_value(node, "the diagonal")
        if diagonal is None:
            return None
        if x.rank < 2:
            self.err("E0311", f"`{fn}` takes a tensor of rank 2 or more, not {x.rank}", e.args[0].span,
                     help="the mask runs over the last two dims")
            return None
        if x.dtype == "bool":
            self.err("E0307", f"`{fn}` takes numbers, not bool", e.span, help="cast first: `cast(x, f32)`")
            return None
        self.t.call[id(e)] = CallInfo(fn, {"lower": fn == "tril", "diagonal": diagonal})
        return x

    # ------------------------------------------------------------ arg-reductions and top-k
    def _row_op(self, e: ast.Call, fn: str, x: TensorTy, dim_kw: ast.Keyword | None) -> int | None:
        axis = self._axis(e, dim_kw.value if dim_kw is not None else None, x.rank, default=-1)
        if axis is None:
            return None
        if axis != x.rank - 1:
            self.err(E_AXIS, f"`{fn}` along dim {axis} of a rank-{x.rank} tensor is not supported",
                     dim_kw.value.span, "not the last dim", help="reduce along the last dim (dim=-1)")
            return None
        if x.dtype == "bool" or (not is_float(x.dtype) and DTYPES[x.dtype].itemsize > 4):
            self.err("E0307", f"`{fn}` takes float or integer tensors of at most 32 bits, not {x.dtype}", e.span,
                     help="cast first: `cast(x, f32)`")
            return None
        return axis

    def _type_argmax(self, e: ast.Call) -> Ty | None:
        return self._argreduce(e, "argmax")

    def _type_argmin(self, e: ast.Call) -> Ty | None:
        return self._argreduce(e, "argmin")

    def _argreduce(self, e: ast.Call, fn: str) -> Ty | None:
        if not self.arity(e, fn, 1):
            return None
        x = self._tensor(e.args[0], f"the argument of `{fn}`")
        if x is None:
            return None
        axis = self._row_op(e, fn, x, e.keyword("dim"))
        keep_kw = e.keyword("keepdim")
        keep = self.const_bool(keep_kw.value, "`keepdim`") if keep_kw else False
        if axis is None or keep is None:
            return None
        self.t.call[id(e)] = CallInfo(fn, {"axis": axis, "keepdim": keep})
        shape, valid = list(x.shape), list(x.valid_shape)
        shape[axis] = valid[axis] = 1
        if not keep:
            if x.rank == 1:
                shape, valid = [1], [1]
            else:
                del shape[axis]
                del valid[axis]
        return TensorTy("i32", tuple(shape), None if valid == shape else tuple(valid))

    def _sorted_row(self, e: ast.Call, fn: str, x: TensorTy) -> int | None:
        """The row length of a topk / argsort: a constant, whole (its valid extent too)."""
        n = x.shape[-1]
        if not sym.is_const(n):
            self.err(E_TOPK, f"`{fn}` needs the length of its rows fixed, not `{sym.to_text(n)}`", e.args[0].span,
                     f"rows of {sym.to_text(n)} elements",
                     help=f"fix `{sym.to_text(n)}` in the YAML's `symbols:`: a row is sorted within one tile")
            return None
        if x.valid_shape[-1] != n:
            self.err(E_TOPK, f"`{fn}` sorts whole rows, but this row's valid length is "
                     f"`{sym.to_text(x.valid_shape[-1])}`", e.args[0].span,
                     help="sort a tensor whose rows are whole")
            return None
        return int(n)

    def unpack(self, s: ast.Unpack) -> None:
        """``v, i = topk(x, k)``: one local per result."""
        e = s.value
        fn = e.func_name if isinstance(e, ast.Call) else None
        tys = None
        if fn not in MULTI_RESULT:
            what = f"`{fn}`" if fn else "this expression"
            self.err(E_UNPACK, f"{what} gives one value; it cannot be bound to {len(s.targets)} names", s.span,
                     help="bind it to one name: `v = ...`; `topk` is the builtin with two results")
            self.expr(e)
        elif len(s.targets) != MULTI_RESULT[fn]:
            self.err(E_UNPACK, f"`{fn}` gives {MULTI_RESULT[fn]} results, not {len(s.targets)}", s.span,
                     help=f"write `{INDEXING[fn].signature}`")
        else:
            tys = self._type_topk(e)
        if tys is None:
            for target in s.targets:  # poisoned: their uses stay quiet
                self.scope[target.id] = Binding(target.id, "error", ScalarTy("f32"), target.span, ir_name="?")
            return
        self.bind_results(s, tys)

    def bind_results(self, s: ast.Unpack, tys: tuple[TensorTy, ...]) -> None:
        for target, ty in zip(s.targets, tys):
            name = target.id
            self.check_name(name, target.span, "local")
            old = self.scope.get(name)
            if old is not None and old.kind in ("param", "index", "symbol"):
                out = old.param is not None and old.param.mode in ("out", "inout")
                kind = {"param": "parameter", "index": "loop index"}.get(old.kind, "dim symbol")
                self.err("E0400" if out else "E0316", f"`{name}` is a {kind} and cannot be rebound",
                         target.span, secondary=[Label(old.span, "bound here")],
                         help=f"write into it: `{name}[:] = ...`" if out else "bind the result to a new name")
                continue
            self.check_rebind(name, old, target.span)  # (E0871: a loop body rebinding a name it read)
            b = Binding(name, "value", ty, target.span, ir_name=self.ir_name(name))
            self.scope[name] = b
            self.t.binding[id(target)] = b

    def _type_topk(self, e: ast.Call) -> tuple[TensorTy, TensorTy] | None:
        if not self.arity(e, "topk", 2):
            return None
        x = self._tensor(e.args[0], "the argument of `topk`")
        if x is None:
            return None
        axis = self._row_op(e, "topk", x, e.keyword("dim"))
        k = self.int_value(e.args[1], "`k`")
        largest_kw = e.keyword("largest")
        largest = self.const_bool(largest_kw.value, "`largest`") if largest_kw else True
        if axis is None or k is None or largest is None:
            return None
        n = self._sorted_row(e, "topk", x)
        if n is None:
            return None
        if not sym.is_const(k) or not 1 <= k <= n:
            self.err(E_TOPK, f"`k` must be a constant in [1, {n}] (the row length), not `{sym.to_text(k)}`",
                     e.args[1].span, help="pick at most as many values as a row holds")
            return None
        self.t.call[id(e)] = CallInfo("topk", {"axis": axis, "k": int(k), "largest": largest})
        shape = (*x.shape[:-1], int(k))
        valid = (*x.valid_shape[:-1], int(k))
        v = None if valid == shape else valid
        return TensorTy(x.dtype, shape, v), TensorTy("i32", shape, v)

    def _type_argsort(self, e: ast.Call) -> Ty | None:
        if not self.arity(e, "argsort", 1):
            return None
        x = self._tensor(e.args[0], "the argument of `argsort`")
        if x is None:
            return None
        axis = self._row_op(e, "argsort", x, e.keyword("dim"))
        desc_kw = e.keyword("descending")
        desc = self.const_bool(desc_kw.value, "`descending`") if desc_kw else False
        if axis is None or desc is None:
            return None
        n = self._sorted_row(e, "argsort", x)
        if n is None:
            return None
        self.t.call[id(e)] = CallInfo("argsort", {"axis": axis, "k": n, "largest": desc})
        return TensorTy("i32", x.shape, x.valid)
