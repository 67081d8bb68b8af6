"""``aten::embedding``: a row gather (padding_idx only matters for training)."""
from __future__ import annotations

import numpy as np


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False, out=None):
    """Rows of ``weight`` picked by ``indices``: shape ``indices.shape + weight.shape[1:]``."""
    if out is None:
        return np.take(weight, indices, axis=0)
    return np.take(weight, indices, axis=0, out=out)
