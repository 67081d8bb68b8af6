"""quantized::qlinear (+relu) and the dynamic qlinear: fbgemm's int32 accumulation and requantization."""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError, int8_gemm
from srcore.plugin import int8_onednn as onednn

from ._common import F32, buffer, ints, output_qparams, quant_tensor, require_per_tensor, require_quantized, wrap
from .convert import choose_qparams
from . import qnnpack
from .conv import check_arith, weight_scales64
from .gemm import act_bound, dequantize_acc, int_matmul, packed, packed_int8, requantize


def _check(x_shape, w, op):
    if w.ndim != 2:
        raise KernelError(f"{op}: the weight must be 2-D, got shape {list(w.shape)}")
    if x_shape[-1] != w.shape[1]:
        raise KernelError(f"{op}: input features {x_shape[-1]} do not match the weight {list(w.shape)}")


def _rows(xq: np.ndarray, k: int, p8) -> np.ndarray:
    return int8_gemm.linear_rows(xq, p8)


def _acc(xq: np.ndarray, x_zp: int, w, qdtype: str) -> np.ndarray:
    """Exact int32 accumulators (int32, or float32/float64 integers), shape (rows, out features):
    the int8 GEMM where it applies (``srcore.plugin.int8_gemm``), else SGEMM on shifted integers."""
    k = xq.shape[-1]
    if int8_gemm.applies(k, qdtype, getattr(w, "qdtype", "")):
        p8 = packed_int8(w)
        return int8_gemm.gemm(_rows(xq, k, p8), x_zp, p8)
    p = packed(w)
    a = xq.reshape(-1, xq.shape[-1]).astype(F32)
    a -= F32(x_zp)
    return int_matmul(a, p.rows.T, act_bound(x_zp, qdtype) * p.bmax)


def _qlinear(X, W, B, Y_scale_i, Y_zero_point_i, relu, out, op, arith):
    check_arith(arith, op)
    require_per_tensor(X, op)
    require_quantized(W, op, "weight")
    _check(X.shape, W, op)
    q = output_qparams(X.qdtype, Y_scale_i, Y_zero_point_i, op)
    shape = X.shape[:-1] + (W.shape[0],)
    k = X.shape[-1]
    if arith == "fbgemm" and int8_gemm.applies(k, X.qdtype, getattr(W, "qdtype", "")):
        # the int8 GEMM with the requantization fused into its epilogue
        res = buffer(out, shape, X.qdtype)
        tgt = res if res.flags.c_contiguous else np.empty(res.shape, res.dtype)
        int8_gemm.gemm_requantize(_rows(ints(X), k, packed_int8(W)), X.qparams.zero_point, packed_int8(W),
                                  X.qparams.scale, packed(W).scales, B, q.scale, q.zero_point, relu,
                                  tgt, channels_first=False)
        if tgt is not res:
            res[...] = tgt
        return wrap(res, X.qdtype, q)
    acc = _acc(ints(X), X.qparams.zero_point, W, X.qdtype)
    w_scales = packed(W).scales
    res = buffer(out, shape, X.qdtype)
    if arith == "qnnpack":
        qnnpack.requantize(acc, X.qparams.scale, w_scales, weight_scales64(W), B, q.scale, q.zero_point, X.qdtype,
                           relu, res.reshape(acc.shape))
    elif arith == "onednn":
        y = onednn.scaled(acc, X.qparams.scale, w_scales, B, "linear")
        onednn.requantize(y, q.scale, q.zero_point, X.qdtype, relu, res.reshape(acc.shape))
    else:
        requantize(acc, X.qparams.scale, w_scales, B, q.scale, q.zero_point, X.qdtype, relu, res.reshape(acc.shape))
    return wrap(res, X.qdtype, q)


def qlinear_out(X, W, B, Y_scale_i, Y_zero_point_i, arith="fbgemm", *, out=None):
    """``quantized::linear`` with its packed weight unpacked: int32 accumulation, then fbgemm's or
    oneDNN's requantization (``arith``, as torch packed the weight)."""
    return _qlinear(X, W, B, Y_scale_i, Y_zero_point_i, False, out, "quantized::qlinear", arith)


def qlinear_relu_out(X, W, B, Y_scale_i, Y_zero_point_i, arith="fbgemm", *, out=None):
    return _qlinear(X, W, B, Y_scale_i, Y_zero_point_i, True, out, "quantized::qlinear_relu", arith)


def _dynamic(X, W, B, reduce_range, relu, out, op, arith="fbgemm"):
    if arith not in ("fbgemm", "qnnpack"):
        raise KernelError(f"{op}: arith={arith!r} is not fbgemm or qnnpack")
    require_quantized(W, op, "weight")
    x = np.asarray(X, np.float32)
    _check(x.shape, W, op)
    lo, hi = (float(x.min()), float(x.max())) if x.size else (0.0, 0.0)
    # QNNPACK quantizes the input to the full 8 bits whatever reduce_range says
    scale, zp = choose_qparams(lo, hi, 0, 255, bool(reduce_range) and arith == "fbgemm")
    xq = quant_tensor(x, scale, zp, "quint8")
    acc = _acc(xq, zp, W, "quint8")
    w_scales = packed(W).scales
    if arith == "qnnpack":
        res = qnnpack.dequantize_acc(acc, scale, w_scales, B, relu).reshape(x.shape[:-1] + (W.shape[0],))
    else:
        res = dequantize_acc(acc, scale, w_scales, B, relu).reshape(x.shape[:-1] + (W.shape[0],))
    if out is None:
        return res
    out[...] = res
    return out


def qlinear_dynamic_out(X, W, B, reduce_range=False, arith="fbgemm", *, out=None):
    """``quantized::linear_dynamic``: X quantized per call (quint8, from its min and max), float result;
    ``arith``: fbgemm's or QNNPACK's (engine qnnpack)."""
    return _dynamic(X, W, B, reduce_range, False, out, "quantized::qlinear_dynamic", arith)


def qlinear_relu_dynamic_out(X, W, B, reduce_range=False, arith="fbgemm", *, out=None):
    return _dynamic(X, W, B, reduce_range, True, out, "quantized::qlinear_relu_dynamic", arith)
