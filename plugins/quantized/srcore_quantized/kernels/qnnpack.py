"""QNNPACK's arithmetic: what torch computes with its ``qnnpack`` quantized engine (on x86 too).

With that engine torch packs conv / linear weights for QNNPACK and runs ``quantized::add(_relu)`` of two
quint8 tensors of one shape and the quint8 average pools through QNNPACK's kernels, which round
otherwise than fbgemm's and ATen's (measured against torch 2.13: a few elements in a thousand for
conv and linear, many for add at exact ties). The importer records the engine (``arith="qnnpack"``,
the ``*_qnnpack`` ops); this module reproduces the kernels:

- conv / linear: the float bias quantized to int32 with the scale ``s_w * s_x`` (``quantize_val``:
  ``nearbyint(b * (1.0f / float(s)))``) and added to the exact accumulator; requantized per output
  channel as ``nearbyint(float(acc) * rs)`` with ``rs = (s_w * s_x) * (1 / s_y)`` in float32, then the
  output zero point with int16 saturation, clamped (at the zero point with relu);
- add: the fixed-point form (``pytorch_qnnp_compute_add_quantization_params``): multipliers of the
  two scale ratios with 21 - exponent fractional bits, one shift rounding half away from zero;
- average pools: the integer window sums less ``n * zp``, times ``1 / n`` in float32, rounded half
  to even.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

from ._common import F32, buffer, ints, output_qparams, require_per_tensor, wrap

_I16 = (-32768, 32767)


def _saturate_u8(v: np.ndarray, zero_point: int, lo: int) -> np.ndarray:
    """QNNPACK's epilogue: int16 saturation (``packs_epi32``), the zero point added with int16
    saturation, uint8 saturation, then the clamp's lower bound (relu: the zero point)."""
    v = np.clip(v, *_I16)
    v += zero_point
    return np.clip(v, max(lo, 0), 255)


def bias_int32(bias, w_scales64: np.ndarray, x_scale: float) -> np.ndarray:
    """torch's ``QuantizeBias`` for QNNPACK: the float bias quantized per output channel to qint32 with
    scale ``s_w * s_x`` (double) and zero point 0, as ``quantize_val``: ``nearbyint(b * (1.0f / float(s)))``."""
    s = (np.asarray(w_scales64, np.float64) * np.float64(F32(x_scale))).astype(F32)
    inv = (F32(1.0) / s).astype(F32)
    q = np.rint((np.asarray(bias, F32) * inv).astype(F32)).astype(np.float64)
    return np.clip(q, -2.0 ** 31, 2.0 ** 31 - 1).astype(np.int64)


def requantize(acc: np.ndarray, x_scale: float, w_scales: np.ndarray, w_scales64: np.ndarray, bias, y_scale: float,
               y_zero_point: int, qdtype: str, relu: bool, out: np.ndarray, axis: int = -1) -> np.ndarray:
    """A QNNPACK conv's or linear's output from its exact accumulators ``acc`` (integers, output
    channels along ``axis``): int32 bias added, ``nearbyint(float(acc) * rs)`` per channel, saturated."""
    if qdtype != "quint8":
        raise KernelError(f"QNNPACK's arithmetic takes quint8 activations, got {qdtype}")
    shape = [1] * acc.ndim
    shape[axis] = -1
    a = np.rint(acc).astype(np.int64) if acc.dtype.kind == "f" else acc.astype(np.int64)
    if bias is not None:
        a = a + bias_int32(bias, w_scales64, x_scale).reshape(shape)
    rs = ((np.asarray(w_scales, F32) * F32(x_scale)).astype(F32) * (F32(1.0) / F32(y_scale))).astype(F32)
    v = np.rint((a.astype(F32) * rs.reshape(shape)).astype(F32)).astype(np.int64)
    out[...] = _saturate_u8(v, int(y_zero_point), int(y_zero_point) if relu else 0)
    return out


def _bits(x) -> int:
    return int(np.array(x, F32).view(np.uint32))


def add(qa, qb, scale, zero_point, relu: bool, out, op: str):
    """``quantized::add(_relu)`` with the qnnpack engine: QNNPACK's fixed-point add when both are
    quint8 of one shape (torch's condition), else torch's own add (``binary``)."""
    require_per_tensor(qa, op, "first input")
    require_per_tensor(qb, op, "second input")
    if qa.qdtype != "quint8" or qb.qdtype != "quint8" or qa.shape != qb.shape:
        from . import binary

        return binary._add(qa, qb, scale, zero_point, relu, out, op)
    q = output_qparams("quint8", scale, zero_point, op)
    sa = F32(F32(qa.qparams.scale) / F32(q.scale))
    sb = F32(F32(qb.qparams.scale) / F32(q.scale))
    if not (2.0 ** -14 <= sa < 256 and 2.0 ** -14 <= sb < 256):
        raise KernelError(f"{op}: QNNPACK takes input / output scale ratios in [2^-14, 2^8), got {sa} and {sb}")
    shift = 21 - ((_bits(max(sa, sb)) >> 23) - 127)
    am = int(np.rint(np.float64(sa) * 2.0 ** shift))   # lrintf of a power-of-two multiple: exact
    bm = int(np.rint(np.float64(sb) * 2.0 ** shift))
    za, zb = int(qa.qparams.zero_point), int(qb.qparams.zero_point)
    acc = ints(qa).astype(np.int64) * am + ints(qb).astype(np.int64) * bm - (am * za + bm * zb)
    acc = (acc + 2 ** 31) % 2 ** 32 - 2 ** 31                   # int32 arithmetic, as the kernel's
    mask = (1 << shift) - 1
    rem = (acc & mask) - (acc < 0)
    r = (acc >> shift) + (rem > (mask >> 1))                    # the shift rounds half away from zero
    res = buffer(out, qa.shape, "quint8")
    zp = int(q.zero_point)
    res[...] = np.clip(r + zp, zp if relu else 0, 255)
    return wrap(res, "quint8", q)


def add_out(qa, qb, scale, zero_point, *, out=None):
    """``quantized::add`` as torch runs it with the qnnpack engine (the importer's ``add_qnnpack``)."""
    return add(qa, qb, scale, zero_point, False, out, "quantized::add_qnnpack")


def add_relu_out(qa, qb, scale, zero_point, *, out=None):
    return add(qa, qb, scale, zero_point, True, out, "quantized::add_relu_qnnpack")


#: window sizes QNNPACK's average pools round as srcore does at exact ties: checked against torch 2.13
#: for 2, 4, 8, 16 and the odd ones (no exact ties); at the ties of 6, 10, 12, 14, ... torch's result
#: follows neither half-to-even nor half-away-from-zero on the float32 product (not reproduced)
def _window_reproduced(n: int) -> bool:
    return n % 2 == 1 or n & (n - 1) == 0


def _pool(xq, sums: np.ndarray, n: int, out, op: str):
    if not _window_reproduced(n):
        raise KernelError(f"{op}: torch's QNNPACK average pool of {n}-element windows rounds exact ties in a "
                          f"way srcore does not reproduce; quantize (and run torch) with the x86 or fbgemm engine")
    q = xq.qparams
    zp = int(q.zero_point)
    scale = F32(F32(F32(q.scale) / F32(q.scale)) / F32(n))
    v = np.rint(((sums - n * zp).astype(F32) * scale).astype(F32)).astype(np.int64)
    res = buffer(out, sums.shape, "quint8")
    res[...] = _saturate_u8(v, zp, 0)
    return wrap(res, "quint8", q)


def _pool_input(self, op: str):
    xq = require_per_tensor(self, op)
    if xq.qdtype != "quint8" or xq.ndim != 4:
        return None
    return xq


def avg_pool2d_out(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                   divisor_override=None, channels_last=False, *, out=None):
    """``aten::avg_pool2d`` with the qnnpack engine (``quantized::avg_pool2d_qnnpack``): QNNPACK's pool for
    a 4-D quint8 input without ceil_mode (torch's condition; padding counts as the zero point whatever
    ``count_include_pad`` and ``divisor_override`` say, as QNNPACK ignores them), else torch's own."""
    from . import pool

    op = "quantized::avg_pool2d_qnnpack"
    xq = _pool_input(self, op)
    if xq is None or ceil_mode:
        from . import channels_last as cl

        fallback = cl.avg_pool2d_channels_last_out if channels_last else pool.avg_pool2d_out
        return fallback(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out=out)
    k = pool._ntuple(kernel_size, 2, ())
    x = ints(xq).astype(np.int64)
    p = pool._ntuple(padding, 2, (0, 0))
    if any(p):
        x = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=int(xq.qparams.zero_point))
    sums, _, _ = pool.avg_windows(x, k, stride, 0, False, True, None)
    return _pool(xq, sums, k[0] * k[1], out, op)


def adaptive_avg_pool2d_out(self, output_size, channels_last=False, *, out=None):
    """``aten::adaptive_avg_pool2d`` with the qnnpack engine: QNNPACK's average pool with kernel = stride
    = input / output where the output divides the input and differs from it (torch's condition), else
    torch's own adaptive pool."""
    from . import pool

    op = "quantized::adaptive_avg_pool2d_qnnpack"
    xq = _pool_input(self, op)
    if xq is not None:
        H, W = xq.shape[2:]
        size = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size] * 2
        oh, ow = [(H, W)[i] if v is None else int(v) for i, v in enumerate(size * (2 // len(size)))]
        if (oh, ow) != (H, W) and H % oh == 0 and W % ow == 0:
            k = (H // oh, W // ow)
            sums, _, _ = pool.avg_windows(ints(xq), k, k, 0, False, True, None)
            return _pool(xq, sums, k[0] * k[1], out, op)
    return pool.adaptive_avg_pool2d_out(self, output_size, out=out, nhwc=True if channels_last else None)


def mean_out(self, dim=None, keepdim=False, *, dtype=None, channels_last=False, out=None):
    """``aten::mean`` with the qnnpack engine (``quantized::mean_qnnpack``): QNNPACK's global average pool
    (the average pool's rounding over the whole plane) for a 4-D quint8 input over dims ``[2, 3]``
    exactly as written (torch's condition), else torch's own mean."""
    from . import pool

    op = "quantized::mean_qnnpack"
    xq = _pool_input(self, op)
    dims = list(dim) if isinstance(dim, (list, tuple)) else None
    if xq is None or dims != [2, 3] or dtype is not None:
        from . import channels_last as cl

        fallback = cl.mean_channels_last_out if channels_last else pool.mean_out
        return fallback(self, dim, keepdim, dtype=dtype, out=out)
    sums = ints(xq).astype(np.int64).sum(axis=(2, 3), keepdims=True)
    if out is not None and not keepdim:
        out = out.reshape(out.shape + (1, 1))
    res = _pool(xq, sums, xq.shape[2] * xq.shape[3], out, op)
    return res if keepdim else res.reshape(res.shape[:2])


# -- lookup-table activations: QNNPACK tabulates the 256 outputs once per operator ----------------------
def _libm():
    import ctypes
    import ctypes.util

    lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    lib.expf.restype, lib.expf.argtypes = ctypes.c_float, [ctypes.c_float]
    lib.tanh.restype, lib.tanh.argtypes = ctypes.c_double, [ctypes.c_double]
    return lib


_LIBM = None
_TABLES: dict = {}


def _entry(fn: str, x: np.float32, inv_out: np.float32, zp: int) -> np.float32:
    """One table entry before clamping and ``lrintf``, as QNNPACK's operator setup computes it (C float
    arithmetic; sigmoid and tanh through the C library's ``expf`` / ``tanh``, which torch calls)."""
    global _LIBM
    if fn == "hardswish":
        x2 = min(max(F32(x + F32(3)), F32(0)), F32(6))
        return F32(F32(inv_out * F32(F32(x * x2) / F32(6))) + F32(zp))
    if fn == "hardsigmoid":
        x2 = min(max(F32(x + F32(3)), F32(0)), F32(6))
        return F32(F32(inv_out * F32(x2 / F32(6))) + F32(zp))
    if _LIBM is None:
        _LIBM = _libm()
    if fn == "sigmoid":
        return F32(F32(256) / F32(F32(1) + F32(_LIBM.expf(float(-x)))))
    if fn == "tanh":
        return F32(128.0 * _LIBM.tanh(float(x)) + 128.0)
    raise KernelError(f"no QNNPACK lookup table for {fn!r}")


def lookup_table(fn: str, in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """QNNPACK's 256-entry uint8 table of ``fn`` for these parameters (cached)."""
    key = (fn, float(in_scale), int(in_zp), float(out_scale), int(out_zp))
    table = _TABLES.get(key)
    if table is None:
        inv_out = F32(F32(1) / F32(out_scale))
        s = F32(in_scale)
        vals = [_entry(fn, F32(s * F32(i - int(in_zp))), inv_out, int(out_zp)) for i in range(256)]
        table = np.rint(np.clip(np.array(vals, F32), 0, 255)).astype(np.uint8)
        if len(_TABLES) > 256:
            _TABLES.clear()
        _TABLES[key] = table
    return table


#: the output parameters QNNPACK's fixed-range activations require (torch gives them these)
_FIXED = {"sigmoid": (1.0 / 256, 0), "hardsigmoid": (1.0 / 256, 0), "tanh": (2.0 / 256, 128)}


def lut_out(self, fn, output_scale=None, output_zero_point=None, *, out=None):
    """``quantized::lut_qnnpack``: torch's ``sigmoid`` / ``tanh`` / ``hardsigmoid`` (fixed output
    parameters) and ``hardswish`` (given ones, else the input's) of a quint8 tensor with the qnnpack
    engine: QNNPACK's lookup table. A qint8 input takes torch's own kernel, as torch does."""
    op = "quantized::lut_qnnpack"
    xq = require_per_tensor(self, op)
    if fn not in ("hardswish", *_FIXED):
        raise KernelError(f"{op}: fn={fn!r} is not hardswish, sigmoid, hardsigmoid or tanh")
    if fn in _FIXED:
        output_scale, output_zero_point = _FIXED[fn]
    elif output_scale is None:
        output_scale, output_zero_point = xq.qparams.scale, xq.qparams.zero_point
    if xq.qdtype != "quint8":
        from . import activation

        if fn == "hardswish":
            return activation.hardswish_out(self, output_scale, output_zero_point, out=out)
        return getattr(activation, f"{fn}_out")(self, out=out)
    q = output_qparams("quint8", output_scale, output_zero_point, op)
    table = lookup_table(fn, xq.qparams.scale, xq.qparams.zero_point, q.scale, q.zero_point)
    res = buffer(out, xq.shape, "quint8")
    np.take(table, ints(xq), out=res)
    return wrap(res, "quint8", q)


def dequantize_acc(acc: np.ndarray, x_scale: float, w_scales: np.ndarray, bias, relu: bool) -> np.ndarray:
    """QNNPACK's dynamic linear output: ``float(acc) * (s_w * s_x)`` then ``+ bias`` in float32, two
    roundings (its kernel multiplies and adds, no fma), relu as ``max(y, 0)``."""
    mult = (np.asarray(w_scales, F32) * F32(x_scale)).astype(F32)
    res = (acc.astype(F32) * mult).astype(F32)
    if bias is not None:
        res += np.asarray(bias, F32)
    if relu:
        np.maximum(res, F32(0), out=res)
    return res
