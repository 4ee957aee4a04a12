"""pypto.cond, is_loop_begin / is_loop_end, an if on a loop index, and an if decided at trace time."""
import pypto
import torch


@pypto.frontend.jit
def edges(x: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32), y: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32),
          flag: bool):
    pypto.set_vec_tile_shapes(1, 32)
    for i in pypto.loop(x.shape[0], name="rows"):
        row = x[i:i + 1, :]
        if flag:
            row = row * 3.0
        else:
            row = row * 5.0
        if pypto.cond(pypto.is_loop_begin(i)):
            y[i:i + 1, :] = row + 1.0
        elif pypto.is_loop_end(i):
            y[i:i + 1, :] = row - 1.0
        elif i < 3:
            y[i:i + 1, :] = row
        else:
            y[i:i + 1, :] = row * 2.0


def main():
    x = torch.randn(6, 32)
    edges(x, torch.empty(6, 32), True)
