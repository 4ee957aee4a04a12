"""A kernel nobody in the file calls: DYNAMIC dims of the same place share a symbol, and the test
case says which sizes it lacks."""
import pypto


@pypto.frontend.jit
def shift(x: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32), y: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(4, 32)
    y[:] = x - 1.0
