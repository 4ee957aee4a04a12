"""Helpers are inlined: one decorated @pypto.frontend.function, one plain, one calling another."""
import pypto


@pypto.frontend.function
def centered(t):
    mean = pypto.sum(t, -1, keepdim=True)
    mean = mean / t.shape[-1]
    return t - mean


def rms(t, eps=1e-6):
    sq = centered(t)
    sq = sq * sq
    return pypto.sqrt(pypto.sum(sq, dim=-1, keepdim=True) / t.shape[-1] + eps)


@pypto.frontend.jit
def norm(x: pypto.Tensor([8, 128], pypto.DT_FP32), out: pypto.Tensor([8, 128], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 128)
    out.move(centered(x) / rms(x))
