"""Numpy reference of `head_copy` (ported from dynamic_loop.py:24).

Takes the inputs positionally and the scalars by keyword; returns y in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def head_copy(x):
    raise NotImplementedError("the numpy reference of head_copy is not written yet")
