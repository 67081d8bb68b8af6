"""quantized::qconv1d / qconv2d (+relu, +add): exact integer convolution, fbgemm's requantization.

The input is shifted by its zero point before zero padding (padding stands for real zeros), the
windows are gathered as a strided view and contracted with the shifted weight in float64: exact
integer sums, then :func:`gemm.requantize` per output channel. Groups (depthwise included), stride,
padding and dilation are torch's.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

from ._common import (F32, buffer, dequant_scalar, ints, output_qparams, quant_scalar, require_per_tensor,
                      require_quantized, wrap)
from . import onednn
from .gemm import requantize, shifted, weight_params

#: the arithmetic of torch's packed weights (the ops' ``arith`` argument, recorded by the importer)
ARITHS = ("fbgemm", "onednn")


def check_arith(arith: str, op: str) -> str:
    if arith not in ARITHS:
        raise KernelError(f"{op}: arith={arith!r} is not one of {', '.join(ARITHS)}")
    return arith


def _tuple(v, n: int) -> tuple[int, ...]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(int(x) for x in (v * n if len(v) == 1 else v))


def conv_acc(xq: np.ndarray, x_zp: int, w, stride, padding, dilation, groups: int) -> np.ndarray:
    """Integer accumulators (float64) of a grouped N-d convolution, shape (N, Cout, *out)."""
    n_sp = w.ndim - 2
    stride, padding, dilation = _tuple(stride, n_sp), _tuple(padding, n_sp), _tuple(dilation, n_sp)
    N, C = xq.shape[:2]
    cout, cg = w.shape[:2]
    if groups < 1 or C % groups or cout % groups or C // groups != cg:
        raise KernelError(f"convolution: input with {C} channels, weight {list(w.shape)} and groups={groups} "
                          f"do not fit")
    x = shifted(xq, x_zp)
    if any(padding):
        x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    k = w.shape[2:]
    sp = x.shape[2:]
    out_sp = tuple((s - d * (kk - 1) - 1) // st + 1 for s, kk, st, d in zip(sp, k, stride, dilation))
    if any(o <= 0 for o in out_sp):
        raise KernelError(f"convolution: output size {out_sp} is too small (input {xq.shape}, kernel {tuple(k)})")
    st = x.strides
    win = np.lib.stride_tricks.as_strided(
        x, (N, C, *out_sp, *k),
        (st[0], st[1], *(st[2 + i] * stride[i] for i in range(n_sp)), *(st[2 + i] * dilation[i] for i in range(n_sp))),
        writeable=False)
    _, w_zp = weight_params(w)
    wf = shifted(ints(w), w_zp.reshape((-1,) + (1,) * (w.ndim - 1)))
    if groups == 1:
        cols = np.moveaxis(win, 1, 1 + n_sp).reshape(N * int(np.prod(out_sp)), -1)   # (N*out, C*k)
        acc = cols @ wf.reshape(cout, -1).T                                          # (N*out, Cout)
        return np.moveaxis(acc.reshape(N, *out_sp, cout), -1, 1)
    g = groups
    wg = wf.reshape(g, cout // g, cg, *k)
    xg = win.reshape(N, g, cg, *out_sp, *k)
    sp_l, k_l = "xyz"[:n_sp], "ijk"[:n_sp]
    acc = np.einsum(f"ngc{sp_l}{k_l},goc{k_l}->ngo{sp_l}", xg, wg, optimize=True)
    return acc.reshape(N, cout, *out_sp)


def _qconv(qx, weight, bias, stride, padding, dilation, groups, output_scale, output_zero_point, relu, out, op,
           qaccum=None, arith="fbgemm"):
    check_arith(arith, op)
    require_per_tensor(qx, op)
    require_quantized(weight, op, "weight")
    n_sp = weight.ndim - 2
    if qx.ndim != n_sp + 2:
        raise KernelError(f"{op}: expects a {n_sp + 2}-D input (N, C, ...), got shape {list(qx.shape)}")
    q = output_qparams(qx.qdtype, output_scale, output_zero_point, op)
    acc = conv_acc(ints(qx), qx.qparams.zero_point, weight, stride, padding, dilation, int(groups))
    w_scales, _ = weight_params(weight)
    accl = np.moveaxis(acc, 1, -1)   # channels last: requantize per output channel
    res = buffer(out, acc.shape, qx.qdtype)
    if qaccum is None and arith == "onednn":
        y = onednn.scaled(accl, qx.qparams.scale, w_scales, bias, "conv")
        onednn.requantize(y, q.scale, q.zero_point, qx.qdtype, relu, np.moveaxis(res, 1, -1))
        return wrap(res, qx.qdtype, q)
    if qaccum is None:
        requantize(accl, qx.qparams.scale, w_scales, bias, q.scale, q.zero_point, qx.qdtype, relu,
                   np.moveaxis(res, 1, -1))
        return wrap(res, qx.qdtype, q)
    # conv2d_add (torch has it in oneDNN only, whatever ``arith`` says): the convolution's float
    # result plus dequantize(qaccum), quantized once
    require_per_tensor(qaccum, op, "accumulator")
    act_w = F32(qx.qparams.scale) * w_scales
    y = accl.astype(F32) * act_w
    if bias is not None:
        y += np.asarray(bias, F32)
    y = np.moveaxis(y, -1, 1) + dequant_scalar(ints(qaccum), qaccum.qparams.scale, qaccum.qparams.zero_point)
    if relu:
        np.maximum(y, F32(0), out=y)
    quant_scalar(y, q.scale, q.zero_point, qx.qdtype, out=res)
    return wrap(res, qx.qdtype, q)


def qconv_out(qx, weight, bias, stride, padding, dilation, groups, output_scale, output_zero_point,
              arith="fbgemm", *, out=None):
    """``quantized::conv{1,2}d`` with its packed weight unpacked; ``arith``: the requantization of
    torch's packing, fbgemm's or oneDNN's (:mod:`.onednn`)."""
    return _qconv(qx, weight, bias, stride, padding, dilation, groups, output_scale, output_zero_point, False, out,
                  "quantized::qconv", arith=arith)


def qconv_relu_out(qx, weight, bias, stride, padding, dilation, groups, output_scale, output_zero_point,
                   arith="fbgemm", *, out=None):
    return _qconv(qx, weight, bias, stride, padding, dilation, groups, output_scale, output_zero_point, True, out,
                  "quantized::qconv_relu", arith=arith)


def qconv_add_out(qx, qaccum, weight, bias, stride, padding, dilation, groups, output_scale, output_zero_point, *,
                  out=None):
    return _qconv(qx, weight, bias, stride, padding, dilation, groups, output_scale, output_zero_point, False, out,
                  "quantized::qconv2d_add", qaccum)


def qconv_add_relu_out(qx, qaccum, weight, bias, stride, padding, dilation, groups, output_scale, output_zero_point,
                       *, out=None):
    return _qconv(qx, weight, bias, stride, padding, dilation, groups, output_scale, output_zero_point, True, out,
                  "quantized::qconv2d_add_relu", qaccum)
