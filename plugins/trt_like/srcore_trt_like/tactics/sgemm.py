"""GEMM layers on srcore's packed-panel SGEMM (:mod:`..kernels.sgemm`): the constant weight packed into
panels when the engine is built, a register-tiled numba kernel per call; candidates beside numpy's
OpenBLAS and MKL's packed SGEMM, chosen by timing. On the 2-vCPU AMD EPYC (Zen 3, AVX2) OpenBLAS re-packing
the weight every call and MKL's packed SGEMM both lost to ONNX Runtime's MLAS on mlp_wide's layers, which
this kernel matches (docs/trt-like.md, "GEMM").

One thread only: at more, an engine runs its GEMMs on one threaded pool (:mod:`.choose`) and this
kernel has no split yet.
"""
from __future__ import annotations

from srcore.plugin import simd_conv as _sc

from ..builder.network import Layer, Network
from ..kernels import threads as _threads
from ..kernels.sgemm import PackedSgemm
from .records import Candidate, Kernel


def gemm_candidates(layer: Layer, net: Network) -> list[Candidate]:
    w = layer.attrs["weight"]
    n, k = w.shape
    if n == 0 or k == 0 or _threads.count() > 1:    # (an empty sum: the numpy tactic writes the zeros)
        return []
    # 8 lanes everywhere; where the CPU has 16-lane vectors the same kernel at 16 too (timed: LLVM keeps
    # AVX-512's 256-bit preference, and the 16-lane tile holds twice the columns)
    widths = (8,) if _sc.lanes() == 8 else (8, 16)
    def restore(layout, lanes):
        return _kernel(PackedSgemm(None, lanes, packed=(layout["wp"], n, k)))
    return [Candidate(_name(lanes), lambda lanes=lanes: _kernel(PackedSgemm(w, lanes)),
                      restore=lambda layout, lanes=lanes: restore(layout, lanes))
            for lanes in widths]


def _name(lanes: int) -> str:
    return "packed_sgemm" if lanes == 8 else f"packed_sgemm{lanes}"


def _kernel(gemm: PackedSgemm) -> Kernel:
    def run(x, out):
        gemm(x, out)
    return Kernel(run, gemm.weight_bytes, keep=gemm, layout={"wp": gemm.wp})
