"""Numpy references of the operator library: the golden oracles, independent of ptodsl.

Each takes the kernel's input tensors positionally (as float32 or integer arrays) and its scalar
attributes by keyword, and returns the outputs.
"""

import numpy as np


def add_one(x):
    return x + 1.0


def add(x, y):
    return x + y


def scale_shift(x, alpha, beta=0.5):
    return x * alpha + beta


def relu(x):
    return np.maximum(x, 0.0)


def gelu(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def seq_add(inp, act_seqs, out):
    result = out.copy()
    for b, n in enumerate(act_seqs):
        result[b, :n] = inp[b, :n] + 1.0
    return result
