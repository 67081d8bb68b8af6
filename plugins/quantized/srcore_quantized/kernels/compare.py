"""Comparisons of quantized tensors (``aten::eq``, ``ne``, ``lt``, ``le``, ``gt``, ``ge``; ``.Scalar``
and ``.Tensor``): torch dequantizes (per tensor or per channel) and compares the float32 values
(``TensorOperators.cpp``); the result is a bool tensor. A float ``other`` is compared as it is."""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError, QuantizedArray

from .convert import dequantize_out

F32 = np.float32

_FNS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal}


def _real(x):
    return dequantize_out(x) if isinstance(x, QuantizedArray) else np.asarray(x)


def _compare(name: str, self, other, out):
    fn = _FNS[name]
    a = _real(self)
    if isinstance(other, np.ndarray) and other.ndim > 0 or isinstance(other, QuantizedArray):
        b = _real(other)
    else:   # a Scalar (or a 0-dim tensor): compared in the float32 tensor's type, as torch promotes
        b = F32(float(np.asarray(other)))
    try:
        shape = np.broadcast_shapes(a.shape, np.shape(b))
    except ValueError:
        raise KernelError(f"aten::{name}: shapes {list(a.shape)} and {list(np.shape(b))} do not broadcast") from None
    if out is None:
        return fn(a, b)
    if out.shape != shape or out.dtype != np.bool_:
        raise KernelError(f"aten::{name}: output buffer {out.dtype}{list(out.shape)} does not fit a bool{list(shape)} result")
    fn(a, b, out=out)
    return out


def _make(name: str):
    def kernel(self, other, *, out=None):
        return _compare(name, self, other, out)

    kernel.__name__ = f"{name}_out"
    kernel.__doc__ = f"aten::{name} of a quantized tensor: its dequantized float32 values compared."
    return kernel


eq_out, ne_out, lt_out, le_out, gt_out, ge_out = (_make(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))


def equal(self, other) -> bool:
    """``aten::equal`` of a quantized ``self``: torch's ``equal_quantized_cpu``, True only for a quantized
    ``other`` of the same dtype, shape, scheme and parameters (per tensor or per channel) holding the
    same stored integers; a float ``other`` is never equal."""
    if not isinstance(self, QuantizedArray) or not isinstance(other, QuantizedArray):
        return False
    if self.qdtype != other.qdtype or self.shape != other.shape or self.qparams != other.qparams:
        return False
    return bool(np.array_equal(self.view(np.ndarray), other.view(np.ndarray)))
