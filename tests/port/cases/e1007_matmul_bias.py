import pypto


@pypto.frontend.jit
def mm(a: pypto.Tensor([32, 64], pypto.DT_FP16), b: pypto.Tensor([64, 32], pypto.DT_FP16),
       c: pypto.Tensor([32, 32], pypto.DT_FP32), bias: pypto.Tensor([32], pypto.DT_FP32)):
    pypto.set_cube_tile_shapes([32, 32], [64, 64], [32, 32])
    c[:] = pypto.matmul(a, b, pypto.DT_FP32, c_matrix_nz=True)
