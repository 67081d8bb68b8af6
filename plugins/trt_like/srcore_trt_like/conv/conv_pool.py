"""``packed_gemm_max_pool``: a conv and the max pool that alone reads it as one tactic. resnet's stem
(7x7/2 conv, 3x3/2 pool) writes a 1x64x112x112 tensor (3.2 MB) that the pool reads back at once,
both from memory; fused, the conv's output is pooled while it is in cache and never written
(``kernels/conv_pool.py``). The network rewrite is ``builder/fusion.py``'s ``fuse_conv_pool``.
"""
from __future__ import annotations

import numpy as np

from ..errors import TacticSpecError
from ..kernels import conv_pool as _cp
from ..kernels import packed as _k
from ..kernels import parallel as _par
from ..kernels import threads as _threads
from ..kernels.scratch import SCRATCH
from .packed import PackedGemmTactic
from .pool import MaxPool2d
from .spec import ConvSpec

# conv output rows per GEMM of the fused tactic: their operand and C^T (~95 KB a row for the stem)
# stay in L2 while the pool reduces them
ROWS_BYTES = 512 << 10


class PackedConvMaxPool:
    """``out = max_pool(relu?(conv(x) + bias))`` with the pool reduced from the packed GEMM's C^T."""
    name = "packed_gemm_max_pool"

    def __init__(self, spec: ConvSpec, weight, bias, pool: MaxPool2d, threads: int | None = None, layout=None):
        if pool.dilation != (1, 1) or pool.x_shape != spec.out_shape:
            raise TacticSpecError(f"{self.name}: needs an undilated pool of the conv's output {spec.out_shape}")
        self.conv = PackedGemmTactic(spec, weight, bias, threads=1, layout=layout)
        self.pool = pool
        self.out_shape = pool.out_shape
        self.threads = _threads.count() if threads is None else max(1, int(threads))
        self.governor = _threads.Governor(self.threads)
        c = self.conv
        Hc, Wc = spec.out_shape[2:]
        row_bytes = Wc * (c.K + 64 * c.mb) * 4
        self.step = max(1, min(Hc, ROWS_BYTES // row_bytes))
        (pkh, pkw), (psh, psw), (pph, ppw) = pool.kernel, pool.stride, pool.padding
        self.geom = np.array([pkh, pkw, psh, psw, pph, ppw], np.int64)
        Hp, Wp = pool.out_shape[2:]
        nt = self.threads
        self.parts = [_threads.split(Hp, t, nt) for t in range(nt)]
        rows = max(min(Hc, (b - 1) * psh - pph + pkh) - max(0, a * psh - pph) for a, b in self.parts if b > a)
        ldc = 64 * c.mb
        nblk = (self.step * Wc) // 6 + 2
        self.shapes = ((nblk, c.K, 6), (nblk * 6 * ldc,), (max(rows, 1) * Wp * ldc,), ((Wp + 16) * 16,))
        self.weight_bytes = c.weight_bytes

    def layout(self) -> dict[str, np.ndarray]:
        """The packed conv weight (see :meth:`ConvTactic.layout`)."""
        return self.conv.layout()

    def __call__(self, x, out):
        c, s = self.conv, self.conv.spec
        N, C = s.x_shape[:2]
        Hc, Wc = s.out_shape[2:]
        (kh, kw), (sh, sw), (ph, _), (dh, _) = s.kernel, s.stride, s.padding, s.dilation
        xph = SCRATCH.get("packed_phases", c.xph_shape)
        wf = c.wp.reshape(-1)
        nt = self.threads
        bufs = [SCRATCH.get(f"convpool_{i}", (nt,) + shp) for i, shp in enumerate(self.shapes)]
        if nt > 1:
            self.governor.run(_par.conv_pool, x, xph, c.pad, c.rows, kh, kw, sh, sw, ph, dh, c.joff, c.seg, Hc, Wc,
                              wf, c.K, c.mb, self.step, self.geom, *bufs, c.bias, s.relu, out, nt)
            return
        xp, ct, hm, stage = (b[0] for b in bufs)
        Hp = self.out_shape[2]
        for n in range(N):
            _k.split_phases(x, n, sw, c.pad, c.rows, xph, 0, C)
            _cp.part(xph, kh, kw, sh, ph, dh, c.joff, c.seg, Hc, Wc, wf, c.K, c.mb, self.step, self.geom, 0, Hp, xp,
                     ct, hm, stage, c.bias, s.relu, out, n)


