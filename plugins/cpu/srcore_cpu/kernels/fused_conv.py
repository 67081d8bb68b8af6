"""srcore:: fused convolutions (declared in ``srcore/ops/srcore.yaml``): conv2d + relu and
conv2d + add + relu, the activation applied in place on ``out``."""
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


def _const_conv(node: NodeInfo):
    names = ("weight", "bias", "stride", "padding", "dilation", "groups")
    if not all(node.is_const(n) for n in names) or not isinstance(node.const("weight"), np.ndarray):
        return None
    # the input's static shape lets the conv pick its algorithm and transform its weight at load
    return _conv.make_conv(2, *(node.const(n) for n in names), input_shape=_conv.static_input_shape(node))


def conv2d_relu_matcher(node: NodeInfo):
    """Constant weights and hyper-parameters: a workspace-owning conv, then relu in place; else the
    generic kernel (never None: a declining matcher makes dispatch skip the kernel)."""
    conv = _const_conv(node)
    if conv is None:
        return conv2d_relu

    def conv2d_relu_const(input, out=None):
        return _relu_(conv(input, out=out))
    return Specialized(conv2d_relu_const, args=(0,))


def conv2d_add_relu_matcher(node: NodeInfo):
    """Like :func:`conv2d_relu_matcher`, adding ``other`` before the relu."""
    conv = _const_conv(node)
    if conv is None:
        return conv2d_add_relu

    def conv2d_add_relu_const(input, other, out=None):
        out = conv(input, out=out)
        np.add(out, other, out=out)
        return _relu_(out)
    return Specialized(conv2d_add_relu_const, args=(0, 3))
