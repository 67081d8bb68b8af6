"""Winograd F(2x2, 3x3) and F(4x4, 3x3) tactics for 3x3, stride-1, undilated, ungrouped convs.

``out = A^T [U . V] A`` per output tile, with ``U = G g G^T`` laid out once at construction
((n*n, O, C), float64 then cast) and ``V = B^T d B`` built per call by a numba kernel that
reads the unpadded input (padding folded into the gather). The n*n products of (O x C) by
(C x tiles) are one ``np.matmul`` into a per-thread buffer; a numba kernel then applies A^T,
the bias, the residual and the relu while it writes ``out`` (partial tiles cut there, so odd
sizes need no extra copy). F(4x4) does 36 / (16 * 9) = 1/4 of the direct multiplies, F(2x2) 4/9.
Accuracy (max|dy| / max|y| against a float64 conv): see ``winograd_math.py`` and
``docs/trt-like.md``.
"""
from __future__ import annotations

import numpy as np

from ..kernels import winograd as _k
from .spec import ConvSpec, ConvTactic
from ..errors import TacticSpecError
from ..kernels.blas_team import TeamParts, ranges
from ..kernels.scratch import SCRATCH
from .winograd_guard import DirectOnNonFinite
from ..kernels.winograd_math import F2, F4
from ..kernels.winograd_math import transform_weight as _transform


#: output channels transformed at a time: the float64 product of a 512x512 layer's F(4x4) transform
#: was 75 MB at once (the engine's peak memory while it was built), 2.4 MB per chunk
TRANSFORM_CHUNK = 16


def transform_weight(w: np.ndarray, mats) -> np.ndarray:
    """:func:`..kernels.winograd_math.transform_weight` (``(n*n, O, C)`` float32), a chunk of output
    channels at a time so that its float64 intermediate stays small; the same values."""
    w = np.asarray(w)
    O, C = w.shape[:2]
    u = np.empty((mats.n * mats.n, O, C), np.float32)
    for o in range(0, O, TRANSFORM_CHUNK):
        u[:, o:o + TRANSFORM_CHUNK] = _transform(w[o:o + TRANSFORM_CHUNK], mats)
    return u


def winograd_applies(spec: ConvSpec) -> bool:
    """3x3, stride 1, dilation 1, groups 1 (any padding and size)."""
    return spec.kernel == (3, 3) and spec.stride == (1, 1) and spec.dilation == (1, 1) and spec.groups == 1


def require_winograd(name: str, spec: ConvSpec) -> None:
    """Raise :class:`TacticSpecError` naming the tactic unless :func:`winograd_applies`."""
    if not winograd_applies(spec):
        raise TacticSpecError(
            f"{name}: needs a 3x3 kernel, stride 1, dilation 1 and groups 1; got kernel {spec.kernel}, "
            f"stride {spec.stride}, dilation {spec.dilation}, groups {spec.groups}")


class WinogradTactic(TeamParts, DirectOnNonFinite, ConvTactic):
    """Winograd F(m x m, 3 x 3), m = 2 or 4 (name ``winograd_f2x2`` / ``winograd_f4x4``). With
    ``team > 1`` (name ``..._team``): the input transform in parts of input channels, the products
    in parts of points (one batched call each), the output transform in parts of output channels,
    each phase on the team when its own timing says so (:class:`..kernels.blas_team.TeamParts`)."""
    uses_blas = True

    def __init__(self, spec: ConvSpec, weight, bias, m: int = 4, u=None, layout=None, team: int = 1):
        if m not in (2, 4):
            raise TacticSpecError(f"winograd: output tile m must be 2 or 4, got {m}")
        self.name = f"winograd_f{m}x{m}" + ("_team" if team > 1 else "")
        super().__init__(spec, weight, bias, layout)
        require_winograd(self.name, spec)
        self._keep_direct(weight, bias)
        self.m = m
        mats = F4 if m == 4 else F2
        # (n*n, O, C); ``u``: the same, already computed (conv_tactics shares it between tactics)
        shape = (mats.n * mats.n, spec.out_channels, spec.x_shape[1])
        self.u = self._laid_out("u", shape, lambda: transform_weight(np.asarray(weight), mats) if u is None else u)
        self._input = _k.input_f4 if m == 4 else _k.input_f2
        self._output = _k.output_f4 if m == 4 else _k.output_f2
        N, C = spec.x_shape[:2]
        _, O, Ho, Wo = self.out_shape
        self.th, self.tw = -(-Ho // m), -(-Wo // m)
        tiles = N * self.th * self.tw
        self.v_shape = (mats.n * mats.n, C, tiles)
        self.m_shape = (mats.n * mats.n, O, tiles)
        self._cparts, self._oparts, self._pparts = ranges(C), ranges(O), ranges(mats.n * mats.n)
        self._init_team(team)

    def _run(self, x, out, residual):
        if self._nonfinite(x):   # NaN / inf would spread over whole tiles: see winograd_guard
            return self._run_direct(x, out, residual)
        s = self.spec
        C, O = s.x_shape[1], s.out_channels
        v = SCRATCH.get("wino_v", self.v_shape)
        mm = SCRATCH.get("wino_m", self.m_shape)
        res = out if residual is None else residual
        if self.team_threads > 1:
            pt, pl, th, tw, u, cp, op = s.padding[0], s.padding[1], self.th, self.tw, self.u, self._cparts, self._oparts
            self._parts(lambda i: self._input(x, pt, pl, th, tw, v, *cp[i]), len(cp))
            # a few points per part, one batched call each (numpy loops over them without the GIL;
            # each point is the same single GEMM whatever the batch, so the same bits)
            pp = self._pparts
            self._parts(lambda i: np.matmul(u[pp[i][0]:pp[i][1]], v[pp[i][0]:pp[i][1]],
                                            out=mm[pp[i][0]:pp[i][1]]), len(pp))
            self._parts(lambda i: self._output(mm, self.bias, res, residual is not None, s.relu, out, th, tw, *op[i]),
                        len(op))
            return
        self._input(x, s.padding[0], s.padding[1], self.th, self.tw, v, 0, C)
        np.matmul(self.u, v, out=mm)
        self._output(mm, self.bias, res, residual is not None, s.relu, out, self.th, self.tw, 0, O)
