"""The example's kernels: out variants write into the buffer the memory planner hands them."""
from __future__ import annotations

import numpy as np


def scaled_tanh_out(self, *, scale=1.0, out=None):
    out = np.tanh(self, out=out)
    return np.multiply(out, scale, out=out)


def relu_out(self, *, out=None):
    return np.maximum(self, 0.0, out=out)
