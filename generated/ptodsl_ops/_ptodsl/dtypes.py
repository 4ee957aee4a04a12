"""The element types ptodsl knows, described once: name, size in bytes and numpy equivalent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The order is the one the documentation uses; tables and messages list dtypes in this order.
DTYPE_NAMES: tuple[str, ...] = ("bool", "i8", "i16", "i32", "i64", "u8", "f16", "bf16", "f32")


@dataclass(frozen=True)
class DtypeInfo:
    name: str
    itemsize: int
    numpy_name: str  # a name numpy.dtype() accepts, except bf16 which comes from ml_dtypes
    is_float: bool
    is_signed: bool


DTYPES: dict[str, DtypeInfo] = {
    d.name: d
    for d in (
        DtypeInfo("bool", 1, "bool", False, False),
        DtypeInfo("i8", 1, "int8", False, True),
        DtypeInfo("i16", 2, "int16", False, True),
        DtypeInfo("i32", 4, "int32", False, True),
        DtypeInfo("i64", 8, "int64", False, True),
        DtypeInfo("u8", 1, "uint8", False, False),
        DtypeInfo("f16", 2, "float16", True, True),
        DtypeInfo("bf16", 2, "bfloat16", True, True),
        DtypeInfo("f32", 4, "float32", True, True),
    )
}

assert tuple(DTYPES) == DTYPE_NAMES

# Spellings users bring from numpy, torch and C, so an error can say which name ptodsl uses.
DTYPE_ALIASES: dict[str, str] = {
    "float32": "f32", "fp32": "f32", "float": "f32", "float16": "f16", "fp16": "f16", "half": "f16",
    "bfloat16": "bf16", "int8": "i8", "int16": "i16", "int32": "i32", "int": "i32", "int64": "i64",
    "uint8": "u8", "bool_": "bool", "boolean": "bool",
}
# Types users may expect but ptodsl does not offer, with the reason to show.
UNSUPPORTED_DTYPES: dict[str, str] = {
    name: "ptodsl has no 64-bit float (the vector and cube units do not compute in it); use f32"
    for name in ("f64", "float64", "fp64", "double")
}


def itemsize(name: str) -> int:
    """Bytes per element of the dtype called ``name``."""
    return DTYPES[name].itemsize


def numpy_dtype(name: str) -> Any:
    """The numpy dtype for ``name``; bf16 needs ml_dtypes, imported only when asked for."""
    import numpy as np

    if name == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(DTYPES[name].numpy_name)


def from_numpy(dtype: Any) -> str | None:
    """The ptodsl name of a numpy dtype, or None when ptodsl has no such element type."""
    import numpy as np

    dt = np.dtype(dtype)
    if dt.name == "bfloat16":
        return "bf16"
    for info in DTYPES.values():
        if info.name != "bf16" and np.dtype(info.numpy_name) == dt:
            return info.name
    return None


# The largest dim (a symbol's value, a literal shape, a test case's size): dims reach the generated
# code and the NPU's launch arguments as int32 values.
DIM_MAX = 2**31 - 1


def accumulator_dtype(dtype: str) -> str:
    """Vector reductions accumulate half floats in f32, as the hardware does."""
    return "f32" if DTYPES[dtype].is_float else dtype


__all__ = ["DIM_MAX", "DTYPES", "DTYPE_ALIASES", "DTYPE_NAMES", "FLOAT_MAX", "UNSUPPORTED_DTYPES", "DtypeInfo", "accumulator_dtype",
           "from_numpy", "itemsize", "numpy_dtype", "value_range"]


# Largest finite value of each float dtype; a scalar beyond it would become infinity.
FLOAT_MAX: dict[str, float] = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38}


def value_range(name: str) -> tuple[float, float]:
    """The values a scalar of dtype ``name`` can hold: integer bounds, or ± the largest finite float."""
    if name == "bool":
        return (0, 1)
    if name in FLOAT_MAX:
        return (-FLOAT_MAX[name], FLOAT_MAX[name])
    bits = 8 * DTYPES[name].itemsize
    if DTYPES[name].is_signed:
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return (0, (1 << bits) - 1)
