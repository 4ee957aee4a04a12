import pypto


@pypto.frontend.jit
def fn(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 64)
    t = x * {"scale": 2.0}
    u = t + 1.0
    y[:] = u * t
