"""MKL's packed SGEMM split by weight columns over numba's OpenMP team (the column split of
docs/trt-like.md, *The layer the rule costs*).

MKL's own threads gain nothing on the engines' GEMMs on the 2-vCPU Sapphire Rapids VM: at 2 threads
its ``cblas_sgemm_compute`` of 64x4096 @ 4096x1024 took the CPU time of one thread (3.0 ms, MKL 2026.2,
``MKL_DYNAMIC`` on or off), and the 128-row products of bert_encoder likewise. Here the weight is cut
in column blocks of whole 64s (a function of its shape alone, :func:`.blas_team.parts`), each block
packed on its own, and in a ``parallel=True`` region the threads claim the blocks one at a time
(:mod:`.atomics`: a worker that joins late leaves its blocks to the caller), each block one
``cblas_sgemm_compute`` on one MKL thread (MKL runs sequentially inside an active OpenMP
region; the calling thread is set to 1 for a region numba runs on the caller alone). The blocks'
bits do not depend on which thread, or how many, ran them.

MKL's entry point is called from the compiled region through its address (:func:`_compute`, an
intrinsic), so the region is cached on disk like the other kernels.
"""
from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from srcore.plugin import mkl as _mkl

from . import threads as _threads
from .atomics import split
from .blas_team import parts
from .jit import EXACT_JIT

_I32 = ir.IntType(32)
_PTR = ir.IntType(8).as_pointer()
# void cblas_sgemm_compute(layout, transa, transb, m, n, k, a, lda, b, ldb, beta, c, ldc), MKL's lp64 ints
_COMPUTE = ir.FunctionType(ir.VoidType(), [_I32] * 6 + [_PTR, _I32, _PTR, _I32, ir.FloatType(), _PTR, _I32])


@intrinsic
def _compute(typingctx, fn, m, n, k, a, lda, b, ldb, c, ldc):
    """``cblas_sgemm_compute(RowMajor, NoTrans, Packed, m, n, k, a, lda, b, ldb, 0, c, ldc)`` at address
    ``fn``; pointers and sizes as integers."""
    sig = types.void(types.intp, *([types.intp] * 9))

    def codegen(context, builder, signature, args):
        f, m_, n_, k_, a_, lda_, b_, ldb_, c_, ldc_ = args
        i32 = lambda v: builder.trunc(v, _I32)   # noqa: E731
        ptr = lambda v: builder.inttoptr(v, _PTR)   # noqa: E731
        # CblasRowMajor 101, CblasNoTrans 111, CblasPacked 151 (mkl_cblas.h)
        builder.call(builder.inttoptr(f, _COMPUTE.as_pointer()),
                     [_I32(101), _I32(111), _I32(151), i32(m_), i32(n_), i32(k_), ptr(a_), i32(lda_), ptr(b_),
                      i32(ldb_), ir.Constant(ir.FloatType(), 0.0), ptr(c_), i32(ldc_)])
        return context.get_dummy_value()
    return sig, codegen


_SET_LOCAL = ir.FunctionType(_I32, [_I32])


@intrinsic
def _one_thread(typingctx, fn):
    """``MKL_Set_Num_Threads_Local(1)`` at address ``fn``: MKL on the calling thread alone (an OpenMP
    worker's own count is MKL's default, which may start a nested team)."""
    def codegen(context, builder, signature, args):
        builder.call(builder.inttoptr(args[0], _SET_LOCAL.as_pointer()), [_I32(1)])
        return context.get_dummy_value()
    return types.void(types.intp), codegen


@njit(**EXACT_JIT)
def _blocks(t, i0, i1, fn, one, m, k, n, x, packed, starts, widths, out):
    """Blocks ``i0`` to ``i1`` (:data:`split_compute`)."""
    _one_thread(one)   # a call a claim: ~ns against a block's product
    for i in range(i0, i1):
        w = widths[i]
        _compute(fn, m, w, k, x, k, packed[i], w, out + 4 * starts[i], n)


#: ``split_compute(nt, 1, nb, fn, one, m, k, n, x, packed, starts, widths, out)``: ``out[:, s:s+w] =
#: x @ W[s:s+w].T`` for every block ``i`` of ``nb``: its packed B at address ``packed[i]``, first
#: column ``starts[i]``, ``widths[i]`` columns; ``fn``: ``cblas_sgemm_compute``'s address, ``one``:
#: ``MKL_Set_Num_Threads_Local``'s; ``x`` (m, k) and ``out`` (m, n) row-major, at addresses ``x``,
#: ``out``. The ``nt`` threads claim the blocks one at a time (:func:`.atomics.split`).
split_compute = split(_blocks, "split_compute")


class SplitPackedGemm:
    """``out = x @ weight.T`` for ``x`` (M, K) and a constant ``weight`` (N, K): the weight's column
    blocks (:func:`.blas_team.parts`) each packed by MKL for this M, a call running them on a
    governed team of ``threads`` (:class:`.threads.Governor`). ``__call__(x, out)`` takes
    C-contiguous float32 arrays of those shapes."""

    def __init__(self, lib, weight: np.ndarray, m: int, threads: int):
        w = np.ascontiguousarray(weight, np.float32)
        self.lib, self.m = lib, m
        self.n, self.k = w.shape
        ranges = parts(self.n)
        # packed here, always: valid only where MKL wrote them (kernels/mkl.py's PackedGemm)
        self.packed = packed = [_mkl.pack_b(lib, w[a:b].T, m)[0] for a, b in ranges]
        self.weight_bytes = w.nbytes
        self._addrs = np.array([p.ctypes.data for p in packed], np.int64)
        self._starts = np.array([a for a, _ in ranges], np.int64)
        self._widths = np.array([b - a for a, b in ranges], np.int64)
        self._fn = ctypes.cast(lib.cblas_sgemm_compute, ctypes.c_void_p).value
        self._one = ctypes.cast(lib.MKL_Set_Num_Threads_Local, ctypes.c_void_p).value
        self.threads = max(1, int(threads))
        self.governor = _threads.Governor(self.threads)

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        # a region numba runs on the caller alone is no OpenMP region: MKL would use the thread's count
        _mkl.set_threads(self.lib, 1)
        self.governor.run(split_compute, self.threads, 1, len(self.packed), self._fn, self._one, self.m, self.k,
                          self.n, x.ctypes.data, self._addrs, self._starts, self._widths, out.ctypes.data)
