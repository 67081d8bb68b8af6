"""Winograd F(4x4, 3x3) / F(2x2, 3x3) with its n*n products on the packed-panel SGEMM's register tiles.

Per point p, ``M_p (O, T) = U_p (O, C) @ V_p (C, T)`` on :mod:`.sgemm`'s 1x1-conv tiles (6 rows of the
weight broadcast x a panel of 2 vectors of tiles, 12 FMA accumulators: MLAS's tile): ``U_p`` packed
once as the broadcast side (:func:`.sgemm.pack_weight_rows`), ``V_p`` (the input transform's rows of
``T`` tiles) read in place as the panels, ``M_p`` written whole. The transforms are :mod:`.winograd`'s
(the epilogue in the output transform's stores). OpenBLAS's batched ``np.matmul`` of the same
products ran at ~70 GFLOP/s a core on resnet's 64-channel 56x56 layer and ~40 on the 256-channel
14x14 one (AMD EPYC, CPU time), and cannot be split over threads without changing its bits.

:func:`points` takes points ``[p0, p1)``; :func:`split` runs a whole call on numba's OpenMP team in
three regions (input transform by input channels, products by points, output transform by output
channels), each cut in ``nt`` parts of the shape alone, so any team size gives the bits of one thread.
The panels' vector loads read up to one panel past ``V``'s last row: ``V`` needs ``2 * lanes`` floats
of slack after it. ``nogil``, ``cache=True``.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from srcore.plugin import simd_vec as _sv

from . import sgemm as _s
from . import winograd as _w
from .jit import JIT, PARALLEL_JIT
from .parallel import _part

fptr, vsplat = _sv.fptr, _sv.vsplat


@njit(**JIT)
def points(ua, usz, v, mm, O, T, C, L, tag, p0, p1):
    """``mm[p] = U_p @ v[p]`` for points ``p0 <= p < p1``: ``ua`` the points' packed weights (``usz``
    floats each, :func:`.sgemm.pack_weight_rows` of (O, C)), ``v`` (P, C, T) and ``mm`` (P, O, T)
    C-contiguous, flat."""
    z = vsplat(tag, np.float32(0.0))
    W = 2 * L
    NP = (T + W - 1) // W
    pa, px, po = fptr(ua), fptr(v), fptr(mm)
    zero = np.float32(0.0)
    for p in range(p0, p1):
        a0, b0, c0 = p * usz, p * C * T, p * O * T
        for pb0 in range(0, NP, _s.NCP):
            npb = min(_s.NCP, NP - pb0)
            for k0 in range(0, C, _s.KC):
                kc = min(_s.KC, C - k0)
                acc = k0 > 0
                for j in range(npb):
                    pb = pb0 + j
                    nv = min(W, T - pb * W)
                    bo = b0 + k0 * T + pb * W
                    r = 0
                    while r < O:
                        ao = a0 + k0 * O + r * kc
                        oo = c0 + r * T + pb * W
                        R = _s._rows(O - r)
                        # (last=False: no bias or clamp here, the output transform applies them)
                        if R == 6:
                            _s._ctile6(pa, ao, px, bo, T, kc, po, oo, T, acc, False, nv, L, z, pa, r, zero, zero)
                        elif R == 4:
                            _s._ctile4(pa, ao, px, bo, T, kc, po, oo, T, acc, False, nv, L, z, pa, r, zero, zero)
                        elif R == 2:
                            _s._ctile2(pa, ao, px, bo, T, kc, po, oo, T, acc, False, nv, L, z, pa, r, zero, zero)
                        else:
                            _s._ctile1(pa, ao, px, bo, T, kc, po, oo, T, acc, False, nv, L, z, pa, r, zero, zero)
                        r += R


@njit(**JIT)
def serial(m, x, pt, pl, th, tw, v, ua, usz, mm, bias, res, has_res, relu, out, L, tag):
    """A whole call on the calling thread (``v``, ``mm``: (P, C, T), (P, O, T))."""
    C, O = x.shape[1], out.shape[1]
    P, T = v.shape[0], v.shape[2]
    if m == 4:
        _w.input_f4(x, pt, pl, th, tw, v, 0, C)
    else:
        _w.input_f2(x, pt, pl, th, tw, v, 0, C)
    points(ua, usz, v.reshape(-1), mm.reshape(-1), O, T, C, L, tag, 0, P)
    if m == 4:
        _w.output_f4(mm, bias, res, has_res, relu, out, th, tw, 0, O)
    else:
        _w.output_f2(mm, bias, res, has_res, relu, out, th, tw, 0, O)


@njit(**PARALLEL_JIT)
def split(m, x, pt, pl, th, tw, v, ua, usz, mm, bias, res, has_res, relu, out, L, tag, nt):
    """:func:`serial` in ``nt`` parts a phase on numba's OpenMP team (see the module's docstring)."""
    C, O = x.shape[1], out.shape[1]
    P, T = v.shape[0], v.shape[2]
    vf, mf = v.reshape(-1), mm.reshape(-1)
    for t in prange(nt):
        c0, c1 = _part(C, t, nt, 1)
        if m == 4:
            _w.input_f4(x, pt, pl, th, tw, v, c0, c1)
        else:
            _w.input_f2(x, pt, pl, th, tw, v, c0, c1)
    for t in prange(nt):
        p0, p1 = _part(P, t, nt, 1)
        points(ua, usz, vf, mf, O, T, C, L, tag, p0, p1)
    for t in prange(nt):
        o0, o1 = _part(O, t, nt, 1)
        if m == 4:
            _w.output_f4(mm, bias, res, has_res, relu, out, th, tw, o0, o1)
        else:
            _w.output_f2(mm, bias, res, has_res, relu, out, th, tw, o0, o1)
