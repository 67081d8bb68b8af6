"""Vectorizable float32 math for numba kernels: exp, expm1, log, log1p, tanh, sigmoid, erf, sin, cos.

numba has no SVML here, so ``math.exp`` and friends inside a numba loop are scalar libm calls
and the loop does not vectorize. These versions are branch-free float32 code (range reduction,
polynomials, selects, integer bit tricks) that LLVM's loop vectorizer turns into SIMD code.

Each function is a numba *intrinsic*: calling ``fastmath.exp(x)`` (x a float32) in
``@numba.njit`` code emits its LLVM instructions right there, with no call for LLVM to inline
and nothing for numba to inline either (numba's ``inline="always"`` re-runs its front end per
call site: 10 inlined tanh took 1.3 s to compile, 10 of these take ~0.1 s). The math is
written once, as Python code over :class:`F32` values whose operators emit the instructions
(``*_ir`` functions, which :mod:`.pointwise_ops` composes as well).

Special values follow torch's float32 CPU kernels: NaN in, NaN out; ``exp(-inf) = 0``,
``log(0) = -inf``, ``log(-1) = nan``, ``tanh(+-inf) = +-1``; denormal inputs and results are
kept (no flush to zero). Measured accuracy against float64 references is in
``docs/trt-like.md`` and asserted by ``tests/test_fastmath.py``.

Sources: exp, log and tanh follow Cephes' float32 ``expf``/``logf``/``tanhf`` (Cody-Waite range
reduction and their minimax polynomials); expm1 and log1p are derived from them; erf uses two
minimax polynomials fitted for this module (relative error on [0, 1], ``erfc(x) * exp(x*x)``
on [1, 4]); sin and cos follow FreeBSD's float32 ``sinf``/``cosf`` (the argument reduced by pi/2 in
float64, their float64 kernels ``__kernel_sindf``/``__kernel_cosdf``), with the reduction by fused
multiply-adds against pi/2 in three float64 parts, exact for ``|x| < 2**50``, and Payne and Hanek's
table reduction above. ``sigmoid`` is torch's own formula, ``1 / (1 + exp(-x))``, so that it underflows to
0 below -88.7 as torch's does.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .jit import EXACT_JIT

__all__ = ["exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "sin", "cos", "clamp", "silu", "hardsigmoid", "hardswish",
           "leaky_relu", "gelu", "gelu_tanh",
           "F32", "Cond", "where", "float32_function", "jit_options"]

_FLOAT = ir.FloatType()
_DOUBLE = ir.DoubleType()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
# FMA contraction only: nothing that assumes no NaN/inf or reassociates (Cody-Waite needs order)
_FLAGS = ("contract",)


def jit_options() -> dict:
    """numba options of kernels calling these functions: IEEE division (no ZeroDivisionError) and
    no fast-math, so a kernel's own +, -, *, / round exactly like torch's separate ops (these
    functions put FMA contraction on their own instructions only)."""
    return dict(EXACT_JIT)


# -- a float32 expression builder ------------------------------------------------------------------
class F32:
    """A float32 LLVM value; arithmetic and comparison operators emit instructions through
    ``builder`` (Python numbers are float32 constants; comparisons are ordered, ``!=`` is true
    for NaN, as in Python)."""

    __slots__ = ("builder", "value")

    def __init__(self, builder: ir.IRBuilder, value: ir.Value):
        self.builder = builder
        self.value = value

    def _op(self, other) -> ir.Value:
        return other.value if isinstance(other, F32) else ir.Constant(_FLOAT, float(other))

    def _bin(self, name: str, a, b) -> F32:
        return F32(self.builder, getattr(self.builder, name)(a, b, flags=_FLAGS))

    def __add__(self, o): return self._bin("fadd", self.value, self._op(o))
    def __radd__(self, o): return self._bin("fadd", self._op(o), self.value)
    def __sub__(self, o): return self._bin("fsub", self.value, self._op(o))
    def __rsub__(self, o): return self._bin("fsub", self._op(o), self.value)
    def __mul__(self, o): return self._bin("fmul", self.value, self._op(o))
    def __rmul__(self, o): return self._bin("fmul", self._op(o), self.value)
    def __truediv__(self, o): return self._bin("fdiv", self.value, self._op(o))
    def __rtruediv__(self, o): return self._bin("fdiv", self._op(o), self.value)
    def __neg__(self): return F32(self.builder, self.builder.fneg(self.value))
    def __abs__(self): return self.call("llvm.fabs")
    def fmod(self, o): return self._bin("frem", self.value, self._op(o))   # (C's fmod: the sign of self)

    def _cmp(self, op: str, o) -> Cond:
        return Cond(self.builder, self.builder.fcmp_ordered(op, self.value, self._op(o)))

    def __lt__(self, o): return self._cmp("<", o)
    def __le__(self, o): return self._cmp("<=", o)
    def __gt__(self, o): return self._cmp(">", o)
    def __ge__(self, o): return self._cmp(">=", o)
    def __eq__(self, o): return self._cmp("==", o)

    def __ne__(self, o):
        return Cond(self.builder, self.builder.fcmp_unordered("!=", self.value, self._op(o)))

    __hash__ = None

    def call(self, llvm_intrinsic: str, *others) -> F32:
        """``llvm_intrinsic`` (``"llvm.sqrt"``, ``"llvm.pow"``...) of self and ``others``."""
        fn = self.builder.module.declare_intrinsic(llvm_intrinsic, [_FLOAT])
        return F32(self.builder, self.builder.call(fn, [self.value, *(self._op(o) for o in others)]))

    def is_nan(self) -> Cond:
        return self != self


class Cond:
    """An i1 condition; ``|``, ``&`` and ``~`` combine conditions."""

    __slots__ = ("builder", "value")

    def __init__(self, builder: ir.IRBuilder, value: ir.Value):
        self.builder = builder
        self.value = value

    def __or__(self, o): return Cond(self.builder, self.builder.or_(self.value, o.value))
    def __and__(self, o): return Cond(self.builder, self.builder.and_(self.value, o.value))
    def __invert__(self): return Cond(self.builder, self.builder.not_(self.value))


def where(cond: Cond, a, b) -> F32:
    """``a if cond else b`` as a select (both sides computed: what vectorized code does anyway)."""
    b_ = cond.builder

    def val(x):
        return x.value if isinstance(x, F32) else ir.Constant(_FLOAT, float(x))

    return F32(b_, b_.select(cond.value, val(a), val(b)))


def _uncontracted(value: ir.Value) -> ir.Value:
    """``value`` with FMA contraction off on the instructions making it (through selects): a
    function's result is rounded to float32, as torch rounds every op's result. Otherwise LLVM
    fuses its last multiply with the next function's first add once both are inlined in one
    kernel (gelu then hardsigmoid: 1 ulp off, and another value than the same ops unfused)."""
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if not isinstance(v, ir.Instruction) or id(v) in seen:
            continue
        seen.add(id(v))
        if v.opname == "select":
            stack.extend(v.operands[1:])
        elif "contract" in getattr(v, "flags", ()):
            v.flags = [f for f in v.flags if f != "contract"]
    return value


def float32_function(emit: Callable[..., F32]):
    """A numba intrinsic of float32 arguments computing ``emit(*args)`` inline in the caller."""
    nargs = emit.__code__.co_argcount

    def typed(args):
        if len(args) != nargs or any(a != types.float32 for a in args):
            return None

        def codegen(context, builder, signature, llvm_args):
            return _uncontracted(emit(*(F32(builder, a) for a in llvm_args)).value)

        return types.float32(*args), codegen

    # intrinsic() reads the template's parameters: one explicit template per arity
    if nargs == 1:
        def template(typingctx, a):
            return typed((a,))
    elif nargs == 2:
        def template(typingctx, a, b):
            return typed((a, b))
    elif nargs == 3:
        def template(typingctx, a, b, c):
            return typed((a, b, c))
    elif nargs == 4:
        def template(typingctx, a, b, c, d):
            return typed((a, b, c, d))
    else:
        raise ValueError(f"{emit.__name__}: 1 to 4 float32 arguments, not {nargs}")
    template.__name__ = template.__qualname__ = emit.__name__.removesuffix("_ir")
    template.__doc__ = emit.__doc__
    return intrinsic(template)


# -- integer bit tricks -----------------------------------------------------------------------------
def _scale_by_pow2(p: F32, k: F32) -> F32:
    """``p * 2**k`` for a ``k`` holding an integer in [-150, 128]: two exact power-of-two factors
    built from bits, so denormal and overflowing results round once, like ldexp."""
    b = p.builder
    k_int = b.fptosi(k.value, _I32)
    half = b.ashr(k_int, ir.Constant(_I32, 1))
    rest = b.sub(k_int, half)

    def pow2(n):
        return F32(b, b.bitcast(b.shl(b.add(n, ir.Constant(_I32, 127)), ir.Constant(_I32, 23)), _FLOAT))

    return p * pow2(half) * pow2(rest)


def _frexp(x: F32) -> tuple[F32, F32]:
    """(mantissa in [0.5, 1), exponent as float32) of a positive normal float32."""
    b = x.builder
    bits = b.bitcast(x.value, _I32)
    m = b.or_(b.and_(bits, ir.Constant(_I32, 0x007FFFFF)), ir.Constant(_I32, 0x3F000000))
    e = b.sub(b.lshr(bits, ir.Constant(_I32, 23)), ir.Constant(_I32, 126))
    return F32(b, b.bitcast(m, _FLOAT)), F32(b, b.sitofp(e, _FLOAT))


def _horner(x: F32, coefficients) -> F32:
    """c0 * x**n + ... + cn (highest power first)."""
    p = coefficients[0] * x + coefficients[1]
    for c in coefficients[2:]:
        p = p * x + c
    return p


INF = float("inf")
NAN = float("nan")

# -- exp, expm1 -----------------------------------------------------------------------------------
_ROUND_MAGIC = 12582912.0            # 1.5 * 2**23: adding it rounds |v| < 2**22 to an integer
_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375                # ln 2 = _LN2_HI + _LN2_LO, k * _LN2_HI exact (Cody-Waite)
_LN2_LO = -2.12194440e-4
_EXP_MAX_IN = 89.0                   # exp(89) overflows: everything above gives inf
_EXP_MIN_IN = -104.0                 # exp(-104) rounds to 0: everything below gives 0
# Cephes expf: exp(r) = 1 + r + r*r * P(r) on [-ln2/2, ln2/2]
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
          5.0000001201e-1)


def _exp_reduce(x: F32) -> tuple[F32, F32, F32]:
    """(k, r, r*r*P(r)) with x = k*ln2 + r, x clamped to [-104, 89] first (NaN becomes 89; the
    callers put it back)."""
    x = where(x < _EXP_MAX_IN, x, _EXP_MAX_IN)
    x = where(x > _EXP_MIN_IN, x, _EXP_MIN_IN)
    k = (x * _LOG2E + _ROUND_MAGIC) - _ROUND_MAGIC
    r = x - k * _LN2_HI
    r = r - k * _LN2_LO
    return k, r, _horner(r, _EXP_P) * (r * r)


def exp_ir(x: F32) -> F32:
    """e**x in float32 (< 1 ulp); inf above 88.72, denormals down to -103.3, then 0."""
    k, r, q = _exp_reduce(x)
    return where(x.is_nan(), x, _scale_by_pow2((q + r) + 1.0, k))


def expm1_ir(x: F32) -> F32:
    """e**x - 1 in float32, accurate near 0."""
    k, r, q = _exp_reduce(x)
    em1_r = q + r                                  # expm1(r): relative accuracy kept for small r
    # 2**k * (1 + em1_r) - 1 = 2**k * em1_r + (2**k - 1), where 2**k - 1 is exact for k <= 24;
    # above, -1 is below half an ulp of e**x
    scale = _scale_by_pow2(F32(x.builder, ir.Constant(_FLOAT, 1.0)), where(k < 25.0, k, 24.0))
    small = scale * em1_r + (scale - 1.0)
    large = _scale_by_pow2(em1_r + 1.0, k)
    return where(x.is_nan(), x, where(k < 25.0, small, large))


# -- log, log1p -----------------------------------------------------------------------------------
_SQRT_HALF = 0.707106781186547524
_MIN_NORMAL = 1.17549435e-38
# Cephes logf: log(1 + m) = m - m*m/2 + m**3 * P(m) for m in [sqrt(.5) - 1, sqrt(2) - 1]
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
          -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)


def log_ir(x: F32) -> F32:
    """Natural log in float32 (< 1 ulp); -inf at +-0, NaN below 0, denormal inputs handled."""
    denormal = x < _MIN_NORMAL
    m, e = _frexp(where(denormal, x * 8388608.0, x))   # scale denormals by 2**23
    e = e - where(denormal, 23.0, 0.0)
    below = m < _SQRT_HALF
    e = where(below, e - 1.0, e)
    m = where(below, m + m - 1.0, m - 1.0)
    z = m * m
    y = _horner(m, _LOG_P) * m * z
    y = y + e * _LN2_LO
    y = y - 0.5 * z
    y = (m + y) + e * _LN2_HI
    y = where(x < INF, y, x)                           # +inf and NaN pass through
    return where(x > 0.0, y, where(x == 0.0, -INF, where(x.is_nan(), x, NAN)))


def log1p_ir(x: F32) -> F32:
    """log(1 + x) in float32, accurate near 0: log(w) + err / w with w = 1 + x rounded and err
    its rounding error (TwoSum, exact)."""
    w = x + 1.0
    x_part = w - 1.0
    one_part = w - x_part
    err = (x - x_part) + (1.0 - one_part)
    lw = log_ir(w)
    y = where((err == 0.0) | (x == INF), lw, lw + err / w)
    return where(w == 1.0, x, y)              # |x| < 2**-24: x itself (keeps -0.0 and denormals)


# -- tanh, sigmoid --------------------------------------------------------------------------------
# Cephes tanhf: tanh(x) = x + x**3 * P(x*x) for |x| < 0.625
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
           -3.33332819422e-1)


def tanh_ir(x: F32) -> F32:
    """tanh in float32: Cephes' polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above."""
    z = x * x
    small = _horner(z, _TANH_P) * z * x + x
    a = abs(x)
    big = 1.0 - 2.0 / (exp_ir(a + a) + 1.0)
    big = where(x > 0.0, big, -big)
    return where(a >= 0.625, big, small)      # NaN takes the polynomial: NaN


def sigmoid_ir(x: F32) -> F32:
    """1 / (1 + exp(-x)) in float32: torch's formula, so 0 below -88.7 like torch."""
    return 1.0 / (exp_ir(-x) + 1.0)


# -- erf ------------------------------------------------------------------------------------------
# erf(x) = x + x * S(x*x) on [0, 1]: S minimax in the relative error of erf (Lawson's iteration in
# float64, then float32 coefficients rounded one at a time from the top, the rest refitted): 1.9e-9.
# x + x*S rather than x*P keeps the rounding of the larger terms out of the result.
_ERF_S = (7.853897113818675e-05, -0.000801020534709096, 0.005188329145312309, -0.026853812858462334,
          0.1128358542919159, -0.3761262595653534, 0.12837916612625122)
# erfc(x) * exp(x*x) = Q(x - 2.5) on [1, 4]: minimax in the absolute error of erfc, fitted the
# same way: 2.4e-9
_ERFC_Q = (0.0001068438432412222, 0.00022506613458972424, 0.000543326314073056, -0.0006611161516048014,
           0.0023025020491331816, -0.00813225470483303, 0.02491462603211403, -0.07434218376874924,
           0.21080760657787323)


def erf_ir(x: F32) -> F32:
    """The error function in float32: x + x * S(x*x) below |x| = 1, 1 - exp(-x*x) * Q(|x|) up to 4
    (erf rounds to +-1 from 3.92 on)."""
    small = x + x * _horner(x * x, _ERF_S)
    a = abs(x)
    a4 = where(a < 4.0, a, 4.0)
    big = 1.0 - exp_ir(-(a4 * a4)) * _horner(a4 - 2.5, _ERFC_Q)
    big = where(x > 0.0, big, -big)
    return where(a >= 1.0, big, small)        # NaN takes the polynomial: NaN


# -- sin, cos ------------------------------------------------------------------------------------
_PIO2 = (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33)   # pi/2, 159 bits
_TWO_OVER_PI = 0.6366197723675814
_ROUND_MAGIC_64 = 6755399441055744.0     # 1.5 * 2**52: adding it rounds |v| < 2**51 to an integer
_TRIG_MAX_IN = 2.0 ** 50                 # the reduction's quotient is exact below: the table's above


def _two_over_pi_bits(bits: int) -> int:
    """floor(2/pi * 2**bits), from Machin's formula in integers (a few hundred bits: exact here)."""
    guard = bits + 32
    one = 1 << guard

    def arctan_inv(n: int) -> int:       # arctan(1/n) * 2**guard
        total, term, k, n2 = 0, one // n, 1, n * n
        while term:
            total += term // k if k % 4 == 1 else -(term // k)
            term //= n2
            k += 2
        return total

    pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))
    return ((2 * one) << bits) // pi


def _huge_table() -> tuple[list[float], list[float]]:
    """For each float32 exponent e (|x| = M * 2**e, M < 2**24 an integer, e in 0..104): (2**e * 2/pi)
    mod 4 as hi + mid float64s, so that M * (hi + mid) mod 4 is x * 2/pi mod 4 within ~2**-76:
    Payne and Hanek's reduction, the bits of 2/pi below 2**-e-2 the only ones a float32 of that
    exponent needs."""
    frac_bits = 24 + 2 * 53 + 16                       # below 2**-(e+2): M's bits plus two doubles
    two_over_pi = _two_over_pi_bits(104 + frac_bits)   # 2/pi * 2**(104 + frac_bits)
    hi, mid = [], []
    for e in range(105):
        scaled = two_over_pi >> (104 - e)              # 2**e * 2/pi * 2**frac_bits
        v = scaled % (4 << frac_bits)                  # mod 4
        h = float(v) / 2.0 ** frac_bits                # correctly rounded (int -> float)
        rest = v - int(h * 2.0 ** frac_bits)
        hi.append(h)
        mid.append(float(rest) / 2.0 ** frac_bits)
    return hi, mid


_HUGE_HI, _HUGE_MID = _huge_table()
# FreeBSD k_sindf.c / k_cosdf.c on |r| <= pi/4: |sin(r)/r - s(r)| < 2**-37.5, |cos(r) - c(r)| < 2**-34.1
_SIN_S = (-0.16666666641626524, 0.008333329385889463, -0.00019839334836096632, 2.718311493989822e-06)
_COS_C = (-0.499999997251031, 0.04166662332373906, -0.001388676377460993, 2.439044879627741e-05)


def _trig(x: F32, quadrant_shift: int) -> F32:
    """sin(x) (shift 0) or cos(x) = sin(x + pi/2) (shift 1): x - j * pi/2 in float64 (three fused
    multiply-adds: one rounding each, near-exact), the quadrant ``j + shift`` picking the sin or cos
    kernel and the sign, the float64 result rounded once to float32 (< 1 ulp); from |x| = 2**50 on,
    where the float64 quotient is no longer the nearest integer, :func:`_reduce_huge`'s r and j.
    NaN for +-inf and NaN."""
    b = x.builder

    def d(v):
        return ir.Constant(_DOUBLE, v)

    def fma(a_, b_, c_):
        fn = b.module.declare_intrinsic("llvm.fma", [_DOUBLE], ir.FunctionType(_DOUBLE, [_DOUBLE] * 3))
        return b.call(fn, [a_, b_, c_])

    xd = b.fpext(x.value, _DOUBLE)
    jm = b.fadd(b.fmul(xd, d(_TWO_OVER_PI)), d(_ROUND_MAGIC_64))
    j = b.fsub(jm, d(_ROUND_MAGIC_64))
    nj = b.fneg(j)
    r = xd
    for part in _PIO2:
        r = fma(nj, d(part), r)
    q = b.trunc(b.bitcast(jm, _I64), _I32)   # j's low bits
    r_huge, q_huge = _reduce_huge(x, d, fma)
    huge = b.fcmp_ordered(">=", b.call(b.module.declare_intrinsic("llvm.fabs", [_FLOAT]), [x.value]),
                          ir.Constant(_FLOAT, _TRIG_MAX_IN))
    r = b.select(huge, r_huge, r)
    q = b.add(b.select(huge, q_huge, q), ir.Constant(_I32, quadrant_shift))
    z = b.fmul(r, r)
    w = b.fmul(z, z)
    s_, c_ = _SIN_S, _COS_C
    # (r + s*(S1 + z*S2)) + s*w*(S3 + z*S4), s = z*r
    sz = b.fmul(z, r)
    sin_r = b.fadd(b.fadd(r, b.fmul(sz, b.fadd(d(s_[0]), b.fmul(z, d(s_[1]))))),
                   b.fmul(b.fmul(sz, w), b.fadd(d(s_[2]), b.fmul(z, d(s_[3])))))
    # ((1 + z*C0) + w*C1) + (w*z)*(C2 + z*C3)
    cos_r = b.fadd(b.fadd(b.fadd(d(1.0), b.fmul(z, d(c_[0]))), b.fmul(w, d(c_[1]))),
                   b.fmul(b.fmul(w, z), b.fadd(d(c_[2]), b.fmul(z, d(c_[3])))))
    odd = b.icmp_unsigned("!=", b.and_(q, ir.Constant(_I32, 1)), ir.Constant(_I32, 0))
    neg = b.icmp_unsigned("!=", b.and_(q, ir.Constant(_I32, 2)), ir.Constant(_I32, 0))
    y = b.select(odd, cos_r, sin_r)
    y = F32(b, b.fptrunc(b.select(neg, b.fneg(y), y), _FLOAT))
    return where(abs(x) < math.inf, y, NAN)     # NaN and +-inf fail the test: NaN, as torch


def _reduce_huge(x: F32, d, fma) -> tuple[ir.Value, ir.Value]:
    """(r, j mod 4) with x = j * pi/2 + r, |r| <= pi/4, for a finite |x| >= 2**50, as float64 and
    int32 (:func:`_huge_table`: x * 2/pi mod 4 from the table row of x's exponent; two gathers and a
    dozen float64 operations per element, always computed, taken only where |x| >= 2**50)."""
    b = x.builder
    i32 = lambda v: ir.Constant(_I32, v)   # noqa: E731
    bits = b.bitcast(x.value, _I32)
    mag = b.and_(bits, i32(0x7FFFFFFF))
    e = b.sub(b.lshr(mag, i32(23)), i32(150))                        # |x| = M * 2**e
    e = b.select(b.icmp_signed("<", e, i32(0)), i32(0), e)           # (small x: a row, unused)
    e = b.select(b.icmp_signed(">", e, i32(104)), i32(104), e)       # (inf, NaN: unused)
    m = b.sitofp(b.or_(b.and_(mag, i32(0x007FFFFF)), i32(0x00800000)), _DOUBLE)

    def row(name, values):
        table = b.module.globals.get(name)
        if table is None:
            ty = ir.ArrayType(_DOUBLE, len(values))
            table = ir.GlobalVariable(b.module, ty, name)
            table.global_constant = True
            table.linkage = "internal"
            table.initializer = ir.Constant(ty, values)
        return b.load(b.gep(table, [i32(0), e], inbounds=True))

    hi, mid = row("srcore_fastmath_2_over_pi_hi", _HUGE_HI), row("srcore_fastmath_2_over_pi_mid", _HUGE_MID)
    p = b.fmul(m, hi)                                  # < 2**26
    err = fma(m, hi, b.fneg(p))                        # exactly m * hi - p
    jm = b.fadd(p, d(_ROUND_MAGIC_64))
    j = b.fsub(jm, d(_ROUND_MAGIC_64))                 # the nearest integer to p
    f = b.fadd(b.fsub(p, j), b.fadd(err, b.fmul(m, mid)))   # p - j exact; |f| <= 1/2 + 2**-25
    jm2 = b.fadd(f, d(_ROUND_MAGIC_64))
    j2 = b.fsub(jm2, d(_ROUND_MAGIC_64))
    f = b.fsub(f, j2)
    q = b.add(b.trunc(b.bitcast(jm, _I64), _I32), b.trunc(b.bitcast(jm2, _I64), _I32))
    r = b.fmul(f, d(_PIO2[0]))
    neg = b.icmp_signed("<", bits, i32(0))             # sin(-x) = -sin(x): -r, quadrant -j
    return b.select(neg, b.fneg(r), r), b.select(neg, b.sub(i32(0), q), q)


def sin_ir(x: F32) -> F32:
    """sin in float32 (< 1 ulp; -0.0 kept)."""
    return where(x == 0.0, x, _trig(x, 0))


def cos_ir(x: F32) -> F32:
    """cos in float32 (< 1 ulp)."""
    return _trig(x, 1)


exp = float32_function(exp_ir)
expm1 = float32_function(expm1_ir)
log = float32_function(log_ir)
log1p = float32_function(log1p_ir)
tanh = float32_function(tanh_ir)
sigmoid = float32_function(sigmoid_ir)
erf = float32_function(erf_ir)
sin = float32_function(sin_ir)
cos = float32_function(cos_ir)


# the activations a trt_like conv layer can carry (kernels/activation.py) and the pointwise wing
# uses (pointwise/ops.py): one float32 formula each, torch's
def clamp_ir(x: F32, lo: F32, hi: F32) -> F32:
    """torch.clamp: min(max(x, lo), hi) with NaN from any side (a NaN bound makes every result
    NaN, as torch's); ``hi`` wins when lo > hi."""
    # (a Python float bound, hardsigmoid's and hardswish's, is never NaN)
    take_lo = (x < lo) | lo.is_nan() if isinstance(lo, F32) else x < lo
    y = where(take_lo, lo, x)
    take_hi = (y > hi) | hi.is_nan() if isinstance(hi, F32) else y > hi
    return where(take_hi, hi, y)


_SQRT1_2 = math.sqrt(0.5)
# torch's kBeta of the tanh GELU: M_SQRT2 * M_2_SQRTPI * 0.5 = sqrt(2 / pi)
_GELU_TANH_BETA = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5
_GELU_TANH_KAPPA = 0.044715


def leaky_relu_ir(x: F32, slope: F32) -> F32:
    return where(x > 0.0, x, x * slope)


def _fma(a: F32, b: F32, c: F32) -> F32:
    """``a * b + c`` rounded once (``llvm.fma``)."""
    bld = a.builder
    fn = bld.module.declare_intrinsic("llvm.fma", [_FLOAT], ir.FunctionType(_FLOAT, [_FLOAT] * 3))
    return F32(bld, bld.call(fn, [a.value, b.value, c.value]))


_EXP_NEG_MIN = -87.0                 # exp(-87) is a normal float: 2**k * p stays one from here up


def _exp_neg_ir(a: F32, a_lo: F32) -> F32:
    """exp(a + a_lo) for a <= 0, |a_lo| within an ulp of a (a two-float exponent): expf's
    reduction and polynomial with a_lo added to the reduced argument, 2**k added to the exponent
    bits (the rounding constant's bits shifted hold k); 0 below -87 and for NaN."""
    b = a.builder
    ac = where(a > _EXP_NEG_MIN, a, _EXP_NEG_MIN)
    kr = ac * _LOG2E + _ROUND_MAGIC
    k = kr - _ROUND_MAGIC
    r = ac - k * _LN2_HI
    r = (r - k * _LN2_LO) + a_lo
    p = (_horner(r, _EXP_P) * (r * r) + r) + 1.0
    shifted = b.shl(b.bitcast(kr.value, _I32), ir.Constant(_I32, 23))
    y = F32(b, b.bitcast(b.add(b.bitcast(p.value, _I32), shifted), _FLOAT))
    return where(a > _EXP_NEG_MIN, y, 0.0)


# Phi(-a) = t Q(t) exp(-a**2 / 2) with t = 1 / (1 + 0.26 a), a >= 0: Q minimax in the relative
# error of Phi(-a) on [0, 13.3] (Lawson's iteration in float64 on erfcx; 2.0e-8 before rounding
# to float32). The exp does not wait for the division and Q: two short dependency chains, not one
# long one (the loop is latency bound otherwise)
_PHI_C = 0.26
_PHI_Q = (0.030896160751581192, -0.15474054217338562, 0.2554672658443451, -0.15553663671016693,
          0.16415293514728546, 0.04964228346943855, 0.1033913865685463, 0.10296492278575897,
          0.1037621945142746)


def phi_ir(x: F32) -> F32:
    """The standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2 in float32: relative error below 5e-7
    wherever it is a normal float (x**2 / 2 enters the exp as two floats: its rounding would
    otherwise grow the tail's error with x**2)."""
    a = abs(x)
    t = 1.0 / (a * _PHI_C + 1.0)
    s = x * x
    s_lo = _fma(x, x, -s)
    h = (t * _horner(t, _PHI_Q)) * _exp_neg_ir(s * -0.5, s_lo * -0.5)
    return where(x < 0.0, h, 1.0 - h)


def gelu_ir(x: F32) -> F32:
    """x * Phi(x) (torch's exact GELU, x * (1 + erf(x / sqrt 2)) / 2, as one product)."""
    return x * phi_ir(x)


def gelu_tanh_ir(x: F32) -> F32:
    inner = _GELU_TANH_BETA * (x + _GELU_TANH_KAPPA * (x * x * x))
    return 0.5 * x * (1.0 + tanh_ir(inner))


_EXP_FINITE_MAX = 88.72283172607421875   # the largest float32 whose exp is finite
_SILU_EXP_MIN = -20.0                     # 1 + exp(-20) rounds to 1


def silu_ir(x: F32) -> F32:
    """x / (1 + exp(-x)), torch's formula and the same bits as with :func:`exp_ir`, in fewer
    instructions (the loop is bound by their count, not by the division: a reciprocal estimate
    with a Newton step was slower). exp's reduction on -x clamped to [-20, 88.72], then
    ``1 + p * 2**k`` as ``(p * 2**(k-2) + 0.25) * 4``: one power of two from bits for every k up
    to 128, rounded as torch rounds ``1 + exp(-x)`` (exact scalings of the same sum). exp(-x) = inf
    below -88.72: -0.0, and NaN for -inf (x * 0); NaN passes through the numerator."""
    b = x.builder
    a = -x
    ac = where(a < _EXP_FINITE_MAX, a, _EXP_FINITE_MAX)
    ac = where(ac > _SILU_EXP_MIN, ac, _SILU_EXP_MIN)
    k = (ac * _LOG2E + _ROUND_MAGIC) - _ROUND_MAGIC
    r = (ac - k * _LN2_HI) - k * _LN2_LO
    p = (_horner(r, _EXP_P) * (r * r) + r) + 1.0
    pow2 = b.shl(b.add(b.fptosi(k.value, _I32), ir.Constant(_I32, 127 - 2)), ir.Constant(_I32, 23))
    q = x / ((p * F32(b, b.bitcast(pow2, _FLOAT)) + 0.25) * 4.0)
    return where(a > _EXP_FINITE_MAX, x * 0.0, q)


def hardsigmoid_ir(x: F32) -> F32:
    return clamp_ir(x + 3.0, 0.0, 6.0) / 6.0


def hardswish_ir(x: F32) -> F32:
    return x * clamp_ir(x + 3.0, 0.0, 6.0) / 6.0


clamp = float32_function(clamp_ir)
silu = float32_function(silu_ir)
hardsigmoid = float32_function(hardsigmoid_ir)
hardswish = float32_function(hardswish_ir)
leaky_relu = float32_function(leaky_relu_ir)
gelu = float32_function(gelu_ir)
gelu_tanh = float32_function(gelu_tanh_ir)
