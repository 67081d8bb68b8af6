"""float32 GEMMs with constant weights through Intel MKL (``cblas_sgemm_pack`` / ``_compute`` and
``cblas_sgemm`` of the ``mkl`` package's ``libmkl_rt``), where they time faster than numpy's BLAS.

torch eager runs its linears on MKL, numpy on OpenBLAS, which packs the weight again in every
call. MKL packs a constant weight once, at load, for the row count the node has; on an Intel
Sapphire Rapids at 1 thread the packed products took 0.62-0.83x OpenBLAS's time for the family
models' linears (M >= 64), but GEMVs (M = 1) 2.4x; see docs/performance.md. So nothing here is
chosen by vendor: :func:`gemm_for` times both libraries on the node's own shape when the matcher
runs (at load; CPU time of the thread, which other jobs on the machine disturb less than wall
time) and returns MKL's GEMM only when it was faster on this machine; otherwise the kernel keeps
``np.dot``.

It is only offered while numpy's BLAS runs on one thread (``parallel.blas_threads() == 1`` at
load: at 2 threads OpenBLAS keeps the second core), and every call runs MKL on one thread: the
calling thread's MKL count is set to 1 for the call and put back after (``MKL_Set_Num_Threads_Local``),
so trt_like's MKL tactic in the same process keeps its own count. Both plugins load MKL through
srcore's :mod:`srcore.blas.mkl` (``srcore.plugin.mkl``), so they share its threading layer; a process
whose MKL already runs another layer (numpy built on MKL, say) gets no MKL GEMM here. ``SRCORE_CPU_MKL=0`` turns it off.
"""
from __future__ import annotations

import os
import time

import numpy as np

from srcore.plugin import mkl as _mkl

_ENV = "SRCORE_CPU_MKL"
_ROW_MAJOR, _NO_TRANS, _PACKED = _mkl.ROW_MAJOR, _mkl.NO_TRANS, _mkl.PACKED
_MIN_MACS = 1 << 18                 # below this the ctypes call (~1-2 us) outweighs any gain: not timed
_WIN = 0.97                         # MKL must be 3% faster: on a tie numpy's BLAS stays
_choices: dict[tuple[int, int, int], bool] = {}


def _load():
    """MKL's runtime (srcore's shared loader, :mod:`srcore.blas.mkl`), or None: not installed,
    ``SRCORE_CPU_MKL=0``, or MKL already runs another threading layer in this process."""
    if os.environ.get(_ENV, "1") == "0":
        return None
    lib = _mkl.library()
    return lib if lib is not None and lib.layer == lib.requested_layer else None


def _make(lib, wT, m: int):
    """``mkl_dot(x2, wT_, out=None)``: ``x2 @ wT_`` into ``out`` (both 2-D) by MKL when ``wT_`` is
    ``wT``, the kernel's constant (k, n) weight (C- or Fortran-contiguous: a transposed view of
    torch's weight needs no copy), and the operands suit ``cblas`` (float32, C-contiguous); else
    ``np.dot``. The weight is packed once, here, for ``m`` rows (``cblas_sgemm_pack``: no packing
    in the calls, 0.62-0.83x OpenBLAS's time on an Intel Sapphire Rapids); other row counts run
    ``cblas_sgemm``."""
    k, n = wT.shape
    w_ptr = wT.ctypes.data
    packed, trans, ld = _mkl.pack_b(lib, wT, m)
    p_ptr = packed.ctypes.data
    sgemm, compute, local = lib.cblas_sgemm, lib.cblas_sgemm_compute, lib.MKL_Set_Num_Threads_Local
    f32 = np.dtype(np.float32)

    def mkl_dot(x2, wT_, out=None):
        if wT_ is not wT or x2.dtype != f32 or x2.ndim != 2 or x2.shape[1] != k or not x2.flags.c_contiguous:
            return np.dot(x2, wT_, out=out)
        rows = x2.shape[0]
        if out is None:
            out = np.empty((rows, n), f32)
        elif out.dtype != f32 or out.shape != (rows, n) or not out.flags.c_contiguous:
            return np.dot(x2, wT_, out=out)
        if not rows:
            out.fill(0)
            return out
        prev = local(1)   # (srcore.blas.mkl.swap_threads, inlined: a call per product)
        try:
            if rows == m:
                compute(_ROW_MAJOR, _NO_TRANS, _PACKED, m, n, k, x2.ctypes.data, k, p_ptr, ld, 0.0, out.ctypes.data, n)
            else:
                sgemm(_ROW_MAJOR, _NO_TRANS, trans, rows, n, k, 1.0, x2.ctypes.data, k, w_ptr, ld, 0.0,
                      out.ctypes.data, n)
        finally:
            local(prev)
        return out
    mkl_dot.packed = packed   # (kept alive with the kernel)
    return mkl_dot


def _best(call, reps: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time()
        for _ in range(reps):
            call()
        best = min(best, time.thread_time() - t0)
    return best


def _mkl_faster(mkl_dot, m: int, wT: np.ndarray) -> bool:
    """Time ``np.dot`` (on a C-contiguous weight, as the kernels would hold it) and ``mkl_dot`` on an
    ``(m, k) x wT`` product, rounds alternating."""
    k, n = wT.shape
    x = np.random.default_rng(0).standard_normal((m, k), dtype=np.float32)
    out = np.empty((m, n), np.float32)
    wc = wT if wT.flags.c_contiguous else np.ascontiguousarray(wT)
    np.dot(x, wc, out=out)
    mkl_dot(x, wT, out)
    reps = max(1, int(2e6 // (m * k * n) + 1))   # a round of ~2M multiply-adds or more
    t_np = t_mkl = float("inf")
    for _ in range(5 if m * k * n < 1 << 27 else 3):   # 3 rounds of a product over ~5 ms
        t_np = min(t_np, _best(lambda: np.dot(x, wc, out=out), reps, 1))
        t_mkl = min(t_mkl, _best(lambda: mkl_dot(x, wT, out), reps, 1))
    return t_mkl < _WIN * t_np


def gemm_for(m, wT: np.ndarray):
    """MKL's ``x2 @ wT`` (``mkl_dot(x2, wT, out=None)``, :func:`_make`) for an ``(m, k)`` float32
    ``x2`` when it timed faster than ``np.dot`` here (once per shape and process), else None.
    ``wT``: float32 (k, n), C- or Fortran-contiguous. ``m`` None (unknown at load) or a product
    below ``_MIN_MACS`` multiply-adds: None."""
    from .parallel import blas_threads

    if (not isinstance(m, int) or m <= 0 or wT.dtype != np.float32 or wT.ndim != 2
            or not (wT.flags.c_contiguous or wT.flags.f_contiguous)):
        return None
    k, n = wT.shape
    if m * k * n < _MIN_MACS or blas_threads() != 1:
        return None
    lib = _load()
    if lib is None:
        return None
    mkl_dot = _make(lib, wT, m)
    key = (m, k, n)
    if key not in _choices:
        _choices[key] = _mkl_faster(mkl_dot, m, wT)
    return mkl_dot if _choices[key] else None


def _rows_ok(a, f32) -> bool:
    """A float32 2-D array whose rows are contiguous (any row stride): ``cblas`` takes it as is."""
    return a.dtype == f32 and a.ndim == 2 and a.strides[1] == 4 and a.strides[0] % 4 == 0 and a.strides[0] >= 0


def matmul_rows():
    """``gemm(a, b, out)``: ``out[...] = a @ b`` by ``cblas_sgemm`` for float32 2-D operands whose
    rows are contiguous (row strides as leading dimensions: ``out`` may be a block of columns of a
    larger matrix), else ``np.matmul``; None without MKL or at more than one BLAS thread. Callers
    time it against their numpy path before using it (``conv.make_conv``)."""
    from .parallel import blas_threads

    lib = _load()
    if lib is None or blas_threads() != 1:
        return None
    sgemm, local = lib.cblas_sgemm, lib.MKL_Set_Num_Threads_Local
    f32 = np.dtype(np.float32)

    def gemm(a, b, out):
        m, k = a.shape
        n = b.shape[1]
        if (not (_rows_ok(a, f32) and _rows_ok(b, f32) and _rows_ok(out, f32)) or b.shape[0] != k
                or out.shape != (m, n) or m == 0 or n == 0 or k == 0):
            return np.matmul(a, b, out=out)
        prev = local(1)
        try:
            sgemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0, a.ctypes.data, max(a.strides[0] // 4, 1),
                  b.ctypes.data, max(b.strides[0] // 4, 1), 0.0, out.ctypes.data, max(out.strides[0] // 4, 1))
        finally:
            local(prev)
        return out
    return gemm
