"""Tensor IR of the layout builtins (``check/layout.py`` typed them).

A reshape or a permutation that keeps the last dim last is a relabelling of GM memory: ``reshape``
and ``permute`` ops of the control program, no data moves (``ir/gm.py`` gives the strides). That
is only done where the language's rule, "a layout op gives a value as of its statement", holds
for free: the source's memory never changes afterwards (an input, or a value the kernel computed)
and the reshape can be expressed with strides (``shapes.reshape_strides``). Otherwise the source
is first copied into a workspace of its own (``clone``). A permutation that moves the last dim
becomes relabellings around one ``transpose`` of the last two dims, which tiling does with TTRANS.
``concat`` and ``clone`` are computations that tiling stores into their result's regions;
``expand`` is the ``broadcast`` that writes of a narrower value already use.
"""

from __future__ import annotations

from .. import shapes, sym
from ..check.types import CallInfo
from ..frontend import ast
from ..ir import Op, TensorType, Value
from ..ir.gm import dense_strides

LAYOUT_CALLS = ("reshape", "permute", "concat", "expand", "clone")


def _layout(b) -> dict[str, tuple[str, tuple[sym.Expr, ...]]]:
    """Value name -> (the root whose memory it labels, its strides there); absent: itself, dense."""
    if not hasattr(b, "layout"):
        b.layout = {}
    return b.layout


def origin(b, v: Value) -> tuple[str, tuple[sym.Expr, ...]]:
    return _layout(b).get(v.name, (v.name, dense_strides(v.type.shape)))


def note_view(b, base: Value, view: Value) -> None:
    """A view shares its base's root and strides."""
    _layout(b)[view.name] = origin(b, base)


def _mutable_roots(b) -> set[str]:
    """Tensors later statements may write: out/inout parameters and locals."""
    ck = b.ck
    out = {name for name, p in ck.params.items() if p.param is not None and p.param.mode in ("out", "inout")}
    out |= {d.ir_name for d in ck.typing.defines.values() if d.kind == "local"}
    return out


def _type(shape, valid, dtype: str) -> TensorType:
    shape, valid = tuple(shape), tuple(valid)
    return TensorType(dtype, shape, None if valid == shape else valid)


def copy_of(b, src: Value, span) -> Value:
    """``src`` in a dense workspace of its own."""
    tmp = Value(b.fresh("c"), src.type)
    b.emit(Op("clone", [src], {}, [tmp], span=span))
    return tmp


def relabel(b, src: Value, out: Value, span, snapshot: bool) -> Value:
    """``out`` as a reshape of ``src``'s memory; with ``snapshot``, a source whose memory may
    change later (or one the reshape cannot label with strides) is copied first."""
    root, strides = origin(b, src)
    new = shapes.reshape_strides(src.type.shape, strides, out.type.shape)
    if new is None or (snapshot and root in _mutable_roots(b)):
        src = copy_of(b, src, span)
        root, strides = src.name, dense_strides(src.type.shape)
        new = shapes.reshape_strides(src.type.shape, strides, out.type.shape)
    b.emit(Op("reshape", [src], {}, [out], span=span))
    _layout(b)[out.name] = (root, new if new is not None else dense_strides(out.type.shape))
    return out


def _permute(b, src: Value, perm: tuple[int, ...], out: Value | None, span, snapshot: bool) -> Value:
    t: TensorType = src.type
    if perm == tuple(range(t.rank)) and out is None:
        return src
    shape, valid = shapes.permute(t.shape, perm), shapes.permute(t.valid_shape, perm)
    out = out or Value(b.fresh("p"), _type(shape, valid, t.dtype))
    root, strides = origin(b, src)
    if snapshot and root in _mutable_roots(b):
        src = copy_of(b, src, span)
        root, strides = src.name, dense_strides(src.type.shape)
    b.emit(Op("permute", [src], {"perm": perm}, [out], span=span))
    _layout(b)[out.name] = (root, shapes.permute(strides, perm))
    return out


def permute(b, src: Value, perm: tuple[int, ...], out: Value, span) -> Value:
    """``out`` = ``src`` with its dims in the order ``perm``. Keeping the last dim last, a
    relabelling; moving it, a relabelling that puts the dim to become last second to last, a
    ``transpose`` of the last two dims into a workspace, and a relabelling of that."""
    n = len(perm)
    if perm[-1] == n - 1:
        return _permute(b, src, perm, out, span, snapshot=True)
    a = perm[-1]
    others = [d for d in perm if d not in (a, n - 1)]
    first = tuple(others + [a, n - 1])
    mid = _permute(b, src, first, None, span, snapshot=False)
    mt: TensorType = mid.type
    swap = lambda xs: tuple(xs[:-2]) + (xs[-1], xs[-2])  # noqa: E731
    order = others + [n - 1, a]  # source dims of the transposed workspace, in its order
    second = tuple(order.index(d) for d in perm)
    tout = out if second == tuple(range(n)) else Value(b.fresh("t"), _type(swap(mt.shape), swap(mt.valid_shape),
                                                                            mt.dtype))
    b.emit(Op("transpose", [mid], {}, [tout], span=span))
    if tout is out:
        return out
    return _permute(b, tout, second, out, span, snapshot=False)


def lower(b, e: ast.Call, call: CallInfo, out: Value) -> Value:
    """The ops of one layout builtin; ``out`` is the value its result must be."""
    span = e.span
    if call.op == "concat":
        parts = [b.value(item) for item in e.args[0].items]
        b.emit(Op("concat", parts, {"axis": call.attrs["axis"]}, [out], span=span))
        return out
    src = b.value(e.args[0])
    if call.op == "reshape":
        return relabel(b, src, out, span, snapshot=True)
    if call.op == "permute":
        return permute(b, src, tuple(call.attrs["perm"]), out, span)
    if call.op == "clone":
        b.emit(Op("clone", [src], {}, [out], span=span))
        return out
    assert call.op == "expand", call.op
    if tuple(src.type.shape) == tuple(out.type.shape):
        b.emit(Op("clone", [src], {}, [out], span=span))
    else:
        b.emit(Op("broadcast", [src], {}, [out], span=span))
    return out


__all__ = ["LAYOUT_CALLS", "lower", "note_view", "origin", "permute", "relabel"]
