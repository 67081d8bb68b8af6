"""``aten::embedding``: a row gather (padding_idx only matters for training)."""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False, out=None):
    """Rows of ``weight`` picked by ``indices``: shape ``indices.shape + weight.shape[1:]``. An index
    outside ``[0, rows)`` is an error, as in torch (numpy would wrap a negative one silently)."""
    n = weight.shape[0] if weight.ndim else 0
    if indices.size:
        lo, hi = int(np.minimum.reduce(indices, axis=None)), int(np.maximum.reduce(indices, axis=None))
        if lo < 0 or hi >= n:
            raise KernelError(f"embedding: index {lo if lo < 0 else hi} is out of range for a weight of "
                              f"{n} rows")
    # checked, so "clip" changes nothing; numpy's default "raise" buffers ``out`` first
    return np.take(weight, indices, axis=0, out=out, mode="clip")
