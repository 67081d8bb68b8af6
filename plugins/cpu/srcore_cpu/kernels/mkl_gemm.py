"""float32 GEMMs with constant weights through Intel MKL (``cblas_sgemm_pack`` / ``_compute`` and
``cblas_sgemm`` of the ``mkl`` package's ``libmkl_rt``), where they time faster than numpy's BLAS.

torch eager runs its linears on MKL, numpy on OpenBLAS, which packs the weight again in every
call. MKL packs a constant weight once, at load, for the row count the node has; on an Intel
Sapphire Rapids at 1 thread the packed products took 0.62-0.83x OpenBLAS's time for the family
models' linears (M >= 64), but GEMVs (M = 1) 2.4x; see docs/performance.md. So nothing here is
chosen by vendor: :func:`gemm_for` times both libraries on the node's own shape when the matcher
runs (at load) and returns MKL's GEMM only when it was faster on this machine; otherwise the
kernel keeps ``np.dot``.

**Threads.** MKL runs on as many threads as numpy's BLAS has when the kernel is built
(``parallel.blas_threads()``, the process's intra-op count): each call sets the calling thread's
MKL count for the call and puts it back after (``MKL_Set_Num_Threads_Local``), so trt_like's MKL
tactic in the same process keeps its own count. At one thread both libraries are timed on the
thread's own clock (``srcore.plugin.clock``), rounds alternating; at more, in wall time, MKL's
rounds back to back after a pause (:data:`SETTLE_S`), then numpy's: OpenBLAS's idle worker spins
~0.1 s after a threaded call on the core MKL's team needs, and alternating calls charged MKL for
it (64x4096 @ 4096x4096 at 2 threads on the Sapphire Rapids: MKL 6.8 ms after a pause, 12.7
alternating with OpenBLAS's 9.7). MKL's team is GNU OpenMP's (:mod:`srcore.blas.mkl`), whose
workers by default spin after each region on the core OpenBLAS's and the part pool's threads
need: bert_encoder at 2 threads with MKL's linears and OpenBLAS's attention products ran 99.8 ms
a call that way, 6.8 ms with ``OMP_WAIT_POLICY=PASSIVE`` (workers sleep at once), 7.2 ms on
OpenBLAS alone. So loading MKL here asks for passive workers unless the user chose a policy (as
trt_like does), and MKL is offered at more than one thread only where the workers are known to
sleep (:func:`workers_sleep`): libgomp reads the policy once, when it is loaded, and torch
(imported first by its frontends) loads its own copy, which MKL then shares. Both plugins load MKL through srcore's
:mod:`srcore.blas.mkl` (``srcore.plugin.mkl``), so they share its threading layer; a process whose
MKL already runs another layer (numpy built on MKL, say) gets no MKL GEMM here.
``SRCORE_CPU_MKL=0`` turns it off.
"""
from __future__ import annotations

import os
import time

import numpy as np

from srcore.plugin import clock as _clock
from srcore.plugin import mkl as _mkl

_ENV = "SRCORE_CPU_MKL"
_ROW_MAJOR, _NO_TRANS, _PACKED = _mkl.ROW_MAJOR, _mkl.NO_TRANS, _mkl.PACKED
_MIN_MACS = 1 << 18                 # below this the ctypes call (~1-2 us) outweighs any gain: not timed
_WIN = 0.97                         # MKL must be 3% faster: on a tie numpy's BLAS stays
#: at more than one thread, the pause before MKL's timing rounds: OpenBLAS's workers spin for
#: ~2^28 cycles (``OPENBLAS_THREAD_TIMEOUT``'s default, ~0.1 s) after a threaded call
SETTLE_S = 0.12
_choices: dict[tuple[int, int, int, int], bool] = {}
_passive: list[bool] = []           # workers_sleep(), decided once, when MKL is first loaded


def _gomp_loaded() -> bool:
    try:
        with open("/proc/self/maps") as f:
            return any("libgomp" in line for line in f)
    except OSError:
        return True       # cannot tell: assume it is, with a policy this process may not know


def _initial_policy() -> str:
    """``OMP_WAIT_POLICY`` in the environment this process started with ("" if unset or unknown)."""
    try:
        with open("/proc/self/environ", "rb") as f:
            for var in f.read().split(b"\0"):
                if var.startswith(b"OMP_WAIT_POLICY="):
                    return var.split(b"=", 1)[1].decode(errors="replace").strip().upper()
    except OSError:
        pass
    return ""


def workers_sleep() -> bool:
    """Whether GNU OpenMP's workers (MKL's team) sleep at once after a region: libgomp loaded after
    this process asked for ``OMP_WAIT_POLICY=PASSIVE`` (the default :func:`_load` sets), or already
    loaded by a process started with it. Decided when MKL is first loaded."""
    return bool(_passive and _passive[0])


def _load():
    """MKL's runtime (srcore's shared loader, :mod:`srcore.blas.mkl`), or None: not installed,
    ``SRCORE_CPU_MKL=0``, or MKL already runs another threading layer in this process."""
    if os.environ.get(_ENV, "1") == "0":
        return None
    if not _passive:
        if _gomp_loaded():
            _passive.append(_initial_policy() == "PASSIVE")
        else:   # libgomp reads it when it loads (see the module doc)
            _passive.append(os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE").strip().upper() == "PASSIVE")
    lib = _mkl.library()
    return lib if lib is not None and lib.layer == lib.requested_layer else None


def _make(lib, wT, m: int, threads: int = 1):
    """``mkl_dot(x2, wT_, out=None)``: ``x2 @ wT_`` into ``out`` (both 2-D) by MKL when ``wT_`` is
    ``wT``, the kernel's constant (k, n) weight (C- or Fortran-contiguous: a transposed view of
    torch's weight needs no copy), and the operands suit ``cblas`` (float32, C-contiguous); else
    ``np.dot``. The weight is packed once, here, for ``m`` rows (``cblas_sgemm_pack``: no packing
    in the calls, 0.62-0.83x OpenBLAS's time on an Intel Sapphire Rapids); other row counts run
    ``cblas_sgemm``. Each call runs MKL on ``threads`` threads."""
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
        prev = local(threads)   # (srcore.blas.mkl.swap_threads, inlined: a call per product)
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


def _faster(mkl_call, np_call, reps: int, rounds: int, threads: int) -> bool:
    """Whether ``mkl_call`` times :data:`_WIN` faster than ``np_call`` (both warmed up), each round
    ``reps`` calls: at one thread on the thread's own clock, rounds alternating; at more in wall
    time, MKL's rounds back to back after :data:`SETTLE_S`, then numpy's (see the module doc)."""
    t = {mkl_call: float("inf"), np_call: float("inf")}
    if threads == 1:
        for _ in range(rounds):
            for call in t:
                t[call] = min(t[call], _clock.per_call_ns(call, reps, "cpu"))
    else:
        time.sleep(SETTLE_S)
        for call in t:
            call()
            for _ in range(rounds):
                t[call] = min(t[call], _clock.per_call_ns(call, reps, "wall"))
    return t[mkl_call] < _WIN * t[np_call]


def _mkl_faster(mkl_dot, m: int, wT: np.ndarray, threads: int = 1) -> bool:
    """Time ``np.dot`` (on a C-contiguous weight, as the kernels would hold it) and ``mkl_dot`` on an
    ``(m, k) x wT`` product (:func:`_faster`)."""
    k, n = wT.shape
    x = np.random.default_rng(0).standard_normal((m, k), dtype=np.float32)
    out = np.empty((m, n), np.float32)
    wc = wT if wT.flags.c_contiguous else np.ascontiguousarray(wT)
    np.dot(x, wc, out=out)
    mkl_dot(x, wT, out)
    reps = max(1, int(2e6 // (m * k * n) + 1))   # a round of ~2M multiply-adds or more
    rounds = 5 if m * k * n < 1 << 27 else 3     # 3 rounds of a product over ~5 ms
    return _faster(lambda: mkl_dot(x, wT, out), lambda: np.dot(x, wc, out=out), reps, rounds, threads)


def gemm_for(m, wT: np.ndarray):
    """MKL's ``x2 @ wT`` (``mkl_dot(x2, wT, out=None)``, :func:`_make`) for an ``(m, k)`` float32
    ``x2`` when it timed faster than ``np.dot`` here (once per shape and process), else None.
    ``wT``: float32 (k, n), C- or Fortran-contiguous. ``m`` None (unknown at load) or a product
    below ``_MIN_MACS`` multiply-adds: None. Timed and run at numpy's BLAS thread count now (at more
    than one only where :func:`workers_sleep`)."""
    from .parallel import blas_threads

    if (not isinstance(m, int) or m <= 0 or wT.dtype != np.float32 or wT.ndim != 2
            or not (wT.flags.c_contiguous or wT.flags.f_contiguous)):
        return None
    k, n = wT.shape
    if m * k * n < _MIN_MACS:
        return None
    lib = _load()
    if lib is None:
        return None
    threads = blas_threads()
    if threads > 1 and not workers_sleep():
        return None
    mkl_dot = _make(lib, wT, m, threads)
    key = (m, k, n, threads)
    if key not in _choices:
        _choices[key] = _mkl_faster(mkl_dot, m, wT, threads)
    return mkl_dot if _choices[key] else None


def _rows_ok(a, f32) -> bool:
    """A float32 2-D array whose rows are contiguous (any row stride): ``cblas`` takes it as is."""
    return a.dtype == f32 and a.ndim == 2 and a.strides[1] == 4 and a.strides[0] % 4 == 0 and a.strides[0] >= 0


def matmul_rows():
    """``gemm(a, b, out)``: ``out[...] = a @ b`` by ``cblas_sgemm`` for float32 2-D operands whose
    rows are contiguous (row strides as leading dimensions: ``out`` may be a block of columns of a
    larger matrix), else ``np.matmul``; None without MKL. It runs MKL on numpy's BLAS thread count
    now (``gemm.threads``; at more than one only where :func:`workers_sleep`). Callers time it
    against their numpy path before using it (``conv.make_conv``)."""
    from .parallel import blas_threads

    lib = _load()
    if lib is None:
        return None
    threads = blas_threads()
    if threads > 1 and not workers_sleep():
        return None
    sgemm, local = lib.cblas_sgemm, lib.MKL_Set_Num_Threads_Local
    f32 = np.dtype(np.float32)

    def gemm(a, b, out):
        m, k = a.shape
        n = b.shape[1]
        if (not (_rows_ok(a, f32) and _rows_ok(b, f32) and _rows_ok(out, f32)) or b.shape[0] != k
                or out.shape != (m, n) or m == 0 or n == 0 or k == 0):
            return np.matmul(a, b, out=out)
        prev = local(threads)
        try:
            sgemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0, a.ctypes.data, max(a.strides[0] // 4, 1),
                  b.ctypes.data, max(b.strides[0] // 4, 1), 0.0, out.ctypes.data, max(out.strides[0] // 4, 1))
        finally:
            local(prev)
        return out
    gemm.threads = threads
    return gemm
