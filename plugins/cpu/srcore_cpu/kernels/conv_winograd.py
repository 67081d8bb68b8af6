"""Winograd F(2x2, 3x3) for 3x3, stride-1, undilated, ungrouped 2-D convolutions.

Each 2x2 output tile comes from a 4x4 input tile: ``Y = A^T [(G g G^T) . (B^T d B)] A``,
so the GEMM work is 16 products of (O x C) by (C x tiles) with tiles = H*W/4,
2.25x fewer multiply-adds than im2col's (O x 9C) by (9C x H*W), and no 9x
column copy. The weight transform ``G g G^T`` is done once, in float64, when
the matcher binds the constant weight. Every transform is vectorised over the
whole tensor (4 numpy calls per stage); the bias is added on the half-way
output stage (a quarter of the output's size). Errors are ~1e-6 relative
in float32 (transform constants are 0, +-1 and 1/2).

Measured (1 thread, float32, OpenBLAS SkylakeX, against im2col + GEMM): see
``conv.py``'s docstring.
"""
from __future__ import annotations

import numpy as np

from . import parallel as _par
from .workspace import fill_padded

_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
# G g G^T for every (o, c) at once: (G kron G)[4i + j, 3k + l] = G[i, k] G[j, l]
_GG = np.kron(_G, _G)


def transform_weight(w):
    """(O, C, 3, 3) -> (16, O, C) C-contiguous ``G w G^T``, element (r, s) at index 4r + s.

    One (16, 9) x (9, O*C) matmul in float64 instead of a 3-operand einsum. The products are
    exact (constants 0, +-1/4, +-1/2, 1); only the float64 summation order differs from the
    einsum's, far below float32's precision (bit-identical on random 512x512 weights, test)."""
    O, C = w.shape[:2]
    u = _GG @ w.reshape(O * C, 9).astype(np.float64).T          # (16, O*C), C-contiguous
    return u.astype(w.dtype).reshape(16, O, C)


def applies(w, stride, pads, dilation, groups) -> bool:
    """Whether the Winograd kernel computes this conv (2-D 3x3, stride 1, dilation 1, groups 1)."""
    return (w.ndim == 4 and tuple(w.shape[2:]) == (3, 3) and groups == 1
            and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1) and len(pads) == 2)


def conv3x3(x, gw, bias, pads, out, ws, threads=1):
    """The conv of ``x`` (N, C, H, W) with transformed weight ``gw`` (16, O, C) into ``out``.

    ``threads > 1``: two phases on :mod:`.parallel`'s pool, each split in ``threads`` parts:
    padding + input transform by input channel, then GEMM + output transform by output channel
    (a part's output channels need only its own GEMM rows, so one hand-over per phase).
    """
    N, C, H, W = x.shape
    O = gw.shape[1]
    (pt, pb), (pl, pr) = pads
    Ho, Wo = H + pt + pb - 2, W + pl + pr - 2
    th, tw = (Ho + 1) // 2, (Wo + 1) // 2
    Hp, Wp = 2 * th + 2, 2 * tw + 2
    dt = x.dtype
    # extra zero rows/cols at the bottom/right so whole tiles cover an odd output
    xpads = [(pt, Hp - H - pt), (pl, Wp - W - pl)]
    xp = ws.get(None, "pad", (N, C, Hp, Wp), dt)
    # input transform B^T d B; rows first (over full padded width), then columns
    t = ws.get(None, "wg_tr", (4, N, C, th, Wp), dt)  # t is dead before r: one buffer
    u = ws.get(None, "wg_u", (4, 4, C, N, th, tw), dt)

    def transform_input(cs):
        fill_padded(xp[:, cs], x[:, cs], xpads)
        d = [xp[:, cs, r:r + 2 * th:2, :] for r in range(4)]
        tc = t[:, :, cs]
        np.subtract(d[0], d[2], out=tc[0])
        np.add(d[1], d[2], out=tc[1])
        np.subtract(d[2], d[1], out=tc[2])
        np.subtract(d[1], d[3], out=tc[3])
        e = [tc[..., s:s + 2 * tw:2] for s in range(4)]          # (4, N, c, th, tw)
        us = [u[:, s, cs].transpose(0, 2, 1, 3, 4) for s in range(4)]
        np.subtract(e[0], e[2], out=us[0])
        np.add(e[1], e[2], out=us[1])
        np.subtract(e[2], e[1], out=us[2])
        np.subtract(e[1], e[3], out=us[3])

    T = N * th * tw
    m = ws.get(None, "wg_m", (16, O, T), dt)
    um = u.reshape(16, C, T)
    # output transform A^T M A: rows (a = 0, 1) then columns (b = 0, 1)
    m6 = m.reshape(4, 4, O, N, th, tw)
    even = Ho == 2 * th and Wo == 2 * tw and out.flags.c_contiguous
    full = out if even else ws.get(None, "wg_y", (N, O, 2 * th, 2 * tw), dt)
    yv = full.reshape(N, O, th, 2, tw, 2)
    y0 = yv[..., 0].transpose(3, 1, 0, 2, 4)  # (a, O, N, th, tw), output column b = 0
    y1 = yv[..., 1].transpose(3, 1, 0, 2, 4)
    r = None  # shares t's buffer: allocated once the input transform is done

    def transform_output(os_):
        mo, ro, z0, z1 = m6[:, :, os_], r[:, :, os_], y0[:, os_], y1[:, os_]
        np.add(mo[0], mo[1], out=ro[0])
        np.add(ro[0], mo[2], out=ro[0])
        np.subtract(mo[1], mo[2], out=ro[1])
        np.subtract(ro[1], mo[3], out=ro[1])
        if bias is not None:  # column 1 feeds both output columns with weight +1
            np.add(ro[:, 1], bias[os_].reshape(-1, 1, 1, 1), out=ro[:, 1])
        np.add(ro[:, 0], ro[:, 1], out=z0)
        np.add(z0, ro[:, 2], out=z0)
        np.subtract(ro[:, 1], ro[:, 2], out=z1)
        np.subtract(z1, ro[:, 3], out=z1)
        if not even:
            out[:, os_] = full[:, os_, :Ho, :Wo]

    if threads > 1 and C >= 2 * threads and O >= 2 * threads:
        cchunks, ochunks = _par.split(C, threads), _par.split(O, threads)

        def phase1(i):
            transform_input(slice(*cchunks[i]))
        _par.run_parts(phase1, threads, threads)
        r = ws.get(None, "wg_tr", (2, 4, O, N, th, tw), dt)

        def phase2(i):
            o = slice(*ochunks[i])
            np.matmul(gw[:, o], um, out=m[:, o])
            transform_output(o)
        _par.run_parts(phase2, threads, threads)
        return out
    transform_input(slice(None))
    np.matmul(gw, um, out=m)
    r = ws.get(None, "wg_tr", (2, 4, O, N, th, tw), dt)
    transform_output(slice(None))
    return out
