import pypto


@pypto.frontend.jit
def fn(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 64)
    f = lambda t: t * 2.0  # noqa: E731
    y[:] = f(x)
