"""A batch loop over a DYNAMIC dim: symbols, views with a clamped valid shape, per-loop tiles,
unroll lists, int parameters fixed in the YAML, `...` in slices."""
import pypto
import torch

TILE = 4


@pypto.frontend.jit
def rows_plus(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
              y: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32), tile_b: int):
    batch, hidden = x.shape
    n = (batch + tile_b - 1) // tile_b
    pypto.set_vec_tile_shapes(4, 64)
    for b in pypto.loop(n, name="b_loop", unroll_list=[2, 4]):
        off = b * tile_b
        end = min(off + tile_b, batch)
        xv = pypto.view(x, [tile_b, hidden], [off, 0], valid_shape=[end - off, hidden])
        pypto.set_vec_tile_shapes(2, 64)
        pypto.assemble(xv + 1.0, [off, 0], y)


@pypto.frontend.jit
def head_copy(x: pypto.Tensor([pypto.DYNAMIC, ...], pypto.DT_FP16), y: pypto.Tensor([pypto.DYNAMIC, ...], pypto.DT_FP16)):
    b = x.shape[0]
    pypto.set_vec_tile_shapes(1, 2, 32)
    for i in pypto.loop(0, b, 1, name="LOOP_b", idx_name="i"):
        y[i:i + 1, ...] = x[i:i + 1, ...] * 2.0


def run():
    x = torch.randn(10, 64)
    y = torch.empty(10, 64)
    rows_plus(x, y, TILE)
    h = torch.randn((3, 2, 32), dtype=torch.float16)
    head_copy(h, torch.empty_like(h))
