"""A view's valid shape clamped the other way round, `(dim - off).min(size)`: the clamp ptodsl
gives every view, so the view keeps only its size."""
import pypto
import torch


@pypto.frontend.jit
def chunks(x: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32), y: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32)):
    total = x.shape[0]
    pypto.set_vec_tile_shapes(8, 32)
    for c in pypto.loop(0, (total + 7) // 8, 1, name="chunk"):
        start = c * 8
        part = pypto.view(x, [8, 32], [start, 0], valid_shape=[(total - start).min(8), 32])
        pypto.assemble(pypto.abs(part) * 0.25, [start, 0], y)


def test_chunks():
    x = torch.randn(21, 32)
    chunks(x, torch.empty_like(x))
