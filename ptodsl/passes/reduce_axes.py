"""A reduction over several axes (``sum(x, dim=[0, 2])``) as Tensor IR: one single-axis
reduction per axis, innermost first, each keeping its axis, then one reshape dropping them all
when ``keepdim=False``.

Reducing axis by axis is exact for ``amax``/``amin``, and for ``mean`` a mean of equal-sized
means is the mean. A half-float ``sum``/``mean`` is computed in f32 between the steps (a cast in,
a cast out), so its result is rounded to the dtype once, as a single-axis reduction's is.
"""

from __future__ import annotations

from ..check.types import CallInfo
from ..dtypes import DTYPES, accumulator_dtype
from ..ir import Op, TensorType, Value

ROUNDING = ("sum", "mean")  # reductions whose intermediate results would be rounded again


def reduce_axes(builder, call: CallInfo, src: Value, out: Value, span) -> Value:
    """Emit the ops of ``call`` (a reduction with ``axes``) on ``src`` through ``builder`` (the
    tensorize builder: ``emit`` and ``fresh``); the last op defines ``out``."""
    axes = sorted(call.attrs["axes"], reverse=True)
    keep = call.attrs["keepdim"]
    dtype = src.type.dtype
    wide = accumulator_dtype(dtype) if call.op in ROUNDING and DTYPES[dtype].is_float else dtype
    cur = src
    if wide != dtype:
        cur = _value(builder, wide, cur.type.shape, cur.type.valid_shape)
        builder.emit(Op("cast", [src], {"to": wide, "mode": "rint"}, [cur], span=span))
    shape, valid = list(src.type.shape), list(src.type.valid_shape)
    for k, axis in enumerate(axes):
        shape[axis], valid[axis] = 1, 1
        last = k == len(axes) - 1 and keep and wide == dtype
        res = out if last else _value(builder, wide, shape, valid)
        builder.emit(Op(call.op, [cur], {"axis": axis, "keepdim": True}, [res], span=span))
        cur = res
    if wide != dtype:
        res = out if keep else _value(builder, dtype, shape, valid)
        builder.emit(Op("cast", [cur], {"to": dtype, "mode": "rint"}, [res], span=span))
        cur = res
    if not keep:
        builder.emit(Op("reshape", [cur], {}, [out], span=span))
    return out


def _value(builder, dtype: str, shape, valid) -> Value:
    shape, valid = tuple(shape), tuple(valid)
    return Value(builder.fresh(), TensorType(dtype, shape, None if valid == shape else valid))


__all__ = ["reduce_axes"]
