"""Intel oneMKL's packed SGEMM as a GEMM tactic, when the optional ``mkl`` package is installed.

A layer's constant weight is packed once, at build time, into MKL's internal blocked
layout (``cblas_sgemm_pack``); every call then runs ``cblas_sgemm_compute`` on it, so the
weight is never re-packed per call as OpenBLAS must do. On this project's machines that is
1.3-1.6x faster than numpy's OpenBLAS on the benchmark models' GEMM shapes (see
docs/trt-like.md). It is one more candidate: the builder times it against the numpy
tactic per layer and keeps the faster (on CPUs where MKL is slow, OpenBLAS wins).

``pip install srcore-trt-like[mkl]`` (or ``mkl`` itself) makes it available; the engine
option ``mkl=False`` leaves it out. MKL runs on the GNU OpenMP threading layer when
``libgomp`` is present (the one numba uses), else sequentially; each call uses the
intra-op thread count (``MKL_NUM_THREADS``, ``OMP_NUM_THREADS`` or ``OPENBLAS_NUM_THREADS``,
else 1), set per calling thread so RuntimePool threads do not fight over it.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import mkl as _mkl

from . import threads as _threads

# MKL's runtime, its cblas enums and per-thread counts: srcore's shared loader (srcore.plugin.mkl)
ROW_MAJOR, NO_TRANS, TRANS, PACKED = _mkl.ROW_MAJOR, _mkl.NO_TRANS, _mkl.TRANS, _mkl.PACKED
A_MATRIX, B_MATRIX = _mkl.A_MATRIX, _mkl.B_MATRIX
library, version, intra_op_threads, set_threads = _mkl.library, _mkl.version, _mkl.intra_op_threads, _mkl.set_threads


class PackedGemm:
    """``out = x @ weight.T`` for ``x`` (M, K) and a constant ``weight`` (N, K), the weight packed
    once for this M. ``__call__(x, out)`` takes C-contiguous float32 arrays of those shapes."""

    def __init__(self, lib, weight: np.ndarray, m: int, threads: int | None = None):
        self.lib = lib
        w = np.ascontiguousarray(weight, np.float32)
        self.n, self.k = w.shape
        self.m = m
        # B = W^T: W row-major (N, K) read transposed, leading dimension K. Packed here, always: the
        # packed bytes are valid only where MKL wrote them (a copy at another address computed
        # wrong values or died with SIGFPE), so they are never stored or restored
        self.packed = _mkl.pack_b(lib, w.T, m)[0]
        # what a call streams: the weight itself (get_size reserves far more for small matrices,
        # 10-30x at 256x1024, most of it never written)
        self.weight_bytes = w.nbytes
        self._addr = self.packed.ctypes.data
        self._compute = lib.cblas_sgemm_compute
        self._threads = lib.threads if threads is None else max(1, min(int(threads), lib.threads))
        # MKL's team waits for a busy core like numba's: the same run-time choice (threads.Governor)
        self.governor = _threads.Governor(self._threads)

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        n, k = self.n, self.k
        if self._threads == 1:
            set_threads(self.lib, 1)   # per calling thread, once
            self._compute(ROW_MAJOR, NO_TRANS, PACKED, self.m, n, k, x.ctypes.data, k, self._addr, n, 0.0,
                          out.ctypes.data, n)
            return
        gov = self.governor
        team = gov.team()
        set_threads(self.lib, team)
        t0 = gov.clock()
        self._compute(ROW_MAJOR, NO_TRANS, PACKED, self.m, n, k, x.ctypes.data, k, self._addr, n, 0.0,
                      out.ctypes.data, n)
        gov.record(team, gov.clock() - t0)
