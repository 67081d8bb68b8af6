"""Layers on MKL (:mod:`..kernels.mkl`), candidates beside the numpy/OpenBLAS ones: GEMM layers on the
packed SGEMM (packed when built), attention on plain ``cblas_sgemm`` with strided operands (no copies).
Both run on MKL (``Candidate.blas == "mkl"``): at more than one intra-op thread the builder keeps an
engine on one threaded BLAS (see :func:`.choose.choose_tactics`).
"""
from __future__ import annotations

import threading

import numpy as np

from ..builder.network import Layer, Network
from ..kernels import mkl as mkl_gemm
from ..kernels import threads as _threads
from ..kernels.blas_team import parts
from ..kernels.mkl_split import SplitPackedGemm
from ..kernels.rows import softmax_rows
from .records import Candidate, Kernel


def gemm_candidates(layer: Layer, net: Network) -> list[Candidate]:
    lib = mkl_gemm.library()
    if lib is None:
        return []
    w = layer.attrs["weight"]
    n, k = w.shape
    if k == 0:   # an empty sum: the numpy tactic writes the zeros
        return []
    m = net.tensors[layer.inputs[0]].size // k

    # a small product on one MKL thread: waking the team costs more than it saves, and a busy
    # core makes it wait (see kernels/threads.py, PARALLEL_MIN_WORK). Where the column split below
    # is offered, on one MKL thread too: MKL's own 2 threads gained nothing on any engine product
    # (64x4096 @ 4096x1024: 3.04 ms of CPU in 3.05 ms at 2 threads, 3.03 ms at 1; Sapphire Rapids
    # VM, MKL 2026.2), and between the split's regions its threaded calls slowed them (128x256 @
    # 256x256 split: 53 us alone, 247 us beside MKL's threaded GEMMs, the governor then keeping it
    # on one thread)
    threads = None if m * n * k >= _threads.PARALLEL_MIN_WORK and not splits(layer, net) else 1

    # No layout is stored: MKL's packed bytes are valid only at the address they were packed at
    # (copied elsewhere, as a serialized engine's are when read back, cblas_sgemm_compute returned
    # wrong values or died with SIGFPE: MKL 2026.2, copies at another address mod 2 MiB for a
    # 300x40 weight), so a stored plan packs its weights again when loaded
    def build() -> Kernel:
        gemm = mkl_gemm.PackedGemm(lib, w, m, threads=threads)

        def run(x, out):
            gemm(x, out)      # (..., K) and (..., N) C-contiguous: the same memory as (M, K), (M, N)
        return Kernel(run, gemm.weight_bytes, keep=gemm)
    out = [Candidate("mkl_packed", build, blas="mkl")]
    team = _threads.count()
    if splits(layer, net):
        def build_split() -> Kernel:   # (no layout stored either: see build)
            gemm = SplitPackedGemm(lib, w, m, team)

            def run(x, out):
                gemm(x, out)
            return Kernel(run, gemm.weight_bytes, keep=gemm)
        # MKL's own threads gain nothing on these products (kernels/mkl_split.py): its weight's column
        # blocks on numba's OpenMP team instead, timed against the one above
        out.append(Candidate("mkl_split", build_split, blas="mkl"))
    return out


def splits(layer: Layer, net: Network) -> bool:
    """Whether GEMM ``layer`` has an ``mkl_split`` candidate: more than one intra-op thread, a weight of
    more than one column block, and at least :data:`..kernels.threads.PARALLEL_MIN_WORK` multiply-adds.
    Offered at any size, bert_encoder's 0.1 ms products split too and gained (7.5 -> 6.4-6.9 ms a call
    at 2 threads), but its tail did not hold: ``benchmarks.tail`` p90 1.08-1.81x the median alone and a
    24 ms median beside a busy core (unsplit: 1.03-1.04x, 8.3 ms; Sapphire Rapids VM, 2026-11-27)."""
    n, k = layer.attrs["weight"].shape
    m = net.tensors[layer.inputs[0]].size // max(k, 1)
    return _threads.count() > 1 and len(parts(n)) > 1 and m * n * k >= _threads.PARALLEL_MIN_WORK


def attention_candidates(layer: Layer, net: Network) -> list[Candidate]:
    """Unmasked multi-head attention on a packed (B, L, 3E) qkv: per batch and head ``S = Q K^T``
    and ``O_h = P V`` as ``cblas_sgemm`` on strided views of qkv (leading dimension 3E), O_h
    written straight into its columns of the (L, E) output; softmax compiled."""
    lib = mkl_gemm.library()
    if lib is None:
        return []
    B, L, E3 = net.shape(layer.inputs[0])
    E = E3 // 3
    H = layer.attrs["heads"]
    D = E // H
    scale = np.float32(layer.attrs["scale"])
    tls = threading.local()
    sgemm = lib.cblas_sgemm
    rm, nt, tr = mkl_gemm.ROW_MAJOR, mkl_gemm.NO_TRANS, mkl_gemm.TRANS

    def run(qkv, out):
        try:
            s, p = tls.scratch
        except AttributeError:
            s, p = tls.scratch = np.empty((L, L), np.float32), np.empty((L, L), np.float32)
        # per-head products are too small to split: waking a second thread costs more than it saves
        mkl_gemm.set_threads(lib, 1)
        sp, pp = s.ctypes.data, p.ctypes.data
        for bi in range(B):
            x = qkv[bi].ctypes.data
            o = out[bi].ctypes.data
            for h in range(H):
                c = 4 * h * D
                sgemm(rm, nt, tr, L, L, D, 1.0, x + c, E3, x + 4 * E + c, E3, 0.0, sp, L)
                softmax_rows(s, p, scale)
                sgemm(rm, nt, nt, L, D, L, 1.0, pp, L, x + 8 * E + c, E3, 0.0, o + c, E)
    out = [Candidate("mkl", lambda: Kernel(run), blas="mkl")]
    threads = _threads.count()
    if threads > 1 and B * H > 1:
        # its (batch, head) pairs claimed over numba's OpenMP team, as the attention_heads layer's
        # (transformer_block's two 128x256 layers of 4 heads: ~0.3 ms each on one thread at 2 threads,
        # the call's largest part not split); the build's timing at the engine's thread count keeps it or not
        out.append(Candidate("mkl_heads_omp", lambda: _packed_heads_omp(lib, B, L, E, H, scale, threads), blas="mkl"))
    return out


def _packed_heads_omp(lib, B: int, L: int, E: int, H: int, scale, nt: int) -> Kernel:
    """The packed attention's heads on :mod:`..kernels.heads_omp` (q, k, v the thirds of each qkv row,
    3E floats apart), governed like the other regions."""
    from ..kernels import heads_omp

    fn, one = heads_omp.addresses(lib)
    zero = np.zeros((1, 1, 1, L), np.float32)
    gov = _threads.Governor(nt)
    tls = threading.local()

    def run(qkv, out):
        try:
            s, p = tls.scratch
        except AttributeError:
            s, p = tls.scratch = np.empty((nt, L, L), np.float32), np.empty((nt, L, L), np.float32)
        mkl_gemm.set_threads(lib, 1)
        x, b = qkv.ctypes.data, qkv.strides[0]
        gov.run(heads_omp.heads, nt, 1, B * H, fn, one, x, b, x + 4 * E, b, x + 8 * E, b, out.ctypes.data,
                out.strides[0], L, L, E, H, zero, 0, scale, False, False, s, p, 3 * E)
    return Kernel(run, keep=gov)
