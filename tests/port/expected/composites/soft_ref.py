"""Numpy reference of `soft` (ported from composites.py:8).

Takes the inputs positionally and the scalars by keyword; returns y, z in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def soft(x):
    raise NotImplementedError("the numpy reference of soft is not written yet")
