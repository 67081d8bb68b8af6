"""Quantized ops torch runs in float: ``quantized::softmax`` and ``quantized::matmul`` dequantize their
inputs, call the float op (``at::softmax``, ``at::matmul``) and quantize the result per tensor
(``qsoftmax_naive``, ``qmatmul`` without ruy: torch's x86 builds). srcore does the same in numpy
float32; the float op's own rounding (ATen's vector exp, MKL's summation order) is not reproduced,
so an element whose float value lies within float error of a rounding boundary may land one step
off (docs/quantization.md)."""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

from ._common import F32, buffer, dequant_scalar, ints, output_qparams, quant_tensor, require_per_tensor, wrap


def _dequantize(x, op, what="input"):
    require_per_tensor(x, op, what)
    return dequant_scalar(ints(x), x.qparams.scale, x.qparams.zero_point)


def softmax_out(qx, dim, output_scale, output_zero_point, *, out=None):
    """``quantized::softmax``: ``quantize_per_tensor(softmax(dequantize(qx), dim))`` (float32: the row
    maximum subtracted, exp, the sum's reciprocal times each term, as ATen's vector kernel)."""
    op = "quantized::softmax"
    x = _dequantize(qx, op)
    q = output_qparams(qx.qdtype, output_scale, output_zero_point, op)
    d = int(dim)
    if x.ndim == 0:
        y = np.ones_like(x)
    else:
        if not -x.ndim <= d < x.ndim:
            raise KernelError(f"{op}: dim {d} is out of range for a {x.ndim}-D input")
        e = np.exp((x - x.max(axis=d, keepdims=True)).astype(np.float64)).astype(F32)
        s = e.sum(axis=d, keepdims=True, dtype=np.float64).astype(F32)
        y = (e * (F32(1.0) / s)).astype(F32)
    res = buffer(out, qx.shape, qx.qdtype)
    quant_tensor(y, q.scale, q.zero_point, qx.qdtype, out=res)
    return wrap(res, qx.qdtype, q)


def matmul_out(qa, qb, scale, zero_point, *, out=None):
    """``quantized::matmul``: ``quantize_per_tensor(dequantize(qa) @ dequantize(qb))``, torch's checks
    (8-bit, same dtype, per tensor, same rank >= 2, equal batch dims: no broadcasting)."""
    op = "quantized::matmul"
    for t, what in ((qa, "first operand"), (qb, "second operand")):
        require_per_tensor(t, op, what)
        if t.qdtype not in ("quint8", "qint8"):
            raise KernelError(f"{op}: the {what} is {t.qdtype}; operands must be quint8 or qint8")
    if qa.qdtype != qb.qdtype:
        raise KernelError(f"{op}: the operands have different dtypes ({qa.qdtype}, {qb.qdtype})")
    if qa.ndim != qb.ndim or qa.ndim < 2 or qa.shape[:-2] != qb.shape[:-2] or qa.shape[-1] != qb.shape[-2]:
        raise KernelError(f"{op}: shapes {list(qa.shape)} and {list(qb.shape)} do not multiply (same rank >= 2, "
                          f"equal batch dims, inner sizes equal)")
    q = output_qparams(qa.qdtype, scale, zero_point, op)
    y = np.matmul(_dequantize(qa, op), _dequantize(qb, op))
    shape = qa.shape[:-1] + qb.shape[-1:]
    res = buffer(out, shape, qa.qdtype)
    quant_tensor(y, q.scale, q.zero_point, qa.qdtype, out=res)
    return wrap(res, qa.qdtype, q)
