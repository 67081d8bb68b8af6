"""GEMM layers split over a team of Python threads, each part on one OpenBLAS thread
(:mod:`..kernels.blas_team`): offered at more than one intra-op thread for the products large
enough to split; the builder times them against the OpenMP pool (:func:`.choose._choose_pool`)."""
from __future__ import annotations

from ..builder.network import Layer, Network
from ..kernels import blas_team as _team
from ..kernels import threads as _threads
from .records import Candidate, Kernel


def gemm_candidates(layer: Layer, net: Network) -> list[Candidate]:
    w = layer.attrs["weight"]
    n, k = w.shape
    m = net.tensors[layer.inputs[0]].size // max(k, 1)
    threads = _threads.count()
    if threads <= 1 or k == 0 or m * n * k < _threads.PARALLEL_MIN_WORK or not _threads._set_local():
        return []

    def build() -> Kernel:
        gemm = _team.SplitGemm(w, threads)

        def run(x, out):
            gemm(x, out)
        return Kernel(run, gemm.weight_bytes, keep=gemm)
    return [Candidate("numpy_split", build, blas=BLAS_TEAM)]


#: ``Candidate.blas`` of the tactics on the Python thread team
BLAS_TEAM = "blas_team"
