"""Winograd F(4x4) / F(2x2) on the packed GEMM: tactics ``winograd_f4x4_packed``, ``winograd_f2x2_packed``.

The transformed weights ``U = G g G^T`` are packed once per point for the numba GEMM (``(n*n, O/64,
C, 64)``). A call works through chunks of tile rows: the vector input transform of a chunk into
``V``, the n*n GEMMs ``C^T_p = (U_p V_p)^T`` on its tiles, then the vector output transform with
the epilogue (``winograd_vkernels.py``). Chunks keep V and C^T in L2 (resnet's 64-channel 56x56
layer: 1.8 MB each for the whole image, the transforms' time doubled when they spilled).

Threads: with several chunks, each thread takes whole chunks (no barrier; each its own V and C^T);
with one, the phases split: the input transform by input channel, the products by (point, 64-row
weight block), the output transform by 16 output channels.
"""
from __future__ import annotations

import numpy as np

from ..kernels import gemm as _g
from ..kernels import parallel as _par
from ..kernels import threads as _threads
from ..kernels import winograd_vec as _k
from .spec import ConvSpec, ConvTactic
from ..errors import TacticSpecError
from ..kernels.scratch import SCRATCH
from .winograd import require_winograd, transform_weight
from .winograd_guard import DirectOnNonFinite
from ..kernels.winograd_math import F2, F4

# bytes of V per chunk of tile rows: V and C^T of a chunk stay in L2 between the phases
CHUNK_BYTES = 1 << 20


class WinogradPackedTactic(DirectOnNonFinite, ConvTactic):
    """Winograd F(m x m, 3 x 3), m = 4 or 2, on the packed numba GEMM and vector transforms."""

    def __init__(self, spec: ConvSpec, weight, bias, m: int = 4, threads: int | None = None, u=None, layout=None):
        if m not in (2, 4):
            raise TacticSpecError(f"winograd packed: output tile m must be 2 or 4, got {m}")
        self.name = f"winograd_f{m}x{m}_packed"
        super().__init__(spec, weight, bias, layout)
        require_winograd(self.name, spec)
        self._keep_direct(weight, bias)
        self.m = m
        mats = F4 if m == 4 else F2
        self.points = P = mats.n * mats.n
        O, C = spec.out_channels, spec.x_shape[1]

        def pack():
            # (n*n, MB, C, 64), written a 64-channel block at a time: the transformed weights of a
            # whole layer (U, as large again) and a list of packed points (again) were all alive
            # at once, 108 MiB for resnet's 512-channel F(4x4) layer: the peak of its engine's build
            up = np.empty((P, -(-O // _g.MR), C, _g.MR), np.float32)
            for b, o in enumerate(range(0, O, _g.MR)):
                v = transform_weight(np.asarray(weight[o:o + _g.MR]), mats) if u is None else u[:, o:o + _g.MR]
                for p in range(P):
                    up[p, b] = _g.pack_weight(v[p])[0]
            return up
        self.up = self._laid_out("up", (P, -(-O // _g.MR), C, _g.MR), pack)
        self.mb = self.up.shape[1]
        N, C = spec.x_shape[:2]
        _, O, Ho, Wo = self.out_shape
        self.th, self.tw = th, tw = -(-Ho // m), -(-Wo // m)
        self.threads = nt = _threads.count() if threads is None else max(1, int(threads))
        self.governor = _threads.Governor(nt)
        rows = max(1, min(th, CHUNK_BYTES // (P * C * tw * 4)))
        per_image = -(-th // rows)
        if nt > 1 and N * per_image > 1:           # as many chunks per thread
            per_image = -(-(N * per_image) // nt) * nt // N if N * per_image >= nt else per_image
        rows = -(-th // per_image)
        self.chunks = np.array([(n, ty0, min(th, ty0 + rows)) for n in range(N) for ty0 in range(0, th, rows)],
                               np.int64)
        self.nb = _g.blocks(rows * tw)             # column blocks of the largest chunk
        self.by_chunks = nt > 1 and len(self.chunks) >= nt
        self._input = _k.input_f4 if m == 4 else _k.input_f2
        self._output = _k.output_f4 if m == 4 else _k.output_f2

    def _run(self, x, out, residual):
        if self._nonfinite(x):   # NaN / inf would spread over whole tiles: see winograd_guard
            return self._run_direct(x, out, residual)
        s = self.spec
        C, O = s.x_shape[1], s.out_channels
        P, mb, nb, tw, nt = self.points, self.mb, self.nb, self.tw, self.threads
        # V of a chunk: (p, c, t) at p * C * ldv + c * ldv + t; C^T: each tile's points together, (t, p, o)
        # at t * P * 64 MB + p * 64 MB + o (the output transform reads 36 vectors a few KiB apart)
        ps = 64 * mb
        ldc = P * ps
        has_res = residual is not None
        res = residual if has_res else out
        uf = self.up.reshape(-1)
        usz = mb * C * 64
        pt, pl = s.padding
        if nt > 1:
            slots = nt if self.by_chunks else 1
            v = SCRATCH.get("wino_v", (slots, P * C * 6 * nb))
            ct = SCRATCH.get("wino_c", (slots, 6 * nb * ldc))
            self.governor.run(_par.winograd, self.m, x, self.chunks, pt, pl, tw, v, uf, usz, C, mb, ct, ldc, ps, P,
                              self.bias, res, has_res, s.relu, out, nt, self.by_chunks)
            return
        v = SCRATCH.get("wino_v", (P * C * 6 * nb,))
        ct = SCRATCH.get("wino_c", (6 * nb * ldc,))
        for n, ty0, ty1 in self.chunks:
            nbc = _g.blocks((ty1 - ty0) * tw)
            ldv = 6 * nbc
            self._input(x, n, pt, pl, tw, ty0, ty1, v, C * ldv, ldv, ldv, 0, C)
            for p in range(P):
                _g.gemm_u(uf, p * usz, v, p * C * ldv, ldv, ct, p * ps, C, mb, 0, mb, 0, nbc, ldc)
            self._output(ct, ldc, ps, tw, ty0, ty1, self.bias, res, has_res, s.relu, out, n, 0, O)
