"""Numpy references of the operator library: the golden oracles, independent of ptodsl.

Each takes the kernel's input tensors positionally (as float32 or integer arrays) and its scalar
attributes by keyword, and returns the outputs.
"""

import math

import numpy as np


def bitwise_not(x):
    # two's complement: ~x == -x - 1, wrapping in x's own dtype
    return -x - 1


def add_one(x):
    return x + 1.0


def add(x, y):
    return x + y


def scale_shift(x, alpha, beta=0.5):
    return x * alpha + beta


def relu(x):
    return np.maximum(x, 0.0)


def gelu(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def seq_add(inp, act_seqs, out):
    result = out.copy()
    for b, n in enumerate(act_seqs):
        result[b, :n] = inp[b, :n] + 1.0
    return result


def sub(x, y):
    return x.astype(np.float64) - y.astype(np.float64)


def mul(x, y):
    return x.astype(np.float64) * y.astype(np.float64)


def div(x, y):
    return x.astype(np.float64) / y.astype(np.float64)


def matmul(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def scalar_ops(x, s=0.25):
    return (x.astype(np.float64) - 1.5) * 2.0 / 4.0 + s


def exp(x):
    return np.exp(x.astype(np.float64))


def log(x):
    return np.log(x.astype(np.float64))


def sqrt(x):
    return np.sqrt(x.astype(np.float64))


def rsqrt(x):
    return 1.0 / np.sqrt(x.astype(np.float64))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


def clamp(x, lo=-1.0, hi=1.0):
    return np.clip(x.astype(np.float64), lo, hi)


def erf(x):
    # math.erf, exact to double precision: independent of the kernel's approximation
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def tanh(x):
    return np.tanh(x.astype(np.float64))


def silu(x):
    x = x.astype(np.float64)
    return x / (1.0 + np.exp(-x))


def reciprocal(x):
    return 1.0 / x.astype(np.float64)


def abs_neg(x):
    return np.abs(x), np.negative(x)


def swiglu(a, b):
    a = a.astype(np.float64)
    return a / (1.0 + np.exp(-a)) * b.astype(np.float64)


def leaky_relu(x, slope=0.1):
    x = x.astype(np.float64)
    return np.where(x > 0.0, x, x * slope)


def to_f16(x):
    return x.astype(np.float16)


def to_f32(x):
    return x.astype(np.float32)


def sum_rows(x):
    return x.astype(np.float64).sum(axis=-1, keepdims=True)


def sum_cols(x):
    return x.astype(np.float64).sum(axis=0, keepdims=True)


def amax_rows(x):
    return x.max(axis=-1)


def amin_cols(x):
    return x.min(axis=0, keepdims=True)


def mean_rows(x):
    return x.astype(np.float64).mean(axis=-1)


def attention(q, k, v, scale):
    s = (q.astype(np.float64) @ k.astype(np.float64).T) * scale
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v.astype(np.float64)


def rmsnorm(x, gamma, eps=1e-6):
    x = x.astype(np.float64)
    inv = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return x * inv * gamma.astype(np.float64)


def layernorm(x, gamma, beta, eps=1e-5):
    x = x.astype(np.float64)
    d = x - x.mean(axis=-1, keepdims=True)
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + eps) * gamma.astype(np.float64) + beta.astype(np.float64)


def log_softmax(x):
    x = x.astype(np.float64)
    s = x - x.max(axis=-1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=-1, keepdims=True))


def matmul_bias_relu(a, b, bias):
    return np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0.0)


# ---------------------------------------------------------------------------- backward references
# The gradients of the forward references above, written out by hand in f64: each takes the
# backward kernel's inputs (saved forward tensors and output gradients) and returns the input
# gradients, in the backward kernel's parameter order.


def softmax_bwd(y, dy):
    y, dy = y.astype(np.float64), dy.astype(np.float64)
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


def rmsnorm_bwd(x, gamma, dy, eps=1e-6):
    x, gamma, dy = x.astype(np.float64), gamma.astype(np.float64), dy.astype(np.float64)
    inv = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    g = dy * gamma
    dx = inv * g - x * inv**3 * (g * x).mean(axis=-1, keepdims=True)
    return dx, (dy * x * inv).sum(axis=0)


def layernorm_bwd(x, gamma, dy, eps=1e-5):
    x, gamma, dy = x.astype(np.float64), gamma.astype(np.float64), dy.astype(np.float64)
    d = x - x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps)
    xhat = d * rstd
    g = dy * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)


def silu_bwd(x, dy):
    x = x.astype(np.float64)
    s = 1.0 / (1.0 + np.exp(-x))
    return dy.astype(np.float64) * s * (1.0 + x * (1.0 - s))


def gelu_bwd(x, dy):
    # d/dx of refs.gelu, 0.5 x (1 + tanh(u)) with u = c (x + 0.044715 x^3)
    x = x.astype(np.float64)
    c = np.sqrt(2.0 / np.pi)
    t = np.tanh(c * (x + 0.044715 * x**3))
    return dy.astype(np.float64) * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x))


def matmul_bwd(a, b, dc):
    a, b, dc = a.astype(np.float64), b.astype(np.float64), dc.astype(np.float64)
    return dc @ b.T, a.T @ dc


# ---------------------------------------------------------------------------- torch equivalents
# What `ptodsl bench` times next to each kernel (`torch:` in a spec names one): eager torch code
# computing the same outputs from torch tensors, inputs positionally and scalars by keyword. Each
# imports torch itself, so the references above work without it.


def torch_bitwise_not(x):
    import torch

    return torch.bitwise_not(x)


def torch_abs_neg(x):
    return x.abs(), -x


def torch_add(x, y):
    return x + y


def torch_add_one(x):
    return x + 1.0


def torch_amax_rows(x):
    return x.amax(-1)


def torch_amin_cols(x):
    return x.amin(0, keepdim=True)


def torch_attention(q, k, v, scale):
    import torch

    return torch.softmax((q @ k.T).float() * scale, -1).to(q.dtype) @ v


def torch_to_f32(x):
    return x.float()


def torch_to_f16(x):
    return x.half()


def torch_div(x, d):
    return x / d


def torch_erf(x):
    import torch

    return torch.erf(x)


def torch_clamp(x, lo=-1.0, hi=1.0):
    import torch

    return torch.clamp(x, lo, hi)


def torch_exp(x):
    import torch

    return torch.exp(x)


def torch_gelu(x):
    import torch

    return torch.nn.functional.gelu(x, approximate="tanh")


def torch_layernorm(x, gamma, beta, eps=1e-5):
    import torch

    return torch.nn.functional.layer_norm(x, x.shape[-1:], gamma, beta, eps)


def torch_log(x):
    import torch

    return torch.log(x)


def torch_log_softmax(x):
    import torch

    return torch.log_softmax(x, -1)


def torch_matmul(a, b):
    # the cube accumulates half-float products in f32; `(a @ b).float()` would round to f16 first
    return a.float() @ b.float()


def torch_matmul_bias_relu(a, b, bias):
    import torch

    return torch.relu(a.float() @ b.float() + bias)


def torch_mean_rows(x):
    return x.mean(-1)


def torch_mul(x, s):
    return x * s


def torch_reciprocal(x):
    import torch

    return torch.reciprocal(x)


def torch_relu(x):
    import torch

    return torch.relu(x)


def torch_rmsnorm(x, gamma, eps=1e-6):
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma


def torch_rsqrt(x):
    import torch

    return torch.rsqrt(x)


def torch_seq_add(inp, act_seqs, out):
    import torch

    # rows past each batch's length keep out's values: a mask, as eager torch code would write it
    rows = torch.arange(inp.shape[1])[None, :, None]
    return torch.where(rows < act_seqs[:, None, None], inp + 1.0, out)


def torch_scalar_ops(x, s=0.25):
    return (x - 1.5) * 2.0 / 4.0 + s


def torch_scale_shift(x, alpha, beta=0.5):
    return x * alpha + beta


def torch_sigmoid(x):
    import torch

    return torch.sigmoid(x)


def torch_silu(x):
    import torch

    return torch.nn.functional.silu(x)


def torch_softmax(x):
    import torch

    return torch.softmax(x, -1)


def torch_sqrt(x):
    import torch

    return torch.sqrt(x)


def torch_sub(x, m):
    return x - m


def torch_sum_cols(x):
    return x.sum(0, keepdim=True)


def torch_sum_rows(x):
    return x.sum(-1, keepdim=True)


def torch_swiglu(a, b):
    import torch

    return torch.nn.functional.silu(a) * b


def torch_tanh(x):
    import torch

    return torch.tanh(x)


def torch_leaky_relu(x, slope=0.1):
    import torch

    return torch.where(x > 0, x, x * slope)


# The backward ops' eager equivalents: torch's own autograd of the forward torch functions above
# (softmax's backward reads only its output, so it calls the kernel eager autograd runs for it).


def _grads(forward, inputs, grads_out, wanted, **scalars):
    import torch

    leaves = [t.detach().requires_grad_(i in wanted) for i, t in enumerate(inputs)]
    outs = forward(*leaves, **scalars)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return torch.autograd.grad(outs, [leaves[i] for i in wanted], grads_out)


def torch_softmax_bwd(y, dy):
    import torch

    return torch.ops.aten._softmax_backward_data(dy, y, -1, y.dtype)


def torch_rmsnorm_bwd(x, gamma, dy, eps=1e-6):
    return _grads(torch_rmsnorm, [x, gamma], [dy], [0, 1], eps=eps)


def torch_layernorm_bwd(x, gamma, dy, eps=1e-5):
    import torch

    beta = torch.zeros_like(gamma)  # y is affine in beta: its gradient does not depend on beta's value
    return _grads(torch_layernorm, [x, gamma, beta], [dy], [0, 1, 2], eps=eps)


def torch_silu_bwd(x, dy):
    return _grads(torch_silu, [x], [dy], [0])


def torch_gelu_bwd(x, dy):
    return _grads(torch_gelu, [x], [dy], [0])


def torch_matmul_bwd(a, b, dc):
    return _grads(torch_matmul, [a, b], [dc], [0, 1])


# ------------------------------------------------------------------ indexing


def gather_rows(table, ids):
    return table[ids]


def kv_cache_update(k_cache, v_cache, slot_mapping, k, v):
    kc, vc = k_cache.copy(), v_cache.copy()
    for t, slot in enumerate(slot_mapping):  # token order: of two tokens for one slot the later stays
        kc[slot] = k[t]
        vc[slot] = v[t]
    return kc, vc


def _topk_order(p, k):
    """The columns of the k largest values of each row, equal values in column order."""
    return np.argsort(-p, axis=-1, kind="stable")[..., :k]


def moe_topk(logits, k=4):
    x = logits.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    ids = _topk_order(p, k)
    top = np.take_along_axis(p, ids, axis=-1)
    return top / top.sum(axis=-1, keepdims=True), ids.astype(np.int32)


def argmax_rows(x):
    return np.argmax(x, axis=-1).astype(np.int32), np.argmin(x, axis=-1, keepdims=True).astype(np.int32)


def causal_mask(scores, offset=0):
    return np.tril(scores, offset), np.triu(scores, offset + 1)


def arange_pos(x, start=0):
    n = x.shape[-1]
    return x + np.arange(n) * 0.5, np.arange(start, start + n).astype(np.int32)


def torch_gather_rows(table, ids):
    import torch

    return torch.index_select(table, 0, ids.long())


def torch_kv_cache_update(k_cache, v_cache, slot_mapping, k, v):
    slots = slot_mapping.long()
    return k_cache.index_copy(0, slots, k), v_cache.index_copy(0, slots, v)


def torch_moe_topk(logits, k=4):
    import torch

    p = torch.softmax(logits.float(), dim=-1)
    top, ids = torch.topk(p, k, dim=-1)
    return (top / top.sum(dim=-1, keepdim=True)).to(logits.dtype), ids.int()


def torch_argmax_rows(x):
    import torch

    return torch.argmax(x, dim=-1).int(), torch.argmin(x, dim=-1, keepdim=True).int()


def torch_causal_mask(scores, offset=0):
    import torch

    return torch.tril(scores, offset), torch.triu(scores, offset + 1)


def torch_arange_pos(x, start=0):
    import torch

    n = x.shape[-1]
    ramp = torch.arange(n, dtype=x.dtype, device=x.device) * 0.5
    return x + ramp, torch.arange(start, start + n, dtype=torch.int32, device=x.device)


def gather_last(x, idx, cols):
    return np.take_along_axis(x, idx.astype(np.int64), axis=-1), x[:, cols]


def torch_gather_last(x, idx, cols):
    import torch

    return torch.gather(x, -1, idx.long()), torch.index_select(x, 1, cols.long())
