"""``grouped_depthwise``: a grouped conv with few channels per group (``k = in / groups = out / groups``,
2 to 8: ResNeXt's and RegNet's 3x3s) as ``k`` passes of the channel-blocked depthwise kernel, timed
against the direct and im2col tactics (which run a group's ``k`` output channels in a 6- or 16-wide
register block, or one small GEMM per group). Kernel alone, CPU time, Sapphire Rapids: 2x64x8x8,
32 groups, 3x3 stride 2: 23 us against im2col_gemm's 41 and simd_direct's 47-61; at 4 channels
per group and more the direct kernels win (2x32x8x8 in 8 groups: 44 against simd_direct_8's 18).
(The pixel-vector depthwise kernel as the passes' was slower on all four shapes tried.)

Output channel ``o = g * k + i`` reads input channels ``g * k + (i + s) % k`` in pass ``s`` (a rotation
inside each group, so every pass is a one-to-one channel map): pass 0 is a depthwise conv of the input
itself, pass ``s > 0`` of its rotated copy, each with weights ``weight[o, (i + s) % k]``. The first pass
adds the bias (and the layer's residual), the later ones add the output so far (as their residual,
in place), the last applies relu; another activation is one pass after (:class:`.spec.ConvTactic`).
"""
from __future__ import annotations

import attrs
import numpy as np

from ..errors import TacticSpecError
from .depthwise import DepthwiseBlockedTactic
from .spec import ConvSpec, ConvTactic

#: channels per group the tactic is offered for (k passes cost k depthwise convs and k - 1 copies)
MAX_GROUP_CHANNELS = 8


def grouped_depthwise_applies(spec: ConvSpec) -> bool:
    k = spec.x_shape[1] // spec.groups
    return spec.groups > 1 and 2 <= k <= MAX_GROUP_CHANNELS and spec.out_channels == spec.x_shape[1]


class GroupedDepthwiseTactic(ConvTactic):
    """:func:`grouped_depthwise_applies` convs as ``k`` depthwise passes of ``pass_tactic`` (module doc);
    the passes' weights laid out as ``(k, O, 1, kh, kw)`` (stored as ``w``)."""
    name = "grouped_depthwise"
    pass_tactic = DepthwiseBlockedTactic

    def __init__(self, spec: ConvSpec, weight, bias, layout=None):
        super().__init__(spec, weight, bias, layout)
        if not grouped_depthwise_applies(spec):
            raise TacticSpecError(f"{self.name}: needs 2 to {MAX_GROUP_CHANNELS} channels per group and out channels "
                                  f"== in channels, got {spec.x_shape[1]} -> {spec.out_channels} in {spec.groups} "
                                  "groups")
        C = spec.x_shape[1]
        k = C // spec.groups
        o = np.arange(C)
        g, i = o // k, o % k
        #: per pass s: the input channel each output channel reads (a rotation inside its group)
        self.index = [g * k + (i + s) % k for s in range(k)]
        self.w = self._laid_out("w", (k, C, 1, *spec.kernel), lambda: np.ascontiguousarray(np.stack(
            [np.asarray(weight, np.float32)[o, (i + s) % k][:, None] for s in range(k)])))
        zero = np.zeros(C, np.float32)
        self.passes = []
        for s in range(k):
            sub = attrs.evolve(spec, groups=C, relu=spec.relu and s == k - 1, residual=s > 0 or spec.residual,
                               activation="none")
            self.passes.append(self.pass_tactic(sub, self.w[s], self.bias if s == 0 else zero))
        self.rotated = np.empty(spec.x_shape, np.float32)

    def _run(self, x, out, residual):
        self.passes[0]._run(x, out, residual)
        for s in range(1, len(self.passes)):
            np.take(x, self.index[s], axis=1, out=self.rotated)
            self.passes[s]._run(self.rotated, out, out)

