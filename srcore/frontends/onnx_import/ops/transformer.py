"""Transformer ONNX ops of opset 23+: RMSNormalization and RotaryEmbedding.

RMSNormalization with a scale of the normalized shape (the form exporters write) is ``aten::rms_norm``
(srcore's fused kernel); any other broadcasting scale is ``x * rsqrt(mean(x^2) + eps) * scale``.
Half-precision inputs compute in ``stash_type`` (float32) and round once at the end, as ONNX does.
RotaryEmbedding is ONNX's rotation written out (slices, multiplies, one concat), on 4-D
``[batch, heads, seq, head]`` or 3-D ``[batch, seq, hidden]`` inputs with ``num_heads``.
"""
from __future__ import annotations

from ..context import NodeContext, Unsupported
from ..dtypes import FLOATS
from ._util import cast, norm_axis, table


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
    dt = cx.require_dtype(0, FLOATS, "X")
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
    cos, sin = cx.x(1), cx.x(2)
    if cx.has(3):   # [max_pos, D] caches indexed by [B, S] position ids
        cx.require_dtype(3, {"int64", "int32"}, "position_ids")
        ids = cx.x(3)
        cos, sin = (cx.op("aten::embedding", c, ids, -1, False, False) for c in (cos, sin))
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
    del dt
    return y


CONVERTERS = table(RMSNormalization=(rms_normalization, 23), RotaryEmbedding=(rotary_embedding, 23))
