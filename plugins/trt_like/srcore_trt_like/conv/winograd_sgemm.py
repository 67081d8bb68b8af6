"""Winograd on the packed-panel SGEMM's tiles: tactics ``winograd_f4x4_sgemm``, ``winograd_f2x2_sgemm`` (one
thread) and ``winograd_f4x4_sgemm_omp``, ``winograd_f2x2_sgemm_omp`` (numba's OpenMP team).

The transforms of ``winograd.py`` around the n*n products ``U_p V_p`` on ``kernels/sgemm.py``'s 6 x 16
register tile (``kernels/winograd_sgemm.py``), the transformed weights packed once per point. The
``_omp`` form splits every phase of a call (input transform by input channels, products by points,
output transform by output channels) in parts of the shape alone: the bits of the one-thread tactic on
any team. The OpenBLAS tactics' 2-thread form (``_team``) hands each phase to Python threads, ~0.1-0.7 ms
of hand-overs and GIL a call (resnet's 64-channel 56x56 layer: 1.62 ms on 2 threads, 1.36 on one; AMD
EPYC, 2026-11-29); the ``_omp`` form has three OpenMP regions and no Python between them.
"""
from __future__ import annotations

import numpy as np

from ..kernels import sgemm as _s
from ..kernels import threads as _threads
from ..kernels import winograd_sgemm as _k
from ..kernels.scratch import SCRATCH
from ..kernels.winograd_math import F2, F4
from .spec import ConvSpec, ConvTactic
from ..errors import TacticSpecError
from . import winograd as _wg
from .winograd import require_winograd
from .winograd_guard import DirectOnNonFinite

#: the tile's vector width: 8 lanes (AVX2 ``ymm``), as ``pointwise_sgemm``
LANES = 8


class WinogradSgemmTactic(DirectOnNonFinite, ConvTactic):
    """Winograd F(m x m, 3 x 3), m = 4 or 2, on the SGEMM tiles; ``threads > 1``: split on numba's OpenMP
    team (name ``..._omp``), run under a :class:`..kernels.threads.Governor`."""

    def __init__(self, spec: ConvSpec, weight, bias, m: int = 4, threads: int = 1, u=None, layout=None):
        if m not in (2, 4):
            raise TacticSpecError(f"winograd sgemm: output tile m must be 2 or 4, got {m}")
        self.threads = nt = max(1, int(threads))
        self.name = self.tactic_name(m, nt)
        super().__init__(spec, weight, bias, layout)
        require_winograd(self.name, spec)
        self._keep_direct(weight, bias)
        self.m = m
        mats = F4 if m == 4 else F2
        P = mats.n * mats.n
        O, C = spec.out_channels, spec.x_shape[1]

        def pack():
            t = _wg.transform_weight(np.asarray(weight), mats) if u is None else u
            return np.stack([_s.pack_weight_rows(t[p]) for p in range(P)])
        self.ua = self._laid_out("ua", (P, O * C), pack)
        N = spec.x_shape[0]
        _, _, Ho, Wo = self.out_shape
        self.th, self.tw = -(-Ho // m), -(-Wo // m)
        T = N * self.th * self.tw
        self._sizes = (P, C, O, T)
        self.tag = _s.width_tag(LANES)
        self.governor = _threads.Governor(nt) if nt > 1 else None

    @staticmethod
    def tactic_name(m: int, threads: int) -> str:
        return f"winograd_f{m}x{m}_sgemm" + ("_omp" if threads > 1 else "")

    def _run(self, x, out, residual):
        if self._nonfinite(x):   # NaN / inf would spread over whole tiles: see winograd_guard
            return self._run_direct(x, out, residual)
        s = self.spec
        P, C, O, T = self._sizes
        # V with a panel of slack after it: the last panel's vector loads read past its last row
        vbuf = SCRATCH.get("wino_v", (P * C * T + 2 * LANES,))   # (the roles of the other Winograd tactics)
        vbuf[P * C * T:] = 0.0
        v = vbuf[:P * C * T].reshape(P, C, T)
        mm = SCRATCH.get("wino_m", (P, O, T))
        has_res = residual is not None
        res = residual if has_res else out
        ua = self.ua.reshape(-1)
        pt, pl = s.padding
        if self.governor is None:
            _k.serial(self.m, x, pt, pl, self.th, self.tw, v, ua, O * C, mm, self.bias, res, has_res, s.relu, out,
                      LANES, self.tag)
        else:
            self.governor.run(_k.split, self.m, x, pt, pl, self.th, self.tw, v, ua, O * C, mm, self.bias, res,
                              has_res, s.relu, out, LANES, self.tag, self.threads)
