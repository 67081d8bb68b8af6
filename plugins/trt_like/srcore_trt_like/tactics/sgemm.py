"""GEMM layers on srcore's packed-panel SGEMM (:mod:`..kernels.sgemm`): the constant weight packed into
panels when the engine is built, a register-tiled numba kernel per call; candidates beside numpy's
OpenBLAS and MKL's packed SGEMM, chosen by timing. On the 2-vCPU AMD EPYC (Zen 3, AVX2) OpenBLAS re-packing
the weight every call and MKL's packed SGEMM both lost to ONNX Runtime's MLAS on mlp_wide's layers, which
this kernel matches (docs/trt-like.md, "GEMM").

At more than one intra-op thread a layer the intra-op policy splits (:func:`..kernels.threads.for_work`) gets
``packed_sgemm_split`` instead (:mod:`..kernels.sgemm_split`: the same kernel cut by columns or rows over
numba's OpenMP team, governed), timed against the threaded pools' other GEMMs, and a smaller one the
one-thread kernel (with :data:`SMALL_SPLIT_WORK` set, both from there).
"""
from __future__ import annotations

import os

from srcore.plugin import simd_conv as _sc

from ..builder.network import Layer, Network
from ..kernels import threads as _threads
from ..kernels.sgemm import PackedSgemm
from ..kernels.sgemm_split import SplitSgemm
from .records import Candidate, Kernel


#: with ``SRCORE_TRT_LIKE_SMALL_SGEMM_SPLIT=1`` (read at import; ``benchmarks.families_ab``'s ``+smallsplit``: A/B)
#: layers from this work (multiply-adds) up are offered ``packed_sgemm_split`` beside the one-thread kernel, below
#: the intra-op policy's :data:`..kernels.threads.PARALLEL_MIN_WORK` too: bert_encoder's sixteen 128 x 256 x 256
#: projections (8.4 M, ~0.1 ms alone) are a third of its GEMM time at 2 threads, and ONNX Runtime splits them.
#: Off by default: MKL's split of the same products gained at 2 threads but not its tail beside a busy core
#: (docs/trt-like.md, ``mkl_split``); whether the small layers split is the policy's (:func:`..kernels.threads.for_work`)
SMALL_SPLIT_WORK = 4_000_000 if os.environ.get("SRCORE_TRT_LIKE_SMALL_SGEMM_SPLIT") == "1" else None


def _split(work: int) -> bool:
    """Whether a layer of ``work`` multiply-adds is offered ``packed_sgemm_split``."""
    return _threads.for_work(work) > 1 or (
        SMALL_SPLIT_WORK is not None and work >= SMALL_SPLIT_WORK and _threads.count() > 1)


def gemm_candidates(layer: Layer, net: Network) -> list[Candidate]:
    w = layer.attrs["weight"]
    n, k = w.shape
    if n == 0 or k == 0:    # (an empty sum: the numpy tactic writes the zeros)
        return []
    # 8 lanes everywhere; where the CPU has 16-lane vectors the same kernel at 16 too (timed: LLVM keeps
    # AVX-512's 256-bit preference, and the 16-lane tile holds twice the columns)
    widths = (8,) if _sc.lanes() == 8 else (8, 16)
    work = net.tensors[layer.inputs[0]].size * n
    out = []
    threads = _threads.count()
    if _split(work):
        def split(lanes, packed=None):
            gemm = SplitSgemm(w if packed is None else None, lanes, packed, parts=threads,
                              governor=_threads.Governor(threads))
            return _kernel(gemm)
        out += [Candidate(_name(lanes) + "_split", lambda lanes=lanes: split(lanes), blas="omp",
                          restore=lambda layout, lanes=lanes: split(lanes, (layout["wp"], n, k)))
                for lanes in widths]
    if _threads.for_work(work) > 1:
        return out

    def restore(layout, lanes):
        return _kernel(PackedSgemm(None, lanes, packed=(layout["wp"], n, k)))
    return out + [Candidate(_name(lanes), lambda lanes=lanes: _kernel(PackedSgemm(w, lanes)),
                            restore=lambda layout, lanes=lanes: restore(layout, lanes))
                  for lanes in widths]


def threaded(layer: Layer, net: Network) -> bool:
    """Whether the layer has a ``packed_sgemm_split`` candidate (on numba's OpenMP pool)."""
    n, k = layer.attrs["weight"].shape
    return n > 0 and k > 0 and _split(net.tensors[layer.inputs[0]].size * n)


def _name(lanes: int) -> str:
    return "packed_sgemm" if lanes == 8 else f"packed_sgemm{lanes}"


def _kernel(gemm: PackedSgemm) -> Kernel:
    def run(x, out):
        gemm(x, out)
    return Kernel(run, gemm.weight_bytes, keep=gemm, layout={"wp": gemm.wp})
