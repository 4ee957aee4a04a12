"""Numpy references of the library's specs for issue 23's elementwise ops and reductions (the
golden oracles, independent of ptodsl), with their eager-torch equivalents for `ptodsl bench`.

Each takes the kernel's input tensors positionally (float32 or integer arrays) and its scalar
attributes by keyword, and returns the outputs; the torch functions import torch in their body.
"""

import numpy as np


def _f64(*xs):
    return [np.asarray(x, np.float64) for x in xs]


def rounding(x):
    (x,) = _f64(x)
    return np.rint(x), np.floor(x), np.ceil(x), np.trunc(x), np.rint(np.floor(x * 8.0) * 0.5)


def torch_rounding(x):
    import torch

    return torch.round(x), torch.floor(x), torch.ceil(x), torch.trunc(x), torch.round(torch.floor(x * 8.0) * 0.5)


def pow_ops(x, e, p=1.5):
    x, e = _f64(x, e)
    return (np.power(x, e), np.power(x, p), np.power(2.0, e), np.exp2(e * 8.0), np.log1p(x - 1.0),
            np.log1p(e * 0.00001))


def torch_pow_ops(x, e, p=1.5):
    import torch

    return (torch.pow(x, e), torch.pow(x, p), torch.pow(2.0, e), torch.exp2(e * 8.0), torch.log1p(x - 1.0),
            torch.log1p(e * 0.00001))


def trig(x):
    (x,) = _f64(x)
    return np.sin(x), np.cos(x)


def torch_trig(x):
    import torch

    return torch.sin(x), torch.cos(x)


def clip(x, lo, hi):
    return np.clip(x, -1, 2), np.minimum(np.maximum(x, lo), hi), np.sign(x)


def torch_clip(x, lo, hi):
    import torch

    return torch.clamp(x, -1, 2), torch.minimum(torch.maximum(x, lo), hi), torch.sign(x)


def logical(x, z):
    x, z = _f64(x, z)
    a = np.where((x > 0.0) & (z < 0.5), x, z)
    b = np.where((x < -0.5) | ~(z > 0.0), x, 0.0)
    c = np.where(((x > z) & ~(z > 0.75)) | (x < -0.9), 1.0, z)
    return a, b, c


def torch_logical(x, z):
    import torch

    a = torch.where((x > 0.0) & (z < 0.5), x, z)
    b = torch.where((x < -0.5) | ~(z > 0.0), x, torch.zeros_like(x))
    c = torch.where(((x > z) & ~(z > 0.75)) | (x < -0.9), torch.ones_like(z), z)
    return a, b, c


def reduce_axes(x, w):
    x, w = _f64(x, w)
    return (x.sum(axis=(0, 2), keepdims=True), x.max(axis=0), x.mean(axis=(1, 2)), w.min(axis=0, keepdims=True),
            w.mean(axis=(1, 2, 3), keepdims=True), w.sum(axis=(0, 1)))


def torch_reduce_axes(x, w):
    import torch

    return (torch.sum(x, dim=[0, 2], keepdim=True), torch.amax(x, dim=0), torch.mean(x, dim=[1, 2]),
            torch.amin(w, dim=0, keepdim=True), torch.mean(w, dim=[-1, 1, 2], keepdim=True), torch.sum(w, dim=[0, 1]))
