"""The ``depthwise_direct`` conv tactic: groups == in channels, a direct numba loop per output row."""
from __future__ import annotations

import numpy as np

from ..errors import TacticSpecError
from ..kernels import conv as _k
from .spec import ConvSpec, ConvTactic


class DepthwiseDirectTactic(ConvTactic):
    """groups == in channels (out channels a multiple of them): a direct numba loop, one
    multiply-add pass per tap over each output row, the epilogue on the row."""
    name = "depthwise_direct"

    def __init__(self, spec: ConvSpec, weight, bias, layout=None):
        super().__init__(spec, weight, bias, layout)
        if spec.groups != spec.x_shape[1]:
            raise TacticSpecError(f"depthwise_direct: needs groups == in channels ({spec.x_shape[1]}), "
                                  f"got groups {spec.groups}")
        shape = (spec.out_channels, *spec.kernel)
        self.w = self._laid_out("w", shape, lambda: np.ascontiguousarray(
            np.asarray(weight, np.float32).reshape(shape)))

    def _run(self, x, out, residual):
        s = self.spec
        res = out if residual is None else residual
        _k.depthwise(x, self.w, self.bias, res, residual is not None, s.relu, out, s.stride[0], s.stride[1],
                     s.padding[0], s.padding[1], s.dilation[0], s.dilation[1], 0, s.out_channels)
