"""srcore:: fused linear + elementwise ops (declared in ``srcore/ops/srcore.yaml``): the activation runs in
place on ``out``."""
from __future__ import annotations

import numpy as np

from . import linalg as _linalg
from .fused import _linear_act_matcher


def _tanh_(out):
    return np.tanh(out, out=out)


def _sigmoid_(out):
    from scipy.special import expit  # what aten::sigmoid uses: the fused op gives the same values

    return expit(out, out=out)


def linear_tanh(input, weight, bias=None, out=None):
    """``srcore::linear_tanh``."""
    return _tanh_(_linalg.linear(input, weight, bias, out=out))


def linear_sigmoid(input, weight, bias=None, out=None):
    """``srcore::linear_sigmoid``."""
    return _sigmoid_(_linalg.linear(input, weight, bias, out=out))


linear_tanh_matcher = _linear_act_matcher(_tanh_, linear_tanh)
linear_sigmoid_matcher = _linear_act_matcher(_sigmoid_, linear_sigmoid)
