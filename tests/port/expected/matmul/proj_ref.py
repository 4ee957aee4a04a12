"""Numpy reference of `proj` (ported from matmul.py:7).

Takes the inputs positionally and the scalars by keyword; returns out in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def proj(a, w):
    raise NotImplementedError("the numpy reference of proj is not written yet")
