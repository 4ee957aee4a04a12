"""Numpy reference of `shift` (ported from no_call.py:7).

Takes the inputs positionally and the scalars by keyword; returns y in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def shift(x):
    raise NotImplementedError("the numpy reference of shift is not written yet")
