"""Transformer ONNX ops of opset 23+: RMSNormalization, RotaryEmbedding, Attention, SwiGLU, TensorScatter.

RMSNormalization with a scale of the normalized shape (the form exporters write) is ``aten::rms_norm``
(srcore's fused kernel); any other broadcasting scale is ``x * rsqrt(mean(x^2) + eps) * scale``.
Half-precision inputs compute in ``stash_type`` (float32) and round once at the end, as ONNX does.
RotaryEmbedding is ONNX's rotation written out (slices, multiplies, one concat), on 4-D
``[batch, heads, seq, head]`` or 3-D ``[batch, seq, hidden]`` inputs with ``num_heads``.
"""
from __future__ import annotations

import numpy as np

from ....ir.types import INT
from ..context import NodeContext, Unsupported
from ..dtypes import FLOATS, scalar_type
from ._util import cast, dim_item, norm_axis, table


def rms_normalization(cx: NodeContext):
    dt = cx.require_dtype(0, FLOATS, "X")
    r = cx.rank(0)
    axis = norm_axis(int(cx.attr("axis", -1)), r)
    eps = float(cx.attr("epsilon", 1e-5))
    stash = int(cx.attr("stash_type", 1))
    if stash != 1:
        raise Unsupported(f"stash_type={stash} (srcore computes the statistics in float32 only)")
    x = cx.x(0)
    wide = dt in ("float16", "bfloat16")
    if wide:
        x = cast(cx, x, "float32")
    s = cx.x(1) if not wide else cast(cx, cx.x(1), "float32")
    shape, sshape = cx.shape(0), cx.shape(1)
    norm = list(shape[axis:]) if shape is not None else None
    if dt != "float64" and norm is not None and all(isinstance(d, int) for d in norm) and list(sshape or ()) == norm:
        y = cx.op("aten::rms_norm", x, norm, s, eps)
    else:
        dims = list(range(axis, r))
        ms = cx.op("aten::mean", cx.op("aten::mul", x, x), dims, True, None)
        y = cx.op("aten::mul", cx.op("aten::mul", x, cx.op("aten::rsqrt", cx.op("aten::add", ms, eps, 1))), s)
    return cast(cx, y, dt) if wide else y


def _last(cx: NodeContext, x, start: int, end: int | None, step: int = 1):
    return cx.op("aten::slice", x, -1, start, end, step)


def rotary_embedding(cx: NodeContext):
    cos, sin = cx.x(1), cx.x(2)
    if cx.has(3):   # [max_pos, D] caches indexed by [B, S] position ids
        cx.require_dtype(3, {"int64", "int32"}, "position_ids")
        ids = cx.x(3)
        cos, sin = (cx.op("aten::embedding", c, ids, -1, False, False) for c in (cos, sin))
    return rotate(cx, cos, sin)


def rotate(cx: NodeContext, cos, sin):
    """Input 0 rotated by ``cos``/``sin`` ``[B or 1, S, >= rot / 2]`` as the node's ``interleaved``,
    ``num_heads`` and ``rotary_embedding_dim`` say (ONNX's and onnxruntime's RotaryEmbedding)."""
    cx.require_dtype(0, FLOATS, "X")
    interleaved = int(cx.attr("interleaved", 0))
    heads = int(cx.attr("num_heads", 0))
    rot = int(cx.attr("rotary_embedding_dim", 0))
    r = cx.rank(0)
    shape = cx.shape(0)
    x = cx.x(0)
    if r == 3:   # [B, S, hidden] -> [B, S, N, H]: the caches broadcast over N (dim 2)
        if not heads:
            raise Unsupported("a 3-D input needs the num_heads attribute")
        if shape is None or not isinstance(shape[2], int) or shape[2] % heads:
            raise Unsupported(f"the hidden size must be known at conversion and divisible by num_heads={heads}")
        head = shape[2] // heads
        x = cx.op("aten::unflatten", x, 2, [heads, head])
        head_axis = 2
    elif r == 4:  # [B, N, S, H]: the caches broadcast over N (dim 1)
        if shape is None or not isinstance(shape[3], int):
            raise Unsupported("the head size must be known at conversion")
        head = shape[3]
        head_axis = 1
    else:
        raise Unsupported(f"input of rank {r} (3 or 4 expected)")
    rot = rot or head
    if rot % 2 or rot > head:
        raise Unsupported(f"rotary_embedding_dim={rot} for head size {head}")
    half = rot // 2
    cos, sin = (cx.op("aten::unsqueeze", _last(cx, c, 0, half), head_axis) for c in (cos, sin))
    xr = _last(cx, x, 0, rot) if rot < head else x
    if interleaved:
        x1, x2 = _last(cx, xr, 0, None, 2), _last(cx, xr, 1, None, 2)
    else:
        x1, x2 = _last(cx, xr, 0, half), _last(cx, xr, half, rot)
    real = cx.op("aten::sub", cx.op("aten::mul", cos, x1), cx.op("aten::mul", sin, x2))
    imag = cx.op("aten::add", cx.op("aten::mul", sin, x1), cx.op("aten::mul", cos, x2))
    if interleaved:
        y = cx.op("aten::flatten", cx.op("aten::stack", [real, imag], -1), -2, -1)
    else:
        y = cx.op("aten::cat", [real, imag], -1)
    if rot < head:
        y = cx.op("aten::cat", [y, _last(cx, x, rot, None)], -1)
    if r == 3:
        y = cx.op("aten::flatten", y, 2, 3)
    return y


def _heads_first(cx: NodeContext, i: int, heads: int, what: str):
    """A 3-D ``[B, S, heads * H]`` input as ``[B, heads, S, H]``."""
    shape = cx.shape(i)
    if not heads or shape is None or not isinstance(shape[2], int) or shape[2] % heads:
        raise Unsupported(f"3-D {what} needs its hidden size known and a divisible {what[0].lower()}_num_heads "
                          f"attribute")
    return cx.op("aten::transpose", cx.op("aten::unflatten", cx.x(i), 2, [heads, shape[2] // heads]), 1, 2)


def _const_of(cx: NodeContext, value, dt: str, what: str):
    from ..values import Val

    arr = np.array(value, dtype=np.dtype(dt))
    return cx.conv.tensor_of(Val(f"{cx.node.name or cx.op_type}.{what}", const=arr))


def attention(cx: NodeContext):
    """ONNX's Attention (opsets 23-25) written out as ONNX's reference computes it: ``Q * sqrt(scale)``
    and ``K * sqrt(scale)`` multiplied, softcap, an additive bias (the mask, causal from the bottom
    right, padding from ``nonpad_kv_seqlen``), softmax (in ``softmax_precision``), fully masked rows 0."""
    dt = cx.require_dtype(0, FLOATS, "Q")
    r = cx.rank(0)
    qh, kvh = int(cx.attr("q_num_heads", 0)), int(cx.attr("kv_num_heads", 0))
    causal = int(cx.attr("is_causal", 0))
    mode = int(cx.attr("qk_matmul_output_mode", 0))
    softcap = float(cx.attr("softcap", 0.0))
    precision = int(cx.attr("softmax_precision", 0))
    if mode not in (0, 1, 2, 3):
        raise Unsupported(f"qk_matmul_output_mode={mode}")
    if r == 3:
        q, k, v = (_heads_first(cx, i, h, w) for i, h, w in ((0, qh, "Q"), (1, kvh, "K"), (2, kvh, "V")))
        head = cx.shape(0)[2] // qh
    elif r == 4:
        q, k, v = cx.x(0), cx.x(1), cx.x(2)
        shape = cx.shape(0)
        if shape is None or not isinstance(shape[3], int) or not isinstance(shape[1], int):
            raise Unsupported("4-D Q needs its head count and head size known at conversion")
        qh, head = shape[1], shape[3]
        kshape = cx.shape(1)
        if kshape is None or not isinstance(kshape[1], int):
            raise Unsupported("4-D K needs its head count known at conversion")
        kvh = kshape[1]
    else:
        raise Unsupported(f"Q of rank {r} (3 or 4 expected)")
    scale = cx.attr("scale", None)
    scale = 1 / np.sqrt(head) if scale is None else float(scale)
    s = _const_of(cx, np.sqrt(scale), dt, "scale")
    if cx.has(4) != cx.has(5):
        raise Unsupported("past_key and past_value must be given together")
    past = None
    if cx.has(4):
        past = dim_item(cx, 4, cx.x(4), 2)
        k = cx.op("aten::cat", [cx.x(4), k], 2)
        v = cx.op("aten::cat", [cx.x(5), v], 2)
    present_k, present_v = k, v
    nonpad = cx.x(6) if cx.has(6) else None
    if nonpad is not None and past is not None:
        raise Unsupported("nonpad_kv_seqlen with past_key")
    q_len, kv_len = cx.op("aten::size", q, 2, types=[INT]), cx.op("aten::size", k, 2, types=[INT])
    zero, ninf = _const_of(cx, 0.0, dt, "zero"), _const_of(cx, -np.inf, dt, "ninf")
    bias = None
    if cx.has(3):
        m = cx.x(3)
        m = cx.op("aten::where", m, zero, ninf) if cx.dtype(3) == "bool" else cast(cx, m, dt)
        pad = cx.int_op("aten::sub", kv_len, cx.op("aten::size", m, -1, types=[INT]))
        bias = cx.op("aten::constant_pad_nd", m, [0, pad], float("-inf"))
    left, right = int(cx.attr("left_window_size", -1)), int(cx.attr("right_window_size", -1))
    if causal or left >= 0 or right >= 0:
        # the query's absolute position: i + the keys before the block (past, or nonpad[b] - q_len)
        pos = cx.op("aten::unsqueeze", cx.op("aten::arange", q_len, scalar_type("int64"), None, None, None), 1)
        if nonpad is not None:
            off = cx.op("aten::sub", cx.op("aten::reshape", cast(cx, nonpad, "int64"), [-1, 1, 1, 1]), q_len)
            pos = cx.op("aten::add", pos, off)
        elif past is not None:
            pos = cx.op("aten::add", pos, past)
        j = cx.op("aten::arange", kv_len, scalar_type("int64"), None, None, None)
        for on, allowed in ((causal, lambda: cx.op("aten::le", j, pos)),
                            (left >= 0, lambda: cx.op("aten::le", cx.op("aten::sub", pos, j), left)),
                            (right >= 0, lambda: cx.op("aten::le", cx.op("aten::sub", j, pos), right))):
            if on:
                c = cx.op("aten::where", allowed(), zero, ninf)
                bias = c if bias is None else cx.op("aten::add", bias, c)
    if nonpad is not None:
        j = cx.op("aten::arange", kv_len, scalar_type("int64"), None, None, None)
        keep = cx.op("aten::lt", j, cx.op("aten::reshape", cast(cx, nonpad, "int64"), [-1, 1, 1, 1]))
        p = cx.op("aten::where", keep, zero, ninf)
        bias = p if bias is None else cx.op("aten::add", bias, p)
    if kvh != qh:
        if qh % kvh:
            raise Unsupported(f"{qh} query heads for {kvh} key/value heads")
        k = cx.op("aten::repeat_interleave", k, qh // kvh, 1, None)
        v = cx.op("aten::repeat_interleave", v, qh // kvh, 1, None)
    qk = cx.op("aten::matmul", cx.op("aten::mul", q, s), cx.op("aten::transpose", cx.op("aten::mul", k, s), 2, 3))
    if softcap > 0:
        cap = _const_of(cx, softcap, dt, "softcap")
        qk = cx.op("aten::mul", cx.op("aten::tanh", cx.op("aten::div", qk, cap)), cap)
    biased = qk if bias is None else cx.op("aten::add", qk, bias)
    wide = biased
    if precision:
        from ..dtypes import dtype_of

        wide = cast(cx, biased, dtype_of(precision))
    p = cx.op("aten::softmax", wide, -1, None)
    if bias is not None:   # a row whose bias is all -inf attends nothing: 0, not NaN
        masked = cx.op("aten::eq", cx.op("aten::amax", bias, [-1], True), float("-inf"))
        p = cx.op("aten::where", masked, _const_of(cx, 0.0, "float32", "pzero"), p)
    p = cast(cx, p, dt)
    y = cx.op("aten::matmul", p, v)
    if r == 3:
        y = cx.op("aten::flatten", cx.op("aten::transpose", y, 1, 2), 2, 3)
    qk_out = {0: qk, 1: qk, 2: biased, 3: p}[mode]
    return y, present_k, present_v, qk_out


def swiglu(cx: NodeContext):
    """``A * sigmoid(alpha * A) * B`` (equal shapes, no broadcasting)."""
    cx.require_dtype(0, FLOATS, "A")
    alpha = float(cx.attr("alpha", 1.0))
    if cx.shape(0) != cx.shape(1) or cx.dtype(0) != cx.dtype(1):
        raise Unsupported(f"A {cx.shape(0)} {cx.dtype(0)} and B {cx.shape(1)} {cx.dtype(1)} must agree")
    a = cx.x(0)
    gate = cx.op("aten::sigmoid", a if alpha == 1.0 else cx.op("aten::mul", a, alpha))
    return cx.op("aten::mul", cx.op("aten::mul", a, gate), cx.x(1))


def tensor_scatter(cx: NodeContext):
    """The KV-cache write: ``update`` into ``past_cache`` along ``axis`` from ``write_indices[b]``
    (wrapping around the cache in ``circular`` mode), one ``aten::scatter``."""
    mode = cx.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise Unsupported(f"mode={mode!r}")
    r = cx.rank(0)
    axis = norm_axis(int(cx.attr("axis", -2)), r)
    if axis == 0:
        raise Unsupported("axis 0 (the batch axis write_indices index)")
    up = cx.x(1)
    shape = [1] * r
    shape[axis] = -1
    idx = cx.op("aten::reshape", cx.op("aten::arange", dim_item(cx, 1, up, axis), scalar_type("int64"),
                                       None, None, None), shape)
    if cx.has(2):
        bshape = [1] * r
        bshape[0] = -1
        idx = cx.op("aten::add", idx, cx.op("aten::reshape", cast(cx, cx.x(2), "int64"), bshape))
    if mode == "circular":
        idx = cx.op("aten::remainder", idx, dim_item(cx, 0, cx.x(0), axis))
    return cx.op("aten::scatter", cx.x(0), axis, cx.op("aten::expand_as", idx, up), up)


CONVERTERS = table(RMSNormalization=(rms_normalization, 23), RotaryEmbedding=(rotary_embedding, 23),
                   Attention=(attention, 23, 24, 25), SwiGLU=(swiglu, 28), TensorScatter=(tensor_scatter, 24))
