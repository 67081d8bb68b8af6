"""srcore:: fused ops (declared in ``srcore/ops/srcore.yaml``): linear + activation and add + relu
(conv2d + relu and conv2d + add + relu are in :mod:`.fused_conv`, so that a model without
convolutions does not import them). Each applies its activation in place on ``out``, so the fused
node writes one buffer instead of two."""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import NodeInfo

from . import linalg as _linalg

# activation_fast (GELU's erf form) and pointwise_match (the compiled SiLU/GELU passes) are imported where
# used: a model with only linear+relu (digits) does not load them (~0.4 ms of a cold start)


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
        from . import activation_fast as _act_fast

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
    (never None: a declining matcher makes dispatch skip the kernel). SiLU and GELU on a large
    float32 output run as one compiled pass (:func:`.pointwise_match.compiled_inplace`): their
    numpy forms take several passes and cost up to a third of the linear's GEMM."""
    def matcher(node: NodeInfo):
        if not (node.is_const("weight") and node.is_const("bias")):
            return generic
        if act is _silu_ or act is _gelu_:
            from .pointwise_match import compiled_inplace
        out_type = node.output_types[0] if node.output_types else None
        if act is _silu_:
            return _linalg._linear_fast(node, compiled_inplace("aten::silu", out_type) or act) or generic
        if act is not _gelu_:
            return _linalg._linear_fast(node, act) or generic
        if not node.is_const("approximate"):
            return generic
        approximate = node.const("approximate")
        compiled = None
        if approximate in ("none", "tanh"):   # anything else: the numpy form raises torch's error
            compiled = compiled_inplace(f"gelu:{approximate}", out_type, approximate=approximate)
        return _linalg._linear_fast(node, compiled or (lambda out: _gelu_(out, approximate))) or generic
    return matcher


linear_relu_matcher = _linear_act_matcher(_relu_, linear_relu)
linear_silu_matcher = _linear_act_matcher(_silu_, linear_silu)
linear_gelu_matcher = _linear_act_matcher(_gelu_, linear_gelu)


def add_relu(self, other, *, alpha=1, out=None):
    """``srcore::add_relu``: relu(self + alpha * other)."""
    if alpha != 1:
        other = np.multiply(other, alpha)
    out = np.add(self, other, out=out)
    return _relu_(out)


#: the conv fusions, still reachable as attributes of this module (imported on first use)
_CONV_FUSIONS = frozenset({"conv2d_relu", "conv2d_add_relu", "conv2d_relu_matcher", "conv2d_add_relu_matcher"})


def __getattr__(name: str):
    if name in _CONV_FUSIONS:
        from . import fused_conv

        return getattr(fused_conv, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
