"""`cast(x, dtype, mode=...)` rounds the same way on sim and cpu, for every mode the language
offers: to integers (ties, negative ties, saturation, NaN) and to narrower floats (ties on the
f16 and bf16 grids, subnormals, overflow to infinity or to the largest finite value).

The expected values are written out by hand from the modes' definitions (docs/LANGUAGE.md §1.3),
not computed by any code of ptodsl. One kernel holds every conversion: one C++ build."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import ptodsl

MODES = ("rint", "round", "floor", "ceil", "trunc")
N = 32
I32 = (2**31 - 1, -(2**31))
I16 = (2**15 - 1, -(2**15))
INF, NAN = math.inf, math.nan
F16_MAX, BF16_MAX = 65504.0, (2 - 2**-7) * 2.0**127
E10, E7 = 2.0**-10, 2.0**-7  # the spacing of f16 and bf16 just above 1

# f32 inputs; index -> the value
X = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.75, -2.75, 3e9, -3e9, INF, -INF, NAN, 40000.0, -40000.0, 0.0,
     1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), 1 + 2**-12, 70000.0, -70000.0, 2.0**-25, 1 + 2**-8,
     float(np.finfo(np.float32).max), -(1 + 2**-8)]
# per mode (rint, round, floor, ceil, trunc), per input of X
X_TO_I32 = {
    "rint": [0, 2, 2, 0, -2, -2, 3, -3, I32[0], I32[1], I32[0], I32[1], 0, 40000, -40000, 0,
             1, 1, -1, 1, 70000, -70000, 0, 1, I32[0], -1],
    "round": [1, 2, 3, -1, -2, -3, 3, -3, I32[0], I32[1], I32[0], I32[1], 0, 40000, -40000, 0,
              1, 1, -1, 1, 70000, -70000, 0, 1, I32[0], -1],
    "floor": [0, 1, 2, -1, -2, -3, 2, -3, I32[0], I32[1], I32[0], I32[1], 0, 40000, -40000, 0,
              1, 1, -2, 1, 70000, -70000, 0, 1, I32[0], -2],
    "ceil": [1, 2, 3, 0, -1, -2, 3, -2, I32[0], I32[1], I32[0], I32[1], 0, 40000, -40000, 0,
             2, 2, -1, 2, 70000, -70000, 1, 2, I32[0], -1],
    "trunc": [0, 1, 2, 0, -1, -2, 2, -2, I32[0], I32[1], I32[0], I32[1], 0, 40000, -40000, 0,
              1, 1, -1, 1, 70000, -70000, 0, 1, I32[0], -1],
}
X_TO_I16 = {m: [max(I16[1], min(I16[0], v)) for v in vs] for m, vs in X_TO_I32.items()}
I64 = (2**63 - 1, -(2**63))
X_TO_I64 = {m: [3_000_000_000 if v == I32[0] and x == 3e9 else -3_000_000_000 if v == I32[1] and x == -3e9
                else I64[0] if v == I32[0] else I64[1] if v == I32[1] else v for x, v in zip(X, vs)]
            for m, vs in X_TO_I32.items()}
_EXACT = X[:8]
X_TO_F16 = {
    "rint": _EXACT + [INF, -INF, INF, -INF, NAN, 40000.0, -40000.0, 0.0, 1.0, 1 + 2 * E10, -1.0, 1.0, INF, -INF,
                      0.0, 1 + 2**-8, INF, -(1 + 2**-8)],
    "round": _EXACT + [INF, -INF, INF, -INF, NAN, 40000.0, -40000.0, 0.0, 1 + E10, 1 + 2 * E10, -(1 + E10), 1.0,
                       INF, -INF, 2.0**-24, 1 + 2**-8, INF, -(1 + 2**-8)],
    "floor": _EXACT + [F16_MAX, -INF, INF, -INF, NAN, 40000.0, -40000.0, 0.0, 1.0, 1 + E10, -(1 + E10), 1.0,
                       F16_MAX, -INF, 0.0, 1 + 2**-8, F16_MAX, -(1 + 2**-8)],
    "ceil": _EXACT + [INF, -F16_MAX, INF, -INF, NAN, 40000.0, -40000.0, 0.0, 1 + E10, 1 + 2 * E10, -1.0, 1 + E10,
                      INF, -F16_MAX, 2.0**-24, 1 + 2**-8, INF, -(1 + 2**-8)],
    "trunc": _EXACT + [F16_MAX, -F16_MAX, INF, -INF, NAN, 40000.0, -40000.0, 0.0, 1.0, 1 + E10, -1.0, 1.0,
                       F16_MAX, -F16_MAX, 0.0, 1 + 2**-8, F16_MAX, -(1 + 2**-8)],
}
# bf16: 3e9 lies between 178 and 179 steps of 2^24, 40000 between 156 and 157 of 256, 70000
# between 136 and 137 of 512; 1 + 2^-8 is a tie between 1 and 1 + 2^-7
B3, B4, B7 = (178 * 2.0**24, 179 * 2.0**24), (39936.0, 40192.0), (69632.0, 70144.0)
X_TO_BF16 = {
    "rint": _EXACT + [B3[1], -B3[1], INF, -INF, NAN, B4[0], -B4[0], 0.0, 1.0, 1.0, -1.0, 1.0, B7[1], -B7[1],
                      2.0**-25, 1.0, INF, -1.0],
    "round": _EXACT + [B3[1], -B3[1], INF, -INF, NAN, B4[0], -B4[0], 0.0, 1.0, 1.0, -1.0, 1.0, B7[1], -B7[1],
                       2.0**-25, 1 + E7, INF, -(1 + E7)],
    "floor": _EXACT + [B3[0], -B3[1], INF, -INF, NAN, B4[0], -B4[1], 0.0, 1.0, 1.0, -(1 + E7), 1.0, B7[0], -B7[1],
                       2.0**-25, 1.0, BF16_MAX, -(1 + E7)],
    "ceil": _EXACT + [B3[1], -B3[0], INF, -INF, NAN, B4[1], -B4[0], 0.0, 1 + E7, 1 + E7, -1.0, 1 + E7, B7[1],
                      -B7[0], 2.0**-25, 1 + E7, INF, -1.0],
    "trunc": _EXACT + [B3[0], -B3[0], INF, -INF, NAN, B4[0], -B4[0], 0.0, 1.0, 1.0, -1.0, 1.0, B7[0], -B7[0],
                       2.0**-25, 1.0, BF16_MAX, -1.0],
}
# f16 inputs to i8: ties, saturation (200, 127.5 rounding up to 128, -128.5 down to -129), NaN
H = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 200.0, -200.0, INF, -INF, NAN, 127.5, -128.5, 0.0]
H_TO_I8 = {
    "rint": [0, 2, 2, 0, -2, -2, 127, -128, 127, -128, 0, 127, -128, 0],
    "round": [1, 2, 3, -1, -2, -3, 127, -128, 127, -128, 0, 127, -128, 0],
    "floor": [0, 1, 2, -1, -2, -3, 127, -128, 127, -128, 0, 127, -128, 0],
    "ceil": [1, 2, 3, 0, -1, -2, 127, -128, 127, -128, 0, 127, -128, 0],
    "trunc": [0, 1, 2, 0, -1, -2, 127, -128, 127, -128, 0, 127, -128, 0],
}
H_TO_U8 = {
    "rint": [0, 2, 2, 0, 0, 0, 200, 0, 255, 0, 0, 128, 0, 0],
    "round": [1, 2, 3, 0, 0, 0, 200, 0, 255, 0, 0, 128, 0, 0],
    "floor": [0, 1, 2, 0, 0, 0, 200, 0, 255, 0, 0, 127, 0, 0],
    "ceil": [1, 2, 3, 0, 0, 0, 200, 0, 255, 0, 0, 128, 0, 0],
    "trunc": [0, 1, 2, 0, 0, 0, 200, 0, 255, 0, 0, 127, 0, 0],
}
# bf16 inputs to i32
B = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.75, -2.75, 2.0**32, -(2.0**32), INF, -INF, NAN, 0.0]
B_TO_I32 = {m: X_TO_I32[m][:8] + [I32[0], I32[1], I32[0], I32[1], 0, 0] for m in MODES}

CASTS = [("x", "i32", X_TO_I32), ("x", "i16", X_TO_I16), ("x", "i64", X_TO_I64), ("x", "f16", X_TO_F16),
         ("x", "bf16", X_TO_BF16), ("h", "i8", H_TO_I8), ("h", "u8", H_TO_U8), ("b", "i32", B_TO_I32)]
NP = {"i32": np.int32, "i16": np.int16, "i64": np.int64, "i8": np.int8, "u8": np.uint8, "f16": np.float16,
      "bf16": ml_dtypes.bfloat16}


@pytest.fixture(scope="module")
def op(tmp_path_factory) -> ptodsl.Operator:
    folder = tmp_path_factory.mktemp("cast_modes")
    outs, lines = [], []
    for src, dtype, _ in CASTS:
        for mode in MODES:
            name = f"{src}_{dtype}_{mode}"
            outs.append(f"{name}: out {dtype}[1, N]")
            lines.append(f"    {name}[:] = cast({src}, {dtype}, mode=\"{mode}\")")
    outs.append("x_i32_default: out i32[1, N]")
    lines.append("    x_i32_default[:] = cast(x, i32)")
    params = ", ".join(["x: f32[1, N]", "h: f16[1, N]", "b: bf16[1, N]", *outs])
    (folder / "cast_modes.pto").write_text(f"kernel cast_modes({params}):\n" + "\n".join(lines) + "\n")
    (folder / "cast_modes.yaml").write_text(f"op: cast_modes\nsymbols: {{N: {N}}}\nschedule: {{vec_tile: [1, {N}]}}\n")
    return ptodsl.load(str(folder / "cast_modes.yaml"))


def _row(values: list[float], dtype) -> np.ndarray:
    return np.array([values + [0.0] * (N - len(values))], np.float64).astype(dtype)


def _check(op: ptodsl.Operator, backend: str) -> None:
    x, h, b = _row(X, np.float32), _row(H, np.float16), _row(B, ml_dtypes.bfloat16)
    got = op(x, h, b, backend=backend)
    k = 0
    for src, dtype, table in CASTS:
        for mode in MODES:
            want = table[mode]
            out = np.asarray(got[k])[0, :len(want)]
            expected = np.array(want, object if dtype == "i64" else np.float64).astype(NP[dtype])
            same = (out == expected) | (np.isnan(out.astype(np.float64)) & np.isnan(expected.astype(np.float64)))
            bad = np.flatnonzero(~same)
            inputs = {"x": X, "h": H, "b": B}[src]
            assert not bad.size, (f"{backend}: cast({src}, {dtype}, mode={mode!r}) of "
                                  + ", ".join(f"{inputs[i]!r} gave {out[i]!r}, want {expected[i]!r}" for i in bad[:4]))
            k += 1
    np.testing.assert_array_equal(got[k], got[0])  # no mode: rint, to nearest even


def test_every_cast_mode_on_the_simulator(op):
    _check(op, "sim")


@pytest.mark.cpu
def test_every_cast_mode_on_the_cpu_backend(op, gxx):
    _check(op, "cpu")
