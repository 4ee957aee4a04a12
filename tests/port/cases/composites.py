"""PyPTO ops that are composites of ptodsl ops; an op whose operand failed to translate gives
one diagnostic, not one per later use."""
import pypto
import torch


@pypto.frontend.jit
def soft(x: pypto.Tensor([pypto.DYNAMIC, 128], pypto.DT_FP32), y: pypto.Tensor([pypto.DYNAMIC, 128], pypto.DT_FP32),
         z: pypto.Tensor([pypto.DYNAMIC, 128], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(4, 128)
    for r in pypto.loop(x.shape[0], name="rows"):
        row = pypto.view(x, [1, 128], [r, 0])
        y[r:r + 1, :] = pypto.softmax(row, dim=-1)
        z[r:r + 1, :] = pypto.erfc(row)


def run():
    x = torch.randn(5, 128)
    soft(x, torch.empty(5, 128), torch.empty(5, 128))
