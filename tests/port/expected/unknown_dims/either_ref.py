"""Numpy reference of `either` (ported from unknown_dims.py:51).

Takes the inputs positionally and the scalars by keyword; returns y in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def either(x):
    raise NotImplementedError("the numpy reference of either is not written yet")
