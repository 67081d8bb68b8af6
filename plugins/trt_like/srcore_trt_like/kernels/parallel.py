"""The packed conv on several threads: numba ``parallel=True`` drivers over the serial kernels of
``packed.py`` and ``gemm.py`` (see ``threads.py`` for the threading layer).

Two schedules, chosen per layer by the tactic:

* *chunks* (small weights, many pixels: the stem): each thread takes whole chunks of column
  blocks, round robin, and runs gather, GEMM and epilogue on them in its own buffers; no
  barrier between the phases, every thread reads the (small) weights;
* *phased* (large weights): gather split by column blocks, then the GEMM split by 64-row
  weight blocks (each thread streams its half of the weights) or by column blocks when there
  are few row blocks, then the epilogue split by output channels; one parallel region each.

Every region runs ``prange(nt)`` with part ``t`` doing the t-th slice of the work, so results
do not depend on how many threads actually run it.
"""
from __future__ import annotations

from numba import njit, prange

from . import conv_pool as _cp
from . import gemm as _g
from . import packed as _k
from . import pool_vec as _pool
from . import winograd_vec as _w
from .jit import PARALLEL_JIT


@njit(inline="always")
def _part(total, t, nt, quantum):
    """Part t of nt of range(total), cut at multiples of ``quantum``."""
    q = (total + quantum - 1) // quantum
    return min(total, q * t // nt * quantum), min(total, q * (t + 1) // nt * quantum)


@njit(**PARALLEL_JIT)
def conv(x, xph, pad, rows, kh, kw, sh, sw, ph, dh, joff, seg, wf, K, MB, xp, ct, step, bias, res, has_res, relu, out,
         nt, by_chunks, split_rows):
    """``out = relu?(W @ im2col(x) + bias (+ res))`` on ``nt`` threads. ``xp``/``ct``: (nt, step, K, 6) and
    (nt, 6 step, 64 MB) for *chunks*, (1, blocks, K, 6) and (1, 6 blocks, 64 MB) for *phased* (the same ranks
    both ways: one signature, one cold compile)."""
    N, C = x.shape[0], x.shape[1]
    O = out.shape[1]
    P = out.shape[2] * out.shape[3]
    nb = seg.shape[0]
    ldc = 64 * MB
    for n in range(N):
        for t in prange(nt):
            c0, c1 = _part(C, t, nt, 1)
            _k.split_phases(x, n, sw, pad, rows, xph, c0, c1)
        if by_chunks:
            nch = (nb + step - 1) // step
            for t in prange(nt):
                xpt, ctt = xp[t], ct[t].reshape(-1)
                for ch in range(t, nch, nt):
                    pb0 = ch * step
                    pb1 = min(nb, pb0 + step)
                    _k.gather(xph, kh, kw, sh, ph, dh, joff, seg, pb0, pb1, xpt, pb0, 0, C)
                    _g.gemm(wf, 0, xpt.reshape(-1), 0, ctt, 0, K, MB, 0, MB, 0, pb1 - pb0, ldc)
                    _k.epilogue_t(ctt, 0, ldc, 1, min(P, 6 * pb1) - 6 * pb0, 0, out, n, 6 * pb0, bias, res, has_res,
                                  relu, 0, O)
        else:
            for t in prange(nt):
                pb0, pb1 = _part(nb, t, nt, 1)
                _k.gather(xph, kh, kw, sh, ph, dh, joff, seg, pb0, pb1, xp[0], 0, 0, C)
            xf, cf = xp.reshape(-1), ct.reshape(-1)
            for t in prange(nt):
                if split_rows:
                    ob0, ob1 = _part(MB, t, nt, 1)
                    _g.gemm(wf, 0, xf, 0, cf, 0, K, MB, ob0, ob1, 0, nb, ldc)
                else:
                    pb0, pb1 = _part(nb, t, nt, 1)
                    _g.gemm(wf, 0, xf, 0, cf, 0, K, MB, 0, MB, pb0, pb1, ldc)
            for t in prange(nt):
                o0, o1 = _part(O, t, nt, 16)
                _k.epilogue_t(cf, 0, ldc, 1, P, 0, out, n, 0, bias, res, has_res, relu, o0, o1)


@njit(inline="always")
def _wino_in(m, x, n, pt, pl, tw, ty0, ty1, v, psv, csv, ldv, c0, c1):
    # kernels chosen by value, not passed as functions: numba does not cache functions that take
    # dispatchers as arguments (6 s of compiling at every process start)
    if m == 4:
        _w.input_f4(x, n, pt, pl, tw, ty0, ty1, v, psv, csv, ldv, c0, c1)
    else:
        _w.input_f2(x, n, pt, pl, tw, ty0, ty1, v, psv, csv, ldv, c0, c1)


@njit(inline="always")
def _wino_out(m, cf, ldc, ps, tw, ty0, ty1, bias, res, has_res, relu, out, n, o0, o1):
    if m == 4:
        _w.output_f4(cf, ldc, ps, tw, ty0, ty1, bias, res, has_res, relu, out, n, o0, o1)
    else:
        _w.output_f2(cf, ldc, ps, tw, ty0, ty1, bias, res, has_res, relu, out, n, o0, o1)


@njit(**PARALLEL_JIT)
def winograd(m, x, chunks, pt, pl, tw, v, uf, usz, C, MB, ct, ldc, ps, P, bias, res, has_res, relu, out, nt,
             by_chunks):
    """A Winograd F(m x m) conv (``winograd_packed.py``) on ``nt`` threads over its chunks of tile rows
    (``chunks``: (image, first, end tile row)). *by_chunks*: each thread whole chunks, its own V and
    C^T (``v``/``ct`` rows t); else per chunk the input transform split by input channels, the P
    products by (point, row block) items, the output transform by 16 output channels."""
    O = out.shape[1]
    if by_chunks:
        for t in prange(nt):
            vt, ctt = v[t], ct[t]
            for i in range(t, chunks.shape[0], nt):
                n, ty0, ty1 = chunks[i, 0], chunks[i, 1], chunks[i, 2]
                nbc = ((ty1 - ty0) * tw + 5) // 6
                ldv = 6 * nbc
                _wino_in(m, x, n, pt, pl, tw, ty0, ty1, vt, C * ldv, ldv, ldv, 0, C)
                for p in range(P):
                    _g.gemm_u(uf, p * usz, vt, p * C * ldv, ldv, ctt, p * ps, C, MB, 0, MB, 0, nbc, ldc)
                _wino_out(m, ctt, ldc, ps, tw, ty0, ty1, bias, res, has_res, relu, out, n, 0, O)
        return
    vf, cf = v[0], ct[0]
    for i in range(chunks.shape[0]):
        n, ty0, ty1 = chunks[i, 0], chunks[i, 1], chunks[i, 2]
        nbc = ((ty1 - ty0) * tw + 5) // 6
        ldv = 6 * nbc
        for t in prange(nt):
            c0, c1 = _part(C, t, nt, 1)
            _wino_in(m, x, n, pt, pl, tw, ty0, ty1, vf, C * ldv, ldv, ldv, c0, c1)
        for t in prange(nt):
            i0, i1 = _part(P * MB, t, nt, 1)
            for j in range(i0, i1):
                p, ob = j // MB, j % MB
                _g.gemm_u(uf, p * usz, vf, p * C * ldv, ldv, cf, p * ps, C, MB, ob, ob + 1, 0, nbc, ldc)
        for t in prange(nt):
            o0, o1 = _part(O, t, nt, 16)
            _wino_out(m, cf, ldc, ps, tw, ty0, ty1, bias, res, has_res, relu, out, n, o0, o1)


@njit(**PARALLEL_JIT)
def max_pool_s2(x, kh, kw, sh, ph, pw, out, nt):
    """:func:`pool_vkernels.max_pool_s2` on ``nt`` threads, split by channels."""
    C = x.shape[1]
    for t in prange(nt):
        c0, c1 = _part(C, t, nt, 1)
        _pool.max_pool_s2(x, kh, kw, sh, ph, pw, out, c0, c1)


@njit(**PARALLEL_JIT)
def conv_pool(x, xph, pad, rows, kh, kw, sh, sw, ph, dh, joff, seg, Hc, Wc, wf, K, MB, step, pool, xp, ct, hm, stage,
              bias, relu, out, nt):
    """The fused conv + max pool (``conv_pool.py``) on ``nt`` threads: the input's phases split by
    channels, then each thread a range of pooled rows with its own buffers (row t of each)."""
    N, C = x.shape[0], x.shape[1]
    Hp = out.shape[2]
    for n in range(N):
        for t in prange(nt):
            c0, c1 = _part(C, t, nt, 1)
            _k.split_phases(x, n, sw, pad, rows, xph, c0, c1)
        for t in prange(nt):
            a, b = _part(Hp, t, nt, 1)
            if b > a:
                _cp.part(xph, kh, kw, sh, ph, dh, joff, seg, Hc, Wc, wf, K, MB, step, pool, a, b, xp[t], ct[t], hm[t],
                         stage[t], bias, relu, out, n)
