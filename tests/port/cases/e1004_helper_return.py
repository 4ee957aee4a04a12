import pypto


def pick(x, big):
    if big:
        return x * 2.0
    return x


@pypto.frontend.jit
def twice(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 64)
    y[:] = pick(x, True)
