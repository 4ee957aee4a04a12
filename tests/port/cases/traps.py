"""PyPTO's traps stay visible: a rebound output (E0400 at check), a slice write that assembles."""
import pypto
import torch


@pypto.frontend.jit
def add_one(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32), y: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 64)
    y = x + 1.0


@pypto.frontend.jit
def first_rows(x: pypto.Tensor([2, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(2, 64)
    y[:] = pypto.full([8, 64], 0.0, pypto.DT_FP32)
    y[0:, ...] = x


def run():
    add_one(torch.randn(16, 64), torch.empty(16, 64))
