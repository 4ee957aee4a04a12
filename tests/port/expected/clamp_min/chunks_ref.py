"""Numpy reference of `chunks` (ported from clamp_min.py:8).

Takes the inputs positionally and the scalars by keyword; returns y in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def chunks(x):
    raise NotImplementedError("the numpy reference of chunks is not written yet")
