"""Kernels defined inside other functions: the names they read from the enclosing function take
the values the first call of it gives (its parameters, its assignments up to the `def`, the arm
of a known branch, a list it edits); a factory's kernel takes its shapes from the factory's
arguments; a call's tensor divided by a number keeps its shape."""
import math

import pypto
import torch


def row_max(t: torch.Tensor, axis: int, keep: bool = False) -> torch.Tensor:
    kind = pypto.DT_FP32
    if keep:
        dims = list(t.shape)
        dims[axis] = 1
    else:
        dims = list(t.shape)
        dims.pop(axis)

    @pypto.frontend.jit
    def peak(t: pypto.Tensor([], kind), res: pypto.Tensor([], kind)):
        pypto.set_vec_tile_shapes(*([8] * len(t.shape)))
        res[:] = pypto.amax(t, dim=axis, keepdim=keep) * 2.0

    res = torch.empty(tuple(dims), dtype=torch.float32)
    peak(t, res)
    return res


def make_join(first: tuple, second: tuple, along: int):
    if along == 0:
        joined = (first[0] + second[0], first[1])
    else:
        joined = (first[0], first[1] + second[1])

    @pypto.frontend.jit
    def join(p: pypto.Tensor(first, pypto.DT_FP32), q: pypto.Tensor(second, pypto.DT_FP32),
             r: pypto.Tensor(joined, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        r[:] = pypto.concat([p, q], dim=along)

    return join


def test_row_max():
    t = torch.randn(6, 20) / math.sqrt(4.0)
    row_max(t, 1, keep=True)
    row_max(torch.randn(6, 20), 0)  # another axis: another kernel, not ported
    row_max(torch.randn(3, 20), 1, keep=True)  # another size: not a case of the ported kernel


def test_join():
    p = torch.rand(4, 8)
    q = torch.rand(4, 16)
    r = torch.empty(4, 24)
    make_join(p.shape, q.shape, 1)(p, q, r)
