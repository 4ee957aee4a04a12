"""An f32 matmul with a long reduction: the golden case gets an `atol` that grows with K (a sum of
512 products rounds 512 times), written from the K of the kernel's own types."""
import pypto
import torch

K = 512


@pypto.frontend.jit
def scores(q: pypto.Tensor([pypto.DYNAMIC, K], pypto.DT_FP32), keys: pypto.Tensor([48, K], pypto.DT_FP32),
           s: pypto.Tensor([pypto.DYNAMIC, 48], pypto.DT_FP32)):
    pypto.set_cube_tile_shapes([32, 32], [64, 128], [48, 48])
    s.move(pypto.matmul(q, keys, pypto.DT_FP32, b_trans=True))


def run():
    q = torch.randn(72, K)
    scores(q, torch.randn(48, K), torch.empty(72, 48))
