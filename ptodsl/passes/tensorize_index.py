"""Tensorize the indexing builtins (``ptodsl/check/indexing.py`` typed them).

Every index a gather, index_select or scatter_update reads from data is checked before the op:
a loop of the control program reads each valid element of the index tensor and guards it against
the dim it indexes (``guard {access = "index"}``), so an index outside ``[0, dim)`` stops the call
with E0730 on every backend before anything is read or written at it. The ops after the guards
may then trust their indices (their instructions are still emitted with a clamp). A
``scatter_update(..., unique_indices=True)`` also gets a ``guard {access = "repeat"}`` on its index,
which stops the call at the first position that repeats (E0731), and carries ``unique = true``.

``triu``/``tril`` become a triangular 0/1 mask (``tri``), a comparison and a select, so the masked
elements are exactly 0 whatever x holds (inf and NaN too, as torch gives); ``argsort`` is a
``topk`` of the whole row whose values nobody reads.
"""

from __future__ import annotations

from typing import Any

from .. import sym
from ..check.types import CallInfo, TensorTy
from ..frontend import ast
from ..ir import Op, TensorType, Value


def _type(t: TensorTy) -> TensorType:
    return TensorType(t.dtype, t.shape, t.valid)


def index_guards(b: Any, idx: Value, bound: sym.Expr, table: str, axis: int, source: str, span) -> None:
    """Loops over the valid elements of ``idx`` that stop the call at the first value outside
    ``[0, bound)``: the dim ``axis`` of ``table`` it indexes."""
    t: TensorType = idx.type
    indices = [b.fresh("_ix") for _ in t.shape]
    for _ in indices:
        b.blocks.append([])
    value = b.fresh("_iv")
    b.emit(Op("read", [idx], {"index": tuple(sym.Sym(i) for i in indices), "sym": value, "dtype": t.dtype},
              span=span))
    v = sym.Sym(value)
    inside = sym.logical("and", sym.compare("<=", 0, v), sym.compare("<=", v, sym.sub(bound, 1)))
    b.emit(Op("guard", [], {"cond": inside, "tensor": table, "axis": axis, "offset": v, "extent": 1, "dim": bound,
                            "access": "index", "source": source}, span=span))
    for i, extent in reversed(list(zip(indices, t.valid_shape))):
        body = b.blocks.pop()
        b.emit(Op("loop", [], {"index": i, "lo": 0, "hi": extent, "step": 1, "name": i}, [], [body], span))


def lower_call(b: Any, e: ast.Call, call: CallInfo, name: str | None) -> Value:
    """The ops of an indexing builtin used as a value; returns its result."""
    ty = b.t.ty[id(e)]
    out = Value(b.named(name) if name else b.fresh(), _type(ty))
    a = call.attrs
    if call.op in ("index_select", "gather"):
        src, idx = b.value(e.args[0]), b.value(e.args[2])
        axis = a["axis"]
        index_guards(b, idx, src.type.valid_shape[axis], a["table"], axis, a["source"], e.span)
        b.emit(Op(call.op, [src, idx], {"axis": axis}, [out], span=e.span))
    elif call.op == "arange":
        b.emit(Op("arange", [], {"start": a["start"]}, [out], span=e.span))
    elif call.op in ("triu", "tril"):
        x = b.value(e.args[0])
        t: TensorType = x.type
        mask = Value(b.fresh("m"), TensorType(t.dtype, t.shape, t.valid))
        b.emit(Op("tri", [], {"lower": a["lower"], "diagonal": a["diagonal"]}, [mask], span=e.span))
        keep = Value(b.fresh("c"), TensorType("bool", t.shape, t.valid))
        b.emit(Op("cmp", [mask], {"mode": "ne", "scalar": 0}, [keep], span=e.span))
        b.emit(Op("where", [keep, x], {"scalar2": 0}, [out], span=e.span))
    elif call.op in ("argmax", "argmin"):
        x = b.value(e.args[0])
        t = x.type
        if a["keepdim"]:
            b.emit(Op(call.op, [x], {"axis": a["axis"], "keepdim": True}, [out], span=e.span))
        else:
            shape, valid = list(t.shape), list(t.valid_shape)
            shape[a["axis"]] = valid[a["axis"]] = 1
            kept = Value(b.fresh(), TensorType("i32", tuple(shape), None if valid == shape else tuple(valid)))
            b.emit(Op(call.op, [x], {"axis": a["axis"], "keepdim": True}, [kept], span=e.span))
            b.emit(Op("reshape", [kept], {}, [out], span=e.span))
    elif call.op == "argsort":
        x = b.value(e.args[0])
        values = Value(b.fresh("sorted"), TensorType(x.type.dtype, out.type.shape, out.type.valid))
        b.emit(Op("topk", [x], {"k": a["k"], "axis": a["axis"], "largest": a["largest"]}, [values, out],
                  span=e.span))
    else:
        raise AssertionError(f"no lowering for the indexing builtin {call.op}")
    return out


def lower_scatter(b: Any, s: ast.ExprStmt) -> None:
    e = s.expr
    a = b.t.call[id(e)].attrs
    dst = b.values[a["target"]]
    idx, src = b.value(e.args[2]), b.value(e.args[3])
    bound = dst.type.valid_shape[a["axis"]]
    index_guards(b, idx, bound, a["table"], a["axis"], a["source"], s.span)
    attrs: dict[str, Any] = {"axis": a["axis"]}
    if a.get("unique"):
        # positions declared distinct (each now known to lie in [0, bound)): checked once per call,
        # at the top level (the index is an input, the same in every iteration of a loop around
        # the op), before the statement holding the op, so that its rows may be written in any order
        b.blocks[0].append(Op("guard", [idx], {"cond": 1, "tensor": a["table"], "axis": a["axis"], "offset": 0,
                                   "extent": idx.type.valid_shape[0], "dim": bound, "access": "repeat",
                                   "source": a["source"]}, span=s.span))
        attrs["unique"] = True
    b.emit(Op("scatter_update", [dst, idx, src], attrs, span=s.span))


def lower_unpack(b: Any, s: ast.Unpack) -> None:
    """``v, i = topk(x, k)``: one op, a result per name."""
    e = s.value
    a = b.t.call[id(e)].attrs
    x = b.value(e.args[0])
    results = []
    for target in s.targets:
        binding = b.t.binding[id(target)]
        v = Value(b.named(binding.ir_name), _type(binding.ty))
        b.values[binding.ir_name] = v
        results.append(v)
    b.emit(Op("topk", [x], {"k": a["k"], "axis": a["axis"], "largest": a["largest"]}, results, span=s.span))
