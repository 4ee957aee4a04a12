"""Cube tiles, matmul's PyPTO spellings, pass options from the decorator and from the body."""
import pypto
import torch


@pypto.frontend.jit(pass_options={"cycle_upper_bound": 4000, "enable_slice": True})
def proj(a: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP16), w: pypto.Tensor([32, 64], pypto.DT_FP16),
         out: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32)):
    pypto.set_cube_tile_shapes([32, 64], [64, 64], [32, 32])
    pypto.set_pass_options(cycle_upper_bound=3000)
    out.move(pypto.matmul(a, w, pypto.DT_FP32, b_trans=True))


@pypto.frontend.jit
def reduce_cast(a: pypto.Tensor([16, 64], pypto.DT_FP32), s: pypto.Tensor([16], pypto.DT_FP16),
                m: pypto.Tensor([16, 1], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, 64)
    s[:] = pypto.cast(pypto.sum(a, dim=-1), pypto.DT_FP16)
    m[:] = a.amax(-1, keepdim=True)


def run():
    a = torch.randn(40, 64, dtype=torch.float16)
    proj(a, torch.randn(32, 64, dtype=torch.float16), torch.empty(40, 32))
