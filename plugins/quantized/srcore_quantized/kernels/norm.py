"""quantized:: batch_norm (1d/2d/3d, +relu), layer_norm, group_norm and instance_norm."""
from __future__ import annotations

import numpy as np

from srcore.plugin import QDTYPES, KernelError

from ._common import (F32, buffer, dequant_scalar, fma_f32, ints, output_qparams, quant_scalar, require_per_tensor,
                      wrap)


def fused_params(weight, bias, mean, var, eps, input_scale, output_scale, channels):
    """torch's ``compute_fused_params``: per channel ``alpha = w / sqrt(var + eps) * s_in / s_out`` and
    ``beta = (b - mean * w / sqrt(var + eps)) / s_out``, with its float32/float64 steps."""
    var = np.asarray(var, F32).reshape(-1)
    mean = np.asarray(mean, F32).reshape(-1)
    w = np.ones(channels, F32) if weight is None else np.asarray(weight, F32).reshape(-1)
    b = np.zeros(channels, F32) if bias is None else np.asarray(bias, F32).reshape(-1)
    inv_sigma = (1.0 / np.sqrt(var + F32(eps)).astype(np.float64)).astype(F32)
    iw = inv_sigma * w
    alpha = (iw.astype(np.float64) * (float(input_scale) / float(output_scale))).astype(F32)
    beta = ((b - mean * inv_sigma * w).astype(np.float64) / float(output_scale)).astype(F32)
    return alpha, beta


def _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, relu, out, op, ranks):
    require_per_tensor(qx, op)
    if qx.ndim not in ranks:
        raise KernelError(f"{op}: expects a {' or '.join(f'{r}-D' for r in ranks)} input, got shape {list(qx.shape)}")
    q = output_qparams(qx.qdtype, output_scale, output_zero_point, op)
    info = QDTYPES[qx.qdtype]
    C = qx.shape[1]
    alpha, beta = fused_params(weight, bias, mean, var, eps, qx.qparams.scale, q.scale, C)
    # torch runs channels-last: per (n, spatial) row, whole groups of 8 channels on the vector path
    # (fma(alpha, x - zp, beta)), the last C % 8 channels on the scalar path (alpha * (x - zp) + beta)
    x = np.moveaxis(ints(qx), 1, -1).astype(np.float64) - qx.qparams.zero_point
    k = (C // 8) * 8
    y = np.empty(x.shape, F32)
    if k:
        y[..., :k] = (alpha[:k].astype(np.float64) * x[..., :k] + beta[:k].astype(np.float64)).astype(F32)
    if k < C:
        y[..., k:] = alpha[k:] * x[..., k:].astype(F32) + beta[k:]
    r = np.rint(y).astype(np.float64) + q.zero_point
    np.clip(r, q.zero_point if relu else info.qmin, info.qmax, out=r)
    res = buffer(out, qx.shape, qx.qdtype)
    np.moveaxis(res, 1, -1)[...] = r
    return wrap(res, qx.qdtype, q)


def batch_norm_out(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, *, out=None):
    return _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, False, out,
                       "quantized::batch_norm", (2, 3, 4, 5))


def quantized_batch_norm_out(input, weight, bias, mean, var, eps, output_scale, output_zero_point, *, out=None):
    """``aten::quantized_batch_norm``: torch runs ``quantized::batch_norm``'s kernel."""
    return _batch_norm(input, weight, bias, mean, var, eps, output_scale, output_zero_point, False, out,
                       "aten::quantized_batch_norm", (2, 3, 4, 5))


def batch_norm2d_out(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, *, out=None):
    return _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, False, out,
                       "quantized::batch_norm2d", (4,))


def batch_norm2d_relu_out(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, *, out=None):
    return _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, True, out,
                       "quantized::batch_norm2d_relu", (4,))


def batch_norm1d_out(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, *, out=None):
    return _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, False, out,
                       "quantized::batch_norm1d", (2, 3))


def batch_norm1d_relu_out(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, *, out=None):
    return _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, True, out,
                       "quantized::batch_norm1d_relu", (2, 3))


def layer_norm_out(input, normalized_shape, weight, bias, eps, output_scale, output_zero_point, *, out=None):
    """Normalized over the trailing ``normalized_shape`` dims of the dequantized input (float32 moments),
    scaled, shifted and quantized to the output parameters."""
    op = "quantized::layer_norm"
    require_per_tensor(input, op)
    q = output_qparams(input.qdtype, output_scale, output_zero_point, op)
    shape = tuple(int(d) for d in normalized_shape)
    if input.shape[input.ndim - len(shape):] != shape:
        raise KernelError(f"{op}: normalized_shape {list(shape)} does not match the input's trailing dims "
                          f"{list(input.shape)}")
    x = dequant_scalar(ints(input), input.qparams.scale, input.qparams.zero_point)
    axes = tuple(range(input.ndim - len(shape), input.ndim))
    mean = x.mean(axis=axes, keepdims=True, dtype=np.float64)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = ((x - mean) / np.sqrt(var + float(eps))).astype(F32)
    if weight is not None:
        y = y * np.asarray(weight, F32)
    if bias is not None:
        y = y + np.asarray(bias, F32)
    res = buffer(out, input.shape, input.qdtype)
    quant_scalar(y.astype(F32), q.scale, q.zero_point, input.qdtype, out=res)
    return wrap(res, input.qdtype, q)


# -- group / instance norm: torch's quantized_normalize_kernel with per-channel affine -----------------
def _group_norm(qx, groups: int, weight, bias, eps, output_scale, output_zero_point, out, op):
    require_per_tensor(qx, op)
    if qx.ndim < 3:
        raise KernelError(f"{op}: expects an input of at least 3 dims, got shape {list(qx.shape)}")
    q = output_qparams(qx.qdtype, output_scale, output_zero_point, op)
    info = QDTYPES[qx.qdtype]
    n, c = qx.shape[0], qx.shape[1]
    if groups <= 0 or c % groups:
        raise KernelError(f"{op}: {c} channels are not divisible by {groups} groups")
    cpg = c // groups
    hw = int(np.prod(qx.shape[2:], dtype=np.int64))
    x = ints(qx).reshape(n * groups, cpg, hw)
    size = cpg * hw
    # the moments from exact integer sums (in float64: exact below 2^53), then torch's float32 steps; its
    # variance ``sum_sq / N - mean * mean`` is one FMA in torch's vectorized builds
    xf = x.reshape(n * groups, size).astype(np.float64)
    s = xf.sum(axis=1).astype(F32)
    s2 = np.einsum("ij,ij->i", xf, xf).astype(F32)
    del xf
    mean_shifted = (s / F32(size)).astype(F32)
    mean = (mean_shifted - F32(qx.qparams.zero_point)).astype(F32)
    var = np.maximum(fma_f32(-mean_shifted, mean_shifted, (s2 / F32(size)).astype(F32)), F32(0))
    xs = F32(qx.qparams.scale)
    std_inv = (np.float64(xs) / np.sqrt(((var * xs) * xs).astype(np.float64) + float(eps))).astype(F32)
    w = np.ones(c, F32) if weight is None else np.asarray(weight, F32).reshape(c)
    b = np.zeros(c, F32) if bias is None else np.asarray(bias, F32).reshape(c)
    # per (row, channel): gamma_p = scale_x / std * gamma (float32), beta
    gamma_p = (std_inv.reshape(n, groups, 1) * w.reshape(1, groups, cpg)).astype(F32).reshape(n * groups, cpg, 1)
    beta = np.broadcast_to(b.reshape(1, groups, cpg), (n, groups, cpg)).reshape(n * groups, cpg, 1)
    # (q - zp) from a table indexed by the stored byte, then float32 steps in torch's order, in place
    levels = (np.arange(256, dtype=np.uint8).view(x.dtype).astype(np.int64) - qx.qparams.zero_point).astype(F32)
    y = levels[x.view(np.uint8)]
    y -= mean.reshape(-1, 1, 1)
    y *= gamma_p
    y += beta
    # rounded before the zero point is added, on torch's vector path (cvtps2dq, then an integer add) and, as
    # measured against torch 2.13 (0 differences in 6,000 random group norms), on its scalar tail too
    y *= F32(1.0) / F32(q.scale)
    np.rint(y, out=y)
    y += F32(q.zero_point)                 # exact: an integer below 2^24, or far outside and clipped anyway
    np.clip(y, info.qmin, info.qmax, out=y)
    res = buffer(out, qx.shape, qx.qdtype)
    res.reshape(y.shape)[...] = y
    return wrap(res, qx.qdtype, q)


def group_norm_out(input, num_groups, weight, bias, eps, output_scale, output_zero_point, *, out=None):
    """``quantized::group_norm``: per (batch, group) the moments of the stored integers (exact sums,
    float32 steps), then ``(q - zp - mean) * (s_x / std * gamma) + beta`` in float32, quantized
    as ``nearbyint(y / s) + zp``."""
    return _group_norm(input, int(num_groups), weight, bias, eps, output_scale, output_zero_point, out,
                       "quantized::group_norm")


def instance_norm_out(input, weight, bias, eps, output_scale, output_zero_point, *, out=None):
    """``quantized::instance_norm``: torch runs it as a group norm with one channel per group."""
    return _group_norm(input, int(input.shape[1]) if input.ndim > 1 else 1, weight, bias, eps, output_scale,
                       output_zero_point, out, "quantized::instance_norm")


def batch_norm3d_out(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, *, out=None):
    return _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, False, out,
                       "quantized::batch_norm3d", (5,))


def batch_norm3d_relu_out(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, *, out=None):
    return _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, True, out,
                       "quantized::batch_norm3d_relu", (5,))


def batch_norm_relu_out(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, *, out=None):
    return _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, True, out,
                       "quantized::batch_norm_relu", (2, 3, 4, 5))
