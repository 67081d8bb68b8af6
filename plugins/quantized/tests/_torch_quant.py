"""Shared by the quantized tests: a torch quantized tensor as srcore's QuantizedArray."""
from __future__ import annotations

import torch

from srcore.ir import QParams
from srcore.qarray import QuantizedArray


def srq(t) -> QuantizedArray:
    """A torch quantized tensor as a QuantizedArray (stored integers and parameters, per tensor or channel)."""
    qdtype = {torch.quint8: "quint8", torch.qint8: "qint8", torch.qint32: "qint32"}[t.dtype]
    if t.qscheme() == torch.per_tensor_affine:
        q = QParams(t.q_scale(), t.q_zero_point())
    else:
        q = QParams(tuple(t.q_per_channel_scales().tolist()), tuple(t.q_per_channel_zero_points().tolist()),
                    t.q_per_channel_axis())
    return QuantizedArray(t.int_repr().numpy(), qdtype, q)
