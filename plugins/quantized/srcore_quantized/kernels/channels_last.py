"""torch's paths for a quantized tensor it holds channels-last (a 2-d convolution's output).

torch's quantized convolutions return channels-last tensors, and some ops then round otherwise than
on a contiguous tensor. The importer lowers those ops, where their input is a conv's output, to the
``quantized::*_channels_last`` ops run here (docs/quantization.md).

``avg_pool2d`` (torch's NHWC kernel): the channels in whole vectors of int32 lanes (8, or 16 under
ATen's AVX512 capability) are requantized as ``nearbyint(acc * m) + zp`` (the tie rounded to even
before the zero point is added), the remaining channels as ``nearbyint(zp + acc / (1 / m))``, with
``acc = sum(q) - n * zp`` and ``m = s_in / s_out / divisor`` in float32. The contiguous kernel rounds
``acc * m + zp``: a tie (frequent with 2x2 windows) can go either way. ``avg_pool3d`` runs on this
kernel whatever the input's layout (torch makes it channels-last first).

``mean`` over the spatial dims: torch's general path, not its integer fast path:
general path, not its integer fast path: dequantize (``(q - zp) * scale``), a float32 sum over the
spatial positions in ATen's order, a division by their count, ``quantize_per_tensor``. At exact ties
(the integer sum an odd multiple of half the count) the float sum's rounding decides, so the order is
reproduced: ATen's ``cascade_sum`` for an outer reduction (the channels contiguous), in which blocks
of 4 vectors of channels sum the positions in a cascade of 16-position levels (``multi_row_sum``),
then whole vectors and the remaining channels four-way interleaved (``row_sum``); with fewer channels
than a vector holds, groups of 4 channels cascade and the rest interleave. The vector holds 8 floats on
every x86 CPU: ATen's sum has no AVX512 build (``vector_bytes(avx512_kernel=False)``).
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import QDTYPES, KernelError, vector_bytes

from ._common import F32, buffer, dequant_scalar, ints, quant_tensor, require_per_tensor, wrap
from .pool import avg_windows

_LEVELS = 4   # multi_row_sum's cascade levels


def _ceil_log2(n: int) -> int:
    return (n - 1).bit_length() if n > 1 else 0


def _cascade(rows: np.ndarray) -> np.ndarray:
    """ATen's ``multi_row_sum`` over axis 0 (positions), every column independently, in float32."""
    size = rows.shape[0]
    power = max(4, _ceil_log2(size) // _LEVELS)
    step, mask = 1 << power, (1 << power) - 1
    acc = np.zeros((_LEVELS,) + rows.shape[1:], F32)
    i = 0
    while i + step <= size:
        for _ in range(step):
            acc[0] += rows[i]
            i += 1
        for j in range(1, _LEVELS):
            acc[j] += acc[j - 1]
            acc[j - 1] = 0
            if i & (mask << (j * power)):
                break
    for r in rows[i:]:
        acc[0] += r
    for j in range(1, _LEVELS):
        acc[0] += acc[j]
    return acc[0]


def _interleaved(rows: np.ndarray) -> np.ndarray:
    """ATen's ``row_sum``: four interleaved partial sums (each a cascade), the rest added to the first."""
    size = rows.shape[0]
    n4 = size // 4
    parts = [_cascade(rows[k:4 * n4:4]) if n4 else np.zeros(rows.shape[1:], F32) for k in range(4)]
    for r in rows[4 * n4:]:
        parts[0] += r
    for k in range(1, 4):
        parts[0] += parts[k]
    return parts[0]


def outer_sum(x: np.ndarray, lanes: int) -> np.ndarray:
    """ATen's float32 sum over axis 0 of ``x`` (positions, channels), channels contiguous."""
    c = x.shape[1]
    out = np.empty(c, F32)
    j = 0
    if c >= lanes:   # vectorized_outer_sum
        while j + 4 * lanes <= c:
            out[j:j + 4 * lanes] = _cascade(x[:, j:j + 4 * lanes])
            j += 4 * lanes
        while j + lanes <= c:
            out[j:j + lanes] = _interleaved(x[:, j:j + lanes])
            j += lanes
    else:            # scalar_outer_sum
        while j + 4 <= c:
            out[j:j + 4] = _cascade(x[:, j:j + 4])
            j += 4
    if j < c:
        out[j:] = _interleaved(x[:, j:])
    return out


def mean_channels_last_out(self, dim=None, keepdim=False, *, dtype=None, out=None):
    """``aten::mean`` over every spatial dim of a quantized (N, C, *spatial) tensor torch holds
    channels-last, to the input's parameters."""
    op = "quantized::mean_channels_last"
    xq = require_per_tensor(self, op)
    if dtype is not None:
        raise KernelError(f"{op}: a dtype argument is not supported for quantized tensors")
    dims = sorted(d % xq.ndim for d in (dim if isinstance(dim, (list, tuple)) else [dim])) if dim is not None else []
    if xq.ndim < 3 or dims != list(range(2, xq.ndim)):
        raise KernelError(f"{op}: reduces the spatial dims {list(range(2, xq.ndim))} of an (N, C, ...) tensor; "
                          f"got dims {dims} of shape {list(xq.shape)}")
    q = xq.qparams
    n, c = xq.shape[:2]
    positions = int(np.prod(xq.shape[2:]))
    real = dequant_scalar(np.moveaxis(ints(xq), 1, -1).reshape(n, positions, c), q.scale, q.zero_point)
    lanes = vector_bytes(avx512_kernel=False) // 4     # ATen's float sum: its AVX2 build on AVX512 CPUs too
    sums = np.stack([outer_sum(real[i], lanes) for i in range(n)]) if n else np.zeros((0, c), F32)
    mean = sums / F32(positions)
    shape = (n, c) + ((1,) * (xq.ndim - 2) if keepdim else ())
    res = buffer(out, shape, xq.qdtype)
    quant_tensor(mean.reshape(shape), q.scale, q.zero_point, xq.qdtype, out=res)
    return wrap(res, xq.qdtype, q)


def avg_pool2d_channels_last_out(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                                 divisor_override=None, *, out=None):
    """``aten::avg_pool2d`` of a quantized (N, C, H, W) tensor torch holds channels-last."""
    op = "quantized::avg_pool2d_channels_last"
    xq = require_per_tensor(self, op)
    if xq.ndim != 4:
        raise KernelError(f"{op}: expects an (N, C, H, W) tensor, got shape {list(xq.shape)}")
    return _nhwc_average(xq, ints(xq), kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                         out)


def avg_pool3d_out(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                   divisor_override=None, *, out=None):
    """``aten::avg_pool3d`` of a quantized (N, C, D, H, W) tensor: torch runs every one on its
    channels-last kernel (the 2-D one's rounding, registered for AVX512 too; an unbatched input it
    refuses)."""
    op = "aten::avg_pool3d"
    xq = require_per_tensor(self, op)
    a = ints(xq)
    if a.ndim != 5:
        raise KernelError(f"{op}: expects a 5-D input (N, C, D, H, W), got shape {list(a.shape)}")
    return _nhwc_average(xq, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out)


def _nhwc_average(xq, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out):
    """torch's ``_qavg_pool_nhwc_kernel`` over (N, C, *spatial) ``x``, the output to the input's parameters."""
    info, q = QDTYPES[xq.qdtype], xq.qparams
    s, size, divide = avg_windows(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    m = F32(q.scale) / F32(q.scale) / divide.astype(F32)      # torch: input_scale / output_scale / divisor
    acc = (s - size * q.zero_point).astype(F32)
    vec = x.shape[1] // (vector_bytes() // 4) * (vector_bytes() // 4)
    r = np.empty(acc.shape, np.float64)
    r[:, :vec] = np.rint(acc[:, :vec] * m)
    r[:, :vec] += q.zero_point
    r[:, vec:] = np.rint(F32(q.zero_point) + acc[:, vec:] * (F32(1) / (F32(1) / m)))
    np.clip(r, info.qmin, info.qmax, out=r)
    res = buffer(out, r.shape, xq.qdtype)
    res[...] = r
    return wrap(res, xq.qdtype, q)
