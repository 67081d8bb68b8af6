"""Attention: ``scaled_dot_product_attention`` and torch's fused transformer fast paths
(``_native_multi_head_attention``, ``_transformer_encoder_layer_fwd``) that a traced and
frozen ``nn.TransformerEncoderLayer`` / ``nn.MultiheadAttention`` emits in eval mode.

Rows whose keys are all masked give zeros, like torch's CPU kernels (not NaN).
"""
from __future__ import annotations

import math

import numpy as np

from srcore.errors import KernelError


def _masked_softmax(scores, keep=None):
    """Softmax over the last dim in place; ``keep`` (bool, broadcastable) marks attended keys."""
    if keep is not None:
        np.putmask(scores, ~np.broadcast_to(keep, scores.shape), -np.inf)
    m = np.max(scores, axis=-1, keepdims=True)
    dead = ~np.isfinite(m)           # every key masked (or an -inf float mask)
    if dead.any():
        m = np.where(dead, 0, m)
    np.subtract(scores, m, out=scores)
    np.exp(scores, out=scores)
    s = np.sum(scores, axis=-1, keepdims=True)
    if dead.any():
        s = np.where(dead & (s == 0), 1, s)
    np.divide(scores, s, out=scores)
    return scores


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *,
                                 scale=None, enable_gqa=False, out=None):
    """``aten::scaled_dot_product_attention``: softmax(q k^T * scale + mask) v (bool mask: True attends)."""
    if dropout_p:
        raise KernelError(f"scaled_dot_product_attention: dropout_p={dropout_p} is not supported at inference")
    L, E = query.shape[-2:]
    S = key.shape[-2]
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = np.repeat(key, rep, axis=-3)
        value = np.repeat(value, rep, axis=-3)
    sc = 1.0 / math.sqrt(E) if scale is None else scale
    scores = np.matmul(query, np.swapaxes(key, -1, -2))
    np.multiply(scores, np.asarray(sc, scores.dtype), out=scores)
    keep = None
    if is_causal:
        keep = np.tril(np.ones((L, S), bool))
    if attn_mask is not None:
        if attn_mask.dtype == np.bool_:
            keep = attn_mask if keep is None else keep & attn_mask
        else:
            scores = np.add(scores, attn_mask, out=scores if scores.shape == np.broadcast_shapes(
                scores.shape, attn_mask.shape) else None)
    probs = _masked_softmax(scores, keep)
    return np.matmul(probs, value, out=out)


def _mha_mask(mask, mask_type, B, H, L, S):
    """torch's masked_softmax convention: True (or nonzero) masks a key out; returns keep or None."""
    if mask is None:
        return None
    masked = mask.astype(bool)
    if mask_type == 1 or (mask_type is None and masked.ndim == 2 and masked.shape == (B, S) and (B, S) != (L, S)):
        masked = masked.reshape(B, 1, 1, S)
    elif masked.ndim == 3:
        masked = masked.reshape(B, -1, L, S)
    return ~masked


def _heads(x, B, T, H, D):
    return x.reshape(B, T, H, D).transpose(0, 2, 1, 3)


def native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                                proj_bias, mask=None, need_weights=True, average_attn_weights=True,
                                mask_type=None):
    """``aten::_native_multi_head_attention`` (batch-first): (output, weights or an empty tensor)."""
    if query.ndim != 3:
        raise KernelError(f"_native_multi_head_attention expects batched (B, L, E) inputs, got {query.shape}")
    B, L, E = query.shape
    S = key.shape[1]
    H = num_head
    D = E // H
    if query is key and key is value:
        qkv = np.matmul(query, qkv_weight.T)
        np.add(qkv, qkv_bias, out=qkv)
        q, k, v = qkv[..., :E], qkv[..., E:2 * E], qkv[..., 2 * E:]
    else:
        ws, bs = np.split(qkv_weight, 3), np.split(qkv_bias, 3)
        q, k, v = (np.matmul(t, w.T) + b for t, w, b in zip((query, key, value), ws, bs))
    q, k, v = _heads(q, B, L, H, D), _heads(k, B, S, H, D), _heads(v, B, S, H, D)
    scores = np.matmul(q, np.swapaxes(k, -1, -2))
    np.multiply(scores, np.asarray(1.0 / math.sqrt(D), scores.dtype), out=scores)
    probs = _masked_softmax(scores, _mha_mask(mask, mask_type, B, H, L, S))
    attn = np.matmul(probs, v).transpose(0, 2, 1, 3).reshape(B, L, E)
    out = np.matmul(attn, proj_weight.T)
    np.add(out, proj_bias, out=out)
    if not need_weights:
        return out, np.empty((0,), query.dtype)
    return out, (probs.mean(axis=1) if average_attn_weights else probs)


def _layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    c = x - mean
    var = np.mean(np.square(c), -1, keepdims=True)
    c *= 1.0 / np.sqrt(var + eps)
    c *= w
    c += b
    return c


def _ffn(x, w1, b1, w2, b2, use_gelu):
    h = np.matmul(x, w1.T)
    h += b1
    if use_gelu:
        from scipy.special import erf
        h *= 0.5 * (1.0 + erf(h / np.sqrt(2.0)).astype(h.dtype))
    else:
        np.maximum(h, 0, out=h)
    y = np.matmul(h, w2.T)
    y += b2
    return y


def transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                  use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
                                  norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                                  mask_type=None):
    """``aten::_transformer_encoder_layer_fwd``: torch's fused eval ``TransformerEncoderLayer``."""
    x = _layer_norm(src, norm_weight_1, norm_bias_1, eps) if norm_first else src
    x = native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                    mask, False, True, mask_type)[0]
    x += src
    if not norm_first:
        x = _layer_norm(x, norm_weight_1, norm_bias_1, eps)
    res = x
    h = _layer_norm(x, norm_weight_2, norm_bias_2, eps) if norm_first else x
    x = _ffn(h, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, use_gelu)
    x += res
    if not norm_first:
        x = _layer_norm(x, norm_weight_2, norm_bias_2, eps)
    return x
