"""Numpy reference of `shifted` (ported from unknown_dims.py:32).

Takes the inputs positionally and the scalars by keyword; returns y in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def shifted(x):
    raise NotImplementedError("the numpy reference of shifted is not written yet")
