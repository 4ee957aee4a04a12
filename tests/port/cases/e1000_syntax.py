import pypto


@pypto.frontend.jit
def broken(x: pypto.Tensor([8], pypto.DT_FP32), y: pypto.Tensor([8], pypto.DT_FP32)):
    y[:] = x +
