"""The patchify tactics: a conv whose kernel equals its stride, unpadded, undilated, ungrouped
(ConvNeXt's 4x4/4 stem, ViT's and Swin's patch embeddings) reads every input pixel once, so its
im2col is a reshape: one GEMM row per output pixel, a patch row's ``kw`` pixels a contiguous run.

* ``patchify_gemm``: per image, the patches gathered as (Ho * Wo, C * kh * kw) rows (numba), one GEMM
  against the weight with the patches operand transposed (BLAS reads it so; the output stays NCHW),
  then the epilogue;
* ``patchify_direct``: the whole layer in one compiled call, each output pixel's channels in a vector
  (small layers, where the calls of a gather + GEMM + epilogue are most of the time);
* ``patchify_dots``: one compiled call too, the gathered patches against the weight as dot products
  vectorised along C * kh * kw (ViT's 16x16 patches: 768 long, 16 pixels and 32 channels), where
  ``patchify_direct`` has one vector of pixels per FMA.

Offered beside the general tactics and chosen by timing (``tactics.py``).
"""
from __future__ import annotations

import numpy as np

from ..errors import TacticSpecError
from ..kernels import patchify as _k
from ..kernels.conv import epilogue
from ..kernels.scratch import SCRATCH
from ..kernels.simd import LANES
from .gemm import _GemmEpilogue
from .spec import ConvSpec, ConvTactic


def patchify_applies(spec: ConvSpec) -> bool:
    """Whether ``spec`` is a non-overlapping patch conv (kernel == stride > 1, no padding, dilation or groups)."""
    return (spec.kernel == spec.stride and spec.kernel != (1, 1) and spec.padding == (0, 0)
            and spec.dilation == (1, 1) and spec.groups == 1)


class _Patchify(_GemmEpilogue, ConvTactic):
    def __init__(self, spec: ConvSpec, weight, bias, layout=None):
        if not patchify_applies(spec):
            raise TacticSpecError(f"{self.name}: needs kernel == stride, padding 0, dilation 1 and groups 1; got "
                                  f"kernel {spec.kernel}, stride {spec.stride}, padding {spec.padding}, "
                                  f"dilation {spec.dilation}, groups {spec.groups}")
        super().__init__(spec, weight, bias, layout)
        self._init_activation(spec)
        O = spec.out_channels   # the weight as (O, C * kh * kw) rows, both tactics' operand
        self.w = self._laid_out("w", (O, int(np.prod(spec.weight_shape[1:]))), lambda: np.ascontiguousarray(
            np.asarray(weight, np.float32).reshape(O, -1)))


class PatchifyGemmTactic(_Patchify):
    """Gather each image's patches as GEMM rows, then ``out[n] = W @ patches.T`` and the epilogue."""
    name = "patchify_gemm"
    uses_blas = True

    def _run(self, x, out, residual):
        s = self.spec
        N, O, Ho, Wo = self.out_shape
        kh, kw = s.kernel
        out3 = out.reshape(N, O, Ho * Wo)
        res3 = out3 if residual is None else residual.reshape(N, O, Ho * Wo)
        patches = SCRATCH.get("cols", (Ho * Wo, self.w.shape[1]))
        for n in range(N):
            _k.gather(x, n, kh, kw, Ho, Wo, patches)
            np.matmul(self.w, patches.T, out=out3[n])
            epilogue(out3, res3, residual is not None, self.bias, s.relu, self.act, self.slope, n, 0, Ho * Wo, 0, O)


class PatchifyDirectTactic(_Patchify):
    """The whole layer in one compiled call (:func:`..kernels.patchify.direct`)."""
    name = "patchify_direct"

    def _run(self, x, out, residual):
        s = self.spec
        cols = SCRATCH.get("cols", (self.w.shape[1], self.out_shape[2] * self.out_shape[3]))
        _k.direct(x, self.w, self.bias, out if residual is None else residual, residual is not None, s.relu,
                  self.act, self.slope, *s.kernel, cols, out)


class PatchifyDotsTactic(_Patchify):
    """The whole layer in one compiled call (:func:`..kernels.patchify.conv_dots`); the weight
    zero-padded to a multiple of 16 columns."""
    name = "patchify_dots"

    def __init__(self, spec: ConvSpec, weight, bias, layout=None):
        super().__init__(spec, weight, bias, layout)
        K = self.w.shape[1]
        self.wp = np.zeros((self.w.shape[0], -(-K // LANES) * LANES), np.float32)
        self.wp[:, :K] = self.w

    def _run(self, x, out, residual):
        s = self.spec
        patches = SCRATCH.get("cols", (self.out_shape[2] * self.out_shape[3], self.wp.shape[1]))
        tile = SCRATCH.get("patchify_tile", (LANES * LANES,))
        _k.conv_dots(x, self.wp, self.bias, out if residual is None else residual, residual is not None,
                         s.relu, self.act, self.slope, *s.kernel, patches, tile, out)
