"""Numpy reference of `scaled` (ported from unknown_dims.py:17).

Takes the inputs positionally and the scalars by keyword; returns y in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def scaled(x, w, bias):
    raise NotImplementedError("the numpy reference of scaled is not written yet")
