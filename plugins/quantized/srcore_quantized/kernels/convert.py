"""Float <-> quantized: quantize (per tensor, per channel, dynamic), dequantize, int_repr, q_scale."""
from __future__ import annotations

import numpy as np

from srcore.plugin import QDTYPES, SCALAR_TYPE_CODES, KernelError, QParams, QuantizationError, QuantizedArray, int8_gemm

from ._common import F32, buffer, dequant_scalar, ints, quant_tensor, require_quantized, wrap


def qdtype_of(code, op: str) -> str:
    name = SCALAR_TYPE_CODES.get(code, code) if isinstance(code, int) and not isinstance(code, bool) else code
    if name not in QDTYPES:
        raise KernelError(f"{op}: dtype {code!r} is not a quantized dtype (expected one of {', '.join(QDTYPES)})")
    return name


def _qparams(op: str, *args) -> QParams:
    try:
        return QParams(*args)
    except QuantizationError as exc:
        raise KernelError(f"{op}: {exc}") from None


def _float_input(x, op: str) -> np.ndarray:
    if isinstance(x, QuantizedArray):
        raise KernelError(f"{op}: the input is already quantized ({x.qdtype}); dequantize it first")
    return np.asarray(x, dtype=F32)


def quantize_per_tensor_out(self, scale, zero_point, dtype, *, out=None):
    """``clamp(nearbyint(zp + x * (1 / scale)))``, rounded as fbgemm's ``Quantize`` (see ``quant_tensor``)."""
    op = "aten::quantize_per_tensor"
    qdtype = qdtype_of(dtype, op)
    if isinstance(scale, np.ndarray):  # the .tensor_qparams overload
        scale, zero_point = float(scale.reshape(-1)[0]), int(zero_point.reshape(-1)[0])
    q = _qparams(op, scale, zero_point)
    info = QDTYPES[qdtype]
    if not info.qmin <= q.zero_point <= info.qmax:
        raise KernelError(f"{op}: zero point {q.zero_point} is outside the range of {qdtype} [{info.qmin}, {info.qmax}]")
    x = _float_input(self, op)
    res = buffer(out, x.shape, qdtype)
    if not _quantize_numba(x, q, qdtype, res):
        quant_tensor(x, q.scale, q.zero_point, qdtype, out=res)
    return wrap(res, qdtype, q)


def _quantize_numba(x: np.ndarray, q, qdtype: str, res: np.ndarray) -> bool:
    """``quant_tensor``'s 8-bit arithmetic in one numba pass; False where it does not apply (then
    numpy's passes: other dtypes, no numba, non-contiguous arrays, a NaN)."""
    if qdtype not in ("quint8", "qint8") or not int8_gemm.numba_enabled():
        return False
    if not (x.flags.c_contiguous and res.flags.c_contiguous):
        return False
    from ._int8_kernels import quantize_u8

    info = QDTYPES[qdtype]
    inv = np.float64(F32(1.0) / F32(q.scale))
    return quantize_u8(x.reshape(-1), inv, np.float64(q.zero_point), F32(info.qmin), F32(info.qmax), res.reshape(-1))


def quantize_per_channel_out(self, scales, zero_points, axis, dtype, *, out=None):
    """One scale and zero point per index along ``axis``; each element rounded as per tensor."""
    op = "aten::quantize_per_channel"
    qdtype = qdtype_of(dtype, op)
    x = _float_input(self, op)
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise KernelError(f"{op}: axis {axis} is out of range for a tensor of rank {x.ndim}")
    axis = axis % x.ndim
    s = np.asarray(scales, np.float64).reshape(-1)
    z = np.asarray(zero_points).reshape(-1).astype(np.int64)
    q = _qparams(op, tuple(s.tolist()), tuple(z.tolist()), axis)
    if len(s) != x.shape[axis]:
        raise KernelError(f"{op}: {len(s)} scales for dim {axis} of size {x.shape[axis]}")
    info = QDTYPES[qdtype]
    if z.size and (z.min() < info.qmin or z.max() > info.qmax):
        raise KernelError(f"{op}: zero points must be within the range of {qdtype} [{info.qmin}, {info.qmax}]")
    shape = [1] * x.ndim
    shape[axis] = -1
    inv = (F32(1.0) / s.astype(F32)).reshape(shape)   # each element as quantize_val: float32 sum, then nearbyint
    r = np.rint(z.astype(F32).reshape(shape) + x * inv).astype(np.float64)
    np.clip(r, info.qmin, info.qmax, out=r)
    res = buffer(out, x.shape, qdtype)
    res[...] = r
    return wrap(res, qdtype, q)


def choose_qparams(x_min: float, x_max: float, qmin: int, qmax: int, reduce_range: bool) -> tuple[float, int]:
    """torch's ``quant_utils::ChooseQuantizationParams`` (affine, no sparsity preservation): the range
    widened to hold 0, scale = range / levels (0.1 when degenerate, at least 6.1e-5), the zero point
    from the end with the smaller error, nudged to an integer."""
    if reduce_range:
        qmin, qmax = qmin // 2, qmax // 2
    mn, mx = min(float(F32(x_min)), 0.0), max(float(F32(x_max)), 0.0)
    scale = (mx - mn) / (qmax - qmin)
    if float(F32(scale)) == 0.0 or np.isinf(F32(1.0) / F32(scale)):
        scale = 0.1
    small = float(F32(6.1e-5))
    if scale < small:
        org = scale
        scale = small
        if mn == 0.0:
            mx = small * (qmax - qmin)
        elif mx == 0.0:
            mn = -small * (qmax - qmin)
        else:
            amp = float(F32(small / org))
            mn, mx = float(F32(mn * amp)), float(F32(mx * amp))
    zp_min = qmin - mn / scale
    zp_max = qmax - mx / scale
    err_min = abs(qmin) - abs(mn / scale)
    err_max = abs(qmax) - abs(mx / scale)
    initial = zp_min if err_min < err_max else zp_max
    if initial < qmin:
        zp = qmin
    elif initial > qmax:
        zp = qmax
    else:
        zp = int(np.rint(initial))
    return float(scale), int(zp)


def quantize_per_tensor_dynamic_out(self, dtype, reduce_range, *, out=None):
    """Parameters from the data's min and max (``ChooseQuantizationParams``), then quantized."""
    op = "aten::quantize_per_tensor_dynamic"
    qdtype = qdtype_of(dtype, op)
    x = _float_input(self, op)
    info = QDTYPES[qdtype]
    lo, hi = (float(x.min()), float(x.max())) if x.size else (0.0, 0.0)
    scale, zp = choose_qparams(lo, hi, info.qmin, info.qmax, bool(reduce_range))
    return quantize_per_tensor_out(x, scale, zp, qdtype, out=out)


def dequantize_out(self, *, out=None):
    """``(q - zero_point) * scale`` in float32 (per channel: in float64, then rounded), as torch."""
    if not isinstance(self, QuantizedArray):  # torch returns a float tensor as it is
        x = np.asarray(self)
        if x.dtype.kind != "f":   # stored integers that lost their parameters: never pass them as values
            raise KernelError(f"aten::dequantize: input is a plain {x.dtype} array, not a quantized tensor "
                              f"(an op before it dropped the quantization parameters)")
        if out is None:
            return x
        out[...] = x
        return out
    q = self.qparams
    qi = ints(self)
    if (q.axis is None and self.qdtype in ("quint8", "qint8") and qi.flags.c_contiguous and int8_gemm.numba_enabled()
            and (out is None or out.flags.c_contiguous and out.dtype == F32 and out.shape == qi.shape)):
        from ._int8_kernels import dequantize_u8   # dequant_scalar's arithmetic in one numba pass

        real = np.empty(qi.shape, F32) if out is None else out
        dequantize_u8(qi.reshape(-1), np.int64(q.zero_point), F32(q.scale), real.reshape(-1))
        return real
    if q.axis is None:
        real = dequant_scalar(qi, q.scale, q.zero_point)
    else:
        real = self.dequantize()
    if out is None:
        return real
    out[...] = real
    return out


def dequantize_list(tensors):
    return [dequantize_out(t) for t in tensors]


def int_repr_out(self, *, out=None):
    x = ints(require_quantized(self, "aten::int_repr"))
    if out is None:
        return x.copy()
    out[...] = x
    return out


def q_scale(self) -> float:
    x = require_quantized(self, "aten::q_scale")
    if x.qparams.axis is not None:
        raise KernelError("aten::q_scale: the tensor is quantized per channel")
    return float(x.qparams.scale)


def q_zero_point(self) -> int:
    x = require_quantized(self, "aten::q_zero_point")
    if x.qparams.axis is not None:
        raise KernelError("aten::q_zero_point: the tensor is quantized per channel")
    return int(x.qparams.zero_point)


_BY_STORAGE = {"uint8": "quint8", "int8": "qint8", "int32": "qint32"}


def make_per_tensor_quantized_tensor(self, scale, zero_point):
    """Integers taken as the stored values of a per-tensor quantized tensor (no copy)."""
    op = "aten::_make_per_tensor_quantized_tensor"
    x = np.asarray(self)
    qdtype = _BY_STORAGE.get(str(x.dtype))
    if qdtype is None:
        raise KernelError(f"{op}: stored values must be uint8, int8 or int32, not {x.dtype}")
    q = _qparams(op, scale, zero_point)
    info = QDTYPES[qdtype]
    if not info.qmin <= q.zero_point <= info.qmax:
        raise KernelError(f"{op}: zero point {q.zero_point} is outside the range of {qdtype}")
    return wrap(x, qdtype, q)
