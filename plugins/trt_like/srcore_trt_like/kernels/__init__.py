"""The kernels wing: numba code (and MKL through ctypes) that the tactics call.

* :mod:`.jit`: the numba options every kernel uses; :mod:`.epilogue`: the shared epilogues
  (bias, residual, relu) of the conv kernels;
* :mod:`.fastmath` (vectorizable float32 exp/log/tanh/erf) and :mod:`.simd` (16-lane vectors);
* :mod:`.conv`, :mod:`.gemm`, :mod:`.packed`, :mod:`.winograd`, :mod:`.winograd_vec`,
  :mod:`.conv_pool`, :mod:`.pool`, :mod:`.pool_vec`, :mod:`.rows`: the kernels;
  :mod:`.parallel`, :mod:`.rows_split`: their ``parallel=True`` drivers (:mod:`.atomics`: the
  counter their threads claim parts from, and the one claim loop of the splits);
* :mod:`.threads` (intra-op threads), :mod:`.scratch` (per-thread scratch) and :mod:`.mkl`
  (Intel oneMKL's packed SGEMM, when installed; :mod:`.mkl_split`: split by weight columns).

numba caches each kernel on disk next to its module, keyed by that module's source only; a
kernel calling a helper of another module here would keep stale machine code after an edit
of the helper. So :func:`kernel_set` hashes every source file of this package and importing
the package drops the on-disk cache when the hash changed. The same hash identifies the kernel
set in serialized engine plans.
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent


#: modules here without numba code (MKL through ctypes, thread settings, scratch buffers)
_NOT_COMPILED = frozenset({"__init__.py", "mkl.py", "threads.py", "scratch.py"})


@functools.cache
def kernel_set() -> str:
    """A short hash of every numba source of this package (what compiled code depends on)."""
    digest = hashlib.sha256()
    for path in sorted(_HERE.glob("*.py")):
        if path.name in _NOT_COMPILED:
            continue
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _refresh_cache() -> None:
    """Drop numba's cache files of this package if they were made from other sources."""
    cache = _HERE / "__pycache__"
    stamp = cache / "srcore-kernel-set.txt"
    current = kernel_set()
    try:
        if stamp.read_text() == current:
            return
    except OSError:
        pass
    try:
        for f in cache.glob("*.nb[ic]"):
            f.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        tmp = cache / f".kernel-set.{os.getpid()}.tmp"
        tmp.write_text(current)
        os.replace(tmp, stamp)
    except OSError:   # a read-only install: numba keeps its cache elsewhere (NUMBA_CACHE_DIR)
        pass


_refresh_cache()
