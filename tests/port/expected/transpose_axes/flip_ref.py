"""Numpy reference of `flip` (ported from transpose_axes.py:8).

Takes the inputs positionally and the scalars by keyword; returns y in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def flip(x):
    raise NotImplementedError("the numpy reference of flip is not written yet")
