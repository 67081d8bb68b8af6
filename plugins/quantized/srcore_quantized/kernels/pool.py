"""Pools and means of quantized tensors, on the stored integers (the output keeps the input's
parameters): max_pool2d, avg_pool2d, adaptive_avg_pool2d, mean over the spatial dims."""
from __future__ import annotations

import numpy as np

from srcore.plugin import QDTYPES, KernelError, int8_means

from ._common import (F32, buffer, channels_last, channels_last_buffer, dequant_scalar, ints, quant_tensor,
                      require_per_tensor, wrap)


def _pair(v, default=None):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return default
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return (int(v[0]), int(v[-1]))


def _out_size(n, k, s, p, d, ceil_mode):
    num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _as_4d(x: np.ndarray):
    if x.ndim == 3:
        return x[None], True
    if x.ndim != 4:
        raise KernelError(f"expects a 3-D or 4-D input, got shape {list(x.shape)}")
    return x, False


def max_pool2d_out(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, *, out=None):
    """The largest stored integer of each window (order-preserving: the real maximum)."""
    xq = require_per_tensor(self, "aten::max_pool2d")
    info = QDTYPES[xq.qdtype]
    x, squeeze = _as_4d(ints(xq))
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding, (0, 0))
    dh, dw = _pair(dilation, (1, 1))
    H, W = x.shape[2:]
    oh, ow = _out_size(H, kh, sh, ph, dh, ceil_mode), _out_size(W, kw, sw, pw, dw, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise KernelError(f"aten::max_pool2d: output size {oh}x{ow} is too small for input {list(x.shape)}")
    shape = (x.shape[0], x.shape[1], oh, ow)
    cl = None
    if not squeeze and channels_last(x) is not None and (out is None or not np.may_share_memory(x, out)):
        cl = channels_last_buffer(out, shape, xq.qdtype)    # a conv's output: the result channels-last too
    if cl is not None:      # the same taps on the (N, H, W, C) memory: no transposing copies
        res, dst = cl
        src = channels_last(x)
        sp = (1, 2)
    else:
        res = buffer(out, shape[1:] if squeeze else shape, xq.qdtype)
        dst = res[None] if squeeze else res
        src, sp = x, (2, 3)
    # pad with the lowest value so that padding never wins, far enough for ceil_mode's last window
    need_h = (oh - 1) * sh + dh * (kh - 1) + 1 - H - ph
    need_w = (ow - 1) * sw + dw * (kw - 1) + 1 - W - pw
    xp = src
    if ph or pw or need_h > 0 or need_w > 0:
        pads = [(0, 0)] * 4
        pads[sp[0]], pads[sp[1]] = (ph, max(need_h, 0)), (pw, max(need_w, 0))
        xp = np.pad(src, pads, constant_values=info.qmin)
    # one elementwise maximum per kernel tap over strided slices: much faster than a reduction over a
    # strided 6-D window view
    for i in range(kh):
        for j in range(kw):
            t = [slice(None)] * 4
            t[sp[0]] = slice(i * dh, i * dh + (oh - 1) * sh + 1, sh)
            t[sp[1]] = slice(j * dw, j * dw + (ow - 1) * sw + 1, sw)
            if i == 0 and j == 0:
                dst[...] = xp[tuple(t)]
            else:
                np.maximum(dst, xp[tuple(t)], out=dst)
    return wrap(res, xq.qdtype, xq.qparams)


def _ntuple(v, n: int, default):
    """A pool argument (an int, or a list of 1 or ``n`` ints; empty or None: ``default``) as ``n`` ints."""
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return list(default)
    v = [int(i) for i in v] if isinstance(v, (list, tuple)) else [int(v)]
    return v * n if len(v) == 1 else v


def _axis_window_sums(x: np.ndarray, axis: int, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Sums of ``x`` (int64) over ``[start[i], end[i])`` along ``axis``: the i-th along that axis."""
    cs = np.cumsum(x, axis=axis)
    cs = np.concatenate([np.zeros_like(np.take(cs, [0], axis=axis)), cs], axis=axis)
    return np.take(cs, end, axis=axis) - np.take(cs, start, axis=axis)


def avg_windows(x: np.ndarray, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """Integer sums of each average-pool window of ``x`` (N, C, *spatial: 2-D or 3-D), with the count of
    its input elements and its divisor (torch's rules: padding counted or not, ``divisor_override``);
    the sums separable: one cumulative sum per spatial dim (exact in int64)."""
    nd = x.ndim - 2
    k = _ntuple(kernel_size, nd, ())
    s = _ntuple(stride, nd, k)
    p = _ntuple(padding, nd, (0,) * nd)
    if divisor_override == 0:
        raise KernelError("avg_pool: divisor must be not zero")
    sums = x.astype(np.int64)
    pool = size = np.ones((1,) * nd, np.int64)
    for i in range(nd):
        ax, n = 2 + i, x.shape[2 + i]
        o = _out_size(n, k[i], s[i], p[i], 1, ceil_mode)
        st = np.arange(o) * s[i] - p[i]
        en = np.minimum(st + k[i], n + p[i])
        st0, en0 = np.maximum(st, 0), np.minimum(en, n)
        sums = _axis_window_sums(sums, ax, st0, en0)
        shape = [1] * nd
        shape[i] = o
        pool = pool * (en - st).reshape(shape)
        size = size * (en0 - st0).reshape(shape)
    divide = np.full_like(size, divisor_override) if divisor_override is not None else (pool if count_include_pad else size)
    return sums, size, divide


def avg_pool2d_out(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                   divisor_override=None, *, out=None):
    """torch's quantized average: ``nearbyint((sum(q) - n * zp) * (s_in / s_out / divisor) + zp)`` in
    float32 per window (s_in = s_out: the output keeps the input's parameters)."""
    xq = require_per_tensor(self, "aten::avg_pool2d")
    info, q = QDTYPES[xq.qdtype], xq.qparams
    x, squeeze = _as_4d(ints(xq))
    s, size, divide = avg_windows(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    oh, ow = s.shape[2:]
    mult = (np.float64(q.scale) / np.float64(q.scale) / divide).astype(F32)
    val = (s - size * q.zero_point).astype(F32) * mult + F32(q.zero_point)
    r = np.clip(np.rint(val), info.qmin, info.qmax)
    shape = (x.shape[0], x.shape[1], oh, ow)
    res = buffer(out, shape[1:] if squeeze else shape, xq.qdtype)
    (res[None] if squeeze else res)[...] = r
    return wrap(res, xq.qdtype, q)


def _window_bounds(out_len: int, in_len: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's adaptive windows: ``floor(i * in / out)`` to ``ceil((i + 1) * in / out)``, in float32."""
    i = np.arange(out_len)
    start = np.floor((i * in_len).astype(F32) / F32(out_len)).astype(np.int64)
    end = np.ceil(((i + 1) * in_len).astype(F32) / F32(out_len)).astype(np.int64)
    return start, end


def adaptive_avg_pool2d_out(self, output_size, *, out=None, nhwc: bool | None = None):
    """torch's quantized adaptive average pool, the output to the input's parameters, rounded as
    ``int8_means.adaptive_avg``: NHWC's formula where torch holds the input channels-last (``nhwc``;
    ``None``: as srcore holds it, or one channel)."""
    xq = require_per_tensor(self, "aten::adaptive_avg_pool2d")
    info, q = QDTYPES[xq.qdtype], xq.qparams
    x, squeeze = _as_4d(ints(xq))
    H, W = x.shape[2:]
    size = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size] * 2
    oh, ow = [(H, W)[i] if v is None else int(v) for i, v in enumerate(size * (2 // len(size)))]
    hs, he = _window_bounds(oh, H)
    ws, we = _window_bounds(ow, W)
    mem = channels_last(x)
    if oh == 1 and ow == 1:
        # a global pool (resnet's head): one sum per channel, over the memory as it lies (a conv's
        # output is channels-last: summed along its rows, not through a strided int64 copy)
        s = (mem.sum(axis=(1, 2), dtype=np.int64)[:, :, None, None] if mem is not None
             else x.sum(axis=(2, 3), dtype=np.int64, keepdims=True))
    else:
        ii = np.zeros((*x.shape[:2], H + 1, W + 1), np.int64)
        ii[:, :, 1:, 1:] = x.astype(np.int64).cumsum(2).cumsum(3)
        s = (ii[:, :, he[:, None], we[None, :]] - ii[:, :, hs[:, None], we[None, :]]
             - ii[:, :, he[:, None], ws[None, :]] + ii[:, :, hs[:, None], ws[None, :]])
    r = int8_means.adaptive_avg(s, (he - hs)[:, None], (we - ws)[None, :], q.zero_point,
                                mem is not None if nhwc is None else nhwc, info.qmin, info.qmax)
    shape = (x.shape[0], x.shape[1], oh, ow)
    res = buffer(out, shape[1:] if squeeze else shape, xq.qdtype)
    (res[None] if squeeze else res)[...] = r
    return wrap(res, xq.qdtype, q)


def adaptive_avg_pool2d_channels_last_out(self, output_size, *, out=None):
    """``aten::adaptive_avg_pool2d`` of a quantized tensor torch holds channels-last (the importer's
    ``quantized::adaptive_avg_pool2d_channels_last``): torch's NHWC kernel's rounding."""
    return adaptive_avg_pool2d_out(self, output_size, out=out, nhwc=True)


def mean_out(self, dim=None, keepdim=False, *, dtype=None, out=None):
    """aten::mean of a quantized tensor, to the input's parameters. Over the innermost dims (the
    spatial mean of NCHW) as torch's fast kernel: ``nearbyint(float(sum(q)) / n)`` on the stored
    integers. Over other dims as torch's general path: the float mean of the dequantized values,
    quantized (the float sum's order may differ from torch's: within one step at exact ties)."""
    xq = require_per_tensor(self, "aten::mean")
    q, info = xq.qparams, QDTYPES[xq.qdtype]
    dims = list(range(xq.ndim)) if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0) else sorted(
        d % xq.ndim for d in (dim if isinstance(dim, (list, tuple)) else [dim]))
    axis = tuple(dims)
    if dims == list(range(xq.ndim - len(dims), xq.ndim)):
        n = int(np.prod([xq.shape[d] for d in dims])) if dims else 1
        total = ints(xq).astype(np.int64).sum(axis=axis, keepdims=bool(keepdim))
        r = int8_means.fast_mean(total, n, info.qmin, info.qmax)
        res = buffer(out, np.shape(r), xq.qdtype)
        res[...] = r
        return wrap(res, xq.qdtype, q)
    real = dequant_scalar(ints(xq), q.scale, q.zero_point)
    m = np.mean(real, axis=axis, keepdims=bool(keepdim), dtype=F32)
    res = buffer(out, np.shape(m), xq.qdtype)
    quant_tensor(np.asarray(m, F32), q.scale, q.zero_point, xq.qdtype, out=res)
    return wrap(res, xq.qdtype, q)


# -- 1-D pools: torch runs them on quantized tensors as the 2-D ones over an (N, C, 1, L) view --------
def _one(v):
    return [int(i) for i in v] if isinstance(v, (list, tuple)) else [int(v)]


def _as_2d_pool(op: str, pool2d, self, out, *args):
    """``pool2d`` (a 2-D kernel above) on ``self`` (C, L) or (N, C, L) viewed with a height of 1, its
    result viewed back; ``out`` (planned) is written through the same view."""
    x = require_per_tensor(self, op)
    a = ints(x)
    if a.ndim not in (2, 3):
        raise KernelError(f"{op}: expects a 2-D or 3-D input, got shape {list(a.shape)}")
    r = pool2d(wrap(a[..., None, :], x.qdtype, x.qparams), *args, out=None if out is None else out[..., None, :])
    return wrap(ints(r)[..., 0, :], x.qdtype, x.qparams)


def max_pool1d_out(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, *, out=None):
    stride = [1] + _one(stride) if _one(stride) else []
    return _as_2d_pool("aten::max_pool1d", max_pool2d_out, self, out, [1] + _one(kernel_size), stride,
                       [0] + _one(padding), [1] + _one(dilation), ceil_mode)


def avg_pool1d_out(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, *, out=None):
    stride = [1] + _one(stride) if _one(stride) else []
    return _as_2d_pool("aten::avg_pool1d", avg_pool2d_out, self, out, [1] + _one(kernel_size), stride,
                       [0] + _one(padding), ceil_mode, count_include_pad)


def adaptive_avg_pool1d_out(self, output_size, *, out=None):
    return _as_2d_pool("aten::adaptive_avg_pool1d", adaptive_avg_pool2d_out, self, out, [1] + _one(output_size))


def _triple(op: str, v, default):
    v = _one(v) if not (isinstance(v, (list, tuple)) and len(v) == 0) else list(default)
    if len(v) not in (1, 3):
        raise KernelError(f"{op}: expects 1 or 3 values, got {v}")
    return v * 3 if len(v) == 1 else v


def max_pool3d_out(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, *, out=None):
    """The largest stored integer of each 3-D window (torch's quantized max_pool3d), one elementwise
    maximum per kernel tap over strided slices of the input padded with the dtype's lowest value."""
    op = "aten::max_pool3d"
    xq = require_per_tensor(self, op)
    a = ints(xq)
    if a.ndim != 5:   # (torch refuses an unbatched quantized input too)
        raise KernelError(f"{op}: expects a 5-D input (N, C, D, H, W), got shape {list(a.shape)}")
    x = a
    k = _triple(op, kernel_size, ())
    s = _triple(op, stride, k)
    p = _triple(op, padding, (0, 0, 0))
    d = _triple(op, dilation, (1, 1, 1))
    if any(2 * pi > ki for pi, ki in zip(p, k)):
        raise KernelError(f"{op}: padding {p} should be at most half of the kernel size {k}")
    sizes = x.shape[2:]
    outs = [_out_size(n, ki, si, pi, di, ceil_mode) for n, ki, si, pi, di in zip(sizes, k, s, p, d)]
    if min(outs) <= 0:
        raise KernelError(f"{op}: output size {outs} is too small for input {list(a.shape)}")
    need = [(o - 1) * si + di * (ki - 1) + 1 - n - pi for o, si, di, ki, n, pi in zip(outs, s, d, k, sizes, p)]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pi, max(ni, 0)) for pi, ni in zip(p, need)],
                constant_values=QDTYPES[xq.qdtype].qmin)
    res = dst = buffer(out, a.shape[:-3] + tuple(outs), xq.qdtype)
    first = True
    for i in range(k[0]):
        for j in range(k[1]):
            for m in range(k[2]):
                t = (Ellipsis,) + tuple(slice(o * di, o * di + (n - 1) * si + 1, si)
                                        for o, di, n, si in zip((i, j, m), d, outs, s))
                if first:
                    dst[...] = xp[t]
                    first = False
                else:
                    np.maximum(dst, xp[t], out=dst)
    return wrap(res, xq.qdtype, xq.qparams)


def adaptive_avg_pool3d_out(self, output_size, *, out=None):
    """torch's quantized adaptive average pool over (D, H, W) of an (N, C, D, H, W) or (C, D, H, W)
    tensor, to the input's parameters: its NCDHW kernel's rounding, or its NDHWC one's where torch would
    see the tensor as channels-last (srcore's memory the same; one channel, or one position)."""
    op = "aten::adaptive_avg_pool3d"
    xq = require_per_tensor(self, op)
    info, q = QDTYPES[xq.qdtype], xq.qparams
    a = ints(xq)
    if a.ndim not in (4, 5) or 0 in a.shape[1:]:
        raise KernelError(f"{op}: expects a non-empty 4-D or 5-D input, got shape {list(a.shape)}")
    x = a if a.ndim == 5 else a[None]
    size = _ntuple(output_size, 3, ())
    sums, ks = x.astype(np.int64), []
    for i, o in enumerate(size):
        st, en = _window_bounds(o, x.shape[2 + i])
        sums = _axis_window_sums(sums, 2 + i, st, en)
        shape = [1, 1, 1]
        shape[i] = o
        ks.append((en - st).reshape(shape))
    # torch's is_contiguous(ChannelsLast3d) of a 5-D tensor, is_contiguous(ChannelsLast) of a 4-D one
    nhwc = (a.transpose(0, 2, 3, 4, 1).flags.c_contiguous if a.ndim == 5 else channels_last(a) is not None)
    r = int8_means.adaptive_avg(sums, ks[1], ks[2], q.zero_point, nhwc, info.qmin, info.qmax, kd=ks[0])
    res = buffer(out, a.shape[:-3] + tuple(size), xq.qdtype)
    res[...] = r if a.ndim == 5 else r[0]
    return wrap(res, xq.qdtype, q)
