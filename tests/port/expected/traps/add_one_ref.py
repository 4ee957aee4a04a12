"""Numpy reference of `add_one` (ported from traps.py:7).

Takes the inputs positionally and the scalars by keyword; returns y in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def add_one(x):
    raise NotImplementedError("the numpy reference of add_one is not written yet")
