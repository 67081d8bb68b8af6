"""GEMM layers split over the native team (``srcore.plugin.native_team``: parts that call numpy's OpenBLAS
``cblas_sgemm`` from compiled code, on workers that never take the GIL), by blocks of rows
(``native_rows``) or of 16 output columns (``native_cols``, each part reading its rows of the (N, K)
weight in place). Offered at more than one intra-op thread from :data:`MIN_WORK` multiply-adds up to
the layers the intra-op policy splits (:func:`..kernels.threads.for_work`: their splits run on the
OpenMP pool or the Python team): bert_encoder's 128 x 256 x 256 projections (~0.1-0.2 ms on one thread) stayed on one thread at 2 threads (a split over numba's OpenMP team or
MKL's was not offered there, nor did it hold beside a busy core), while the cpu plugin's native split
of them took 0.6x one thread (docs/performance-log.md, "Products of 0.2 ms split without the GIL"). The
build's timing keeps it or not, never a vendor; ``exclude_tactics=["native_rows", "native_cols"]``
leaves it out.

**Offered only with** ``SRCORE_TRT_LIKE_NATIVE_GEMM=1`` (read at build; ``benchmarks.families_ab``'s runner
suffix ``+native``): alone each projection timed faster split (the build kept ``native_cols`` on all sixteen of
bert_encoder's), but in the engine, between regions on numba's OpenMP pool (``packed_sgemm_split``,
``mkl_heads_omp``) whose workers spin on the same two cores as the native team's, bert_encoder's call took
1.3x as long (17.9 against 13.7 ms, one process, loaded AMD EPYC: docs/performance-log.md, "the team in the
core"). Per-layer timing does not see that; until the engine's teams are one, it is opt-in.
"""
from __future__ import annotations

import os

import numpy as np

from ..builder.network import Layer, Network
from ..kernels import threads as _threads
from .records import Candidate, Kernel

ENV = "SRCORE_TRT_LIKE_NATIVE_GEMM"
#: products under this many multiply-adds are not offered: a part's hand-over costs a few microseconds
MIN_WORK = 2_000_000


def _col_blocks(n: int, threads: int) -> list[tuple[int, int]]:
    groups = n // 16
    if groups < 2 * threads:
        return []
    cuts = [groups * i // threads * 16 for i in range(threads)] + [n]
    return list(zip(cuts[:-1], cuts[1:]))


def gemm_candidates(layer: Layer, net: Network) -> list[Candidate]:
    w = layer.attrs["weight"]
    n, k = w.shape
    threads = _threads.count()
    if os.environ.get(ENV) != "1" or threads <= 1 or n == 0 or k == 0 or w.dtype != np.float32:
        return []
    m = net.tensors[layer.inputs[0]].size // k
    if m * n * k < MIN_WORK or _threads.for_work(m * n * k) > 1:
        # (a layer the intra-op policy splits has its splits on the OpenMP pool and the Python team, timed
        # as pools against each other: a third team beside them is not offered there)
        return []
    from srcore.plugin import native_team as NT

    fn_addr = NT.sgemm_address()
    if fn_addr is None:
        return []
    blocks = {"native_rows": [(lo, hi) for lo, hi in _rows(m, threads)], "native_cols": _col_blocks(n, threads)}
    return [Candidate(name, lambda name=name, b=b: _build(w, m, n, k, name, b, threads, fn_addr))
            for name, b in blocks.items() if len(b) > 1]


def _rows(m: int, threads: int) -> list[tuple[int, int]]:
    if m < 2 * threads:
        return []
    return [(m * i // threads, m * (i + 1) // threads) for i in range(threads)]


def _build(w, m: int, n: int, k: int, name: str, blocks, threads: int, fn_addr: int) -> Kernel:
    """``out (m, n) = x (m, k) @ w.T`` in ``blocks`` of rows or columns, ``op(b)`` the weight read
    transposed in place (no copy)."""
    from srcore.plugin import native_team as NT
    from srcore.plugin import openblas

    wc = np.ascontiguousarray(w, np.float32)
    wa = wc.ctypes.data
    if name == "native_rows":
        parts = [(lo * k * 4, wa, lo * n * 4, 0, hi - lo, n, k, k, k, n, NT.NO_TRANS, NT.TRANS, 0) for lo, hi in blocks]
    else:
        parts = [(0, wa + lo * k * 4, lo * 4, 0, m, hi - lo, k, k, k, n, NT.NO_TRANS, NT.TRANS, 0) for lo, hi in blocks]
    gemm = NT.Gemm(parts, fn_addr, NT.team(threads))

    def run(x, out):
        # (x (..., k) and out (..., n) C-contiguous: the memory of (m, k) and (m, n))
        gemm(x.ctypes.data, 0, out.ctypes.data)
    # each part one OpenBLAS thread: numpy's BLAS held there while the parts run
    return Kernel(openblas.on_caller(run), wc.nbytes, keep=(gemm, wc))
