"""srcore:: fused convolutions (declared in ``srcore/ops/srcore.yaml``): conv2d + relu and
conv2d + add + relu. Where the SIMD direct conv runs a node, the add and relu happen in its store;
else they are applied in place on ``out`` after the conv (split over the intra-op threads where
timing at load says it pays, as ``row_split.py``)."""
from __future__ import annotations

import numpy as np

from srcore.plugin import NodeInfo, Specialized

from . import conv as _conv
from .linalg import relu_ as _relu_


def conv2d_relu(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, out=None):
    """``srcore::conv2d_relu``."""
    return _relu_(_conv.conv2d(input, weight, bias, stride, padding, dilation, groups, out=out))


def conv2d_add_relu(input, weight, bias, other, stride=1, padding=0, dilation=1, groups=1, out=None):
    """``srcore::conv2d_add_relu``: relu(conv2d(...) + other), ``other`` in the 4th position."""
    out = _conv.conv2d(input, weight, bias, stride, padding, dilation, groups, out=out)
    np.add(out, other, out=out)
    return _relu_(out)


def _const_conv(node: NodeInfo, with_add: bool):
    """The constant-weight conv with its epilogue: ``fn(input, out=None, other=None)``; None when the
    weights or hyper-parameters are not constant."""
    names = ("weight", "bias", "stride", "padding", "dilation", "groups")
    if not all(node.is_const(n) for n in names) or not isinstance(node.const("weight"), np.ndarray):
        return None
    # the input's static shape lets the conv pick its algorithm and transform its weight at load;
    # the SIMD direct conv, where chosen, adds and clamps in its own store (no pass after it)
    return _conv.make_conv(2, *(node.const(n) for n in names), input_shape=_conv.static_input_shape(node),
                           epilogue=_epilogue(node, with_add), add=with_add)


def _epilogue(node: NodeInfo, with_add: bool):
    """``fn(out, other=None)``: add ``other`` (when given) and relu, in place on the conv's output;
    at more than one intra-op thread, for a float32 output of static shape large enough
    (``row_split.py``), in blocks of its (sample, channel) planes on the part pool where that
    times faster at load than one thread (each element the same adds and max: the same bits)."""
    def one(out, other=None):
        if other is not None:
            np.add(out, other, out=out)
        return _relu_(out)

    from . import row_split as RS

    t = node.output_types[0] if node.output_types else None
    threads = RS.split_threads_for(t)
    shape = RS.static_shape(t) if threads > 1 else None
    if shape is None or len(shape) < 3 or shape[0] * shape[1] < 2 * threads:
        return one
    rows = shape[0] * shape[1]

    def split(out, other=None):
        if (out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous
                or (other is not None and not (isinstance(other, np.ndarray) and other.shape == shape
                                               and other.dtype == np.float32 and other.flags.c_contiguous))):
            return one(out, other)
        o = out.reshape(rows, -1)
        x = None if other is None else other.reshape(rows, -1)

        def body(lo, hi):
            if x is not None:
                np.add(o[lo:hi], x[lo:hi], out=o[lo:hi])
            np.maximum(o[lo:hi], 0, out=o[lo:hi])
        RS.run_rows(body, rows, threads)
        return out
    args = (RS.sample(shape), RS.sample(shape, 1) if with_add else None)
    return split if RS.split_pays(one, split, args) else one


def conv2d_relu_matcher(node: NodeInfo):
    """Constant weights and hyper-parameters: a workspace-owning conv, then relu in place; else the
    generic kernel (never None: a declining matcher makes dispatch skip the kernel)."""
    conv = _const_conv(node, False)
    if conv is None:
        return conv2d_relu

    def conv2d_relu_const(input, out=None):
        return conv(input, out)
    return Specialized(conv2d_relu_const, args=(0,))


def conv2d_add_relu_matcher(node: NodeInfo):
    """Like :func:`conv2d_relu_matcher`, adding ``other`` before the relu."""
    conv = _const_conv(node, True)
    if conv is None:
        return conv2d_add_relu

    def conv2d_add_relu_const(input, other, out=None):
        return conv(input, out, other)
    return Specialized(conv2d_add_relu_const, args=(0, 3))
