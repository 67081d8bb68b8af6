"""GEMM layers on MKL's packed SGEMM (:mod:`.mkl_gemm`), a candidate beside numpy's ``np.dot``."""
from __future__ import annotations

from . import mkl_gemm
from .network import Layer, Network


def gemm_candidates(layer: Layer, net: Network) -> list[tuple[str, object]]:
    lib = mkl_gemm.library()
    if lib is None:
        return []
    w = layer.attrs["weight"]
    n, k = w.shape
    m = net.tensors[layer.inputs[0]].size // k
    gemm = mkl_gemm.PackedGemm(lib, w, m)

    def run(x, out):
        gemm(x, out)      # (..., K) and (..., N) C-contiguous: the same memory as (M, K), (M, N)
    run.weight_bytes = gemm.weight_bytes
    run.gemm = gemm       # keeps the packed weight alive with the kernel
    return [("mkl_packed", run)]
