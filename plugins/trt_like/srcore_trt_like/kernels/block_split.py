"""A mobile net's inverted-residual block (1x1 expand, depthwise, squeeze-excite, 1x1 project, all NCHW16c)
as two numba OpenMP regions per image, the expanded tensor kept on the core that made it
(``tactics/block_fuse.py``).

Split layer by layer, a mobile net's 15-200 µs layers lost in the sequence what each won alone: each
layer's split read data the other core had written (docs/performance-log.md, "Issue 16 at 2 threads
on AMD"). Here part ``t`` of region 1 owns a range of the expanded channel blocks through the expand,
the depthwise conv (channels are independent in it: no halo) and the squeeze-excite pool of those
blocks; the caller then computes the gate from the pooled means; part ``t`` of region 2 owns a range of
output pixels (whole 6-pixel tiles of the project): it scales its pixels of every expanded block by the
gate and projects them (with the residual). Only the depthwise result crosses cores, once, where the project must read every channel.

Every kernel is the one-thread layer's, called on ranges (by address, as :mod:`.blocked_split`'s
drivers: linked by name a region re-optimizes their code): the block's result has the bits of its
layers run one after the other."""
from __future__ import annotations

from numba import njit, prange

from srcore.plugin import packed_call as _pc

from .jit import JIT, PARALLEL_JIT
from .parallel import _part
from .simd import LANES, vload, vmul, vstore
from .squeeze_excite import _excite, _pool_blocked

_call = _pc.call_at


@njit(**JIT)
def scale_range(d, s, base, B, P, q0, q1):
    """``d[base:]`` (B blocks of P pixels x 16, NCHW16c) times ``s`` (B * 16,) per channel, pixels
    ``q0 <= p < q1`` only: :func:`.squeeze_excite._scale_blocked`'s multiply, in place."""
    for b in range(B):
        g = vload(s, b * LANES)
        o = base + b * P * LANES
        for i in range(o + q0 * LANES, o + q1 * LANES, LANES):
            vstore(d, i, vmul(vload(d, i), g))


@njit(**PARALLEL_JIT)
def block(fe, eargs, fd, dargs, fp, pargs, scr, xb, tb, n, nt, EB, Ho, Wo, expand, se, d, pooled, inv, w1t, b1,
          w2t, b2, act, gate, h, s):
    """Image ``n`` of one block. ``fe``/``eargs``: the expand's ``pw*_tasks`` (its bound arguments before
    ``(scr, n, b0, b1)``; ``expand`` False: none, the depthwise reads the block input); ``fd``/``dargs``:
    the depthwise's ``dw*_tasks`` (before ``(xb, tb, n, k0, k1)``), writing ``d`` (flat NCHW16c, ``EB``
    blocks of ``Ho x Wo``); ``fp``/``pargs``: the project's ``pw*_range`` (before ``(scr, n, b0, b1, q0,
    q1)``) reading ``d``. With ``se``: ``pooled`` (EB * 16,) the means, ``s`` (EB * 16,, padding lanes 1)
    the gate of ``_excite(w1t, b1, w2t, b2, act, gate)`` with ``h`` its scratch, ``inv`` 1 / (Ho * Wo) in
    16 lanes. ``scr``, ``xb``, ``tb``: each part's rows."""
    P = Ho * Wo
    base = n * EB * P * LANES
    for t in prange(nt):
        k0, k1 = _part(EB, t, nt, 1)
        if k1 > k0:
            if expand:
                _call(fe, eargs + (scr[t], n, k0, k1))
            _call(fd, dargs + (xb[t], tb[t], n, k0, k1))
            if se:
                _pool_blocked(d[base + k0 * P * LANES:], pooled[k0 * LANES:], k1 - k0, P, inv)
    if se:
        _excite(pooled, w1t, b1, w2t, b2, act, gate, h, s)
    nob = pargs[6]
    for t in prange(nt):
        q0, q1 = _part(P, t, nt, 6)   # (pixels in the project's 6-pixel tiles: 7x7 planes cut 24 / 25, not by rows 21 / 28)
        if q1 > q0:
            if se:
                scale_range(d, s, base, EB, P, q0, q1)
            _call(fp, pargs + (scr[t], n, 0, nob, q0, q1))
