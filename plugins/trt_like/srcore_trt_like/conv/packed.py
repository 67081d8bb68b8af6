"""The ``packed_gemm`` conv tactic: im2col straight into the packed operand of the numba GEMM
(``gemm_kernels.py``), the weight packed once at construction, and an epilogue that writes NCHW.

Against ``im2col_gemm`` (numpy's OpenBLAS): no per-call weight packing (resnet's 512-channel
layers stream 9.4 MB of weights per call; OpenBLAS reads them, writes them packed and reads that
again), full 16-lane FMAs, and no 49th-column edge case (OpenBLAS runs N = 49 slower than 48).
"""
from __future__ import annotations

import numpy as np

from ..kernels import gemm as _g
from ..kernels import packed as _k
from ..kernels import parallel as _par
from ..kernels import threads as _threads
from .spec import ConvSpec, ConvTactic
from ..errors import TacticSpecError
from ..kernels.scratch import SCRATCH

# operand bytes gathered per chunk when the weights are small (the stem): the chunk's operand and
# C^T stay in L2 from the gather to the GEMM to the epilogue. With large weights the whole image
# is one chunk, so the weights stream from memory once per call.
CHUNK_BYTES = 1 << 20


class PackedGemmTactic(ConvTactic):
    """Any ungrouped conv as one packed GEMM per image (in chunks of output pixels when the weight
    is small): ``out = relu?(W @ im2col(x) + bias (+ residual))``."""
    name = "packed_gemm"

    def __init__(self, spec: ConvSpec, weight, bias, threads: int | None = None, layout=None):
        super().__init__(spec, weight, bias, layout)
        if spec.groups != 1:
            raise TacticSpecError(f"packed_gemm: needs groups 1, got {spec.groups}")
        (_, C, H, W), (kh, kw) = spec.x_shape, spec.kernel
        O, Ho, Wo = self.out_shape[1:]
        self.K = K = C * kh * kw
        self.wp = self._laid_out("wp", (-(-O // _g.MR), K, _g.MR),
                                 lambda: _g.pack_weight(np.asarray(weight, np.float32).reshape(O, K)))
        self.mb = self.wp.shape[0]
        self.seg = _k.segments(Ho, Wo)
        nb = self.seg.shape[0]
        (sw, pw, dw), wq = (spec.stride[1], spec.padding[1], spec.dilation[1]), -(-W // spec.stride[1])
        # zero columns each side of a phase row: every tap of every output column reads in bounds
        self.pad = pad = max(-(-pw // sw), ((kw - 1) * dw - pw) // sw + Wo - wq, 0)
        L = wq + 2 * pad
        self.xph_shape = (C, H, sw, L)
        sh, ph, dh = spec.stride[0], spec.padding[0], spec.dilation[0]
        h = (np.arange(Ho)[:, None] * sh - ph + np.arange(kh)[None, :] * dh).ravel()
        self.rows = np.unique(h[(h >= 0) & (h < H)]).astype(np.int64)       # input rows some tap reads
        self.joff = _k.tap_offsets(kw, sw, pw, dw, pad, L)
        self.threads = nt = _threads.count() if threads is None else max(1, int(threads))
        self.governor = _threads.Governor(nt)
        self.step = max(1, min(nb, CHUNK_BYTES // (K * 24))) if self.wp.nbytes <= CHUNK_BYTES else nb
        # threaded: whole chunks per thread when there are enough of them (as many per thread), else
        # the phases split; the GEMM by weight row blocks when there are enough (each thread streams
        # its share of the weights), else by column blocks
        nch = -(-nb // self.step)
        self.by_chunks = nt > 1 and nch >= 2 * nt
        if self.by_chunks:
            self.step = -(-nb // (nt * -(-nch // nt)))
        self.split_rows = self.mb >= 4 * nt

    def _run(self, x, out, residual):
        s = self.spec
        N, C = s.x_shape[:2]
        O, Ho, Wo = self.out_shape[1:]
        K, mb, step, seg = self.K, self.mb, self.step, self.seg
        (kh, kw), (sh, sw), (ph, _), (dh, _) = s.kernel, s.stride, s.padding, s.dilation
        has_res = residual is not None
        res = residual if has_res else out
        wf = self.wp.reshape(-1)
        nb = seg.shape[0]
        P = Ho * Wo
        xph = SCRATCH.get("packed_phases", self.xph_shape)
        nt = self.threads
        if nt > 1:
            if self.by_chunks:
                xp = SCRATCH.get("packed_x", (nt, step, K, 6))
                ct = SCRATCH.get("packed_c", (nt, step * 6, mb * 64))
            else:   # one slot: the same array ranks as by chunks, so _par.conv compiles once (12 s cold)
                xp = SCRATCH.get("packed_x", (1, nb, K, 6))
                ct = SCRATCH.get("packed_c", (1, nb * 6, mb * 64))
            self.governor.run(_par.conv, x, xph, self.pad, self.rows, kh, kw, sh, sw, ph, dh, self.joff, seg, wf, K,
                              mb, xp, ct, step, self.bias, res, has_res, s.relu, out, nt, self.by_chunks,
                              self.split_rows)
            return
        for n in range(N):
            _k.split_phases(x, n, sw, self.pad, self.rows, xph, 0, C)
            for pb0 in range(0, nb, step):
                pb1 = min(nb, pb0 + step)
                xp = SCRATCH.get("packed_x", (pb1 - pb0, K, 6))
                ct = SCRATCH.get("packed_c", ((pb1 - pb0) * 6, mb * 64))
                _k.gather(xph, kh, kw, sh, ph, dh, self.joff, seg, pb0, pb1, xp, pb0, 0, C)
                _g.gemm(wf, 0, xp.reshape(-1), 0, ct.reshape(-1), 0, K, mb, 0, mb, 0, pb1 - pb0, 64 * mb)
                _k.epilogue_t(ct.reshape(-1), 0, mb * 64, 1, min(P, 6 * pb1) - 6 * pb0, 0, out, n, 6 * pb0,
                              self.bias, res, has_res, s.relu, 0, O)
