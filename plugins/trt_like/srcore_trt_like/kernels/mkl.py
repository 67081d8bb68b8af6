"""Intel oneMKL's packed SGEMM as a GEMM tactic, when the optional ``mkl`` package is installed.

A layer's constant weight is packed once, at build time, into MKL's internal blocked
layout (``cblas_sgemm_pack``); every call then runs ``cblas_sgemm_compute`` on it, so the
weight is never re-packed per call as OpenBLAS must do. On this project's machines that is
1.3-1.6x faster than numpy's OpenBLAS on the benchmark models' GEMM shapes (see
docs/trt-like.md). It is one more candidate: the builder times it against the numpy
tactic per layer and keeps the faster (on CPUs where MKL is slow, OpenBLAS wins).

``pip install srcore-trt-like[mkl]`` (or ``mkl`` itself) makes it available; the engine
option ``mkl=False`` leaves it out. MKL runs on the GNU OpenMP threading layer when
``libgomp`` is present (the one numba uses), else sequentially; each call uses the
intra-op thread count (``MKL_NUM_THREADS``, ``OMP_NUM_THREADS`` or ``OPENBLAS_NUM_THREADS``,
else 1), set per calling thread so RuntimePool threads do not fight over it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from pathlib import Path

import numpy as np

from . import threads as _threads

# cblas enums (mkl_cblas.h)
ROW_MAJOR, NO_TRANS, TRANS, PACKED = 101, 111, 112, 151
A_MATRIX, B_MATRIX = 161, 162
# MKL_THREADING_* (mkl_service.h)
THREADING_SEQUENTIAL, THREADING_GNU = 1, 3

_lock = threading.Lock()
_loaded: list = []          # [library or None], once per process
_tls = threading.local()


def _find() -> str | None:
    """The path of ``libmkl_rt``: the installed ``mkl`` distribution's, else the system's."""
    try:
        from importlib.metadata import PackageNotFoundError, files

        for f in files("mkl") or ():
            if f.name.startswith("libmkl_rt.so"):
                path = Path(f.locate())
                if path.exists():
                    return str(path)
    except (ImportError, PackageNotFoundError):
        pass
    return ctypes.util.find_library("mkl_rt")


def library():
    """The loaded MKL runtime with its prototypes set, or None if MKL is not installed."""
    if _loaded:
        return _loaded[0]
    with _lock:
        if not _loaded:
            _loaded.append(_load())
    return _loaded[0]


def _load():
    path = _find()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    # before any computational call: the threading layer is fixed by the first one
    layer = THREADING_GNU if ctypes.util.find_library("gomp") else THREADING_SEQUENTIAL
    lib.MKL_Set_Threading_Layer(layer)
    i, f, p = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
    lib.cblas_sgemm_pack_get_size.restype = ctypes.c_size_t
    lib.cblas_sgemm_pack_get_size.argtypes = [i, i, i, i]
    lib.cblas_sgemm_pack.argtypes = [i, i, i, i, i, i, f, p, i, p]
    lib.cblas_sgemm_compute.argtypes = [i, i, i, i, i, i, p, i, p, i, f, p, i]
    lib.cblas_sgemm_compute.restype = None
    lib.cblas_sgemm.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
    lib.cblas_sgemm.restype = None
    lib.MKL_Set_Num_Threads_Local.argtypes = [i]
    lib.MKL_Set_Num_Threads_Local.restype = i
    lib.threads = intra_op_threads() if layer == THREADING_GNU else 1
    return lib


def version() -> str | None:
    """The installed ``mkl`` distribution's version (its packed layout may change between versions)."""
    try:
        from importlib.metadata import version as dist_version

        return dist_version("mkl")
    except Exception:   # not installed as a distribution (a system library): unknown
        return None


def intra_op_threads() -> int:
    for var in ("MKL_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        try:
            n = int(os.environ.get(var, ""))
        except ValueError:
            continue
        if n > 0:
            return n
    return 1


def set_threads(lib, n: int | None = None) -> None:
    """Give the calling thread ``n`` MKL threads (default: the intra-op count); a no-op when set."""
    n = lib.threads if n is None else n
    if getattr(_tls, "threads", None) != n:
        lib.MKL_Set_Num_Threads_Local(n)
        _tls.threads = n


class PackedGemm:
    """``out = x @ weight.T`` for ``x`` (M, K) and a constant ``weight`` (N, K), the weight packed
    once for this M. ``__call__(x, out)`` takes C-contiguous float32 arrays of those shapes."""

    def __init__(self, lib, weight: np.ndarray, m: int, packed: np.ndarray | None = None,
                 threads: int | None = None):
        self.lib = lib
        w = np.ascontiguousarray(weight, np.float32)
        self.n, self.k = w.shape
        self.m = m
        size = lib.cblas_sgemm_pack_get_size(B_MATRIX, m, self.n, self.k)
        if packed is not None:   # a serialized engine's (same MKL: the plan's compatibility record)
            if not isinstance(packed, np.ndarray) or packed.dtype != np.uint8 or packed.shape != (size,):
                raise ValueError(f"MKL packed weight of {getattr(packed, 'shape', '?')} bytes, expected ({size},)")
            self.packed = packed if packed.flags.writeable else np.array(packed, copy=True)
        else:
            self.packed = np.empty(size, np.uint8)
            # B = W^T: W row-major (N, K) read transposed, leading dimension K
            lib.cblas_sgemm_pack(ROW_MAJOR, B_MATRIX, TRANS, m, self.n, self.k, 1.0, w.ctypes.data, self.k,
                                 self.packed.ctypes.data)
        # what a call streams: the weight itself (get_size reserves far more for small matrices,
        # 10-30x at 256x1024, most of it never written)
        self.weight_bytes = w.nbytes
        self._addr = self.packed.ctypes.data
        self._compute = lib.cblas_sgemm_compute
        self._threads = lib.threads if threads is None else max(1, min(int(threads), lib.threads))
        # MKL's team waits for a busy core like numba's: the same run-time choice (threads.Governor)
        self.governor = _threads.Governor(self._threads)

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        n, k = self.n, self.k
        if self._threads == 1:
            if getattr(_tls, "threads", None) != 1:   # per calling thread, once
                set_threads(self.lib, 1)
            self._compute(ROW_MAJOR, NO_TRANS, PACKED, self.m, n, k, x.ctypes.data, k, self._addr, n, 0.0,
                          out.ctypes.data, n)
            return
        gov = self.governor
        team = gov.team()
        set_threads(self.lib, team)
        t0 = gov.clock()
        self._compute(ROW_MAJOR, NO_TRANS, PACKED, self.m, n, k, x.ctypes.data, k, self._addr, n, 0.0,
                      out.ctypes.data, n)
        gov.record(team, gov.clock() - t0)
