"""Attention: ``scaled_dot_product_attention`` and torch's fused encoder layer
(``_transformer_encoder_layer_fwd``, the eval fast path of ``nn.TransformerEncoderLayer``),
which becomes its linear layers, OpenVINO's ScaledDotProductAttention and layer norms."""
from __future__ import annotations

import numpy as np

from .pointwise import gelu, relu
from .table import arg_shape, f32, i64, out, rank_of, register


def _sdpa_ok(n) -> bool:
    rq, rk, rv = rank_of(n, 0), rank_of(n, 1), rank_of(n, 2)
    if None in (rq, rk, rv) or min(rq, rk, rv) < 2 or not rq == rk == rv:
        return False
    if float(n.const("dropout_p", 0.0)) != 0.0 or n.const("enable_gqa", False):
        return False
    has_mask = n.const("attn_mask", 0) is not None   # a non-constant mask: a tensor
    if n.const("is_causal", False) and has_mask:
        return False   # torch raises
    return True


@register("aten::scaled_dot_product_attention", consts=("dropout_p", "is_causal", "scale", "enable_gqa"),
          check=_sdpa_ok)
def _sdpa(c):
    o = c.o
    q, k, v = c.x("query"), c.x("key"), c.x("value")
    mask = None if c.is_none("attn_mask") else c.x("attn_mask")
    scale = c.const("scale", None)
    e = q.get_partial_shape()[-1]
    if scale is None:
        if e.is_dynamic:
            c.fail("the head size must be static (it sets the default scale)")
        scale = 1.0 / np.sqrt(e.get_length())
    causal = bool(c.const("is_causal", False))
    if mask is None and causal:
        return out(o.scaled_dot_product_attention(q, k, v, scale=f32(o, scale), causal=True))
    if mask is None:
        mask = f32(o, 0.0)
    return out(o.scaled_dot_product_attention(q, k, v, mask, f32(o, scale), causal=False))


_ENCODER_CONSTS = ("embed_dim", "num_heads", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "use_gelu",
                   "norm_first", "eps", "norm_weight_1", "norm_bias_1", "norm_weight_2", "norm_bias_2",
                   "ffn_weight_1", "ffn_bias_1", "ffn_weight_2", "ffn_bias_2", "mask", "mask_type")


def _encoder_ok(n) -> bool:
    shape = arg_shape(n, 0)
    e, h = n.const("embed_dim", None), n.const("num_heads", None)
    return shape is not None and len(shape) == 3 and n.const("mask", None) is None and isinstance(e, int) \
        and isinstance(h, int) and h > 0 and e % h == 0 and (not isinstance(shape[2], int) or shape[2] == e)


@register("aten::_transformer_encoder_layer_fwd", consts=_ENCODER_CONSTS, check=_encoder_ok)
def _encoder_layer(c):
    o = c.o
    x = c.x("src")
    e, h = int(c.const("embed_dim")), int(c.const("num_heads"))
    d = e // h
    eps = float(c.const("eps"))

    def w(name):
        return o.constant(np.ascontiguousarray(c.const(name), np.float32)).output(0)

    def linear(t, wn, bn):
        return out(o.add(out(o.matmul(t, w(wn), False, True)), w(bn)))

    def norm(t, k):
        y = out(o.mvn(t, i64(o, [2]), True, eps, "inside_sqrt"))
        return out(o.add(out(o.multiply(y, w(f"norm_weight_{k}"))), w(f"norm_bias_{k}")))

    def attention(t):
        qkv = linear(t, "qkv_weight", "qkv_bias")                               # (B, L, 3E)
        heads = out(o.reshape(qkv, i64(o, [0, 0, 3, h, d]), True))              # (B, L, 3, H, D)
        heads = out(o.transpose(heads, i64(o, [2, 0, 3, 1, 4])))               # (3, B, H, L, D)
        q, k, v = (out(o.squeeze(p, i64(o, [0]))) for p in o.split(heads, i64(o, 0), 3).outputs())
        a = out(o.scaled_dot_product_attention(q, k, v, f32(o, 0.0), f32(o, 1.0 / np.sqrt(d)), causal=False))
        a = out(o.reshape(out(o.transpose(a, i64(o, [0, 2, 1, 3]))), i64(o, [0, 0, e]), True))
        return linear(a, "proj_weight", "proj_bias")

    def ffn(t):
        hdn = linear(t, "ffn_weight_1", "ffn_bias_1")
        hdn = gelu(o, hdn, "none") if c.const("use_gelu") else relu(o, hdn, "linear")
        return linear(hdn, "ffn_weight_2", "ffn_bias_2")

    if c.const("norm_first"):
        x = out(o.add(x, attention(norm(x, 1))))
        return out(o.add(x, ffn(norm(x, 2))))
    x = norm(out(o.add(x, attention(x))), 1)
    return norm(out(o.add(x, ffn(x))), 2)
