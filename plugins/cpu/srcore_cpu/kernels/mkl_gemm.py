"""float32 GEMMs with constant weights through Intel MKL (``cblas_sgemm_pack`` / ``_compute`` and
``cblas_sgemm`` of the ``mkl`` package's ``libmkl_rt``), where they time faster than numpy's BLAS.

torch eager runs its linears on MKL, numpy on OpenBLAS, which packs the weight again in every
call. MKL packs a constant weight once, at load, for the row count the node has; on an Intel
Sapphire Rapids at 1 thread the packed products took 0.62-0.83x OpenBLAS's time for the family
models' linears (M >= 64), but GEMVs (M = 1) 2.4x; see docs/performance.md. So nothing here is
chosen by vendor: :func:`gemm_for` times both libraries on the node's own shape when the matcher
runs (at load) and returns MKL's GEMM only when it was faster on this machine; otherwise the
kernel keeps ``np.dot``.

**Threads.** At more than one intra-op thread (numpy's BLAS thread count when the kernel is
built, ``parallel.blas_threads()``) a product is split by output columns over the plugin's part
pool (``parallel.run_parts``: the caller and its workers), each part a one-thread MKL call on its
own packed block of the weight. MKL's own team is not used: it is GNU OpenMP's, whose workers spin
after each region (torch, imported first, loads libgomp with its default policy, which MKL then
shares) on the core OpenBLAS's and the part pool's threads need: bert_encoder at 2 threads with
MKL's team on the linears and OpenBLAS on the attention products ran 99.8 ms a call, 7.2 ms on
OpenBLAS alone (6.8 ms with ``OMP_WAIT_POLICY=PASSIVE``, which a library cannot set once libgomp
is loaded). Every MKL call runs on one thread of the calling thread's (``MKL_Set_Num_Threads_Local``,
put back after), so trt_like's MKL tactic in the same process keeps its own count.

**Timing.** At one thread both libraries are timed in rounds alternating, on the thread's own
clock (``srcore.plugin.clock``). At more, the split against numpy's threaded BLAS in wall time
(``tactic.split_vs_blas``): the split while OpenBLAS's idle worker sleeps, as in a module whose
products all run on the part pool (the non-constant ones too: :mod:`.split_gemm`), where OpenBLAS
is held at one thread and its worker never wakes; a tie goes to the split. Timed the other way
(each MKL call right after a threaded OpenBLAS call, whose worker spins ~0.1 s on the core the
split's second part needs), MKL lost mlp_wide's linears, which then all ran on OpenBLAS; timed
after a pause while bert_encoder's attention products stayed on threaded OpenBLAS, MKL won its
linears and the model ran 1.6-1.8x slower (12.0-13.4 ms against 7.5-7.6, loaded Sapphire Rapids):
what splits its attention products now (performance.md).

Both plugins load MKL through srcore's :mod:`srcore.blas.mkl` (``srcore.plugin.mkl``); a process
whose MKL already runs another threading layer (numpy built on MKL, say) gets no MKL GEMM here.
``SRCORE_CPU_MKL=0`` turns it off.
"""
from __future__ import annotations

import os

import numpy as np

from srcore.plugin import clock as _clock
from srcore.plugin import mkl as _mkl

_ENV = "SRCORE_CPU_MKL"
_ROW_MAJOR, _NO_TRANS, _PACKED = _mkl.ROW_MAJOR, _mkl.NO_TRANS, _mkl.PACKED
_MIN_MACS = 1 << 18                 # below this the ctypes call (~1-2 us) outweighs any gain: not timed
_WIN = 0.97                         # MKL must be 3% faster: on a tie numpy's BLAS stays
_choices: dict[tuple[int, int, int, int], bool] = {}
#: a split's column blocks are multiples of this many columns (a cache line of float32)
_COLS = 16


def _blocks(n: int, threads: int) -> list[tuple[int, int]]:
    """``[(lo, hi), ...]``: ``n`` output columns in up to ``threads`` blocks of whole
    :data:`_COLS`-column groups (one block when there are fewer than two groups a thread)."""
    groups = n // _COLS
    if threads <= 1 or groups < 2 * threads:
        return [(0, n)]
    cuts = [groups * i // threads * _COLS for i in range(threads)] + [n]
    return list(zip(cuts[:-1], cuts[1:]))


def _load():
    """MKL's runtime (srcore's shared loader, :mod:`srcore.blas.mkl`), or None: not installed,
    ``SRCORE_CPU_MKL=0``, or MKL already runs another threading layer in this process."""
    if os.environ.get(_ENV, "1") == "0":
        return None
    lib = _mkl.library()
    return lib if lib is not None and lib.layer == lib.requested_layer else None


def _make(lib, wT, m: int, threads: int = 1):
    """``mkl_dot(x2, wT_, out=None)``: ``x2 @ wT_`` into ``out`` (both 2-D) by MKL when ``wT_`` is
    ``wT``, the kernel's constant (k, n) weight (C- or Fortran-contiguous: a transposed view of
    torch's weight needs no copy), and the operands suit ``cblas`` (float32, C-contiguous); else
    ``np.dot``. The weight is packed once, here, for ``m`` rows (``cblas_sgemm_pack``: no packing
    in the calls, 0.62-0.83x OpenBLAS's time on an Intel Sapphire Rapids); other row counts run
    ``cblas_sgemm``. At ``threads`` > 1 the output's column blocks (:func:`_blocks`) run on the
    part pool, each block's weight packed on its own."""
    from . import parallel as _par

    k, n = wT.shape
    blocks = _blocks(n, threads)
    trans, ld = (_NO_TRANS, n) if wT.flags.c_contiguous else (_mkl.TRANS, k)   # (as pack_b reads it)
    if len(blocks) == 1:
        packs = [_mkl.pack_b(lib, wT, m)]
    else:   # a column block of a C-contiguous weight is not contiguous: packed from a copy
        packs = [_mkl.pack_b(lib, np.ascontiguousarray(wT[:, lo:hi]) if wT.flags.c_contiguous else wT[:, lo:hi], m)
                 for lo, hi in blocks]
    parts = [(lo, hi, wT[:, lo:].ctypes.data, p.ctypes.data, p_ld) for (lo, hi), (p, _, p_ld) in zip(blocks, packs)]
    sgemm, compute, local = lib.cblas_sgemm, lib.cblas_sgemm_compute, lib.MKL_Set_Num_Threads_Local
    f32 = np.dtype(np.float32)

    def block(i, x_ptr, rows, o_ptr):
        lo, hi, w_ptr, p_ptr, p_ld = parts[i]
        prev = local(1)   # (srcore.blas.mkl.swap_threads, inlined: a call per product)
        try:
            if rows == m:
                compute(_ROW_MAJOR, _NO_TRANS, _PACKED, m, hi - lo, k, x_ptr, k, p_ptr, p_ld, 0.0, o_ptr + 4 * lo, n)
            else:
                sgemm(_ROW_MAJOR, _NO_TRANS, trans, rows, hi - lo, k, 1.0, x_ptr, k, w_ptr, ld, 0.0,
                      o_ptr + 4 * lo, n)
        finally:
            local(prev)

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
        x_ptr, o_ptr = x2.ctypes.data, out.ctypes.data
        if len(parts) == 1:
            block(0, x_ptr, rows, o_ptr)
        else:
            _par.run_parts(lambda i: block(i, x_ptr, rows, o_ptr), len(parts), threads)
        return out
    mkl_dot.packs = packs   # (kept alive with the kernel)
    mkl_dot.parts = len(parts)
    return mkl_dot


def _faster(mkl_call, np_call, reps: int, rounds: int, threads: int, key=None) -> bool:
    """Whether ``mkl_call`` should replace ``np_call`` (both warmed up). At one thread: rounds
    alternating on the thread's own clock, MKL kept when :data:`_WIN` faster. At more: the split
    against numpy's threaded BLAS (``tactic.split_vs_blas``: the split timed while OpenBLAS's
    worker sleeps, as in a module whose products all run split), MKL kept unless :data:`_WIN`
    slower: a threaded OpenBLAS call makes its worker spin on the core the next split needs."""
    if threads > 1:
        from .tactic import split_vs_blas

        # (key: pooled with the earlier timings of this shape, tactic.pooled)
        t_mkl, t_np = split_vs_blas(mkl_call, np_call, rounds=rounds, reps=reps, budget_s=None, key=key)
        return _WIN * t_mkl <= t_np
    clock = _clock.clock_for(threads)
    t = {mkl_call: float("inf"), np_call: float("inf")}
    for _ in range(rounds):
        for call in t:
            t[call] = min(t[call], _clock.per_call_ns(call, reps, clock))
    return t[mkl_call] < _WIN * t[np_call]


def _mkl_faster(mkl_dot, m: int, wT: np.ndarray, threads: int = 1) -> bool:
    """Time ``np.dot`` (on a C-contiguous weight, as the kernels would hold it) and ``mkl_dot`` on an
    ``(m, k) x wT`` product (:func:`_faster`)."""
    k, n = wT.shape
    x = np.random.default_rng(0).standard_normal((m, k), dtype=np.float32)
    out = np.empty((m, n), np.float32)
    wc = wT if wT.flags.c_contiguous else np.ascontiguousarray(wT)
    mkl_dot(x, wT, out)
    if threads <= 1:   # (at more, split_vs_blas warms numpy's up after timing MKL)
        np.dot(x, wc, out=out)
    reps = max(1, int(2e6 // (m * k * n) + 1))   # a round of ~2M multiply-adds or more
    rounds = 5 if m * k * n < 1 << 27 else 3     # 3 rounds of a product over ~5 ms
    return _faster(lambda: mkl_dot(x, wT, out), lambda: np.dot(x, wc, out=out), reps, rounds, threads,
                   key=("mkl_gemm", m, k, n, bool(wT.flags.c_contiguous), threads))


def gemm_for(m, wT: np.ndarray):
    """MKL's ``x2 @ wT`` (``mkl_dot(x2, wT, out=None)``, :func:`_make`) for an ``(m, k)`` float32
    ``x2`` when it timed faster than ``np.dot`` here (once per shape and process), else None.
    ``wT``: float32 (k, n), C- or Fortran-contiguous. ``m`` None (unknown at load) or a product
    below ``_MIN_MACS`` multiply-adds: None. Timed and run at numpy's BLAS thread count now."""
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
    larger matrix), else ``np.matmul``; None without MKL. At numpy's BLAS thread count now
    (``gemm.threads``) > 1 the columns are split over the part pool, one-thread MKL calls (see the
    module doc). Callers time it against their numpy path before using it (``conv.make_conv``)."""
    from . import parallel as _par

    lib = _load()
    if lib is None:
        return None
    threads = _par.blas_threads()
    sgemm, local = lib.cblas_sgemm, lib.MKL_Set_Num_Threads_Local
    f32 = np.dtype(np.float32)

    def one(a, b, out):
        m, k = a.shape
        prev = local(1)
        try:
            sgemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, b.shape[1], k, 1.0, a.ctypes.data, max(a.strides[0] // 4, 1),
                  b.ctypes.data, max(b.strides[0] // 4, 1), 0.0, out.ctypes.data, max(out.strides[0] // 4, 1))
        finally:
            local(prev)

    def gemm(a, b, out):
        m, k = a.shape
        n = b.shape[1]
        if (not (_rows_ok(a, f32) and _rows_ok(b, f32) and _rows_ok(out, f32)) or b.shape[0] != k
                or out.shape != (m, n) or m == 0 or n == 0 or k == 0):
            return np.matmul(a, b, out=out)
        blocks = _blocks(n, threads)
        if len(blocks) == 1:
            one(a, b, out)
        else:
            _par.run_parts(lambda i: one(a, b[:, blocks[i][0]:blocks[i][1]], out[:, blocks[i][0]:blocks[i][1]]),
                           len(blocks), threads)
        return out
    gemm.threads = threads
    return gemm
