"""Intel MKL's runtime (``libmkl_rt`` of the optional ``mkl`` package) through ctypes, for the backends'
float32 GEMMs: finding and loading it once per process, its ``cblas`` SGEMM and packed-weight entry
points, and MKL's per-thread thread count. A library, not a backend: which products run on MKL, and on
how many threads, is each plugin's choice (they time it against numpy's BLAS on the machine).

Every plugin in the process shares the one loaded runtime, so they agree on its threading layer: GNU
OpenMP where ``libgomp`` is found (the one numba uses), else sequential. It is fixed before any
computational call; ``lib.layer`` is the layer MKL reports afterwards, which differs from
``lib.requested_layer`` when MKL already ran another one in this process (numpy built on MKL, say).
Thread counts are set per calling thread (``MKL_Set_Num_Threads_Local``), so RuntimePool threads and
the plugins do not fight over them.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading

import numpy as np

from ..errors import KernelError

# cblas enums (mkl_cblas.h)
ROW_MAJOR, NO_TRANS, TRANS, PACKED = 101, 111, 112, 151
A_MATRIX, B_MATRIX = 161, 162
# MKL_THREADING_* (mkl_service.h)
THREADING_SEQUENTIAL, THREADING_GNU = 1, 3

_lock = threading.Lock()
_loaded: list = []          # [library or None], once per process
_tls = threading.local()


def library_paths():
    """Where ``libmkl_rt`` may be, in order: the installed ``mkl`` distribution's files, the running
    environment's ``lib/``, the system's."""
    try:
        from importlib.metadata import PackageNotFoundError, files

        for f in files("mkl") or ():
            if f.name.startswith("libmkl_rt.so"):
                path = os.fspath(f.locate())   # no pathlib at import: the kernels import this module at start
                if os.path.exists(path):
                    yield path
    except (ImportError, PackageNotFoundError):
        pass
    lib = os.path.join(sys.prefix, "lib")
    yield from (p for p in (os.path.join(lib, f"libmkl_rt.so.{v}") for v in (3, 2)) if os.path.exists(p))
    from ctypes.util import find_library  # here: it imports subprocess, shutil and tempfile (~3 ms of a cold start)

    found = find_library("mkl_rt")
    if found:
        yield found


def library():
    """The loaded MKL runtime with its prototypes set (and ``requested_layer``, ``layer``, ``threads``:
    the intra-op count on the GNU layer, else 1), or None if MKL is not installed."""
    if _loaded:
        return _loaded[0]
    with _lock:
        if not _loaded:
            _loaded.append(_load())
    return _loaded[0]


def _load():
    for path in library_paths():
        try:
            lib = ctypes.CDLL(path)
            _prototypes(lib)
        except (OSError, AttributeError):   # not loadable, or not MKL's runtime
            continue
        # before any computational call: the threading layer is fixed by the first one
        from ctypes.util import find_library

        lib.requested_layer = THREADING_GNU if find_library("gomp") else THREADING_SEQUENTIAL
        lib.layer = lib.MKL_Set_Threading_Layer(lib.requested_layer)
        lib.threads = intra_op_threads() if lib.requested_layer == THREADING_GNU else 1
        return lib
    return None


def _prototypes(lib) -> None:
    i, f, p = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
    protos = {
        "cblas_sgemm": ([i, i, i, i, i, i, f, p, i, p, i, f, p, i], None),
        "cblas_sgemm_pack_get_size": ([i, i, i, i], ctypes.c_size_t),
        "cblas_sgemm_pack": ([i, i, i, i, i, i, f, p, i, p], None),
        "cblas_sgemm_compute": ([i, i, i, i, i, i, p, i, p, i, f, p, i], None),
        "MKL_Set_Num_Threads_Local": ([i], i),
        "MKL_Set_Threading_Layer": ([i], i),
    }
    for name, (argtypes, restype) in protos.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, restype


def version() -> str | None:
    """The installed ``mkl`` distribution's version (its packed layout may change between versions)."""
    try:
        from importlib.metadata import version as dist_version

        return dist_version("mkl")
    except Exception:   # not installed as a distribution (a system library): unknown
        return None


def intra_op_threads() -> int:
    """The intra-op thread count asked for: ``MKL_NUM_THREADS``, ``OMP_NUM_THREADS`` or
    ``OPENBLAS_NUM_THREADS`` (the first positive integer), else 1."""
    for var in ("MKL_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        try:
            n = int(os.environ.get(var, ""))
        except ValueError:
            continue
        if n > 0:
            return n
    return 1


def set_threads(lib, n: int | None = None) -> None:
    """Give the calling thread ``n`` MKL threads (default ``lib.threads``); a no-op when already set
    by this function."""
    n = lib.threads if n is None else n
    if getattr(_tls, "threads", None) != n:
        lib.MKL_Set_Num_Threads_Local(n)
        _tls.threads = n


def swap_threads(lib, n: int) -> int:
    """Give the calling thread ``n`` MKL threads and return its previous count (put it back with
    ``swap_threads(lib, previous)``), for a call that must not change the thread's setting."""
    return lib.MKL_Set_Num_Threads_Local(n)


def pack_b(lib, wT: np.ndarray, m: int) -> tuple[np.ndarray, int, int]:
    """A constant float32 ``wT`` (k, n), C- or Fortran-contiguous (a transposed view of a row-major
    (n, k) weight needs no copy), packed by ``cblas_sgemm_pack`` as the B operand of ``(m, k) x wT``
    products: ``(packed bytes, transpose flag, leading dimension)``, the flag and dimension those of
    ``wT`` as ``cblas_sgemm`` would read it. The bytes are valid only where they are: a copy at
    another address made ``cblas_sgemm_compute`` compute wrong values or die with SIGFPE (MKL
    2026.2), so they are never stored to be read back."""
    if wT.dtype != np.float32 or wT.ndim != 2 or not (wT.flags.c_contiguous or wT.flags.f_contiguous):
        layout = "contiguous" if wT.flags.c_contiguous or wT.flags.f_contiguous else "strided"
        raise KernelError(f"MKL packs a 2-D C- or Fortran-contiguous float32 matrix, not a {layout} "
                          f"{wT.dtype} {wT.shape}")
    k, n = wT.shape
    trans, ld = (NO_TRANS, n) if wT.flags.c_contiguous else (TRANS, k)
    packed = np.empty(lib.cblas_sgemm_pack_get_size(B_MATRIX, m, n, k), np.uint8)
    lib.cblas_sgemm_pack(ROW_MAJOR, B_MATRIX, trans, m, n, k, 1.0, wT.ctypes.data, ld, packed.ctypes.data)
    return packed, trans, ld
