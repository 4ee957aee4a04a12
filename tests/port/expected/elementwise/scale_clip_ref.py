"""Numpy reference of `scale_clip` (ported from elementwise.py:7).

Takes the inputs positionally and the scalars by keyword; returns out in this order. Write it from the PyPTO example's golden function; until then `ptodsl test` fails here."""

import numpy as np  # noqa: F401


def scale_clip(x, lo, *, alpha):
    raise NotImplementedError("the numpy reference of scale_clip is not written yet")
