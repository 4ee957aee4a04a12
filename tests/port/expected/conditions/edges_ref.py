"""Numpy reference of `edges` (ported from conditions.py:7).

Takes the inputs positionally and the scalars by keyword; returns y in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def edges(x):
    raise NotImplementedError("the numpy reference of edges is not written yet")
