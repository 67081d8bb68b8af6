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
so trt_like's MKL tactic in the same process keeps its own count. The threading layer is the one
trt_like's ``kernels/mkl.py`` picks (GNU OpenMP where ``libgomp`` is found, else sequential), so
whichever plugin loads ``libmkl_rt`` first, both agree; a process whose MKL already runs another
layer (numpy built on MKL, say) gets no MKL GEMM here. ``SRCORE_CPU_MKL=0`` turns it off.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import time

import numpy as np

_ENV = "SRCORE_CPU_MKL"
_SEQUENTIAL, _GNU = 1, 3            # MKL_THREADING_SEQUENTIAL, MKL_THREADING_GNU
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112   # CblasRowMajor, CblasNoTrans, CblasTrans
_B_MATRIX, _PACKED = 162, 151       # CblasBMatrix (what sgemm_pack packs), CblasPacked
_MIN_MACS = 1 << 18                 # below this the ctypes call (~1-2 us) outweighs any gain: not timed
_WIN = 0.97                         # MKL must be 3% faster: on a tie numpy's BLAS stays
_choices: dict[tuple[int, int, int], bool] = {}
_lib = None
_looked = False


class _Mkl:
    """The ``cblas`` entry points used: ``sgemm``, and the packed-weight API (``sgemm_pack_get_size``,
    ``sgemm_pack``, ``sgemm_compute``)."""

    def __init__(self, lib):
        p, i, f, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_size_t
        self.sgemm = self._fn(lib.cblas_sgemm, [i, i, i, i, i, i, f, p, i, p, i, f, p, i])
        self.pack_size = self._fn(lib.cblas_sgemm_pack_get_size, [i, i, i, i], size)
        self.pack = self._fn(lib.cblas_sgemm_pack, [i, i, i, i, i, i, f, p, i, p])
        self.compute = self._fn(lib.cblas_sgemm_compute, [i, i, i, i, i, i, p, i, p, i, f, p, i])
        self.local_threads = self._fn(lib.MKL_Set_Num_Threads_Local, [i], i)

    @staticmethod
    def _fn(fn, argtypes, restype=None):
        fn.argtypes, fn.restype = argtypes, restype
        return fn


def _library_paths():
    lib = os.path.join(sys.prefix, "lib")
    yield from (os.path.join(lib, f"libmkl_rt.so.{v}") for v in (3, 2))
    found = ctypes.util.find_library("mkl_rt")
    if found:
        yield found


def _load():
    """MKL's entry points (:class:`_Mkl`) on its sequential layer, or None (not installed, or MKL
    already runs with threads in this process)."""
    global _lib, _looked
    if _looked:
        return _lib
    _looked = True
    if os.environ.get(_ENV, "1") == "0":
        return None
    for path in _library_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        layer = _GNU if ctypes.util.find_library("gomp") else _SEQUENTIAL   # as trt_like's kernels/mkl.py
        try:
            if lib.MKL_Set_Threading_Layer(layer) != layer:
                return None
            _lib = _Mkl(lib)
        except AttributeError:
            continue
        break
    return _lib


def _make(lib: _Mkl, wT, m: int):
    """``mkl_dot(x2, wT_, out=None)``: ``x2 @ wT_`` into ``out`` (both 2-D) by MKL when ``wT_`` is
    ``wT``, the kernel's constant (k, n) weight (C- or Fortran-contiguous: a transposed view of
    torch's weight needs no copy), and the operands suit ``cblas`` (float32, C-contiguous); else
    ``np.dot``. The weight is packed once, here, for ``m`` rows (``cblas_sgemm_pack``: no packing
    in the calls, 0.62-0.83x OpenBLAS's time on an Intel Sapphire Rapids); other row counts run
    ``cblas_sgemm``."""
    k, n = wT.shape
    trans, ld = (_NO_TRANS, n) if wT.flags.c_contiguous else (_TRANS, k)
    w_ptr = wT.ctypes.data
    packed = np.empty(lib.pack_size(_B_MATRIX, m, n, k), np.uint8)
    lib.pack(_ROW_MAJOR, _B_MATRIX, trans, m, n, k, 1.0, w_ptr, ld, packed.ctypes.data)
    p_ptr = packed.ctypes.data
    sgemm, compute, local = lib.sgemm, lib.compute, lib.local_threads
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
        prev = local(1)
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
    sgemm, local = lib.sgemm, lib.local_threads
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
