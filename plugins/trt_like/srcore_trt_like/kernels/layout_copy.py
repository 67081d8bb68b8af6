"""Compiled channels-last copies: a channels-first tensor written, moved to channels-last, into a
column range of a larger output (a folded ``permute`` in a ``cat``, ``tactics/data.py``)."""
from __future__ import annotations

import numba

from .jit import JIT


@numba.njit(**JIT)
def channels_last_into(x, out, lead, c, s, off):
    """``x`` seen as (lead, c, s) and ``out`` as (lead, rest), both C-contiguous:
    ``out[l, off + j * c + k] = x[l, k, j]`` (NCHW -> NHWC for lead = N, s = H * W)."""
    xf = x.reshape(lead, c, s)
    of = out.reshape(lead, out.size // lead)
    for m in range(lead):
        xm, om = xf[m], of[m]
        for j in range(s):
            base = off + j * c
            for k in range(c):
                om[base + k] = xm[k, j]
