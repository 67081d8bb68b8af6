"""Products of two non-constant float tensors (``aten::matmul`` / ``bmm`` / ``mm``: attention's
``q @ k^T`` and ``probs @ v``) split over the part pool at more than one BLAS thread.

At one thread nothing changes. At more, numpy's matmul runs OpenBLAS's threaded GEMM, whose idle
worker then spins ~0.1 s on the core the next part-pool split needs (MKL's linears, split convs):
in a module whose other products run split, one threaded OpenBLAS call between them spoils them
(performance.md). So such a product is split too, over its first batch axis with at least as many
entries as threads (bert's heads), else over its rows, each part a one-thread numpy matmul (the pool
holds OpenBLAS at one thread while its parts run); then no product of the module wakes OpenBLAS's
worker. Chosen where it times no slower than the threaded matmul at load
(``tactic.split_vs_blas``), never by vendor; ``SRCORE_CPU_SPLIT_GEMM=0`` turns it off.
"""
from __future__ import annotations

import os

import numpy as np

_ENV = "SRCORE_CPU_SPLIT_GEMM"
#: OpenBLAS runs a GEMM under this many multiply-adds on one thread (its SMP threshold, 65536 x 4):
#: nothing to split, and no worker woken
MIN_MACS = 1 << 18
#: the split is kept unless the threaded matmul times this much faster (a tie keeps OpenBLAS idle)
WIN = 0.97
_choices: dict[tuple, bool] = {}


def _parts(a_shape, b_shape, threads: int):
    """``(out_shape, [(a_index, b_index, out_index), ...])``: the split of ``a @ b`` into up to
    ``threads`` parts (first batch axis with ``threads`` or more entries, else rows), or None."""
    if len(a_shape) < 2 or len(b_shape) < 2:
        return None
    try:
        batch = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    except ValueError:
        return None
    out_shape = (*batch, a_shape[-2], b_shape[-1])
    nd = len(out_shape)
    axis = next((j for j, e in enumerate(batch) if e >= threads), None)
    if axis is None:                      # rows: a's and out's second-last axis
        if a_shape[-2] < 2 * threads:
            return None
        axis, sliced = nd - 2, (True, False)
    else:                                 # an operand whose batch is shorter or broadcast there: whole
        sliced = tuple(axis - (nd - len(s)) >= 0 and s[axis - (nd - len(s))] > 1 for s in (a_shape, b_shape))
    from .parallel import split

    def index(shape, on, lo, hi):
        if not on:
            return ...
        return (slice(None),) * (axis - (nd - len(shape))) + (slice(lo, hi),)
    return out_shape, [(index(a_shape, sliced[0], lo, hi), index(b_shape, sliced[1], lo, hi),
                        (slice(None),) * axis + (slice(lo, hi),))
                       for lo, hi in split(out_shape[axis], threads)]


def make(a_shape, b_shape, dtype, threads: int):
    """``split_matmul(a, b, out=None)``: ``np.matmul(a, b)`` in parts on the part pool for operands
    of exactly these shapes and ``dtype`` (anything else: ``np.matmul``), or None when it does not
    split."""
    from . import parallel as _par

    plan = _parts(a_shape, b_shape, threads)
    if plan is None:
        return None
    out_shape, parts = plan
    a_shape, b_shape, dtype = tuple(a_shape), tuple(b_shape), np.dtype(dtype)
    matmul, run = np.matmul, _par.run_parts

    def split_matmul(a, b, out=None):
        if a.shape != a_shape or b.shape != b_shape or a.dtype != dtype or b.dtype != dtype:
            return matmul(a, b, out=out)
        if out is None:
            out = np.empty(out_shape, dtype)
        elif out.shape != out_shape or out.dtype != dtype:
            return matmul(a, b, out=out)
        run(lambda i: matmul(a[parts[i][0]], b[parts[i][1]], out=out[parts[i][2]]), len(parts), threads)
        return out
    split_matmul.parts = len(parts)
    return split_matmul


def split_for(a_shape, b_shape, dtype):
    """The split matmul (:func:`make`) for these static shapes where it timed no slower than numpy's
    threaded matmul here (once per shapes and process), else None: at one BLAS thread, unknown or
    symbolic shapes, other dtypes than float32/float64, products under :data:`MIN_MACS`."""
    from .parallel import blas_threads

    if os.environ.get(_ENV, "1") == "0" or dtype not in ("float32", "float64"):
        return None
    if a_shape is None or b_shape is None or not all(isinstance(d, int) for d in (*a_shape, *b_shape)):
        return None
    threads = blas_threads()
    if threads <= 1 or len(a_shape) < 2 or len(b_shape) < 2:
        return None
    try:
        batch = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    except ValueError:
        return None
    if int(np.prod(batch, dtype=np.int64)) * a_shape[-2] * a_shape[-1] * b_shape[-1] < MIN_MACS:
        return None
    fn = make(a_shape, b_shape, dtype, threads)
    if fn is None:
        return None
    key = (tuple(a_shape), tuple(b_shape), dtype, threads)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(dtype) for s in (a_shape, b_shape))
    out = np.empty(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + (a_shape[-2], b_shape[-1]), dtype)
    native = native_matmul(a_shape, b_shape, threads) if dtype == "float32" else None
    if native is not None:
        # (the split whose parts never take the GIL against the Python parts' one, then as before)
        nkey = ("native",) + key
        if nkey not in _choices:
            from .tactic import fastest

            _choices[nkey] = fastest({"split": fn, "native": native}, (a, b, out),
                                     key=("split_gemm_native",) + key) == "native"
        if _choices[nkey]:
            fn, key = native, key + ("native",)
    if key not in _choices:
        from .tactic import split_vs_blas

        t_split, t_blas = split_vs_blas(lambda: fn(a, b, out), lambda: np.matmul(a, b, out=out),
                                        key=("split_gemm",) + key)   # (pooled over builds: tactic.pooled)
        _choices[key] = WIN * t_split <= t_blas
    return fn if _choices[key] else None


def native_matmul(a_shape, b_shape, threads: int):
    """``fn(a, b, out=None)``: the float32 ``np.matmul(a, b)`` of these static shapes split over
    :mod:`.native_team` (parts per batch entry or row block, never taking the GIL), for a
    C-contiguous output and operands whose matrices cblas reads (any strides with a contiguous
    axis: the transposed views of attention's heads), else ``np.matmul``; None where that team is
    not available or turned off."""
    from . import native_team as NT
    from . import parallel as _par

    team, fn_addr = NT.team(threads), NT.sgemm_address()
    if team is None or fn_addr is None:
        return None
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    out_shape = np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + (a_shape[-2], b_shape[-1])
    f32, matmul = np.dtype(np.float32), np.matmul
    gemms: dict = {}   # (a's strides, b's strides) -> Gemm, or None: cblas cannot read them

    def native_matmul(a, b, out=None):
        if a.shape != a_shape or b.shape != b_shape or a.dtype != f32 or b.dtype != f32:
            return matmul(a, b, out=out)
        if out is None:
            out = np.empty(out_shape, f32)
        elif out.shape != out_shape or out.dtype != f32 or not out.flags.c_contiguous:
            return matmul(a, b, out=out)
        strides = (a.strides, b.strides)
        g = gemms.get(strides, False)
        if g is False:
            parts = NT.batched_parts(a_shape, b_shape, a.strides, b.strides, threads) if len(gemms) < 8 else None
            g = gemms[strides] = None if parts is None or len(parts) < 2 else NT.Gemm(parts, fn_addr, team)
        if g is None:
            return matmul(a, b, out=out)
        g(a.ctypes.data, b.ctypes.data, out.ctypes.data)
        return out
    return _par.on_caller(native_matmul)
