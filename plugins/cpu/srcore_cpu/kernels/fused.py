"""srcore:: fused ops (declared in ``srcore/ops/srcore.yaml``): linear + activation,
conv2d + relu, conv2d + add + relu, add + relu. Each applies its activation in place
on ``out``, so the fused node writes one buffer instead of two."""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import NodeInfo, Specialized

from . import activation_fast as _act_fast
from . import conv as _conv
from . import linalg as _linalg


_relu_ = _linalg.relu_


def _silu_(out):
    from scipy.special import expit
    t = expit(out)
    return np.multiply(out, t, out=out)


def _gelu_(out, approximate="none"):
    if approximate == "tanh":
        inner = out * out
        inner *= 0.044715 * out
        inner += out
        inner *= math.sqrt(2.0 / math.pi)
        np.tanh(inner, out=inner)
        inner += 1.0
        inner *= 0.5
    elif approximate == "none":
        return _act_fast.gelu_erf_(out)
    else:
        raise KernelError(f"gelu: approximate must be 'none' or 'tanh', not {approximate!r}")
    return np.multiply(out, inner, out=out)


def linear_relu(input, weight, bias=None, out=None):
    """``srcore::linear_relu``."""
    return _relu_(_linalg.linear(input, weight, bias, out=out))


def linear_silu(input, weight, bias=None, out=None):
    """``srcore::linear_silu``."""
    return _silu_(_linalg.linear(input, weight, bias, out=out))


def linear_gelu(input, weight, bias=None, approximate="none", out=None):
    """``srcore::linear_gelu``."""
    return _gelu_(_linalg.linear(input, weight, bias, out=out), approximate)


def _linear_act_matcher(act, generic):
    """Constant weights: the pre-transposed linear with ``act`` applied in place; else ``generic``
    (never None: a declining matcher makes dispatch skip the kernel)."""
    def matcher(node: NodeInfo):
        if act is not _gelu_:
            return _linalg._linear_fast(node, act) or generic
        if not node.is_const("approximate"):
            return generic
        approximate = node.const("approximate")
        return _linalg._linear_fast(node, lambda out: _gelu_(out, approximate)) or generic
    return matcher


linear_relu_matcher = _linear_act_matcher(_relu_, linear_relu)
linear_silu_matcher = _linear_act_matcher(_silu_, linear_silu)
linear_gelu_matcher = _linear_act_matcher(_gelu_, linear_gelu)


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


def add_relu(self, other, *, alpha=1, out=None):
    """``srcore::add_relu``: relu(self + alpha * other)."""
    if alpha != 1:
        other = np.multiply(other, alpha)
    out = np.add(self, other, out=out)
    return _relu_(out)
