"""Names that are not ptodsl identifiers are renamed; a doc with control characters is cleaned;
loop_unroll binds the index and the factor."""
import pypto


@pypto.frontend.jit
def new(delete: pypto.Tensor([32, 64], pypto.DT_FP32), _out: pypto.Tensor([32, 64], pypto.DT_FP32)):
    "Doc with a\ttab, a\x07bell\nand a second line."
    pypto.set_vec_tile_shapes(4, 64)
    for i, k in pypto.loop_unroll(0, 32, 1, name="u", unroll_list=[4, 2]):
        exp = pypto.exp(delete[i:i + k, :])
        _out[i:i + k, :] = exp
