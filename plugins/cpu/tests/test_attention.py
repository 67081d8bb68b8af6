"""attention kernels vs torch: scaled_dot_product_attention, _native_multi_head_attention,
_transformer_encoder_layer_fwd (what a traced+frozen nn.TransformerEncoderLayer emits)."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore_cpu.kernels import attention as K  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(0)
F = torch.nn.functional
aten = torch.ops.aten


def T(a):
    return None if a is None else torch.from_numpy(a)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def close(a, b, tol=1e-5):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def bool_mask(*shape):
    m = RNG.random(shape) > 0.3
    m[..., 0] = True
    return m


@pytest.mark.parametrize("mask", [None, "bool", "float", "bool-batched", "dead-row"])
@pytest.mark.parametrize("causal,scale", [(False, None), (True, None), (False, 0.3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sdpa(mask, causal, scale, dtype):
    q, k, v = rand(2, 3, 4, 8, dtype=dtype), rand(2, 3, 4, 8, dtype=dtype), rand(2, 3, 4, 5, dtype=dtype)
    m = {None: None, "bool": bool_mask(4, 4), "float": rand(4, 4, dtype=dtype),
         "bool-batched": bool_mask(2, 1, 4, 4)}.get(mask)
    if mask == "dead-row":
        m = bool_mask(4, 4)
        m[2] = False
    if causal and m is not None:
        return  # torch refuses an explicit mask with is_causal
    exp = F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(m), is_causal=causal, scale=scale).numpy()
    close(K.scaled_dot_product_attention(q, k, v, m, 0.0, causal, scale=scale), exp,
          1e-5 if dtype == np.float32 else 1e-12)
    buf = np.full(exp.shape, np.nan, dtype)
    assert K.scaled_dot_product_attention(q, k, v, m, 0.0, causal, scale=scale, out=buf) is buf
    close(buf, exp, 1e-5 if dtype == np.float32 else 1e-12)


def test_sdpa_shapes_gqa_and_dropout():
    q, k, v = rand(3, 5, 8), rand(3, 7, 8), rand(3, 7, 2)     # 3-D, L != S, causal is top-left
    close(K.scaled_dot_product_attention(q, k, v, None, 0.0, True),
          F.scaled_dot_product_attention(T(q), T(k), T(v), is_causal=True).numpy())
    q, k, v = rand(1, 4, 3, 8), rand(1, 2, 6, 8), rand(1, 2, 6, 8)
    close(K.scaled_dot_product_attention(q, k, v, None, 0.0, False, enable_gqa=True),
          F.scaled_dot_product_attention(T(q), T(k), T(v), enable_gqa=True).numpy())
    with pytest.raises(srcore.KernelError, match="dropout_p"):
        K.scaled_dot_product_attention(q, q, q, None, 0.1)


def _mha(E=16, H=4, seed=0):
    torch.manual_seed(seed)
    m = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
    return m, [p.detach().numpy() for p in (m.in_proj_weight, m.in_proj_bias, m.out_proj.weight, m.out_proj.bias)]


@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("masking", [None, "key_padding", "attn", "merged", "dead-entry", "dead-row"])
def test_native_multi_head_attention_self(need_weights, average, masking):
    """Against torch's op; a batch entry or a query whose keys are all masked gives NaN there (unlike
    torch's SDPA, which gives zeros)."""
    mha, params = _mha()
    x = rand(2, 5, 16)
    mask, mask_type = None, None
    if masking in ("key_padding", "dead-entry"):
        mask, mask_type = ~bool_mask(2, 5), 1
        if masking == "dead-entry":
            mask[1] = True
    elif masking in ("attn", "dead-row"):
        mask, mask_type = ~bool_mask(5, 5), 0
        if masking == "dead-row":
            mask[3] = True
    elif masking == "merged":
        mask, mask_type = ~bool_mask(2, 4, 5, 5), 2
    with torch.no_grad():
        eo, ew = aten._native_multi_head_attention(T(x), T(x), T(x), 16, 4, *map(T, params), T(mask),
                                                   need_weights, average, mask_type)
    o, w = K.native_multi_head_attention(x, x, x, 16, 4, *params, mask, need_weights, average, mask_type)
    close(o, eo.numpy())
    if need_weights:
        close(w, ew.numpy())
    else:
        assert w.size == 0


def test_native_mha_cross_attention_matches_module():
    mha, params = _mha(8, 2, seed=1)
    q, kv = rand(2, 3, 8), rand(2, 6, 8)
    kpm = ~bool_mask(2, 6)
    with torch.no_grad():
        eo, ew = mha(T(q), T(kv), T(kv), key_padding_mask=T(kpm))
    o, w = K.native_multi_head_attention(q, kv, kv, 8, 2, *params, kpm, True, True, 1)
    close(o, eo.numpy())
    close(w, ew.numpy())


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("with_mask", [False, True, "dead-entry"])
def test_transformer_encoder_layer_fwd(norm_first, activation, with_mask):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=norm_first,
                                             activation=activation).eval()
    x = rand(2, 6, 32)
    kpm = ~bool_mask(2, 6) if with_mask else None
    if with_mask == "dead-entry":   # every key of entry 1 padded: NaN there, as torch
        kpm[1] = True
    with torch.no_grad():
        exp = layer(T(x), src_key_padding_mask=T(kpm)).numpy()
    sa = layer.self_attn
    p = [t.detach().numpy() for t in (sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias)]
    ln = [t.detach().numpy() for t in (layer.norm1.weight, layer.norm1.bias, layer.norm2.weight, layer.norm2.bias)]
    ff = [t.detach().numpy() for t in (layer.linear1.weight, layer.linear1.bias, layer.linear2.weight,
                                       layer.linear2.bias)]
    r = K.transformer_encoder_layer_fwd(x, 32, 4, *p, activation == "gelu", norm_first, 1e-5, *ln, *ff,
                                        kpm, 1 if with_mask else None)
    close(r, exp, 1e-4)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_traced_frozen_encoder_layer_is_one_fused_node():
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True).eval()
    with torch.no_grad():
        g = torch.jit.freeze(torch.jit.trace(layer, torch.randn(1, 3, 16))).graph
    kinds = {n.kind() for n in g.nodes()}
    assert kinds == {"aten::_transformer_encoder_layer_fwd", "prim::Constant"}


def test_decl():
    from srcore_cpu.decl import attention as D
    assert {k.op for k in D.KERNELS} == {"aten::scaled_dot_product_attention", "aten::_native_multi_head_attention",
                                         "aten::_transformer_encoder_layer_fwd"}
    for k in D.KERNELS:
        mod, _, attr = k.impl.partition(":")
        assert callable(getattr(__import__(mod, fromlist=[attr]), attr))


def _node(op, **args):
    from srcore.ir.types import TensorType
    from srcore.plugin import ArgInfo, NodeInfo
    return NodeInfo(op, None, tuple(ArgInfo(n, TensorType(), not (isinstance(v, str) and v == "<var>"), v)
                                    for n, v in args.items()), ())


def _layer_node(layer, activation, norm_first, mask=None, E=32, H=4, mask_type=None):
    sa = layer.self_attn
    t = [x.detach().numpy() for x in (sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
                                      layer.norm1.weight, layer.norm1.bias, layer.norm2.weight, layer.norm2.bias,
                                      layer.linear1.weight, layer.linear1.bias, layer.linear2.weight,
                                      layer.linear2.bias)]
    return _node("aten::_transformer_encoder_layer_fwd", src="<var>", embed_dim=E, num_heads=H,
                 qkv_weight=t[0], qkv_bias=t[1], proj_weight=t[2], proj_bias=t[3], use_gelu=activation == "gelu",
                 norm_first=norm_first, eps=1e-5, norm_weight_1=t[4], norm_bias_1=t[5], norm_weight_2=t[6],
                 norm_bias_2=t[7], ffn_weight_1=t[8], ffn_bias_1=t[9], ffn_weight_2=t[10], ffn_bias_2=t[11],
                 mask=mask, mask_type=mask_type)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matcher_fast_path(norm_first, activation):
    from srcore.plugin import Specialized
    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=norm_first,
                                             activation=activation).eval()
    spec = K.transformer_encoder_layer_matcher(_layer_node(layer, activation, norm_first))
    assert isinstance(spec, Specialized) and spec.args[0] == 0
    for shape in [(2, 6, 32), (1, 9, 32), (1, 37, 32)]:   # 37 keys: a vector and a tail per softmax row
        x = rand(*shape)
        with torch.no_grad():
            exp = layer(T(x)).numpy()
        r1 = spec.fn(x, None)
        close(r1, exp, 1e-4)
        r2 = spec.fn(x, None)          # scratch is reused: results are fresh arrays, not workspace views
        assert r2 is not r1
        close(r1, exp, 1e-4)
    x64 = rand(2, 6, 32, dtype=np.float64)   # input dtype differs from the weights: the generic kernel
    with torch.no_grad():
        exp64 = layer.double()(T(x64)).numpy()
    close(spec.fn(x64, None), exp64, 1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matcher_fast_path_with_a_key_padding_mask(dtype, norm_first):
    """A key padding mask (bool or torch's float -inf form) as the fast path's additive bias; an
    entry with every key padded gives NaN, as torch's fused layer."""
    from srcore.plugin import Specialized
    torch.manual_seed(3)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=norm_first).eval()
    if dtype == np.float64:
        layer = layer.double()
    spec = K.transformer_encoder_layer_matcher(_layer_node(layer, "relu", norm_first, mask="<var>", mask_type=1))
    assert isinstance(spec, Specialized) and spec.args == (0, 18)
    x = rand(3, 7, 32, dtype=dtype)
    pad = np.arange(7)[None] >= np.array([7, 4, 0])[:, None]
    for mask in (pad, np.where(pad, -np.inf, 0).astype(dtype)):
        with torch.no_grad():
            exp = layer(T(x), src_key_padding_mask=T(mask)).numpy()
        assert np.isnan(exp[2]).all() and not np.isnan(exp[:2]).any()
        close(spec.fn(x, mask), exp, 1e-4)


@pytest.mark.parametrize("masking", [None, "key_padding", "attn", "merged"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_mha_matcher_fast_path(masking, dtype):
    """Self-attention with constant weights and no weights output: the prepared fast path, against
    torch's op (a fully masked query gives NaN there); cross-attention goes to the generic kernel."""
    from srcore.plugin import Specialized
    mha, params = _mha(seed=4)
    params = [p.astype(dtype) for p in params]
    x = rand(2, 5, 16, dtype=dtype)
    mask, mask_type = {None: (None, None), "key_padding": (~bool_mask(2, 5), 1), "attn": (~bool_mask(5, 5), 0),
                       "merged": (~bool_mask(2, 4, 5, 5), 2)}[masking]
    if mask is not None:
        mask.reshape(-1, 5)[1] = True    # one query (or batch entry) with every key masked
    node = _node("aten::_native_multi_head_attention", query="<var>", key="<var>", value="<var>", embed_dim=16,
                 num_head=4, qkv_weight=params[0], qkv_bias=params[1], proj_weight=params[2], proj_bias=params[3],
                 mask=None if mask is None else "<var>", need_weights=False, average_attn_weights=True,
                 mask_type=mask_type)
    spec = K.native_multi_head_attention_matcher(node)
    assert isinstance(spec, Specialized)
    with torch.no_grad():
        want = aten._native_multi_head_attention(T(x), T(x), T(x), 16, 4, *map(T, params), T(mask), False, True,
                                                 mask_type)[0].numpy()
    out, w = spec.fn(x, x, x, mask)
    close(out, want, 1e-5 if dtype == np.float32 else 1e-12)
    assert w.size == 0
    kv = rand(2, 5, 16, dtype=dtype)
    with torch.no_grad():
        want = aten._native_multi_head_attention(T(x), T(kv), T(kv), 16, 4, *map(T, params), T(mask), False, True,
                                                 mask_type)[0].numpy()
    close(spec.fn(x, kv, kv, mask)[0], want, 1e-5 if dtype == np.float32 else 1e-12)


def _kernel(fn):
    # (at more than one intra-op thread the generic kernel comes held on the caller's BLAS thread,
    # attention._held: the kernel itself is under it)
    return getattr(fn, "blas_held", fn)


def test_native_mha_matcher_declines_weights_asked_for():
    mha, params = _mha(seed=5)
    node = _node("aten::_native_multi_head_attention", query="<var>", key="<var>", value="<var>", embed_dim=16,
                 num_head=4, qkv_weight=params[0], qkv_bias=params[1], proj_weight=params[2], proj_bias=params[3],
                 mask=None, need_weights=True, average_attn_weights=True, mask_type=None)
    assert _kernel(K.native_multi_head_attention_matcher(node)) is K.native_multi_head_attention


def test_encoder_layer_matcher_declines_to_generic():
    import attrs
    torch.manual_seed(2)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    assert _kernel(K.transformer_encoder_layer_matcher(_layer_node(layer, "relu", False, mask="<var>",
                                                                   mask_type="<var>"))) \
        is K.transformer_encoder_layer_fwd   # a mask whose type is known only at run time
    n = _layer_node(layer, "relu", False)
    args = tuple(a if a.name != "qkv_weight" else type(a)(a.name, a.type, False, None) for a in n.args)
    assert _kernel(K.transformer_encoder_layer_matcher(attrs.evolve(n, args=args))) \
        is K.transformer_encoder_layer_fwd
