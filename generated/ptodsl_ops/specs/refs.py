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


def bmm(a, b):
    c = np.matmul(a.astype(np.float64), b.astype(np.float64))
    return c, c


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


def _bf16(x):
    """Rounded to bf16 (to nearest even), where the kernel keeps a value in bf16."""
    import ml_dtypes

    return np.asarray(x).astype(ml_dtypes.bfloat16).astype(np.float64)


def ffn(x, w1, w2, act=0):
    # the first product leaves the cube as bf16, and so does the activation: a sum of 256 terms
    # each off by a bf16 rounding would otherwise differ by more than bf16's tolerance
    h = _bf16(x.astype(np.float64) @ w1.astype(np.float64))
    return _bf16(silu(h) if act == 0 else gelu(h)) @ w2.astype(np.float64)


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


def mha_sdpa(q, k, v, scale):
    """softmax(q k^T * scale) v per batch entry and head, in f64; the test of the torch equivalent
    (specs/test_mha_sdpa_torch.py) holds it to torch's scaled_dot_product_attention."""
    s = np.matmul(q.astype(np.float64), np.swapaxes(k.astype(np.float64), -1, -2)) * scale
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.matmul(p / p.sum(axis=-1, keepdims=True), v.astype(np.float64))
# The fixed symbols of paged_attention.yaml and varlen_attention.yaml: the references need them, as
# the kernels take 2-D views whose shapes do not carry them (a test checks they agree).
PAGED_NQ = 64  # query heads
PAGED_BLOCK = 16  # keys per block of the paged caches
VARLEN_D = 64  # head dim


def paged_attention(q, k, v, block_table, kv_act_seqs, atten_out, softmax_scale):
    """Query row (b * S1 + s1) * NQ + h attends to the first kv_act_seqs[b] - (S1 - 1 - s1) keys of
    batch b; key t lives in row block_table[b, t // BLK] * BLK + t % BLK of KV head h // group."""
    out = atten_out.astype(np.float64).copy()
    batches = kv_act_seqs.shape[0]
    s1_len = q.shape[0] // (batches * PAGED_NQ)
    d = q.shape[1]
    group = PAGED_NQ // (k.shape[1] // d)
    for b in range(batches):
        for s1 in range(s1_len):
            seen = int(kv_act_seqs[b]) - (s1_len - 1 - s1)
            if seen <= 0:
                continue  # no keys: the rows keep their values
            rows = [int(block_table[b, t // PAGED_BLOCK]) * PAGED_BLOCK + t % PAGED_BLOCK for t in range(seen)]
            for h in range(PAGED_NQ):
                cols = slice(h // group * d, (h // group + 1) * d)
                r = (b * s1_len + s1) * PAGED_NQ + h
                s = k[rows, cols].astype(np.float64) @ q[r].astype(np.float64) * softmax_scale
                p = np.exp(s - s.max())
                out[r] = p @ v[rows, cols].astype(np.float64) / p.sum()
    return out


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, output, l_output, m_output, softmax_scale=0.125):
    """Per sequence b and head h: O = softmax(s) v, L = sum(exp(s - M)), M = max(s), with s the
    scaled scores of its query rows against its key rows; rows outside every sequence keep theirs."""
    o = output.astype(np.float64).copy()
    l_out, m_out = l_output.astype(np.float64).copy(), m_output.astype(np.float64).copy()
    for b in range(len(cu_seqlens_q) - 1):
        qs, qe = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
        ks, ke = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
        if qe <= qs or ke <= ks:
            continue
        for h in range(q.shape[1] // VARLEN_D):
            cols = slice(h * VARLEN_D, (h + 1) * VARLEN_D)
            s = q[qs:qe, cols].astype(np.float64) @ k[ks:ke, cols].astype(np.float64).T * softmax_scale
            m = s.max(axis=-1, keepdims=True)
            p = np.exp(s - m)
            lsum = p.sum(axis=-1, keepdims=True)
            o[qs:qe, cols] = p / lsum @ v[ks:ke, cols].astype(np.float64)
            l_out[qs:qe, h] = lsum[:, 0]
            m_out[qs:qe, h] = m[:, 0]
    return o, l_out, m_out


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


def matmul_bias(x, w, bias):
    return x.astype(np.float64) @ w.astype(np.float64).T + bias.astype(np.float64)


def matmul_i8(a, b):
    return a.astype(np.int64) @ b.astype(np.int64).T


def matmul_splitk(a, b, bias):
    return a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)


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


def torch_paged_attention(q, k, v, block_table, kv_act_seqs, atten_out, softmax_scale):
    """scaled_dot_product_attention per query token over the keys gathered from its blocks."""
    import torch
    import torch.nn.functional as F

    out = atten_out.clone()
    batches, d = kv_act_seqs.shape[0], q.shape[1]
    s1_len = q.shape[0] // (batches * PAGED_NQ)
    kv_heads = k.shape[1] // d
    for b in range(batches):
        for s1 in range(s1_len):
            seen = int(kv_act_seqs[b]) - (s1_len - 1 - s1)
            if seen <= 0:
                continue
            t = torch.arange(seen)
            rows = block_table[b, t // PAGED_BLOCK].long() * PAGED_BLOCK + t % PAGED_BLOCK
            first = (b * s1_len + s1) * PAGED_NQ
            qh = q[first:first + PAGED_NQ].float().reshape(1, PAGED_NQ, 1, d)
            kh = k[rows].float().reshape(seen, kv_heads, d).transpose(0, 1).unsqueeze(0)
            vh = v[rows].float().reshape(seen, kv_heads, d).transpose(0, 1).unsqueeze(0)
            o = F.scaled_dot_product_attention(qh, kh, vh, scale=softmax_scale, enable_gqa=True)
            out[first:first + PAGED_NQ] = o.reshape(PAGED_NQ, d).to(out.dtype)
    return out


def torch_varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, output, l_output, m_output, softmax_scale=0.125):
    """scaled_dot_product_attention per sequence; L and M from the same scores."""
    import torch
    import torch.nn.functional as F

    o, l_out, m_out = output.clone(), l_output.clone(), m_output.clone()
    heads = q.shape[1] // VARLEN_D
    for b in range(len(cu_seqlens_q) - 1):
        qs, qe = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
        ks, ke = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
        if qe <= qs or ke <= ks:
            continue
        qh = q[qs:qe].float().reshape(qe - qs, heads, VARLEN_D).transpose(0, 1)
        kh = k[ks:ke].float().reshape(ke - ks, heads, VARLEN_D).transpose(0, 1)
        vh = v[ks:ke].float().reshape(ke - ks, heads, VARLEN_D).transpose(0, 1)
        out = F.scaled_dot_product_attention(qh.unsqueeze(0), kh.unsqueeze(0), vh.unsqueeze(0), scale=softmax_scale)
        o[qs:qe] = out[0].transpose(0, 1).reshape(qe - qs, heads * VARLEN_D).to(o.dtype)
        s = qh @ kh.transpose(1, 2) * softmax_scale
        m = s.amax(dim=-1)
        l_out[qs:qe] = torch.exp(s - m[..., None]).sum(dim=-1).transpose(0, 1)
        m_out[qs:qe] = m.transpose(0, 1)
    return o, l_out, m_out


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


def torch_bmm(a, b):
    # torch.matmul broadcasts the batch dims; the cube accumulates in f32 and rounds once to T
    c = a.float() @ b.float()
    return c, c.to(a.dtype)


def torch_matmul_bias(x, w, bias):
    import torch

    return torch.nn.functional.linear(x.float(), w.float(), bias.float()).to(x.dtype)


def torch_matmul_i8(a, b):
    # torch has no int8 matmul on the CPU: the int32 products are exact in int64
    return (a.long() @ b.long().T).int()


def torch_matmul_splitk(a, b, bias):
    return (a.float() @ b.float() + bias).to(a.dtype)


def torch_matmul_bias_relu(a, b, bias):
    import torch

    return torch.relu(a.float() @ b.float() + bias)


def torch_mha_sdpa(q, k, v, scale):
    import torch

    return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)


def torch_ffn(x, w1, w2, act=0):
    import torch

    h = (x.float() @ w1.float()).to(x.dtype)  # the first product leaves the cube as bf16
    a = torch.nn.functional.silu(h.float()) if act == 0 else torch.nn.functional.gelu(h.float(), approximate="tanh")
    return (a.to(x.dtype).float() @ w2.float()).to(x.dtype)


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


# ---- issue 23: rounding, powers and logarithms, trigonometry, clip and sign, logic on masks,
# reductions over several axes and leading axes (specs rounding, pow, trig, clip, logical, reduce_axes)


def _as_f64(*xs):
    return [np.asarray(x, np.float64) for x in xs]


def rounding(x):
    (x,) = _as_f64(x)
    return np.rint(x), np.floor(x), np.ceil(x), np.trunc(x), np.rint(np.floor(x * 8.0) * 0.5)


def torch_rounding(x):
    import torch

    return torch.round(x), torch.floor(x), torch.ceil(x), torch.trunc(x), torch.round(torch.floor(x * 8.0) * 0.5)


def pow_ops(x, e, p=1.5):
    x, e = _as_f64(x, e)
    return (np.power(x, e), np.power(x, p), np.power(2.0, e), np.exp2(e * 8.0), np.log1p(x - 1.0),
            np.log1p(e * 0.00001))


def torch_pow_ops(x, e, p=1.5):
    import torch

    return (torch.pow(x, e), torch.pow(x, p), torch.pow(2.0, e), torch.exp2(e * 8.0), torch.log1p(x - 1.0),
            torch.log1p(e * 0.00001))


def trig(x):
    (x,) = _as_f64(x)
    return np.sin(x), np.cos(x)


def torch_trig(x):
    import torch

    return torch.sin(x), torch.cos(x)


def clip(x, lo, hi):
    return np.clip(x, -1, 2), np.minimum(np.maximum(x, lo), hi), np.sign(x)


def torch_clip(x, lo, hi):
    import torch

    return torch.clamp(x, -1, 2), torch.minimum(torch.maximum(x, lo), hi), torch.sign(x)


def logical(x, z):
    x, z = _as_f64(x, z)
    a = np.where((x > 0.0) & (z < 0.5), x, z)
    b = np.where((x < -0.5) | ~(z > 0.0), x, 0.0)
    c = np.where(((x > z) & ~(z > 0.75)) | (x < -0.9), 1.0, z)
    return a, b, c


def torch_logical(x, z):
    import torch

    a = torch.where((x > 0.0) & (z < 0.5), x, z)
    b = torch.where((x < -0.5) | ~(z > 0.0), x, torch.zeros_like(x))
    c = torch.where(((x > z) & ~(z > 0.75)) | (x < -0.9), torch.ones_like(z), z)
    return a, b, c


def reduce_axes(x, w):
    x, w = _as_f64(x, w)
    return (x.sum(axis=(0, 2), keepdims=True), x.max(axis=0), x.mean(axis=(1, 2)), w.min(axis=0, keepdims=True),
            w.mean(axis=(1, 2, 3), keepdims=True), w.sum(axis=(0, 1)))


def torch_reduce_axes(x, w):
    import torch

    return (torch.sum(x, dim=[0, 2], keepdim=True), torch.amax(x, dim=0), torch.mean(x, dim=[1, 2]),
            torch.amin(w, dim=0, keepdim=True), torch.mean(w, dim=[-1, 1, 2], keepdim=True), torch.sum(w, dim=[0, 1]))


# ---- end of issue 23's references
# ---------------------------------------------------------------- layout ops


def transpose2d(x):
    return np.ascontiguousarray(x.T)


def torch_transpose2d(x):
    return x.transpose(0, 1).contiguous()


def permute_heads(x):
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3))


def torch_permute_heads(x):
    return x.permute(0, 2, 1, 3).contiguous()


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def torch_rotate_half(x):
    import torch

    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def reshape_heads(x, h):
    b, s, heads, d = h.shape
    return x.reshape(b, s, heads, d) + h, h.reshape(b, s, heads * d)


def torch_reshape_heads(x, h):
    b, s, heads, d = h.shape
    return x.reshape(b, s, heads, d) + h, h.reshape(b, s, heads * d)


def bias_expand(x, bias):
    return x + bias[:, None, :]


def torch_bias_expand(x, bias):
    return x + bias.unsqueeze(1).expand(x.shape)


def swap_halves(x):
    h = x.shape[-1] // 2
    return np.concatenate([x[..., h:], x[..., :h]], axis=-1)


def torch_swap_halves(x):
    import torch

    h = x.shape[-1] // 2
    return torch.cat([x[..., h:], x[..., :h]], dim=-1)


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


def rope(x, pos, inv_freq):
    # The angle is rounded to f32 as the kernel (and the models) compute it; the rest in f64.
    angle = (np.asarray(pos, np.float32) * np.asarray(inv_freq, np.float32)).astype(np.float64)
    (x,) = _as_f64(x)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = np.cos(angle), np.sin(angle)
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def torch_rope(x, pos, inv_freq):
    import torch

    angle = pos.float() * inv_freq.float()
    c, s = torch.cos(angle), torch.sin(angle)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h].float(), x[..., h:].float()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)
