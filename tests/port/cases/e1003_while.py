import pypto


@pypto.frontend.jit
def spin(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 64)
    for i in range(4):
        y[:] = x
