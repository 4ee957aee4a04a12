"""The kernel families of the library, for the suites that sample it rather than run every spec."""

from __future__ import annotations

# The golden cases the everyday suite builds and runs on cpu: one variant of one spec per kernel
# family (spec -> variant, "" for a spec of one variant), and among them every dtype the library
# builds. A change to how one family is emitted shows on its representative; the whole matrix (every
# variant of every spec) is `pytest -m full`, which CI runs after the suite.
EVERYDAY: dict[str, str] = {
    "exp": "T=bf16",  # elementwise, a transcendental
    "bitwise_not": "T=i16",  # elementwise on integers
    "add_bcast": "T=f16",  # a binary op with a broadcast operand
    "cast_f16_f32": "T=bf16",  # dtype conversion
    "where_relu": "T=f32",  # compares and selects
    "softmax": "T=bf16",  # row reductions in a persistent row loop run as blocks
    "sum_cols": "T=f32",  # a column reduction
    "argmax_rows": "T=i32",  # an index-producing reduction
    "rmsnorm": "T=f16",  # a norm: reduction, broadcast back, scale
    "softmax_bwd": "T=f16",  # a backward op of several inputs
    "matmul": "T=f16",  # the cube: L1/L0 tiles, block grids
    "matmul_bias_relu": "T=bf16",  # a cube epilogue: the bias table and the fixpipe's relu
    "matmul_i8": "",  # int8 matmul with an i32 accumulator
    "flash_attn": "T=f16",  # attention: cube and vector in a loop, online softmax
    "gather_rows": "T=bf16,I=i64",  # rows gathered by an index tensor read at run time
    "kv_cache_update": "T=f16",  # a scatter into a tensor updated in place
    "transpose2d": "T=i32",  # layout change through tiles
    "reshape_heads": "T=f32",  # views, reshape and permute in the control program
    "moe_topk": "T=f16",  # sort and top-k
}
