"""The BLAS conv tactics: ``gemm_1x1`` (one GEMM on the input) and ``im2col_gemm`` (numba column
gather with the padding folded in, one GEMM per group and chunk of output rows), each with its
epilogue (bias, residual, relu, the layer's activation) in one pass over the chunk the GEMM just
wrote."""
from __future__ import annotations

import numpy as np

from ..errors import TacticSpecError
from ..kernels import conv as _k
from ..kernels.activation import ACTIVATIONS, CODES
from ..kernels.blas_team import TeamParts, ranges
from ..kernels.scratch import SCRATCH
from .spec import ConvSpec, ConvTactic

# im2col columns are built and multiplied in chunks of output rows of at most this many bytes, so the
# columns stay in L2 between the gather and the GEMM, and the epilogue finds the GEMM's rows in cache
COLS_CAP_BYTES = 1 << 20
# outputs at most this wide gather im2col columns through an index plan (see Im2colGemmTactic),
# when their columns for a whole image fit in this many bytes
PLANNED_MAX_WIDTH = 32
PLANNED_MAX_COLS_BYTES = 8 << 20


class _GemmEpilogue:
    """The GEMM tactics' epilogue applies every conv activation on the rows it has just written."""
    fused_activations = ACTIVATIONS

    def _init_activation(self, spec: ConvSpec):
        self.act = CODES[spec.activation]
        self.slope = np.float32(spec.negative_slope)


class Gemm1x1Tactic(_GemmEpilogue, ConvTactic):
    """1x1 kernel, no padding, groups 1: ``out[n] = W @ x[n]`` (O x C by C x H*W); a strided conv
    first gathers the sampled pixels (numba) into a per-thread buffer."""
    name = "gemm_1x1"
    uses_blas = True

    def __init__(self, spec: ConvSpec, weight, bias, layout=None):
        super().__init__(spec, weight, bias, layout)
        self._init_activation(spec)
        if spec.kernel != (1, 1) or spec.padding != (0, 0) or spec.groups != 1:
            raise TacticSpecError(f"gemm_1x1: needs a 1x1 kernel, padding 0 and groups 1; got kernel "
                                  f"{spec.kernel}, padding {spec.padding}, groups {spec.groups}")
        O, C = spec.out_channels, spec.x_shape[1]
        self.w = self._laid_out("w", (O, C), lambda: np.ascontiguousarray(
            np.asarray(weight, np.float32).reshape(O, -1)))

    def _run(self, x, out, residual):
        s = self.spec
        N, C = s.x_shape[:2]
        _, O, Ho, Wo = self.out_shape
        P = Ho * Wo
        out3 = out.reshape(N, O, P)
        res3 = out3 if residual is None else residual.reshape(N, O, P)
        strided = s.stride != (1, 1)
        xs = SCRATCH.get("cols", (C, P)) if strided else None
        for n in range(N):
            if strided:
                _k.subsample(x, n, s.stride[0], s.stride[1], Ho, Wo, xs, 0, C)
            np.matmul(self.w, xs if strided else x[n].reshape(C, P), out=out3[n])
            _k.epilogue(out3, res3, residual is not None, self.bias, s.relu, self.act, self.slope, n, 0, P, 0, O)


class Im2colGemmTactic(_GemmEpilogue, TeamParts, ConvTactic):
    """Any conv: per image (and chunk of output rows), gather the (C/g * kh * kw, rows * Wo) columns
    with zeros for the padding (numba), one GEMM per group into ``out``, then the epilogue.

    Outputs narrower than :data:`PLANNED_MAX_WIDTH` gather through an index plan built here (one
    indexed load per element, whole image at once): their rows are too short for row copies
    (resnet's 7x7 layer: 0.22 -> 0.06 ms); wider outputs copy tap rows, chunked to
    :data:`COLS_CAP_BYTES` (a 56-wide row copy beats the indexed load 0.32 vs 0.46 ms).
    """
    name = "im2col_gemm"
    uses_blas = True

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, team: int = 1):
        if team > 1:
            if spec.groups != 1:
                raise TacticSpecError(f"im2col_gemm_team: needs groups 1, got {spec.groups}")
            self.name = "im2col_gemm_team"
        super().__init__(spec, weight, bias, layout)
        self._init_activation(spec)
        g, O = spec.groups, spec.out_channels
        kk = spec.x_shape[1] // g * spec.kernel[0] * spec.kernel[1]
        self.w = self._laid_out("w", (g, O // g, kk), lambda: np.ascontiguousarray(
            np.asarray(weight, np.float32).reshape(g, O // g, -1)))
        (_, C, H, W), (kh, kw) = spec.x_shape, spec.kernel
        Ho, Wo = self.out_shape[2:]
        K = C * kh * kw
        self.plan = None
        if Wo <= PLANNED_MAX_WIDTH and 4 * K * Ho * Wo <= PLANNED_MAX_COLS_BYTES:
            self.plan = _k.gather_plan(H, W, kh, kw, *spec.stride, *spec.padding, *spec.dilation, Ho, Wo)
            self.rows = Ho
        else:
            self.rows = max(1, min(Ho, COLS_CAP_BYTES // (4 * K * Wo)))
        self._cparts, self._oparts = ranges(C), ranges(O, quantum=16)
        self._init_team(team)

    def _run(self, x, out, residual):
        s = self.spec
        N, C = s.x_shape[:2]
        _, O, Ho, Wo = self.out_shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw), g = s.kernel, s.stride, s.padding, s.dilation, s.groups
        out3 = out.reshape(N, O, Ho * Wo)
        res3 = out3 if residual is None else residual.reshape(N, O, Ho * Wo)
        outg = out.reshape(N, g, O // g, Ho * Wo)
        K = C * kh * kw
        for n in range(N):
            for ho0 in range(0, Ho, self.rows):
                ho1 = min(Ho, ho0 + self.rows)
                p0, p1 = ho0 * Wo, ho1 * Wo
                if self.plan is not None:
                    cols = SCRATCH.get("cols", (C, kh * kw, p1 - p0))
                    if self.team_threads > 1:
                        self._team_chunk(lambda c0, c1: _k.im2col_planned(x, n, self.plan, cols, c0, c1),
                                         cols, out3, res3, residual is not None, n, p0, p1)
                        continue
                    _k.im2col_planned(x, n, self.plan, cols, 0, C)
                else:
                    cols = SCRATCH.get("cols", (C, kh, kw, p1 - p0))
                    if self.team_threads > 1:
                        self._team_chunk(lambda c0, c1: _k.im2col(x, n, kh, kw, sh, sw, ph, pw, dh, dw, ho0, ho1, Wo,
                                                                  cols, c0, c1),
                                         cols, out3, res3, residual is not None, n, p0, p1)
                        continue
                    _k.im2col(x, n, kh, kw, sh, sw, ph, pw, dh, dw, ho0, ho1, Wo, cols, 0, C)
                if g == 1:
                    np.matmul(self.w[0], cols.reshape(K, p1 - p0), out=out3[n, :, p0:p1])
                else:
                    np.matmul(self.w, cols.reshape(g, K // g, p1 - p0), out=outg[n, :, :, p0:p1])
                _k.epilogue(out3, res3, residual is not None, self.bias, s.relu, self.act, self.slope, n, p0, p1, 0, O)

    def _team_chunk(self, gather, cols, out3, res3, has_res, n, p0, p1):
        """One chunk of output rows in parts: the columns by input channels, then the product and
        the epilogue by 16s of output channels."""
        cp, op, w, s = self._cparts, self._oparts, self.w[0], self.spec
        self._parts(lambda i: gather(*cp[i]), len(cp))
        colsk = cols.reshape(w.shape[1], p1 - p0)

        def product(i):
            o0, o1 = op[i]
            np.matmul(w[o0:o1], colsk, out=out3[n, o0:o1, p0:p1])
            _k.epilogue(out3, res3, has_res, self.bias, s.relu, self.act, self.slope, n, p0, p1, o0, o1)
        self._parts(product, len(op))
