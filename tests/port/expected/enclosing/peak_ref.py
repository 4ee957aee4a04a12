"""Numpy reference of `peak` (ported from enclosing.py:21).

Takes the inputs positionally and the scalars by keyword; returns res in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def peak(t):
    raise NotImplementedError("the numpy reference of peak is not written yet")
