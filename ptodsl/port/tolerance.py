"""The absolute tolerance a ported kernel's f32 golden cases need, from its matmuls' K.

ptodsl's f32 default (``atol 1e-6``, ``rtol 1e-5``) holds a value that rounds a few times. A
float32 matmul sums K products: where they cancel (random signs), the result is small and each
of the K roundings is a fraction of the unit roundoff u = 2**-24 of a partial sum whose size
grows like sqrt(K) * m (m the products' magnitude); K such errors of random sign add up to about
sqrt(K) * u * sqrt(K) * m = K * u * m, above 1e-6 once K passes a few dozen, and a numpy
reference in float64 sees all of it. So the port gives a case ``atol: K * u * m`` for the
kernel's longest f32 matmul, with m the square of the largest magnitude of the case's input
data. Measured on float32 matmuls of data in [-1, 1] tiled along K, the worst error of 8192
outputs is 0.13 to 0.15 times this for K from 512 to 8192. (A ``sum`` is left to the defaults:
its terms are the kernel's own values, most often of one sign, as a softmax's, whose rounding
``rtol`` covers; a ``mean`` divides its sum by K.)

The K are read from the Tensor IR of the ported spec, compiled in memory, with each case's
shapes bound: the kernel's own types, not a guess of the port. A kernel that does not compile,
or that has a half-precision output (a case's tolerance holds for every output, and f16/bf16's
defaults are wider already), keeps the defaults.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..diagnostics import Diagnostics
from ..driver import compile_spec
from ..runtime.golden import DEFAULT_RANGE, TOLERANCES
from ..sym import evaluate

UNIT_ROUNDOFF = float(np.finfo(np.float32).eps) / 2  # 2**-24


def reductions(pto: str, yaml_text: str, name: str) -> list[Any] | None:
    """The K (symbolic) of the kernel's f32 matmuls, or None when the spec does not compile or
    writes a half-precision output."""
    folder = os.path.abspath(".ptodsl-port-tolerance")  # never read: both files are given
    ypath, ppath = os.path.join(folder, f"{name}.yaml"), os.path.join(folder, f"{name}.pto")
    try:
        compiled = compile_spec(ypath, Diagnostics(), verify_ir=False, choose=False,
                                sources={ypath: yaml_text, ppath: pto}, lower=False)
    except Exception:  # noqa: BLE001 - no tolerance then: `ptodsl check` reports what is wrong
        return None
    ir = compiled.stages["tensor"]
    found: list[Any] = []
    for func in ir.funcs:
        if any(p.type is not None and p.mode in ("out", "inout") and p.dtype in ("f16", "bf16")
               for p in func.params):
            return None
        for op in func.walk():
            if op.name == "matmul" and op.attrs.get("out_dtype") == "f32" and op.operands:
                a = op.operands[0].type
                found.append(a.shape[-2 if op.attrs.get("trans_a") else -1])
    return found


def case_atol(found: list[Any], case: dict[str, Any], symbols: dict[str, int]) -> tuple[float, str] | None:
    """``K * u * m`` of the case's longest matmul, when it is above the f32 default, and what it
    comes from (for a comment beside the case)."""
    ranges = [case.get("data_range") or DEFAULT_RANGE, *case.get("ranges", {}).values()]
    m = max(max(abs(float(lo)), abs(float(hi))) for lo, hi in ranges)
    env = {**symbols, **case.get("shapes", {})}
    longest = 0
    for length in found:
        try:
            longest = max(longest, int(evaluate(length, env)))
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            continue
    worst = longest * UNIT_ROUNDOFF * m * m
    if worst <= TOLERANCES["f32"][1]:
        return None
    exp = math.floor(math.log10(worst))  # rounded up to two significant digits
    return float(f"{math.ceil(worst / 10 ** exp * 10) / 10:.1f}e{exp}"), f"an f32 matmul sums K = {longest} products"
