"""The packed conv on several threads: numba ``parallel=True`` drivers over the serial kernels of
``packed_kernels.py`` and ``gemm_kernels.py`` (see ``parallel.py`` for the threading layer).

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

from . import gemm_kernels as _g
from . import packed_kernels as _k

_PJIT = dict(parallel=True, nogil=True, cache=True, error_model="numpy")


@njit(inline="always")
def _part(total, t, nt, quantum):
    """Part t of nt of range(total), cut at multiples of ``quantum``."""
    q = (total + quantum - 1) // quantum
    return min(total, q * t // nt * quantum), min(total, q * (t + 1) // nt * quantum)


@njit(**_PJIT)
def conv(x, xph, pad, rows, kh, kw, sh, sw, ph, dh, joff, seg, wf, K, MB, xp, ct, step, bias, res, has_res, relu, out,
         nt, by_chunks, split_rows):
    """``out = relu?(W @ im2col(x) + bias (+ res))`` on ``nt`` threads. ``xp``/``ct``: (nt, step, K, 6) and
    (nt, 6 step, 64 MB) for *chunks*, (blocks, K, 6) and (6 blocks, 64 MB) for *phased*."""
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
                    _g.gemm(wf, 0, xpt.reshape(-1), 0, ctt, 0, K, MB, 0, MB, 0, pb1 - pb0)
                    _k.epilogue_t(ctt, 0, ldc, 1, min(P, 6 * pb1) - 6 * pb0, 0, out, n, 6 * pb0, bias, res, has_res,
                                  relu, 0, O)
        else:
            for t in prange(nt):
                pb0, pb1 = _part(nb, t, nt, 1)
                _k.gather(xph, kh, kw, sh, ph, dh, joff, seg, pb0, pb1, xp, 0, 0, C)
            xf, cf = xp.reshape(-1), ct.reshape(-1)
            for t in prange(nt):
                if split_rows:
                    ob0, ob1 = _part(MB, t, nt, 1)
                    _g.gemm(wf, 0, xf, 0, cf, 0, K, MB, ob0, ob1, 0, nb)
                else:
                    pb0, pb1 = _part(nb, t, nt, 1)
                    _g.gemm(wf, 0, xf, 0, cf, 0, K, MB, 0, MB, pb0, pb1)
            for t in prange(nt):
                o0, o1 = _part(O, t, nt, 16)
                _k.epilogue_t(cf, 0, ldc, 1, P, 0, out, n, 0, bias, res, has_res, relu, o0, o1)
