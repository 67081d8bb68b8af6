"""``dense_tile_nchw16c``: a dense conv from NCHW into NCHW16c (a stem: few input channels) on the SGEMM's
6 x 16 register tile (``kernels/dense_tile.py``): 6 output pixels x one 16-channel block, each input
value broadcast once for both 8-lane halves. One thread; timed beside ``dense_nchw16c`` and its 8-lane twin."""
from __future__ import annotations

import numpy as np

from ..errors import TacticSpecError
from ..kernels import dense_tile
from ..kernels.scratch import SCRATCH
from ..kernels.sgemm import width_tag
from .pointwise_sgemm import blocked_shape, clamp
from .spec import ConvSpec, ConvTactic

LANES = 8


class DenseTileTactic(ConvTactic):
    """An ungrouped 2-D conv without residual, NCHW in, NCHW16c out; the weight packed once as (output
    blocks, taps, 16) (stored as ``wq``)."""
    name = "dense_tile_nchw16c"
    fused_activations = ("leaky_relu", "relu6")

    def __init__(self, spec: ConvSpec, weight, bias, layout=None):
        super().__init__(spec, weight, bias, layout)
        if spec.groups != 1 or spec.residual or len(spec.x_shape) != 4:
            raise TacticSpecError(f"{self.name}: needs an ungrouped 2-D conv without residual; got groups "
                                  f"{spec.groups}, residual {spec.residual}, input {spec.x_shape}")
        O, C, KH, KW = spec.weight_shape
        OB = -(-O // 16)
        self.wq = self._laid_out("wq", (OB * C * KH * KW * 16,), lambda: _pack(np.asarray(weight, np.float32), OB))
        self.bq = np.zeros(OB * 16, np.float32)
        self.bq[:O] = self.bias
        _, _, H, W = spec.x_shape
        (pt, pl), (sh, sw), (dh, dw) = spec.padding, spec.stride, spec.dilation
        _, _, Ho, Wo = spec.out_shape
        # the padded copy holds every row and column a tap reads
        Hp, Wp = max(H + 2 * pt, (Ho - 1) * sh + (KH - 1) * dh + 1), max(W + 2 * pl, (Wo - 1) * sw + (KW - 1) * dw + 1)
        self.taps = np.array([c * Hp * Wp + ky * dh * Wp + kx * dw for c in range(C) for ky in range(KH)
                              for kx in range(KW)], np.int64)
        self.lo, self.hi = clamp(spec)
        self.leaky = spec.activation == "leaky_relu"
        self.slope = np.float32(spec.negative_slope if self.leaky else 0.0)
        self.out_shape = blocked_shape(spec.out_shape)
        self._geom = (C, H, W, pt, pl, Hp, Wp, sh, sw, Ho, Wo, OB)
        self.tag = width_tag(LANES)

    def _run(self, x, out, residual):
        C, H, W, pt, pl, Hp, Wp, sh, sw, Ho, Wo, OB = self._geom
        xp = SCRATCH.get("dense_tile_pad", (C * Hp * Wp,))
        for n in range(x.shape[0]):
            dense_tile.dense_rows(x[n].reshape(-1), xp, self.wq, self.taps, out[n].reshape(-1), C, H, W, pt, pl,
                                  Hp, Wp, sh, sw, Ho, Wo, OB, self.bq, self.lo, self.hi, self.slope, self.leaky, LANES,
                                  self.tag)


def _pack(w: np.ndarray, OB: int) -> np.ndarray:
    O = w.shape[0]
    wp = np.zeros((OB * 16, w[0].size), np.float32)
    wp[:O] = w.reshape(O, -1)
    return np.ascontiguousarray(wp.reshape(OB, 16, -1).transpose(0, 2, 1)).reshape(-1)
