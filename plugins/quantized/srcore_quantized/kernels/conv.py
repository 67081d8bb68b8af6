"""quantized::qconv1d / qconv2d (+relu, +add): exact integer convolution, fbgemm's requantization.

The input is shifted by its zero point before zero padding (padding stands for real zeros), the
windows are gathered (im2col, float32) and contracted with the packed weight by
:func:`gemm.int_matmul` (exact integer sums in SGEMM), then :func:`gemm.requantize` per output
channel; a depthwise convolution is a multiply-add per kernel tap (channels-last, in numba where it
runs). Groups (depthwise included), stride, padding and dilation are torch's.
"""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import KernelError, int8_gemm
from srcore.plugin import int8_onednn as onednn

from ._common import (F32, buffer, channels_last_buffer, dequant_scalar, ints, output_qparams, quant_scalar,
                      require_per_tensor, require_quantized, wrap)
from .gemm import act_bound, int_matmul, packed, packed_int8, requantize, weight_params
from . import qnnpack

#: the arithmetic of torch's packed weights (the ops' ``arith`` argument, recorded by the importer)
ARITHS = ("fbgemm", "onednn", "qnnpack")


def check_arith(arith: str, op: str) -> str:
    if arith not in ARITHS:
        raise KernelError(f"{op}: arith={arith!r} is not one of {', '.join(ARITHS)}")
    return arith


def _tuple(v, n: int) -> tuple[int, ...]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(int(x) for x in (v * n if len(v) == 1 else v))


def conv_acc(xq: np.ndarray, x_zp: int, w, stride, padding, dilation, groups: int, qdtype: str = "quint8"
             ) -> np.ndarray:
    """Exact integer accumulators (float32 or float64 integers) of a grouped N-d convolution, shape
    (N, Cout, *out): the windows gathered (im2col, float32) and contracted with the packed weight by
    :func:`gemm.int_matmul`; a depthwise convolution as a sum over kernel taps."""
    n_sp = w.ndim - 2
    stride, padding, dilation = _tuple(stride, n_sp), _tuple(padding, n_sp), _tuple(dilation, n_sp)
    N, C = xq.shape[:2]
    cout, cg = w.shape[:2]
    if groups < 1 or C % groups or cout % groups or C // groups != cg:
        raise KernelError(f"convolution: input with {C} channels, weight {list(w.shape)} and groups={groups} "
                          f"do not fit")
    k = w.shape[2:]
    sp_in = tuple(s + 2 * p for s, p in zip(xq.shape[2:], padding))
    out_sp = tuple((s - d * (kk - 1) - 1) // st + 1 for s, kk, st, d in zip(sp_in, k, stride, dilation))
    if any(o <= 0 for o in out_sp):
        raise KernelError(f"convolution: output size {out_sp} is too small (input {xq.shape}, kernel {tuple(k)})")
    if groups == 1 and n_sp in (1, 2) and int8_gemm.applies(C * math.prod(k), qdtype, getattr(w, "qdtype", "")):
        return _conv_acc_int8(xq, x_zp, w, stride, padding, dilation, out_sp)
    x = np.zeros((N, C) + sp_in, F32) if any(padding) else np.empty((N, C) + sp_in, F32)
    inner = x[(slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(padding, xq.shape[2:]))]
    np.subtract(xq, F32(x_zp), out=inner, casting="unsafe")   # shifted first: padding stands for real zeros
    p = packed(w)
    bound = act_bound(x_zp, qdtype) * p.bmax
    m = math.prod(out_sp)
    kk = math.prod(k)

    def tap(idx, chans=slice(None)):
        """The input each output position sees at kernel tap ``idx``: a strided slice (N, C, *out)."""
        return x[(slice(None), chans) + tuple(slice(i * d, i * d + (o - 1) * st + 1, st)
                                              for i, d, o, st in zip(idx, dilation, out_sp, stride))]
    taps = list(np.ndindex(*k))
    if groups == C and cg == 1 and cout == C:       # depthwise: one multiply-add per kernel tap
        acc = np.zeros((N, C, *out_sp), F32)
        wr = p.rows.reshape((C,) + tuple(k))
        tmp = np.empty_like(acc)
        for idx in taps:                            # exact: kk * bound is far below 2^24
            np.multiply(tap(idx), wr[(slice(None),) + idx].reshape((C,) + (1,) * n_sp), out=tmp)
            acc += tmp
        return acc

    def im2col(chans: slice, c: int) -> np.ndarray:
        if kk == 1 and all(v == 1 for v in stride) and not any(padding):
            return x[:, chans].reshape(N, c, m)     # a 1x1 convolution: no gathering
        cols = np.empty((N, c, kk) + out_sp, F32)   # (N, K = c * kk, M): K ordered as the weight's
        for t, idx in enumerate(taps):
            cols[:, :, t] = tap(idx, chans)
        return cols.reshape(N, c * kk, m)
    if groups == 1:
        return int_matmul(p.rows, im2col(slice(None), C), bound).reshape(N, cout, *out_sp)
    og = cout // groups
    acc = None
    for g in range(groups):
        part = int_matmul(p.rows[g * og:(g + 1) * og], im2col(slice(g * cg, (g + 1) * cg), cg), bound)
        if acc is None:
            acc = np.empty((N, cout, m), part.dtype)
        acc[:, g * og:(g + 1) * og] = part
    return acc.reshape(N, cout, *out_sp)


def _int8_rows(xq: np.ndarray, x_zp: int, w, stride, padding, dilation, out_sp):
    """The rows the int8 GEMM multiplies for a groups-1 convolution (``int8_gemm.conv_rows``) and
    the weight packed for them."""
    p8 = packed_int8(w, math.prod(w.shape[2:]))
    return int8_gemm.conv_rows(xq, x_zp, p8, w.shape[2:], stride, padding, dilation, out_sp), p8


def _conv_acc_int8(xq: np.ndarray, x_zp: int, w, stride, padding, dilation, out_sp) -> np.ndarray:
    """:func:`conv_acc` (groups 1) on the AVX2 int8 GEMM: int32 (N, Cout, *out), a view of the
    GEMM's channels-last result."""
    cols, p8 = _int8_rows(xq, x_zp, w, stride, padding, dilation, out_sp)
    acc = int8_gemm.gemm(cols, x_zp, p8)                            # (N * m, Cout)
    return np.moveaxis(acc.reshape((xq.shape[0],) + tuple(out_sp) + (p8.n,)), -1, 1)


def _key(v):
    return tuple(v) if isinstance(v, list) else v


def _int8_geometry(qx, w, stride, padding, dilation):
    """``(k, stride, padding, dilation, out_sp, packed weight)`` of a groups-1 conv on the int8 GEMM,
    or None where its shapes do not fit; worked out once per input shape and kept on the weight
    (a node's arguments are the same on every call)."""
    cache = getattr(w, "_srcore_int8_geometry", None)
    if cache is None:
        cache = {}
        try:
            w._srcore_int8_geometry = cache
        except AttributeError:
            pass
    key = (qx.shape, qx.qdtype, _key(stride), _key(padding), _key(dilation))
    try:
        got = cache.get(key, False)
    except TypeError:             # unhashable arguments: worked out each time
        got, cache = False, {}
    if got is not False:
        return got
    got = None
    n_sp = w.ndim - 2
    if n_sp in (1, 2) and w.shape[1] == qx.shape[1]:
        stride, padding, dilation = _tuple(stride, n_sp), _tuple(padding, n_sp), _tuple(dilation, n_sp)
        k = tuple(w.shape[2:])
        out_sp = tuple((s + 2 * p - d * (kk - 1) - 1) // st + 1
                       for s, p, kk, st, d in zip(qx.shape[2:], padding, k, stride, dilation))
        if all(o > 0 for o in out_sp):                              # else conv_acc reports it
            got = (k, stride, padding, dilation, out_sp, packed_int8(w, math.prod(k)))
    if len(cache) > 16:
        cache.clear()
    cache[key] = got
    return got


def _int8_fused(qx, weight, bias, stride, padding, dilation, q, relu, out):
    """The whole fbgemm conv on the int8 GEMM with the requantization in its epilogue, or None
    where that path does not apply (then :func:`conv_acc` and :func:`requantize`)."""
    w = weight
    if q.zero_point is None:
        return None
    geo = _int8_geometry(qx, w, stride, padding, dilation)
    # asked on every call, not kept with the geometry: the GEMM's choice is the process's (tests switch it)
    if geo is None or not int8_gemm.applies(math.prod(w.shape[1:]), qx.qdtype, getattr(w, "qdtype", "")):
        return None
    k, stride, padding, dilation, out_sp, p8 = geo
    N, cout = qx.shape[0], w.shape[0]
    xq, qp = ints(qx), qx.qparams
    cl = channels_last_buffer(out, (N, cout) + out_sp, qx.qdtype)
    if cl is not None:
        # the GEMM's rows are (image, position) and its sums channels: requantized straight into
        # the buffer channels-last, returned as an NCHW view (the next conv reads it without a copy)
        res, mem = cl
        int8_gemm.conv_requantize(xq, qp.zero_point, p8, k, stride, padding, dilation, qp.scale, packed(w).scales,
                                  bias, q.scale, q.zero_point, relu, mem, channels_first=False)
        return wrap(res, qx.qdtype, q)
    res = buffer(out, (N, cout) + out_sp, qx.qdtype)
    tgt = np.empty(res.shape, res.dtype)
    int8_gemm.conv_requantize(xq, qp.zero_point, p8, k, stride, padding, dilation, qp.scale, packed(w).scales, bias,
                              q.scale, q.zero_point, relu, tgt, channels_first=True)
    res[...] = tgt
    return wrap(res, qx.qdtype, q)


def _depthwise_fused(qx, w, bias, stride, padding, dilation, groups, q, relu, out):
    """A depthwise conv2d (one filter per channel) in one numba pass: exact int32 sums per kernel tap
    and fbgemm's requantization; None where it does not apply (then :func:`conv_acc`)."""
    if w.ndim != 4 or qx.ndim != 4 or qx.qdtype != "quint8" or getattr(w, "qdtype", "") != "qint8":
        return None
    C = qx.shape[1]
    if not (groups == C and w.shape[0] == C and w.shape[1] == 1) or not int8_gemm.numba_enabled():
        return None
    plan = _depthwise_plan(qx, w, bias, stride, padding, dilation, q, relu)
    if plan is None:
        return None
    from ._int8_kernels import depthwise_nhwc_u8

    (kh, kw, sh, sw, ph, pw, dh, dw), out_sp, wt, bias_div, mult, y_zp, lo, hi = plan
    # channels-last in and out: every inner loop runs along the channels (SIMD for any stride); an
    # input from a quantized conv already is (no copy), the output is written channels-last into
    # the buffer and returned as an NCHW view
    x = np.ascontiguousarray(np.moveaxis(ints(qx), 1, -1))
    cl = channels_last_buffer(out, (qx.shape[0], C) + out_sp, qx.qdtype)
    if cl is not None and not np.may_share_memory(cl[1], x):
        res, tgt = cl
    else:
        res = buffer(out, (qx.shape[0], C) + out_sp, qx.qdtype)
        tgt = np.empty((qx.shape[0],) + out_sp + (C,), res.dtype)
    depthwise_nhwc_u8(x, np.int32(qx.qparams.zero_point), wt, kh, kw, sh, sw, ph, pw, dh, dw, tgt, bias_div, mult,
                      y_zp, lo, hi)
    if not np.shares_memory(res, tgt):
        res[...] = np.moveaxis(tgt, -1, 1)
    return wrap(res, qx.qdtype, q)


def _depthwise_plan(qx, w, bias, stride, padding, dilation, q, relu):
    """The depthwise kernel's fixed arguments (geometry, ``w - zw`` as (taps, C), fbgemm's
    constants), or None where the output is empty; worked out once per input shape and parameters and
    kept on the weight (recomputing them cost ~30 us a call, a 5x5x512 layer's kernel takes ~12)."""
    cache = getattr(w, "_srcore_dw_plans", None)
    if cache is None:
        cache = {}
        try:
            w._srcore_dw_plans = cache
        except AttributeError:
            pass
    key = (qx.shape, float(qx.qparams.scale), _key(stride), _key(padding), _key(dilation), float(q.scale),
           int(q.zero_point), bool(relu), id(bias))
    try:
        got = cache.get(key, False)
    except TypeError:             # unhashable arguments: worked out each time
        got, cache = False, {}
    if got is not False and got[0] is bias:
        return got[1]
    from srcore.plugin import QDTYPES

    C = qx.shape[1]
    stride, padding, dilation = _tuple(stride, 2), _tuple(padding, 2), _tuple(dilation, 2)
    k = w.shape[2:]
    out_sp = tuple((s + 2 * p - d * (kk - 1) - 1) // st + 1
                   for s, p, kk, st, d in zip(qx.shape[2:], padding, k, stride, dilation))
    plan = None
    if all(o > 0 for o in out_sp):
        p = packed(w)
        _, zps = weight_params(w)
        wt = np.ascontiguousarray((ints(w).reshape(C, -1).astype(np.int32) - zps.astype(np.int32)[:, None]).T)
        act_w = F32(qx.qparams.scale) * p.scales
        mult = (act_w / F32(q.scale)).astype(F32)
        bias_div = (np.asarray(bias, F32) / act_w).astype(F32) if bias is not None else np.zeros(C, F32)
        info = QDTYPES["quint8"]
        geo = (k[0], k[1], stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1])
        plan = (geo, out_sp, wt, bias_div, mult, int(q.zero_point), int(q.zero_point) if relu else info.qmin,
                info.qmax)
    if len(cache) > 16:
        cache.clear()
    cache[key] = (bias, plan)     # the bias kept with its id
    return plan


def _qconv(qx, weight, bias, stride, padding, dilation, groups, output_scale, output_zero_point, relu, out, op,
           qaccum=None, arith="fbgemm"):
    check_arith(arith, op)
    require_per_tensor(qx, op)
    require_quantized(weight, op, "weight")
    n_sp = weight.ndim - 2
    if qx.ndim != n_sp + 2:
        raise KernelError(f"{op}: expects a {n_sp + 2}-D input (N, C, ...), got shape {list(qx.shape)}")
    q = output_qparams(qx.qdtype, output_scale, output_zero_point, op)
    if qaccum is None and arith == "fbgemm" and int(groups) == 1:
        done = _int8_fused(qx, weight, bias, stride, padding, dilation, q, relu, out)
        if done is not None:
            return done
    if qaccum is None and arith == "fbgemm" and int(groups) > 1:
        done = _depthwise_fused(qx, weight, bias, stride, padding, dilation, int(groups), q, relu, out)
        if done is not None:
            return done
    acc = conv_acc(ints(qx), qx.qparams.zero_point, weight, stride, padding, dilation, int(groups), qx.qdtype)
    w_scales = packed(weight).scales
    res = buffer(out, acc.shape, qx.qdtype)
    if qaccum is None and arith == "qnnpack":
        qnnpack.requantize(acc, qx.qparams.scale, w_scales, weight_scales64(weight), bias, q.scale, q.zero_point,
                           qx.qdtype, relu, res, axis=1)
        return wrap(res, qx.qdtype, q)
    if qaccum is None and arith == "onednn":
        y = onednn.scaled(np.moveaxis(acc, 1, -1), qx.qparams.scale, w_scales, bias, "conv")
        onednn.requantize(y, q.scale, q.zero_point, qx.qdtype, relu, np.moveaxis(res, 1, -1))
        return wrap(res, qx.qdtype, q)
    if qaccum is None:   # per output channel: axis 1
        requantize(acc, qx.qparams.scale, w_scales, bias, q.scale, q.zero_point, qx.qdtype, relu, res, axis=1)
        return wrap(res, qx.qdtype, q)
    accl = np.moveaxis(acc, 1, -1)
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


#: ``quantized::qconv2d_then_add``'s ``layout`` -> the add kernel of that loop order
ADD_LAYOUTS = ("nchw", "channels_last", "mixed_layout")


def qconv_then_add_out(qx, other, weight, bias, stride, padding, dilation, groups, conv_scale, conv_zero_point,
                       conv_relu, output_scale, output_zero_point, relu=False, layout="nchw", *, out=None):
    """``quantized::qconv2d_then_add`` (the fuse pass's conv -> add): the conv requantized to its own
    parameters, then the add of that and ``other`` as ``binary.add_out`` (or its channels_last /
    mixed_layout variant) computes it; on the int8 GEMM both in the conv's epilogue
    (``int8_gemm.conv_add_requantize``), else the two kernels one after the other."""
    op = "quantized::qconv2d_then_add"
    if layout not in ADD_LAYOUTS:
        raise KernelError(f"{op}: layout={layout!r} is not one of {', '.join(ADD_LAYOUTS)}")
    done = _then_add_fused(qx, other, weight, bias, stride, padding, dilation, groups, conv_scale, conv_zero_point,
                           bool(conv_relu), output_scale, output_zero_point, bool(relu), layout, out, op)
    if done is not None:
        return done
    from . import binary

    y = _qconv(qx, weight, bias, stride, padding, dilation, groups, conv_scale, conv_zero_point, bool(conv_relu), None,
               op)
    add = {"nchw": binary._add, "channels_last": binary._add_in_channels_last,
           "mixed_layout": binary._add_in_mixed_layout}[layout]
    return add(y, other, output_scale, output_zero_point, bool(relu), out, op)


def _then_add_fused(qx, other, w, bias, stride, padding, dilation, groups, conv_scale, conv_zero_point, conv_relu,
                    output_scale, output_zero_point, relu, layout, out, op):
    """:func:`qconv_then_add_out` in the one-call conv's epilogue, or None where it does not apply."""
    if int(groups) != 1 or qx.ndim != 4 or qx.qdtype != "quint8" or getattr(w, "qdtype", "") != "qint8":
        return None
    if getattr(other, "qdtype", None) != "quint8" or getattr(other.qparams, "axis", None) is not None:
        return None
    require_per_tensor(qx, op)
    qc = output_qparams(qx.qdtype, conv_scale, conv_zero_point, op)
    qy = output_qparams(qx.qdtype, output_scale, output_zero_point, op)
    geo = _int8_geometry(qx, w, stride, padding, dilation)
    if geo is None or not int8_gemm.applies(math.prod(w.shape[1:]), qx.qdtype, w.qdtype):
        return None
    k, stride, padding, dilation, out_sp, p8 = geo
    N, cout = qx.shape[0], w.shape[0]
    shape = (N, cout) + out_sp
    if tuple(other.shape) != shape:
        return None
    from ._common import split_tail

    differ = cout > 1 and out_sp[0] * out_sp[1] > 1
    mode = (int8_gemm.ADD_ALL_SCALAR if layout == "mixed_layout" and differ else
            int8_gemm.ADD_TAIL_MEMORY if layout == "channels_last" and differ else int8_gemm.ADD_TAIL_NCHW)
    n = math.prod(shape)
    xq, qp = ints(qx), qx.qparams
    oq = other.qparams
    cl = channels_last_buffer(out, shape, qx.qdtype)
    if cl is not None:
        res, tgt = cl
        first = False
    else:
        res = buffer(out, shape, qx.qdtype)
        tgt, first = np.empty(shape, res.dtype), True
    done = int8_gemm.conv_add_requantize(xq, qp.zero_point, p8, k, stride, padding, dilation, qp.scale,
                                         packed(w).scales, bias, qc.scale, qc.zero_point, conv_relu, ints(other),
                                         oq.scale, oq.zero_point, qy.scale, qy.zero_point, relu, mode,
                                         split_tail(n, qx.qdtype), tgt, first)
    if done is None:
        return None
    if first:
        res[...] = tgt
    return wrap(res, qx.qdtype, qy)


def conv_transpose_acc(xq: np.ndarray, x_zp: int, w, stride, padding, output_padding, dilation, groups: int
                       ) -> np.ndarray:
    """Exact integer accumulators (float64) of a grouped N-d transposed convolution, shape (N, Cout,
    *out); ``w`` is torch's transposed weight (Cin, Cout / groups, *k). Each kernel tap's products
    are added into the strided output window, then the padding is cropped."""
    n_sp = w.ndim - 2
    stride, padding, output_padding, dilation = (_tuple(v, n_sp) for v in (stride, padding, output_padding,
                                                                             dilation))
    N, C = xq.shape[:2]
    og = w.shape[1]
    if groups < 1 or C != w.shape[0] or C % groups:
        raise KernelError(f"transposed convolution: input with {C} channels, weight {list(w.shape)} and "
                          f"groups={groups} do not fit")
    k, in_sp = w.shape[2:], xq.shape[2:]
    full = tuple((i - 1) * s + d * (kk - 1) + 1 + op
                 for i, s, d, kk, op in zip(in_sp, stride, dilation, k, output_padding))
    out_sp = tuple(f - 2 * p for f, p in zip(full, padding))
    if any(o <= 0 for o in out_sp):
        raise KernelError(f"transposed convolution: output size {out_sp} is too small")
    _, w_zps = weight_params_transposed(w)
    x = xq.astype(np.float64) - float(x_zp)
    wi = ints(w).astype(np.float64) - w_zps
    cg = C // groups
    acc = np.zeros((N, og * groups) + full, np.float64)
    for idx in np.ndindex(*k):
        window = tuple(slice(i * d, i * d + (n - 1) * s + 1, s) for i, d, n, s in zip(idx, dilation, in_sp, stride))
        for g in range(groups):
            part = np.tensordot(x[:, g * cg:(g + 1) * cg], wi[(slice(g * cg, (g + 1) * cg), slice(None)) + idx],
                                axes=([1], [0]))              # (N, *in, og): exact, far below 2^53
            acc[(slice(None), slice(g * og, (g + 1) * og)) + window] += np.moveaxis(part, -1, 1)
    return acc[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(padding, out_sp))]


def weight_params_transposed(w) -> tuple[np.ndarray, float]:
    """(scale per output channel, zero point) of a transposed convolution's per-tensor weight."""
    q = w.qparams
    if q.axis is not None:
        raise KernelError("a transposed convolution's weight quantized per channel is not supported "
                          "(torch quantizes it per tensor)")
    return F32(q.scale), float(q.zero_point)


def qconv_transpose_out(qx, weight, bias, stride, padding, output_padding, dilation, groups, output_scale,
                        output_zero_point, arith="fbgemm", *, out=None):
    """``quantized::conv_transpose2d`` with its packed weight unpacked: exact integer accumulators
    (:func:`conv_transpose_acc`), then fbgemm's requantization (the importer refuses weights packed
    for oneDNN, whose deconvolution torch computes otherwise)."""
    op = "quantized::qconv_transpose"
    if check_arith(arith, op) == "onednn":
        raise KernelError(f"{op}: oneDNN's transposed convolution is not reproduced (quantize with fbgemm)")
    require_per_tensor(qx, op)
    require_quantized(weight, op, "weight")
    if qx.ndim != weight.ndim:
        raise KernelError(f"{op}: expects a {weight.ndim}-D input (N, C, ...), got shape {list(qx.shape)}")
    q = output_qparams(qx.qdtype, output_scale, output_zero_point, op)
    acc = conv_transpose_acc(ints(qx), qx.qparams.zero_point, weight, stride, padding, output_padding, dilation,
                             int(groups))
    cout = acc.shape[1]
    w_scales = np.full(cout, weight_params_transposed(weight)[0], F32)
    res = buffer(out, acc.shape, qx.qdtype)
    if arith == "qnnpack":
        w64 = np.full(cout, float(weight.qparams.scale))
        qnnpack.requantize(acc, qx.qparams.scale, w_scales, w64, bias, q.scale, q.zero_point, qx.qdtype, False, res,
                           axis=1)
    else:
        requantize(acc, qx.qparams.scale, w_scales, bias, q.scale, q.zero_point, qx.qdtype, False, res, axis=1)
    return wrap(res, qx.qdtype, q)


def weight_scales64(w) -> np.ndarray:
    """The weight's scales per output channel (axis 0) as torch holds them: double."""
    q = w.qparams
    return np.full(w.shape[0], float(q.scale)) if q.axis is None else np.asarray(q.scale, np.float64)
