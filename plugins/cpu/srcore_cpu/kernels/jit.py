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
def _exp_poly(r):
    """``exp(r)`` for ``|r| <= ln2 / 2``: Cephes ``expf``'s degree-5 minimax polynomial."""
    p = _F(1.9875691500e-4)
    p = p * r + _F(1.3981999507e-3)
    p = p * r + _F(8.3334519073e-3)
    p = p * r + _F(4.1665795894e-2)
    p = p * r + _F(1.6666665459e-1)
    p = p * r + _F(5.0000001201e-1)
    return p * (r * r) + r + _F(1.0)


@numba.njit(inline="always", **JIT)
def _exp_reduced(x):
    """``exp(x)`` = ``p * 2^n`` for finite ``x`` in float32's range: Cephes ``expf``'s Cody-Waite
    reduction and degree-5 minimax polynomial; returns ``(p, n)``."""
    n = (x * _LOG2E + _ROUND) - _ROUND
    r = (x - n * _LN2_HI) - n * _LN2_LO
    return _exp_poly(r), n


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


#: exp_neg's floor: exp(-87) = 1.6e-38 is a normal float, and at or above it the reduction's
#: 2^n times p (p >= 1 where n = -126) is one too, so the scale can be an exponent-bit add
_EXP_NEG_MIN = _F(-87.0)


@intrinsic
def fma(typingctx, a, b, c):
    """float32 ``a * b + c`` rounded once (``llvm.fma``, which vectorizes): the exact low part of a
    product is ``fma(a, b, -a * b)``."""
    def codegen(context, builder, signature, args):
        f32 = ir.FloatType()
        fn = builder.module.declare_intrinsic("llvm.fma", [f32], ir.FunctionType(f32, [f32, f32, f32]))
        return builder.call(fn, args)
    return types.float32(types.float32, types.float32, types.float32), codegen


@numba.njit(inline="always", **JIT)
def exp_neg(a, a_lo):
    """float32 ``exp(a + a_lo)`` for ``a <= 0`` and ``|a_lo|`` within an ulp of ``a`` (the low part
    of a two-float exponent), lean: :func:`exp`'s reduction and polynomial with ``a_lo`` added to
    the reduced argument, and the scale 2^n added to the exponent bits (the rounding constant's
    bits shifted hold n); 0 below -87 and for NaN. For GELU's factor, whose exponent is never
    positive and whose results down there are below 1e-39 (torch gives 0)."""
    ac = a if a > _EXP_NEG_MIN else _EXP_NEG_MIN
    k = ac * _LOG2E + _ROUND
    n = k - _ROUND
    p = _exp_poly((ac - n * _LN2_HI) - n * _LN2_LO + a_lo)
    y = _bits_to_f32(_f32_to_bits(p) + (_f32_to_bits(k) << np.int32(23)))
    return y if a > _EXP_NEG_MIN else _F(0.0)


@numba.njit(inline="always", **JIT)
def sigmoid(x):
    """``1 / (1 + exp(-x))``, torch's formula (0 below -88.7, 1 above 17)."""
    return _F(1.0) / (_F(1.0) + exp(-x))


@numba.njit(inline="always", **JIT)
def _tanh_small(x):
    """Cephes ``tanhf``'s odd polynomial, accurate for ``|x| < 0.625``."""
    z = x * x
    p = _F(-5.70498872745e-3)
    p = p * z + _F(2.06390887954e-2)
    p = p * z + _F(-5.37397155531e-2)
    p = p * z + _F(1.33314422036e-1)
    p = p * z + _F(-3.33332819422e-1)
    return x + x * z * p


@numba.njit(inline="always", **JIT)
def tanh(x):
    """float32 ``tanh`` (Cephes ``tanhf``: an odd polynomial below 0.625, ``1 - 2 / (exp(2|x|) + 1)``
    above; exact +-1 beyond 9)."""
    a = abs(x)
    small = _tanh_small(x)
    big = _F(1.0) - _F(2.0) / (exp(a + a) + _F(1.0))
    big = big if x >= 0 else -big
    return small if a < _F(0.625) else big


# Phi(-a) = t Q(t) exp(-a^2 / 2), t = 1 / (1 + _PHI_C a), a >= 0: Q minimax in the relative error
# of Phi(-a) for a in [0, 13.3] (Lawson's iteration in float64 on erfcx, c chosen by the same fit;
# 2.0e-8 before the float32 rounding). Unlike Numerical Recipes' erfcc, t exp(-a^2 + P(t)), the exp
# does not wait for the division and the polynomial: two short dependency chains instead of one
# long one, which is what bound the loop (same operation count, 2x faster on Sapphire Rapids).
_PHI_C = _F(0.26)
_PHI_Q = (0.030896160751581192, -0.15474054217338562, 0.2554672658443451, -0.15553663671016693,
          0.16415293514728546, 0.04964228346943855, 0.1033913865685463, 0.10296492278575897,
          0.1037621945142746)
_Q0, _Q1, _Q2, _Q3, _Q4, _Q5, _Q6, _Q7, _Q8 = (_F(c) for c in _PHI_Q)


@numba.njit(inline="always", **JIT)
def sigmoid_lean(x):
    """float32 sigmoid with one lean exponential (:func:`exp_neg` of ``-|x|``, no overflow
    branches) and one division: ``1 / (1 + e)`` for ``x >= 0``, ``e / (1 + e)`` below (relative
    accuracy kept for large negative ``x``). Within 2 ulp of :func:`sigmoid`; for the recurrent
    cells' gates, five of which a hidden unit computes a step."""
    e = exp_neg(-abs(x), _F(0.0))
    s = _F(1.0) / (_F(1.0) + e)
    s = s if x >= 0 else e * s
    return s if x == x else x


@numba.njit(inline="always", **JIT)
def tanh_lean(x):
    """float32 ``tanh`` as :func:`tanh` (the odd polynomial below 0.625) with the large branch as
    ``(1 - e) / (1 + e)``, ``e`` = :func:`exp_neg` of ``-2|x|`` (no overflow branches; ``e`` > 0.28
    there, so ``1 - e`` loses no bits); NaN stays NaN through the polynomial's branch."""
    a = abs(x)
    small = _tanh_small(x)
    e = exp_neg(-(a + a), _F(0.0))
    big = (_F(1.0) - e) / (_F(1.0) + e)
    big = big if x >= 0 else -big
    return big if a >= _F(0.625) else small


@numba.njit(inline="always", **JIT)
def phi(x):
    """The standard normal CDF ``Phi(x) = 0.5 erfc(-x / sqrt 2)`` (GELU's factor): relative error
    below 5e-7 wherever it is a normal float (the far tail too: x^2 / 2 goes into the exp as two
    floats, so its rounding does not grow the error with x^2)."""
    a = abs(x)
    t = _F(1.0) / (_F(1.0) + _PHI_C * a)
    q = _Q0
    q = q * t + _Q1
    q = q * t + _Q2
    q = q * t + _Q3
    q = q * t + _Q4
    q = q * t + _Q5
    q = q * t + _Q6
    q = q * t + _Q7
    q = q * t + _Q8
    s = x * x
    s_lo = fma(x, x, -s)                   # x*x = s + s_lo exactly
    h = (t * q) * exp_neg(s * _F(-0.5), s_lo * _F(-0.5))
    return h if x < 0 else _F(1.0) - h
