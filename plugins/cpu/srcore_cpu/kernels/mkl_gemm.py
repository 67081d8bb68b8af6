"""float32 GEMMs through Intel MKL (``cblas_sgemm`` of the ``mkl`` package's ``libmkl_rt``), where
they time faster than numpy's BLAS.

torch eager runs its linears on MKL, numpy on OpenBLAS. On an Intel Sapphire Rapids at 1 thread
MKL's SGEMM took 0.82-0.90x OpenBLAS's time for the family models' linears (M >= 100), but 1.3-2.7x
for GEMVs (M = 1); see docs/performance.md. So nothing here is chosen by vendor: :func:`gemm_for`
times both libraries on the node's own shape when the matcher runs (at load; CPU time of the
thread, which other jobs on the machine disturb less than wall time) and returns MKL's GEMM only
when it was faster on this machine; otherwise the kernel keeps ``np.dot``.

MKL runs its sequential threading layer (set before its first call), so it is only offered while
numpy's BLAS runs on one thread (``parallel.blas_threads() == 1``): at 2 threads OpenBLAS keeps the
second core. ``SRCORE_CPU_MKL=0`` turns it off. A process whose ``libmkl_rt`` already runs another
threading layer (numpy built on MKL, say) gets no MKL GEMM here.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import time

import numpy as np

_ENV = "SRCORE_CPU_MKL"
_SEQUENTIAL = 1                     # MKL_THREADING_SEQUENTIAL
_ROW_MAJOR, _NO_TRANS = 101, 111    # CblasRowMajor, CblasNoTrans
_MIN_MACS = 1 << 18                 # below this the ctypes call (~1-2 us) outweighs any gain: not timed
_WIN = 0.97                         # MKL must be 3% faster: on a tie numpy's BLAS stays
_choices: dict[tuple[int, int, int], bool] = {}
_sgemm = None
_looked = False


def _library_paths():
    lib = os.path.join(sys.prefix, "lib")
    yield from (os.path.join(lib, f"libmkl_rt.so.{v}") for v in (3, 2))
    found = ctypes.util.find_library("mkl_rt")
    if found:
        yield found


def _load():
    """``cblas_sgemm`` of ``libmkl_rt`` on its sequential layer, or None (not installed, or MKL
    already runs with threads in this process)."""
    global _sgemm, _looked
    if _looked:
        return _sgemm
    _looked = True
    if os.environ.get(_ENV, "1") == "0":
        return None
    for path in _library_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        try:
            if lib.MKL_Set_Threading_Layer(_SEQUENTIAL) != _SEQUENTIAL:
                return None
            fn = lib.cblas_sgemm
        except AttributeError:
            continue
        p, i, f = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
        fn.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
        fn.restype = None
        _sgemm = fn
        break
    return _sgemm


def _make(fn, wT):
    """``x2 @ wT_`` into ``out`` (both 2-D) by MKL when ``wT_`` is ``wT``, the kernel's constant
    (k, n) weight, and the operands suit ``cblas_sgemm`` (float32, C-contiguous); else ``np.dot``."""
    k, n = wT.shape
    w_ptr = wT.ctypes.data
    f32 = np.dtype(np.float32)

    def mkl_dot(x2, wT_, out=None):
        if wT_ is not wT or x2.dtype != f32 or x2.ndim != 2 or x2.shape[1] != k or not x2.flags.c_contiguous:
            return np.dot(x2, wT_, out=out)
        m = x2.shape[0]
        if out is None:
            out = np.empty((m, n), f32)
        elif out.dtype != f32 or out.shape != (m, n) or not out.flags.c_contiguous:
            return np.dot(x2, wT_, out=out)
        fn(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0, x2.ctypes.data, k, w_ptr, n, 0.0, out.ctypes.data, n)
        return out
    return mkl_dot


def _best(call, reps: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time()
        for _ in range(reps):
            call()
        best = min(best, time.thread_time() - t0)
    return best


def _mkl_faster(fn, m: int, w: np.ndarray) -> bool:
    """Time ``np.dot`` and MKL on an ``(m, k) x w`` product, rounds alternating."""
    k, n = w.shape
    x = np.random.default_rng(0).standard_normal((m, k), dtype=np.float32)
    out = np.empty((m, n), np.float32)
    mkl_dot = _make(fn, w)
    np.dot(x, w, out=out)
    mkl_dot(x, w, out)
    reps = max(1, int(2e6 // (m * k * n) + 1))   # a round of ~2M multiply-adds or more
    t_np = t_mkl = float("inf")
    for _ in range(5 if m * k * n < 1 << 27 else 3):   # 3 rounds of a product over ~5 ms
        t_np = min(t_np, _best(lambda: np.dot(x, w, out=out), reps, 1))
        t_mkl = min(t_mkl, _best(lambda: mkl_dot(x, w, out), reps, 1))
    return t_mkl < _WIN * t_np


def gemm_for(m, wT: np.ndarray):
    """MKL's ``x2 @ wT`` (``mkl_dot(x2, wT, out=None)``) for an ``(m, k)`` float32 ``x2`` when it
    timed faster than ``np.dot`` here (once per shape and process), else None. ``m`` None (unknown
    at load) or a product below ``_MIN_MACS`` multiply-adds: None."""
    from .parallel import blas_threads

    if not isinstance(m, int) or wT.dtype != np.float32 or wT.ndim != 2 or not wT.flags.c_contiguous:
        return None
    k, n = wT.shape
    if m * k * n < _MIN_MACS or blas_threads() != 1:
        return None
    fn = _load()
    if fn is None:
        return None
    key = (m, k, n)
    if key not in _choices:
        _choices[key] = _mkl_faster(fn, m, wT)
    return _make(fn, wT) if _choices[key] else None
