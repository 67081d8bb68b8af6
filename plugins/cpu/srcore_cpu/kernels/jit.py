"""numba for the cpu plugin's compiled kernels: options, compilation at load, vectorizable float32 math.

Imported only by the kernel modules that need it (``jit_pointwise``, ``conv_direct``), i.e. only when
a model has such a node: a model without one never imports numba (cold start stays numpy + scipy).

Compilation happens at load, never in a call: kernels are module-level ``numba.njit`` dispatchers
with ``cache=True``, and :func:`compiled` compiles (or loads from numba's on-disk cache) the one
signature a node needs when the matcher runs. The call then goes straight to the compiled entry.

The math (:func:`exp`, :func:`sigmoid`, :func:`tanh`, :func:`phi`) is float32 code without libm
calls, so LLVM's loop vectorizer turns a loop over it into SIMD code (numba has no SVML here: a
``math.exp`` in a loop is a scalar call per element, ~10x slower). Special values follow torch's
float32 CPU kernels where it matters: NaN in, NaN out; ``exp(+inf) = inf``, ``exp(-inf) = 0``.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from srcore.plugin import clock as _clock

#: every kernel: releases the GIL (RuntimePool threads run in parallel), cached on disk, IEEE
#: division (no ZeroDivisionError), and only FMA contraction from fast-math (no reassociation, no
#: NaN/inf assumptions: the range reductions below depend on evaluation order)
JIT = dict(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})


def compiled(dispatcher, signature: str):
    """The compiled entry point of ``dispatcher`` for ``signature``, compiled now (or loaded from
    numba's on-disk cache): matchers call this at load, so no call pays for a compilation, and a
    call skips the dispatcher's type matching."""
    args, _ = numba.core.sigutils.normalize_signature(signature)
    dispatcher.compile(signature)
    return dispatcher.overloads[tuple(args)].entry_point


# LLVM string attributes ("key"="value"); llvmlite's attribute set admits only the names it knows,
# so they are added to the underlying set and emitted verbatim into the function's attributes
_WIDE = ('"prefer-vector-width"="512"', '"min-legal-vector-width"="512"')


@intrinsic
def prefer_512(typingctx):
    """Let LLVM vectorize the calling function with 512-bit vectors. Its tuning for AVX-512 Intel
    cores (``prefer-256-bit``) keeps numba's loops on 256-bit ymm registers; on a CPU without
    AVX-512 the wide vectors are split, same results. A kernel compiled both ways is chosen by
    timing (:func:`fastest`)."""
    def codegen(context, builder, sig, args):
        for a in _WIDE:
            set.add(builder.function.attributes, a)
        return context.get_dummy_value()
    return types.none(), codegen


def fastest(fns, args, rounds: int = 7, reps: int = 3, margin: float = 1.03):
    """The fastest of ``fns`` called on ``args``: best of ``rounds`` alternating rounds of ``reps``
    calls, on the calling thread's own clock (``srcore.plugin.clock``: a loaded machine's waits for
    a core drop out, time blocked does not). The first is the default: another must beat it by
    ``margin``."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], _clock.per_call_ns(lambda fn=fn: fn(*args), reps, "cpu"))
    return fns[min(range(len(fns)), key=lambda j: (best[j] * (1.0 if j == 0 else margin), j))]


@intrinsic
def _f32_to_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


@intrinsic
def _bits_to_f32(typingctx, i):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


_F = np.float32
_LOG2E = _F(1.4426950408889634)
# ln 2 split in two (Cody-Waite): n * _LN2_HI is exact for |n| < 2^9
_LN2_HI = _F(0.693359375)
_LN2_LO = _F(-2.12194440e-4)
_EXP_HI = _F(88.72283)          # exp overflows float32 above this
_EXP_LO = _F(-103.97208)        # below this exp rounds to 0 (denormal results are kept above it)
_ROUND = _F(12582912.0)         # 1.5 * 2^23: x + _ROUND - _ROUND rounds x to an integer


@numba.njit(inline="always", **JIT)
def _pow2(n):
    """``2.0 ** n`` for an integer-valued float32 ``n`` in [-64, 64] (exponent bits)."""
    return _bits_to_f32((np.int32(n) + np.int32(127)) << np.int32(23))


@numba.njit(inline="always", **JIT)
def _exp_reduced(x):
    """``exp(x)`` = ``p * 2^n`` for finite ``x`` in float32's range: Cephes ``expf``'s Cody-Waite
    reduction and degree-5 minimax polynomial; returns ``(p, n)``."""
    n = (x * _LOG2E + _ROUND) - _ROUND
    r = (x - n * _LN2_HI) - n * _LN2_LO
    p = _F(1.9875691500e-4)
    p = p * r + _F(1.3981999507e-3)
    p = p * r + _F(8.3334519073e-3)
    p = p * r + _F(4.1665795894e-2)
    p = p * r + _F(1.6666665459e-1)
    p = p * r + _F(5.0000001201e-1)
    p = p * (r * r) + r + _F(1.0)
    return p, n


@numba.njit(inline="always", **JIT)
def exp(x):
    """float32 ``exp`` (Cephes ``expf``: Cody-Waite reduction, degree-5 minimax; ~1 ulp). The scale
    2^n is applied in two halves, so n = 128 (x just below the overflow) and denormal results work."""
    xc = x if x < _EXP_HI else _EXP_HI
    xc = xc if xc > _EXP_LO else _EXP_LO
    p, n = _exp_reduced(xc)
    h = (n * _F(0.5) + _ROUND) - _ROUND          # n = h + (n - h), both halves within [-64, 64]
    y = (p * _pow2(h)) * _pow2(n - h)
    y = y if x < _EXP_HI else _F(np.inf)
    y = y if x > _EXP_LO else _F(0.0)
    return y if x == x else x


_EXP_NORMAL_MIN = _F(-87.33654)    # exp of less is below float32's normal range (2^-126)


@numba.njit(inline="always", **JIT)
def exp_neg(a):
    """float32 ``exp(a)`` for ``a <= 0``, lean: :func:`exp`'s reduction and polynomial (the same bits
    where the result is a normal float) with one exponent scale and no overflow handling;
    results below the normal range (``a < -87.34``) and NaN ``a`` give 0. For GELU's factor, whose
    exponent is never positive and whose subnormal tail (|GELU(x)| < 1.2e-38) torch returns as 0:
    ~16 vector operations against :func:`exp`'s ~25 (1.6x faster GELU on Sapphire Rapids)."""
    ac = a if a > _EXP_NORMAL_MIN else _EXP_NORMAL_MIN
    p, n = _exp_reduced(ac)
    y = p * _bits_to_f32((np.int32(n) + np.int32(127)) << np.int32(23))
    return y if a > _EXP_NORMAL_MIN else _F(0.0)


@numba.njit(inline="always", **JIT)
def sigmoid(x):
    """``1 / (1 + exp(-x))``, torch's formula (0 below -88.7, 1 above 17)."""
    return _F(1.0) / (_F(1.0) + exp(-x))


@numba.njit(inline="always", **JIT)
def tanh(x):
    """float32 ``tanh`` (Cephes ``tanhf``: an odd polynomial below 0.625, ``1 - 2 / (exp(2|x|) + 1)``
    above; exact +-1 beyond 9)."""
    a = abs(x)
    z = x * x
    p = _F(-5.70498872745e-3)
    p = p * z + _F(2.06390887954e-2)
    p = p * z + _F(-5.37397155531e-2)
    p = p * z + _F(1.33314422036e-1)
    p = p * z + _F(-3.33332819422e-1)
    small = x + x * z * p
    big = _F(1.0) - _F(2.0) / (exp(a + a) + _F(1.0))
    big = big if x >= 0 else -big
    return small if a < _F(0.625) else big


# Numerical Recipes' erfcc: erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), z >= 0; fractional
# error < 1.2e-7 for every z, so the far tail of Phi keeps its relative accuracy
_NR = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
       0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)
_C0, _C1, _C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9 = (_F(c) for c in _NR)
_INV_SQRT2 = _F(1.0 / math.sqrt(2.0))


@numba.njit(inline="always", **JIT)
def phi(x):
    """The standard normal CDF ``Phi(x) = 0.5 erfc(-x / sqrt 2)`` (GELU's factor)."""
    z = abs(x) * _INV_SQRT2
    t = _F(1.0) / (_F(1.0) + _F(0.5) * z)
    p = _C9
    p = p * t + _C8
    p = p * t + _C7
    p = p * t + _C6
    p = p * t + _C5
    p = p * t + _C4
    p = p * t + _C3
    p = p * t + _C2
    p = p * t + _C1
    p = p * t + _C0
    h = _F(0.5) * t * exp_neg(p - z * z)   # (log erfc(z) <= 0, + P's error: never above 1e-7)
    return h if x < 0 else _F(1.0) - h
