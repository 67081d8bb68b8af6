"""The projection layer every converter of a linear map uses (``linear``, attention's projections,
the RNN cells'): its own module, so that :mod:`.cells` needs nothing of :mod:`.converters`."""
from __future__ import annotations

import numpy as np

from .nodes import Converter


def linear_layer(c: Converter, x: int, weight, bias, out_shape, source: str, act: str = "none") -> int:
    """``act(x @ weight.T + bias)`` over the last dim of ``x``, ``weight`` (N, K) constant: a ``gemm``
    layer, then the bias add and the activation as pointwise layers (fusion makes them one
    epilogue kernel, with whatever pointwise work follows)."""
    y = c.net.add("gemm", [x], out_shape, source, weight=np.asarray(weight, np.float32))
    if bias is not None:
        b = c.net.constant(np.ascontiguousarray(bias, np.float32))
        y = c.net.add("pointwise", [y, b], out_shape, source, op="add", args=(("in", 0), ("in", 1)), params={})
    if act != "none":
        y = c.net.add("pointwise", [y], out_shape, source, op=act, args=(("in", 0),), params={})
    return y
