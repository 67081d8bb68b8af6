"""``pointwise_sgemm``: a 1x1 conv writing NCHW as the packed-panel SGEMM's tiles (``kernels/sgemm.py``):
per image ``out (O, H*W) = W (O, C) @ X (C, H*W)``, the weight's rows packed once (6 output channels a
tile, broadcast), the input's planes the panels (16 pixels, two 8-lane vectors), copied per call into
rows of a pitch that keeps them apart in L1 (an NCHW16c input unblocked by 8x8 register transposes on
the way), bias and relu / relu6 in the stores. MLAS's SGEMM tile on a conv whose NCHW output the NCHW16c
1x1 kernels write through 16x16 transposes (detection_head's 64 -> 75 head at 32x32: 328 us on
``pointwise_nchw16c_h8``, ~155 us here, AMD EPYC, loaded). One thread; timed beside the others."""
from __future__ import annotations

import math

import numpy as np

from ..errors import TacticSpecError
from ..kernels import sgemm
from ..kernels.scratch import SCRATCH
from .spec import ConvSpec, ConvTactic

LANES = 8


class PointwiseSgemmTactic(ConvTactic):
    """1x1, stride 1, unpadded, ungrouped, no residual, NCHW out; NCHW or NCHW16c in (``blocked_in``)."""
    name = "pointwise_sgemm"
    fused_activations = ("relu6",)

    def __init__(self, spec: ConvSpec, weight, bias, blocked_in: bool, layout=None):
        super().__init__(spec, weight, bias, layout)
        if spec.kernel != (1, 1) or spec.stride != (1, 1) or spec.padding != (0, 0) or spec.groups != 1 \
                or spec.residual or len(spec.x_shape) != 4:
            raise TacticSpecError(f"{self.name}: needs a 2-D 1x1, stride 1, unpadded, ungrouped conv without a "
                                  f"residual; got kernel {spec.kernel}, stride {spec.stride}, padding {spec.padding}, "
                                  f"groups {spec.groups}, residual {spec.residual}")
        O, C = spec.out_channels, spec.x_shape[1]
        self.wa = self._laid_out("wa", (O * C,), lambda: sgemm.pack_weight_rows(
            np.asarray(weight, np.float32).reshape(O, C)))
        self.lo, self.hi = clamp(spec)
        self.blocked_in = bool(blocked_in)
        self.x_shape = blocked_shape(spec.x_shape) if blocked_in else spec.x_shape
        self.out_shape = spec.out_shape
        self.tag = sgemm.width_tag(LANES)
        _, _, H, W = spec.x_shape
        self._dims = (O, H * W, C, sgemm.plane_pitch(H * W, LANES))

    def _run(self, x, out, residual):
        O, HW, C, ld = self._dims
        xb = SCRATCH.get("sgemm_planes", (C * ld,))
        for n in range(x.shape[0]):
            sgemm.conv1x1_planes(self.wa, x[n].reshape(-1), xb, out[n].reshape(-1), O, HW, C, self.blocked_in,
                                 LANES, self.tag, self.bias, self.lo, self.hi)


def blocked_shape(shape) -> tuple[int, ...]:
    """The NCHW16c shape of NCHW ``shape``."""
    N, C, H, W = shape
    return (N, -(-C // 16), H, W, 16)


def clamp(spec: ConvSpec) -> tuple[np.float32, np.float32]:
    """``(lo, hi)`` of relu / relu6 (else infinities), fused into the stores."""
    return (np.float32(0.0 if spec.relu or spec.activation == "relu6" else -math.inf),
            np.float32(6.0 if spec.activation == "relu6" else math.inf))
