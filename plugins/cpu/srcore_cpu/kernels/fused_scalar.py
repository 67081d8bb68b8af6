"""srcore:: fused ops that end in a Python scalar (declared in ``srcore/ops/srcore.yaml``)."""
from __future__ import annotations

import numpy as np

_add_reduce = np.add.reduce  # what np.sum calls for axis=None, without its Python wrapper (~1 us less)


def sum_gt(self, other):
    """``srcore::sum_gt``: ``bool(sum(self) > other)``, the sum in ``self``'s dtype as ``aten::sum`` does
    (one call instead of sum, gt and Bool)."""
    return bool(_add_reduce(self, None) > other)
