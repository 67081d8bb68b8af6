"""Softmax over the last dim of float32 rows, compiled (numba): one vector pass for the row's max,
one for ``exp(x - max)`` into the output, then the vector sum and one scaling pass.

The numpy kernel (``softmax.py``) makes four passes with a temporary (max, subtract, exp, sum and
divide); on bert_encoder's (1, 4, 128, 128) attention probabilities it took ~4x torch. The max is
an explicit vector max (``simd_vec`` lanes): as a scalar loop LLVM does not vectorize a select
reduction without no-NaN flags, and it cost more than the exp. The exp is ``jit.exp_neg`` (its
argument is never positive): below -87 it gives 0 without computing a subnormal, where ``jit.exp``'s
scaling multiplies down into one, a microcode assist per element that made BERT's masked keys
(scores - 10000) cost 2x the whole row. Exponents in (-104, -87), whose results are subnormal
(torch's too), are counted first; a row with any takes ``jit.exp`` throughout (rare: the assist
is paid only where a result needs it; the row may be its own output, so it is decided before
the first write). A NaN in a row
makes its sum NaN, so the whole row is NaN, as torch's; a row of ``-inf`` gives NaN (0 / 0), as
torch's.

Compiled at load by the matcher (``softmax.py``); float32, C-contiguous, last dim only.
"""
from __future__ import annotations

import numba
import numpy as np
from numba.extending import intrinsic

from srcore.plugin import simd_conv, simd_vec

from . import jit as _J
from .jit import JIT
from .aliasing import same_start

vadd, vload, vsplat, vstore = simd_vec.vadd, simd_vec.vload, simd_vec.vsplat, simd_vec.vstore

_F = np.float32
#: exp_neg gives 0 below this (its results stay normal); between it and _EXP_LO the result is
#: subnormal, below _EXP_LO 0
_EXP_NEG_MIN = _F(-87.0)
_EXP_LO = _F(-104.0)
_SIG = "void(float32[:, ::1], float32[:, ::1], {tag}, int64)"
_SIG_INPLACE = "void(float32[:, ::1], {tag}, int64)"


@intrinsic
def _vmax(typingctx, a, b):
    """``b if b > a else a`` per lane (a NaN of ``b`` is dropped: the exp pass brings it back)."""
    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered(">", args[1], args[0]), args[1], args[0])
    return a(a, b), codegen


@numba.njit(inline="always", **JIT)
def _row_max(xr, D, Dv, nl, z, buf):
    """The largest of ``xr[:D]`` (vector lanes over ``[0, Dv)``, then the tail), 0 for a row of -inf
    (``exp(-inf - 0) = 0``: softmax's ``0 / 0`` and log-softmax's ``-inf - -inf`` give NaN, as torch)."""
    mx = _F(-np.inf)
    if Dv > 0:
        mv = vload(xr, 0, z)
        for i in range(nl, Dv, nl):
            mv = _vmax(mv, vload(xr, i, z))
        vstore(buf, 0, mv)
        for j in range(nl):
            mx = buf[j] if buf[j] > mx else mx
    for i in range(Dv, D):
        mx = xr[i] if xr[i] > mx else mx
    return _F(0.0) if mx == _F(-np.inf) else mx


@numba.njit(inline="always", **JIT)
def _row_sum(v, D, Dv, nl, z, buf):
    """The sum of ``v[:D]``: vector lanes over ``[0, Dv)``, then the tail."""
    sv = z
    for i in range(0, Dv, nl):
        sv = vadd(sv, vload(v, i, z))
    vstore(buf, 0, sv)
    s = _F(0.0)
    for j in range(nl):
        s += buf[j]
    for i in range(Dv, D):
        s += v[i]
    return s


@numba.njit(inline="always", **JIT)
def _softmax_body(x, o, tag, nl):
    """``o[r] = softmax(x[r])`` for every row. ``tag``, ``nl``: the vector width."""
    R, D = x.shape
    Dv = D - D % nl
    z = vsplat(tag, 0.0)
    buf = np.empty(nl, np.float32)
    for r in range(R):
        xr = x[r]
        orow = o[r]
        mx = _row_max(xr, D, Dv, nl, z, buf)
        sub = np.int32(0)   # (an integer count vectorizes without reassociation)
        for i in range(D):
            d = xr[i] - mx
            sub += np.int32(1) if (d < _EXP_NEG_MIN and d > _EXP_LO) else np.int32(0)
        if sub > 0:   # subnormal results (torch's too): the full exp on this row (rare)
            for i in range(D):
                orow[i] = _J.exp(xr[i] - mx)
        else:
            for i in range(D):
                d = xr[i] - mx
                orow[i] = _J.exp_neg(d, _F(0.0)) if d == d else d
        s = _row_sum(orow, D, Dv, nl, z, buf)
        inv = _F(1.0) / s
        for i in range(D):
            orow[i] = orow[i] * inv


@numba.njit(**JIT)
def _softmax_rows(x, o, tag, nl):
    _softmax_body(x, o, tag, nl)


@numba.njit(**JIT)
def _softmax_rows_inplace(x, tag, nl):
    # one array: LLVM vectorizes the loops (for two that alias, its overlap check picks the scalar loop)
    _softmax_body(x, x, tag, nl)


@numba.njit(**JIT)
def _log_softmax_rows(x, o, tag, nl):
    """``o[r] = log_softmax(x[r])`` = ``(x - max) - log(sum(exp(x - max)))`` (torch's order) for
    every row; ``o`` may be ``x``. The exps go to a scratch row (the output may be the input) and
    are summed in vector lanes. ``jit.exp_neg`` gives 0 below -87 where ``exp`` would give a
    subnormal: a term below 1.7e-38 against a sum of at least 1 changes nothing. NaN in a row makes
    its sum and so the whole row NaN; a row of ``-inf`` gives NaN (``-inf - -inf``), as torch's."""
    R, D = x.shape
    Dv = D - D % nl
    z = vsplat(tag, 0.0)
    buf = np.empty(nl, np.float32)
    e = np.empty(D, np.float32)
    for r in range(R):
        xr = x[r]
        orow = o[r]
        mx = _row_max(xr, D, Dv, nl, z, buf)
        for i in range(D):
            d = xr[i] - mx
            e[i] = _J.exp_neg(d, _F(0.0)) if d == d else d
        s = _row_sum(e, D, Dv, nl, z, buf)
        ls = _F(np.log(np.float64(s)))
        for i in range(D):
            orow[i] = (xr[i] - mx) - ls


class LogSoftmax:
    """``run(x2, out2)``: log-softmax of the rows of 2-D float32 C-contiguous ``x2`` into ``out2``
    (which may be ``x2``). Compiled now, at the CPU's vector width (``simd_conv.lanes``)."""

    def __init__(self):
        self.lanes = simd_conv.lanes()
        self.tag = np.zeros((1, 1) if self.lanes == 16 else 1, np.float32)
        tag = "float32[:, ::1]" if self.lanes == 16 else "float32[::1]"
        self.kernel = _J.compiled(_log_softmax_rows, _SIG.format(tag=tag))

    def __call__(self, x2, out2):
        self.kernel(x2, out2, self.tag, self.lanes)


class Softmax:
    """``run(x2, out2)``: softmax of the rows of 2-D float32 C-contiguous ``x2`` into ``out2`` (which
    may be ``x2``). Compiled now, at the CPU's vector width (``simd_conv.lanes``)."""

    def __init__(self):
        self.lanes = simd_conv.lanes()
        self.tag = np.zeros((1, 1) if self.lanes == 16 else 1, np.float32)
        tag = "float32[:, ::1]" if self.lanes == 16 else "float32[::1]"
        self.kernel = _J.compiled(_softmax_rows, _SIG.format(tag=tag))
        self.inplace = _J.compiled(_softmax_rows_inplace, _SIG_INPLACE.format(tag=tag))

    def __call__(self, x2, out2):
        if same_start(out2, x2):
            self.inplace(x2, self.tag, self.lanes)
        else:
            self.kernel(x2, out2, self.tag, self.lanes)
