"""``F.affine_grid``'s base grid, shared by the backends (``srcore.plugin.affine_grid``: the cpu
plugin's ``affine_grid_generator`` and trt_like's, a constant times ``theta`` transposed); numpy only."""
from __future__ import annotations

import numpy as np


def base_grid(h: int, w: int, align_corners: bool) -> np.ndarray:
    """``F.affine_grid``'s (h, w, 3) float64 base: ``[x, y, 1]`` at every pixel centre (``align_corners``:
    the corner pixels) in [-1, 1]; the grid is this times ``theta`` transposed."""
    def axis(size):
        if size <= 1:
            return np.zeros(max(size, 0))
        s = np.linspace(-1.0, 1.0, size)
        return s if align_corners else s * (size - 1) / size

    base = np.empty((h, w, 3))
    base[..., 0] = axis(w)[None, :]
    base[..., 1] = axis(h)[:, None]
    base[..., 2] = 1.0
    return base
