"""The simulator's ``tile.cast``: pto-isa's TCVT under a rounding mode, element by element.

Every source value (f32, f16, bf16, integers of up to 32 bits) is exact in float64, so each
conversion rounds once, from the exact value to the target:
  * to a float dtype (narrowing, or an integer too wide for it): to the nearest representable
    value in the mode's direction, with IEEE 754's overflow (the modes that round toward the
    overflowing side give infinity, the others the largest finite value), subnormals included;
  * to an integer dtype from a float: to an integral value in the mode's direction, then
    saturated to the dtype's range; NaN gives 0;
  * between integer dtypes: saturated to the target's range;
  * to its own dtype: unchanged (the IR's identity cast; the rounding ops round to an integral
    value in the same dtype).
The modes: ``rint`` to nearest, ties to even (the default); ``round`` to nearest, ties away from
zero (C's round); ``floor``; ``ceil``; ``trunc`` toward zero. The CPU backend implements the same
(``cpu_subset/convert.hpp``); tests/backends/test_cast_modes.py holds both to hand-written values.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DTYPES, numpy_dtype

# significand bits (with the implicit one), exponent of the smallest normal, of the largest finite
FORMATS: dict[str, tuple[int, int, int]] = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127)}
MODES = ("rint", "round", "floor", "ceil", "trunc")


def _rounds_up(n: np.ndarray, frac: np.ndarray, negative: np.ndarray, mode: str) -> np.ndarray:
    """Whether a magnitude n + frac (0 <= frac < 1) rounds away from zero to n + 1."""
    if mode == "round":
        return frac >= 0.5
    if mode == "floor":
        return negative & (frac > 0)
    if mode == "ceil":
        return ~negative & (frac > 0)
    if mode == "trunc":
        return np.zeros(n.shape, bool)
    return (frac > 0.5) | ((frac == 0.5) & (np.fmod(n, 2.0) != 0))


def round_to_format(x: np.ndarray, dtype: str, mode: str) -> np.ndarray:
    """float64 ``x`` rounded to the values of float ``dtype`` under ``mode`` (still float64)."""
    precision, min_exp, max_exp = FORMATS[dtype]
    out = np.array(x, np.float64)
    at = np.isfinite(out) & (out != 0)
    v = out[at]
    negative = v < 0
    magnitude = np.abs(v)
    _, exponent = np.frexp(magnitude)  # magnitude = m * 2^exponent, m in [0.5, 1)
    quantum = np.maximum(exponent - 1, min_exp) - (precision - 1)
    scaled = np.ldexp(magnitude, -quantum)  # exact: a power-of-two scaling
    n = np.floor(scaled)
    n = n + _rounds_up(n, scaled - n, negative, mode)
    result = np.ldexp(n, quantum)
    max_finite = np.ldexp(2.0 - 2.0 ** (1 - precision), max_exp)
    to_infinity = {"floor": negative, "ceil": ~negative, "trunc": np.zeros(v.shape, bool)}.get(
        mode, np.ones(v.shape, bool))
    result = np.where(result > max_finite, np.where(to_infinity, np.inf, max_finite), result)
    out[at] = np.where(negative, -result, result)
    return out


def round_to_integer(x: np.ndarray, mode: str) -> np.ndarray:
    """float64 ``x`` rounded to an integral value under ``mode`` (non-finite values kept)."""
    if mode == "round":
        return np.copysign(np.floor(np.abs(x) + 0.5), x)  # exact: |x| + 0.5 is, for x from a float32
    return {"rint": np.rint, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}[mode](x)


def saturate(x: np.ndarray, dtype: str) -> np.ndarray:
    """Integral float64 ``x`` as ``dtype``: clipped to its range, NaN as 0."""
    npd = numpy_dtype(dtype)
    info = np.iinfo(npd)
    out = np.zeros(x.shape, npd)
    high, low = x >= float(info.max), x <= float(info.min)
    mid = ~(high | low | np.isnan(x))
    out[mid] = x[mid].astype(npd)
    out[high], out[low] = info.max, info.min
    return out


def convert(values: np.ndarray, src: str, to: str, mode: str = "rint") -> np.ndarray:
    """``values`` (of dtype ``src``) converted to ``to`` as TCVT does under ``mode``."""
    npd = numpy_dtype(to)
    if to == src or "bool" in (to, src):
        return np.asarray(values).astype(npd)
    if mode not in MODES:
        raise ValueError(f"no rounding mode {mode!r}")
    if np.asarray(values).dtype.kind in "iu" and not DTYPES[to].is_float:
        info = np.iinfo(npd)
        return np.clip(np.asarray(values), info.min, info.max).astype(npd)
    x = np.asarray(values).astype(np.float64)
    if DTYPES[to].is_float:
        with np.errstate(over="ignore"):
            return round_to_format(x, to, mode).astype(npd)
    return saturate(round_to_integer(x, mode) if DTYPES[src].is_float else x, to)


__all__ = ["FORMATS", "MODES", "convert", "round_to_format", "round_to_integer", "saturate"]
