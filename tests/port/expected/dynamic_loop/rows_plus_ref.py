"""Numpy reference of `rows_plus` (ported from dynamic_loop.py:10).

Takes the inputs positionally and the scalars by keyword; returns y in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def rows_plus(x):
    raise NotImplementedError("the numpy reference of rows_plus is not written yet")
