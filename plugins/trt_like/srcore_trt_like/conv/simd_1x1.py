"""``pointwise_simd``: a 1x1, stride-1, unpadded, ungrouped conv on srcore's explicit-SIMD 1x1
kernel (``srcore.plugin.simd_pointwise``: 6 output channels x 4 vectors of pixels in registers,
reading the NCHW input in place, bias/residual/relu/hardswish/hardsigmoid in its stores), at the
CPU's widest vectors; ``pointwise_simd8`` the same at 8 lanes where that is 16. It beats one BLAS
GEMM plus the epilogue pass on a mobile net's small planes (no packing, one pass over the output);
the builder times them beside ``gemm_1x1`` on the real shape."""
from __future__ import annotations

import math

import numpy as np

from ..errors import TacticSpecError
from .spec import ConvSpec, ConvTactic


def simd_1x1_applies(spec: ConvSpec) -> bool:
    return spec.kernel == (1, 1) and spec.padding == (0, 0) and spec.groups == 1 and spec.stride == (1, 1)


class Simd1x1Tactic(ConvTactic):
    """1x1, stride 1, no padding, groups 1; the weight packed once into the kernel's
    (blocks, C, 6) layout (stored as ``wp``), output-channel blocks split over ``threads``."""
    name = "pointwise_simd"
    bound_run = True
    fused_activations = ("hardswish", "hardsigmoid", "relu6")
    #: the vector width (None: the CPU's widest)
    lanes: int | None = None

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 1):
        super().__init__(spec, weight, bias, layout)
        if not simd_1x1_applies(spec):
            raise TacticSpecError(f"pointwise_simd: needs a 1x1 kernel, stride 1, padding 0 and groups 1; got "
                                  f"kernel {spec.kernel}, stride {spec.stride}, padding {spec.padding}, "
                                  f"groups {spec.groups}")
        from srcore.plugin import simd_pointwise

        O, C = spec.out_channels, spec.x_shape[1]
        w = np.asarray(weight, np.float32).reshape(O, C)
        self.conv = simd_pointwise.SimdPointwiseConv(
            w, self.bias, lo=0.0 if spec.relu or spec.activation == "relu6" else -math.inf,
            hi=6.0 if spec.activation == "relu6" else math.inf, lanes_=self.lanes,
            activation=spec.activation if spec.activation in ("hardswish", "hardsigmoid") else None)
        self.wp = self._laid_out("wp", self.conv.wp.shape, lambda: self.conv.wp)
        self.conv.wp = self.wp
        self.threads = threads

    def _run(self, x, out, residual):
        self.conv(x, out, residual, threads=self.threads)


class Simd1x1Lanes8Tactic(Simd1x1Tactic):
    """:class:`Simd1x1Tactic` at 8 lanes, offered where the CPU's vectors are 16 (on a CPU whose
    AVX-512 runs on 256-bit units the narrower vectors may win; the timing says)."""
    name = "pointwise_simd8"
    lanes = 8
