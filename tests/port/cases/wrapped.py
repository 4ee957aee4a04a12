"""A kernel called only through a wrapper that takes its tensor as a parameter (as a module's
`forward` under `torch.compile` would): no call gives the DYNAMIC dim, so its size comes from the
tensor the file makes with the annotation's rank, dtype and fixed dims."""
import pypto
import torch

ROWS = pypto.DYNAMIC


@pypto.frontend.jit
def halve(x: pypto.Tensor([ROWS, 4, 64], pypto.DT_FP32), y: pypto.Tensor([ROWS, 4, 64], pypto.DT_FP32)):
    n = x.shape[0]
    pypto.set_vec_tile_shapes(1, 4, 64)
    for i in pypto.loop(0, n, 1, name="rows"):
        y[i:i + 1, ...] = x[i:i + 1, ...] * 0.5


def launch(x):
    y = torch.empty(x.shape, dtype=x.dtype)
    halve(x, y)
    return y


def test_halve():
    other = torch.randn(3, 8, dtype=torch.float32)  # another rank: not halve's data
    x = torch.rand((6, 4, 64), dtype=torch.float)
    model = torch.compile(launch)
    model(x)
    print(other)
