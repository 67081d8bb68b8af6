"""The ``com.microsoft`` ops onnxruntime's transformer optimizer
(``onnxruntime.transformers.optimizer.optimize_model``, model types bert/gpt2/...) writes into BERT/GPT
files: ``SkipLayerNormalization``, ``SkipSimplifiedLayerNormalization``, ``EmbedLayerNormalization``,
``Attention``, ``MultiHeadAttention``, ``RotaryEmbedding``, ``BiasAdd``, ``GemmFastGelu``, and
``SimplifiedLayerNormalization`` (which onnxruntime registers in the default domain). Each becomes the
ATen ops it fused, computed as onnxruntime's CPU kernels compute them: a padded key gets
``mask_filter_value`` (-10000 by default, not -inf: a fully padded row attends to all its keys) added,
while a causal mask leaves the later keys out of the softmax (as -inf would), as onnxruntime 1.32 does.
What those kernels do not run here (4-D Megatron masks, rotary and shared-buffer attention, the packed
Q/K/V layouts) is refused by name.
"""
from __future__ import annotations

from ....ir.types import INT
from ..context import NodeContext, Unsupported
from ..dtypes import FLOATS, scalar_type
from ._util import cast, dim_item, table
from .transformer import _const_of, rms_normalization, rotate


def _wanted(cx: NodeContext, j: int) -> bool:
    return j < len(cx.node.output) and bool(cx.node.output[j])


def _skip_sum(cx: NodeContext, bias_input: int):
    """``input + skip (+ bias)``, the sum the skip norms normalize (and may output)."""
    s = cx.op("aten::add", cx.x(0), cx.x(1), 1)
    return cx.op("aten::add", s, cx.x(bias_input), 1) if cx.has(bias_input) else s


def _hidden(cx: NodeContext, i: int, x) -> list:
    return [dim_item(cx, i, x, cx.rank(i) - 1)]


def _inv_rms(cx: NodeContext, x, dims: list, eps: float):
    """``1 / sqrt(mean(x^2) + eps)`` over ``dims``, kept as size-1 dims (onnxruntime's ``inv_std_var``)."""
    ms = cx.op("aten::mean", cx.op("aten::mul", x, x), dims, True, None)
    return cx.op("aten::rsqrt", cx.op("aten::add", ms, eps, 1))


def skip_layer_norm(cx: NodeContext):
    """LayerNorm over the last dim of ``input + skip + bias``, times gamma plus beta; the statistics
    ``mean``/``inv_std_var`` ``[B, S, 1]`` and the sum ``input_skip_bias_sum`` as further outputs."""
    cx.require_dtype(0, FLOATS, "input")
    eps = float(cx.attr("epsilon", 1e-12))
    s = _skip_sum(cx, 4)
    beta = cx.x(3) if cx.has(3) else None
    norm = cx.list_value(_hidden(cx, 0, cx.x(0)))
    if _wanted(cx, 1) or _wanted(cx, 2):
        y, mean, rstd = cx.op("aten::native_layer_norm", s, norm, cx.x(2), beta, eps, n_out=3)
        return y, mean, rstd, s
    return cx.op("aten::layer_norm", s, norm, cx.x(2), beta, eps, True), None, None, s


def skip_simplified_layer_norm(cx: NodeContext):
    """RMSNorm (no mean subtracted, no beta) of ``input + skip + bias`` times gamma; ``mean`` is
    zeros (as onnxruntime writes it), ``inv_std_var`` the reciprocal RMS."""
    cx.require_dtype(0, FLOATS, "input")
    eps = float(cx.attr("epsilon", 1e-12))
    s = _skip_sum(cx, 3)
    y = cx.op("aten::rms_norm", s, cx.list_value(_hidden(cx, 0, cx.x(0))), cx.x(2), eps)
    rstd = _inv_rms(cx, s, [-1], eps) if _wanted(cx, 1) or _wanted(cx, 2) else None
    mean = cx.op("aten::zeros_like", rstd, None, None, None, None, None) if _wanted(cx, 1) else None
    return y, mean, rstd, s


def simplified_layer_norm(cx: NodeContext):
    """onnxruntime's RMSNorm (default domain, version 1): ONNX's RMSNormalization's attributes, and the
    reciprocal RMS as output ``inv_std_var``."""
    y = rms_normalization(cx)
    if not _wanted(cx, 1):
        return y
    if cx.dtype(0) != "float32":
        raise Unsupported(f"output inv_std_var of a {cx.dtype(0)} input")
    r = cx.rank(0)
    axis = int(cx.attr("axis", -1)) % r
    return y, _inv_rms(cx, cx.x(0), list(range(axis, r)), float(cx.attr("epsilon", 1e-5)))


def embed_layer_norm(cx: NodeContext):
    """Word + position (+ segment) embeddings, layer-normed; ``mask_index`` the count of ones in each
    mask row (int32; zeros without a mask); ``embedding_sum`` the sum before the norm."""
    eps = float(cx.attr("epsilon", 1e-12))
    mtype = int(cx.attr("mask_index_type", 1))
    if mtype not in (0, 1):
        raise Unsupported(f"mask_index_type={mtype}")
    ids = cx.x(0)
    word = cx.x(2)
    emb = cx.op("aten::embedding", word, ids, -1, False, False)
    if cx.has(8):   # position_ids: [B, S] or [1, S]
        pos_ids = cx.x(8)
    else:
        seq = dim_item(cx, 0, ids, 1)
        pos_ids = cx.op("aten::arange", seq, scalar_type("int64"), None, None, None)
    emb = cx.op("aten::add", emb, cx.op("aten::embedding", cx.x(3), pos_ids, -1, False, False), 1)
    if cx.has(4) != cx.has(1):
        raise Unsupported("segment_ids and segment_embedding must be given together")
    if cx.has(4):
        emb = cx.op("aten::add", emb, cx.op("aten::embedding", cx.x(4), cx.x(1), -1, False, False), 1)
    hidden = [dim_item(cx, 2, word, 1)]
    y = cx.op("aten::layer_norm", emb, cx.list_value(hidden), cx.x(5), cx.x(6), eps, True)
    if cx.has(7):
        ones = cx.op("aten::eq", cx.x(7), 1)
        mask_index = cast(cx, cx.op("aten::sum", ones, [1], False, None), "int32")
    else:
        batch = dim_item(cx, 0, ids, 0)
        mask_index = cx.op("aten::zeros", cx.list_value([batch]), scalar_type("int32"), None, None, None)
    if mtype == 0 and _wanted(cx, 1):
        raise Unsupported("output mask_index with mask_index_type=0")
    return y, mask_index, emb


# -- attention ------------------------------------------------------------------------------------------
def _heads(cx: NodeContext, x, heads: int):
    """``[B, S, heads * H]`` -> ``[B, heads, S, H]``."""
    return cx.op("aten::transpose", cx.op("aten::unflatten", x, -1, [heads, -1]), 1, 2)


def _merge(cx: NodeContext, y):
    """``[B, N, S, H]`` -> ``[B, S, N * H]``."""
    return cx.op("aten::flatten", cx.op("aten::transpose", y, 1, 2), 2, 3)


def _arange(cx: NodeContext, n):
    return cx.op("aten::arange", n, scalar_type("int64"), None, None, None)


def _masked(cx: NodeContext, mi: int, kind: str, q_len, kv_len, past, causal: bool):
    """The booleans ``[B|1, 1, S|1, T]`` of the positions onnxruntime sets to ``mask_filter_value``
    (the mask input ``mi``'s; 1-D ends and starts overlapping count once) and, when causal, of the
    later keys its softmax leaves out (None: none)."""
    j = _arange(cx, kv_len)
    masked = None
    if cx.has(mi):
        cx.require_dtype(mi, {"int32"}, "mask_index")
        m = cx.x(mi)
        r = cx.rank(mi)
        shape = cx.shape(mi)
        if r == 1:
            # [B] key lengths or [2B] ends and starts: told apart by the static length, or by the
            # same symbolic dim (dim_param) as the batch (a mask_index EmbedLayerNormalization wrote)
            batch = (cx.shape(0) or (None,))[0]
            n = shape[0] if shape is not None else None
            m = cast(cx, m, "int64")
            if n is not None and n == batch:
                ends = m
                starts = None
            elif isinstance(n, int) and isinstance(batch, int) and n == 2 * batch and kind == "mask_index":
                ends, starts = (cx.op("aten::slice", m, 0, a, b_, 1) for a, b_ in ((0, batch), (batch, 2 * batch)))
            else:
                raise Unsupported(f"1-D {kind} of length {n} for batch {batch} (key lengths [B]"
                                  f"{' or end and start positions [2B]' if kind == 'mask_index' else ''}, "
                                  f"known at conversion, expected)")
            masked = cx.op("aten::ge", j, cx.op("aten::reshape", ends, [-1, 1, 1, 1]))
            if starts is not None:
                masked = cx.op("aten::logical_or", masked,
                               cx.op("aten::lt", j, cx.op("aten::reshape", starts, [-1, 1, 1, 1])))
        elif r == 2:   # [B, T] 1 keep / 0 mask
            masked = cx.op("aten::unsqueeze", cx.op("aten::unsqueeze", cx.op("aten::le", m, 0), 1), 1)
        elif r == 3 and kind == "mask_index":   # [B, S, T]
            masked = cx.op("aten::unsqueeze", cx.op("aten::le", m, 0), 1)
        else:
            raise Unsupported(f"{r}-D {kind} (onnxruntime's CPU kernel takes 1-D, 2-D"
                              f"{', 3-D' if kind == 'mask_index' else ''})")
    later = None
    if causal:
        pos = cx.op("aten::unsqueeze", _arange(cx, q_len), 1)
        if past is not None:
            pos = cx.op("aten::add", pos, past, 1)
        later = cx.op("aten::gt", j, pos)
    return masked, later


def _attend(cx: NodeContext, q, k, v, *, dt, head: int, scale_attr, masked, mfv: float, bias_input: int):
    """softmax(scale * q k^T + mask + attention_bias) v on ``[B, N, S, H]`` tensors."""
    scale = float(scale_attr) if scale_attr else 1.0 / float(head) ** 0.5
    qk = cx.op("aten::mul", cx.op("aten::matmul", q, cx.op("aten::transpose", k, 2, 3)),
               _const_of(cx, scale, dt, "scale"))
    pad, later = masked
    zero = _const_of(cx, 0.0, dt, "zero")
    if pad is not None:
        qk = cx.op("aten::add", qk, cx.op("aten::where", pad, _const_of(cx, mfv, dt, "mask_filter"), zero), 1)
    if later is not None:   # onnxruntime's softmax leaves the later keys out (each row keeps key 0: no NaN)
        qk = cx.op("aten::add", qk, cx.op("aten::where", later, _const_of(cx, float("-inf"), dt, "ninf"), zero), 1)
    if cx.has(bias_input):
        qk = cx.op("aten::add", qk, cx.x(bias_input), 1)
    return cx.op("aten::matmul", cx.op("aten::softmax", qk, -1, None), v)


def attention(cx: NodeContext):
    """BERT/GPT-2 self-attention with packed Q/K/V weights ``[D_in, D_q + D_k + D_v]``."""
    dt = cx.require_dtype(0, {"float32", "float64"}, "input")
    heads = int(cx.attr("num_heads"))
    causal = bool(cx.attr("unidirectional", 0))
    mfv = float(cx.attr("mask_filter_value", -10000.0))
    scale = cx.attr("scale", 0.0)
    if cx.attr("do_rotary", 0):
        raise Unsupported("do_rotary=1")
    cx.attr("rotary_embedding_dim", 0)   # only read with do_rotary
    if cx.attr("past_present_share_buffer", 0):
        raise Unsupported("past_present_share_buffer=1")
    if cx.has(6):
        raise Unsupported("input past_sequence_length (used with past_present_share_buffer only)")
    sizes = cx.attr("qkv_hidden_sizes", None)
    wshape = cx.shape(1)
    if sizes is None:
        if wshape is None or not isinstance(wshape[1], int) or wshape[1] % 3:
            raise Unsupported("weights' second dim must be known at conversion and divisible by 3")
        sizes = [wshape[1] // 3] * 3
    sizes = [int(s) for s in sizes]
    if len(sizes) != 3 or sizes[0] != sizes[1] or any(s % heads for s in sizes):
        raise Unsupported(f"qkv_hidden_sizes={sizes} for num_heads={heads}")
    qkv = cx.op("aten::matmul", cx.x(0), cx.x(1))
    if cx.has(2):
        qkv = cx.op("aten::add", qkv, cx.x(2), 1)
    q, k, v = (cx.op("aten::slice", qkv, -1, a, a + n, 1) for a, n in zip((0, sizes[0], 2 * sizes[0]), sizes))
    q, k, v = (_heads(cx, t, heads) for t in (q, k, v))
    past = None
    if cx.has(4):   # [2, B, N, P, H]
        pst = cx.x(4)
        k = cx.op("aten::cat", [cx.op("aten::select", pst, 0, 0), k], 2)
        v = cx.op("aten::cat", [cx.op("aten::select", pst, 0, 1), v], 2)
        past = dim_item(cx, 4, pst, 3)
        if sizes[2] != sizes[0]:
            raise Unsupported("past with a value hidden size other than the query's")
    q_len = cx.op("aten::size", q, 2, types=[INT])
    kv_len = cx.op("aten::size", k, 2, types=[INT])
    masked = _masked(cx, 3, "mask_index", q_len, kv_len, past, causal)
    y = _attend(cx, q, k, v, dt=dt, head=sizes[0] // heads, scale_attr=scale, masked=masked, mfv=mfv, bias_input=5)
    present = cx.op("aten::stack", [k, v], 0) if _wanted(cx, 1) else None
    return _merge(cx, y), present


def multi_head_attention(cx: NodeContext):
    """Separate Q ``[B, S, D]``, K and V ``[B, L, D]`` (or already ``[B, N, L, H]``), the optional
    packed bias ``[D + D + D_v]`` added to the 3-D ones, key padding mask, attention bias, past."""
    dt = cx.require_dtype(0, {"float32", "float64"}, "query")
    heads = int(cx.attr("num_heads"))
    causal = bool(cx.attr("unidirectional", 0))
    mfv = float(cx.attr("mask_filter_value", -10000.0))
    scale = cx.attr("scale", 0.0)
    if cx.rank(0) != 3:
        raise Unsupported(f"query of rank {cx.rank(0)} (packed Q/K/V layouts are not supported)")
    if not cx.has(1) or not cx.has(2):
        raise Unsupported("query without key and value (packed Q/K/V)")
    if cx.has(8) or cx.has(9):
        raise Unsupported("inputs past_sequence_length / cache_indirection (beam search buffers)")
    if _wanted(cx, 3):
        raise Unsupported("output qk")
    qshape = cx.shape(0)
    if qshape is None or not isinstance(qshape[2], int) or qshape[2] % heads:
        raise Unsupported(f"the query's hidden size must be known at conversion and divisible by num_heads={heads}")
    d = qshape[2]
    q = cx.x(0)
    k, v = cx.x(1), cx.x(2)
    kr, vr = cx.rank(1), cx.rank(2)
    if (kr, vr) not in ((3, 3), (4, 4)):
        raise Unsupported(f"key of rank {kr} with value of rank {vr} (3-D or 4-D pairs expected)")
    if cx.has(3):
        bshape = cx.shape(3)
        if bshape is None or not isinstance(bshape[0], int):
            raise Unsupported("bias needs its size known at conversion")
        if kr == 4:
            raise Unsupported("bias with 4-D key/value")
        b = cx.x(3)
        q = cx.op("aten::add", q, cx.op("aten::slice", b, 0, 0, d, 1), 1)
        k = cx.op("aten::add", k, cx.op("aten::slice", b, 0, d, 2 * d, 1), 1)
        v = cx.op("aten::add", v, cx.op("aten::slice", b, 0, 2 * d, bshape[0], 1), 1)
    q = _heads(cx, q, heads)
    if kr == 3:
        k, v = _heads(cx, k, heads), _heads(cx, v, heads)
    past = None
    if cx.has(6) != cx.has(7):
        raise Unsupported("past_key and past_value must be given together")
    if cx.has(6):
        if kr == 4:
            raise Unsupported("past_key with 4-D key/value")
        past = dim_item(cx, 6, cx.x(6), 2)
        k = cx.op("aten::cat", [cx.x(6), k], 2)
        v = cx.op("aten::cat", [cx.x(7), v], 2)
    q_len = cx.op("aten::size", q, 2, types=[INT])
    kv_len = cx.op("aten::size", k, 2, types=[INT])
    masked = _masked(cx, 4, "key_padding_mask", q_len, kv_len, past, causal)
    y = _attend(cx, q, k, v, dt=dt, head=d // heads, scale_attr=scale, masked=masked, mfv=mfv, bias_input=5)
    return _merge(cx, y), k if _wanted(cx, 1) else None, v if _wanted(cx, 2) else None, None


def bias_add(cx: NodeContext):
    """``X + bias + skip``."""
    return cx.op("aten::add", cx.op("aten::add", cx.x(0), cx.x(1), 1), cx.x(2), 1)


def gemm_fast_gelu(cx: NodeContext):
    """FastGelu (tanh approximation) of ``X @ W + bias``."""
    y = cx.op("aten::matmul", cx.x(0), cx.x(1))
    if cx.has(2):
        y = cx.op("aten::add", y, cx.x(2), 1)
    return cx.op("aten::gelu", y, "tanh")


def ms_rotary_embedding(cx: NodeContext):
    """onnxruntime's RotaryEmbedding: ``position_ids`` (input 1) ``[B, S]``, or ``[1]`` the position
    of the first token, index the ``[max_pos, rot / 2]`` caches (inputs 2, 3)."""
    if float(cx.attr("scale", 1.0)) != 1.0:
        raise Unsupported(f"scale={cx.attr('scale')}")
    if cx.attr("is_packed_batching", 0):
        raise Unsupported("is_packed_batching=1")
    cx.require_dtype(1, {"int64"}, "position_ids")
    ids = cx.x(1)
    if cx.rank(1) == 1:   # [1]: positions start + 0 .. S - 1, one row for every batch
        seq = dim_item(cx, 0, cx.x(0), cx.rank(0) - 2)
        ids = cx.op("aten::unsqueeze", cx.op("aten::add", _arange(cx, seq), ids, 1), 0)
    elif cx.rank(1) != 2:
        raise Unsupported(f"position_ids of rank {cx.rank(1)} ([B, S] or [1] expected)")
    cos, sin = (cx.op("aten::embedding", cx.x(i), ids, -1, False, False) for i in (2, 3))
    return rotate(cx, cos, sin)


CONVERTERS = table(SkipLayerNormalization=(skip_layer_norm, 1),
                   SkipSimplifiedLayerNormalization=(skip_simplified_layer_norm, 1),
                   EmbedLayerNormalization=(embed_layer_norm, 1), Attention=(attention, 1),
                   MultiHeadAttention=(multi_head_attention, 1), BiasAdd=(bias_add, 1),
                   GemmFastGelu=(gemm_fast_gelu, 1), RotaryEmbedding=(ms_rotary_embedding, 1))

#: ops onnxruntime registers in the default domain that onnx does not define (schema version 1)
ORT_DEFAULT_DOMAIN = table(SimplifiedLayerNormalization=(simplified_layer_norm, 1))
