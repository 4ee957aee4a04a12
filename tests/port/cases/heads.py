"""Work among the top-level statements that a later loop reads only through views of it: a
projection, reshaped into heads and transposed (as attention kernels do), then one batch per
iteration."""
import pypto
import torch

B, S, H, D = 2, 8, 4, 16


@pypto.frontend.jit
def heads(x: pypto.Tensor([B, S, H * D], pypto.DT_FP32), w: pypto.Tensor([1, H * D, H * D], pypto.DT_FP32),
          y: pypto.Tensor([B, H, S, D], pypto.DT_FP32)):
    pypto.set_cube_tile_shapes([16, 16], [64, 64], [64, 64])
    pypto.set_vec_tile_shapes(1, 4, 8, 16)
    flat = pypto.matmul(x, w, pypto.DT_FP32)
    q = pypto.transpose(pypto.reshape(flat, [B, S, H, D]), 1, 2)
    for b in pypto.loop(0, B, 1, name="b_loop"):
        qv = pypto.view(q, [1, H, S, D], [b, 0, 0, 0])
        y[b:b + 1, ...] = qv * 2.0


def run():
    heads(torch.randn(B, S, H * D), torch.randn(1, H * D, H * D), torch.empty(B, H, S, D))
