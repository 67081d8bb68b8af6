"""Special functions (scipy.special), trigonometric and number-theory elementwise ops, bit shifts.

Floating results follow torch: integer and bool inputs give float32; a float32 input is
computed in float64 and rounded once (scipy's float32 loops are less accurate than torch's).
Integer ops (gcd, lcm, shifts) keep torch's semantics on negatives and large shift counts.
"""
from __future__ import annotations

import numpy as np
import scipy.special as sc

from srcore.plugin import KernelError

from .promotion import float_type, result_type


def _store(r, out, dtype):
    r = np.asarray(r, dtype=dtype)
    if out is None:
        return r
    np.copyto(out, r, casting="unsafe")
    return out


def _unary(fn, name):
    def kernel(self, *, out=None):
        dt = float_type(self.dtype)
        return _store(fn(self.astype(np.float64) if dt == np.float32 else self.astype(dt, copy=False)), out, dt)
    kernel.__name__ = name
    kernel.__doc__ = f"``aten::{name}``: elementwise, float32 for integer inputs."
    return kernel


def _binary(fn, name, floating=True):
    def kernel(self, other, *, out=None):
        dt = result_type(self, other)
        if floating:
            dt = float_type(dt)
        a, b = np.asarray(self), np.asarray(other)
        wide = np.float64 if dt == np.float32 else dt
        return _store(fn(a.astype(wide, copy=False), b.astype(wide, copy=False)), out, dt)
    kernel.__name__ = name
    kernel.__doc__ = f"``aten::{name}``: elementwise, broadcast, torch's type promotion."
    return kernel


def _lgamma(x):
    r = sc.gammaln(x)
    return np.where(np.isneginf(x), np.inf, r)  # torch: lgamma(-inf) = +inf (scipy gives -inf)


def _angle(x):
    return np.where(np.isnan(x), x, np.where(x < 0, np.pi, 0.0))


def _entr(x):
    return sc.entr(x)


def _logit(x, eps):
    if eps is not None:
        x = np.clip(x, eps, 1 - eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(x / (1 - x))


def _frac(x):
    return x - np.trunc(x)


acos = _unary(np.arccos, "acos")
asin = _unary(np.arcsin, "asin")
atan = _unary(np.arctan, "atan")
acosh = _unary(np.arccosh, "acosh")
asinh = _unary(np.arcsinh, "asinh")
atanh = _unary(np.arctanh, "atanh")
tan = _unary(np.tan, "tan")
sinh = _unary(np.sinh, "sinh")
cosh = _unary(np.cosh, "cosh")
exp2 = _unary(np.exp2, "exp2")
sinc = _unary(np.sinc, "sinc")
deg2rad = _unary(np.deg2rad, "deg2rad")
rad2deg = _unary(np.rad2deg, "rad2deg")
angle = _unary(_angle, "angle")
erfc = _unary(sc.erfc, "erfc")
erfinv = _unary(sc.erfinv, "erfinv")
digamma = _unary(sc.psi, "digamma")
lgamma = _unary(_lgamma, "lgamma")
i0 = _unary(sc.i0, "i0")
special_i0e = _unary(sc.i0e, "special_i0e")
special_i1 = _unary(sc.i1, "special_i1")
special_i1e = _unary(sc.i1e, "special_i1e")
special_erfcx = _unary(sc.erfcx, "special_erfcx")
special_entr = _unary(_entr, "special_entr")
special_ndtr = _unary(sc.ndtr, "special_ndtr")
special_ndtri = _unary(sc.ndtri, "special_ndtri")
special_log_ndtr = _unary(sc.log_ndtr, "special_log_ndtr")

logaddexp = _binary(np.logaddexp, "logaddexp")
logaddexp2 = _binary(np.logaddexp2, "logaddexp2")
hypot = _binary(np.hypot, "hypot")
copysign = _binary(np.copysign, "copysign")
xlogy = _binary(sc.xlogy, "xlogy")
special_xlog1py = _binary(sc.xlog1py, "special_xlog1py")
special_zeta = _binary(sc.zeta, "special_zeta")
igamma = _binary(sc.gammainc, "igamma")
igammac = _binary(sc.gammaincc, "igammac")
fmax = _binary(np.fmax, "fmax", floating=False)
fmin = _binary(np.fmin, "fmin", floating=False)


def frac(self, *, out=None):
    """``aten::frac``: ``x - trunc(x)`` (floating inputs only, as torch)."""
    if self.dtype.kind not in "fc":
        raise KernelError(f'"frac_cpu" not implemented for {self.dtype}')
    return _store(_frac(self), out, self.dtype)


def logit(self, eps=None, *, out=None):
    """``aten::logit(self, eps=None)``: ``log(x / (1 - x))``, x clamped to [eps, 1 - eps] when eps is given."""
    dt = float_type(self.dtype)
    return _store(_logit(self.astype(np.float64), eps), out, dt)


def ldexp(self, other, *, out=None):
    """``aten::ldexp``: ``self * 2 ** other`` in the promoted floating dtype."""
    dt = float_type(result_type(self, other))
    return _store(np.asarray(self, np.float64) * np.exp2(np.asarray(other, np.float64)), out, dt)


def nextafter(self, other, *, out=None):
    dt = result_type(self, other)
    if dt.kind != "f":
        raise KernelError(f'"nextafter_cpu" not implemented for {dt}')
    return _store(np.nextafter(np.asarray(self, dt), np.asarray(other, dt)), out, dt)


def heaviside(self, values, *, out=None):
    """``aten::heaviside``: torch requires both operands of one dtype."""
    if np.asarray(self).dtype != np.asarray(values).dtype:
        raise KernelError(f"heaviside is not yet implemented for tensors with different dtypes: "
                          f"{self.dtype} and {np.asarray(values).dtype}")
    if self.dtype == np.bool_:
        return _store(np.where(self, True, values), out, self.dtype)
    return _store(np.where(self == 0, values, (self > 0).astype(self.dtype)), out, self.dtype)


def _integers(name, a, b):
    dt = result_type(a, b)
    if dt.kind not in "iub":
        raise KernelError(f'"{name}_cpu" not implemented for \'{_torch_name(dt)}\'')
    return dt


def _torch_name(dt):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bool": "Bool"}.get(np.dtype(dt).name, str(dt))


def gcd(self, other, *, out=None):
    """``aten::gcd``: non-negative, gcd(0, 0) = 0 (integers only)."""
    dt = _integers("gcd", self, other)
    return _store(np.gcd(np.asarray(self, dt), np.asarray(other, dt)), out, dt)


def lcm(self, other, *, out=None):
    """``aten::lcm``: ``|a * b| / gcd(a, b)``, 0 when either is 0 (integers only)."""
    dt = _integers("lcm", self, other)
    return _store(np.lcm(np.asarray(self, dt), np.asarray(other, dt)), out, dt)


def _shift(self, other, out, left):
    dt = result_type(self, other)
    if dt.kind not in "iub" or dt == np.bool_:
        raise KernelError(f'"{"lshift" if left else "rshift"}_cpu" not implemented for \'{_torch_name(dt)}\'')
    a, b = np.asarray(self, dt), np.asarray(other, dt)
    bits = dt.itemsize * 8
    # torch: a shift by a negative amount or by the width or more gives 0 (left) or the sign (right)
    big = (b < 0) | (b >= bits)
    safe = np.where(big, 0, b).astype(dt)
    if left:
        r = np.where(big, 0, np.left_shift(a, safe))
    else:
        r = np.where(big, np.where(a < 0, -1, 0) if dt.kind == "i" else 0, np.right_shift(a, safe))
    return _store(r, out, dt)


def bitwise_left_shift(self, other, *, out=None):
    return _shift(self, other, out, True)


def bitwise_right_shift(self, other, *, out=None):
    return _shift(self, other, out, False)


def polygamma(n, self, *, out=None):
    """``aten::polygamma(int n, Tensor self)``."""
    if n < 0:
        raise KernelError("polygamma(n, x) does not support negative n.")
    dt = float_type(self.dtype)
    return _store(sc.psi(self.astype(np.float64)) if n == 0 else sc.polygamma(n, self.astype(np.float64)), out, dt)


def mvlgamma(self, p, *, out=None):
    """``aten::mvlgamma(self, p)``: the multivariate log-gamma of dimension p."""
    if p < 1:
        raise KernelError("p has to be greater than or equal to 1")
    if self.dtype.kind not in "f":
        raise KernelError("mvlgamma is not implemented for integer inputs")
    x = self.astype(np.float64)
    if x.size and not np.all(x > (p - 1) / 2):
        raise KernelError(f"All elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    r = p * (p - 1) / 4 * np.log(np.pi) + sum(sc.gammaln(x - j / 2) for j in range(p))
    return _store(r, out, self.dtype)


def isposinf(self, *, out=None):
    return _store(np.isposinf(self) if self.dtype.kind == "f" else np.zeros(self.shape, bool), out, np.bool_)


def isneginf(self, *, out=None):
    return _store(np.isneginf(self) if self.dtype.kind == "f" else np.zeros(self.shape, bool), out, np.bool_)


def signbit(self, *, out=None):
    return _store(np.signbit(self) if self.dtype.kind == "f" else (self < 0), out, np.bool_)



