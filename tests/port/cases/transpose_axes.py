"""`pypto.transpose` whose axes are `int` parameters: the call fixes them, and ptodsl's transpose
takes literal axes, so the values are written in."""
import pypto
import torch


@pypto.frontend.jit
def flip(x: pypto.Tensor([], pypto.DT_FP32), y: pypto.Tensor([], pypto.DT_FP32), a: int, b: int):
    pypto.set_vec_tile_shapes(8, 8)
    y[:] = pypto.transpose(x, a, b) + 1.0


def test_flip():
    x = torch.rand(8, 24)
    y = torch.empty(24, 8)
    first, second = 1, 0
    flip(x, y, first, second)
