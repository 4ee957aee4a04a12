import pypto


@pypto.frontend.jit
def two(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32),
        z: pypto.Tensor([8, 64], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 64)
    y[:] = x + 1.0
    pypto.set_vec_tile_shapes(4, 32)
    z[:] = x - 1.0
