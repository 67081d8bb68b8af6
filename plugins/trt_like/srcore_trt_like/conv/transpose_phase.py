"""A 2-D transposed conv as one ordinary stride-1 conv and a depth-to-space (pixel shuffle).

Output ``o = i * s - p + t * d`` of a transposed conv splits by its stride phase ``o = q * s + r``:
phase ``r`` of output ``q`` takes input ``q + e`` through the taps ``t`` with ``r + p - t * d = e * s``.
Over all phases the offsets ``e`` span a small window, so every phase is a stride-1 conv over that
window, and all ``s_h * s_w`` phases of every output channel are the output channels of ONE conv
(``O * s_h * s_w`` of them, the taps a phase does not use zero), whose result, channel
``(o, r_h, r_w)`` at ``(q_h, q_w)``, is the output at ``(q_h * s_h + r_h, q_w * s_w + r_w)``: a
pixel shuffle. pix2pix's and DCGAN's 4x4 stride-2 padding-1 up-convs become a 3x3 conv to
``4 * O`` channels, a U-Net's 2x2 stride-2 one a 1x1 conv; the conv runs on the conv wing's tuned
tactics, which the builder times against the transposed conv's own (``tactics/transposed.py``):
the zero taps cost multiply-adds (9 used of 4 * 9 at 4x4/2), the own tactics' col2im and their
BLAS call per sample cost more on small layers (the seventh held-out zoo's pix2pix: 2x16x2x2 ->
2x16x4x4 30 against 5 us, same process, Sapphire Rapids).
"""
from __future__ import annotations

import attrs
import numpy as np


@attrs.frozen
class PhaseConv:
    """The ordinary conv equal to a transposed conv followed by a pixel shuffle by ``stride``."""

    weight: np.ndarray = attrs.field(eq=False, repr=False)   # (O * sh * sw, C / g, mh, mw) float32
    bias: np.ndarray | None = attrs.field(eq=False, repr=False)
    padding: tuple[int, int]       # symmetric, per dim
    stride: tuple[int, int]        # the transposed conv's: the shuffle's factors
    phase_shape: tuple[int, int]   # (Ho / sh, Wo / sw): the conv's output plane


def _dim_taps(n: int, k: int, s: int, p: int, d: int, no: int):
    """One dimension: ``[(r, t, e), ...]`` (phase, tap, input offset), the symmetric padding ``P``
    and the window ``m`` of the conv, ``Q = no / s``; None when the phases are of unequal length."""
    if no < 1 or no % s:
        return None
    taps = [(r, t, (r + p - t * d) // s) for r in range(s) for t in range(k) if (r + p - t * d) % s == 0]
    if not taps:
        return None
    es = [e for _, _, e in taps]
    lo, m, q = -min(es), max(es) - min(es) + 1, no // s
    hi = q - n - lo + m - 1
    pad = max(lo, hi, 0)
    return taps, pad, n + 2 * pad + 1 - q


def phase_conv(w, bias, x_shape, out_shape, stride, padding, dilation, groups, max_window: int = 7):
    """The :class:`PhaseConv` of a 2-D transposed conv (weight ``w`` (C, O / g, kh, kw), input
    ``x_shape`` (N, C, H, W) to ``out_shape``), or None when the output is not a whole number of
    strides (its phases of unequal sizes) or the conv's window is over ``max_window``."""
    C, Og, kh, kw = w.shape
    H, W = x_shape[2:]
    Ho, Wo = out_shape[2:]
    dims = [_dim_taps(n, k, s, p, d, no) for n, k, s, p, d, no in
            zip((H, W), (kh, kw), stride, padding, dilation, (Ho, Wo))]
    if any(v is None for v in dims) or max(dims[0][2], dims[1][2]) > max_window:
        return None
    (ty, py, mh), (tx, px, mw) = dims
    sh, sw = stride
    cig = C // groups
    # w'[(o, ry, rx), c, e_y + P_y, e_x + P_x] = w[g * C/g + c, o - g * O/g, t_y, t_x]
    w6 = np.zeros((groups, Og, sh, sw, cig, mh, mw), np.float32)
    wg = np.asarray(w, np.float32).reshape(groups, cig, Og, kh, kw)
    for ry, t_y, e_y in ty:
        for rx, t_x, e_x in tx:
            w6[:, :, ry, rx, :, e_y + py, e_x + px] = wg[:, :, :, t_y, t_x].transpose(0, 2, 1)
    O = groups * Og
    b = None if bias is None else np.repeat(np.asarray(bias, np.float32), sh * sw)
    return PhaseConv(w6.reshape(O * sh * sw, cig, mh, mw), b, (py, px), (sh, sw), (Ho // sh, Wo // sw))

