"""Elementwise PyPTO ops: shapes from the call site, scalars, methods, composites."""
import pypto
import torch


@pypto.frontend.jit(runtime_options={"run_mode": pypto.RunMode.SIM})
def scale_clip(x: pypto.Tensor([], pypto.DT_FP32), lo: pypto.Tensor([...], pypto.DT_FP32),
               out: pypto.Tensor(), alpha: float):
    """Scales, shifts and clips x."""
    pypto.set_vec_tile_shapes(8, 64)
    t = pypto.add(pypto.mul(x, alpha), 1.0)
    t = t.exp() - pypto.neg(x)
    out[:] = pypto.clip(t, lo, 4.0 * (t - t + 1.0))


def test_scale_clip():
    x = torch.rand(16, 64, dtype=torch.float32)
    lo = torch.zeros((16, 64))
    out = torch.empty(x.shape, dtype=torch.float32)
    scale_clip(x, lo, out, 0.5)
