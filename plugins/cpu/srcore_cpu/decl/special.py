"""Special functions, trigonometry, number theory and bit shifts (kernels in kernels/special.py)."""
from __future__ import annotations

from . import ALL, FLOATS, INTS, NUMERIC, family

_k = family("special")
_BITS = INTS + ("bool",)

_UNARY = """acos asin atan acosh asinh atanh tan sinh cosh exp2 sinc deg2rad rad2deg angle erfc erfinv digamma lgamma
i0 special_i0e special_i1 special_i1e special_erfcx special_entr special_ndtr special_ndtri special_log_ndtr""".split()
_BINARY = {  # op: its tensor overloads ("" = the unnamed one)
    "logaddexp": ("",), "logaddexp2": ("",), "hypot": ("",), "igamma": ("",), "igammac": ("",),
    "copysign": ("Tensor", "Scalar"), "xlogy": ("Tensor", "Scalar_Other", "Scalar_Self"), "ldexp": ("Tensor",),
    "special_xlog1py": ("", "other_scalar", "self_scalar"), "special_zeta": ("", "other_scalar", "self_scalar"),
}


def _q(name: str, overload: str) -> str:
    return f"aten::{name}.{overload}" if overload else f"aten::{name}"


KERNELS = (
    [_k(f"aten::{n}", n, ALL) for n in _UNARY]
    + [_k(_q(n, ov), n, ALL) for n, ovs in _BINARY.items() for ov in ovs]
    + [_k("aten::frac", "frac", FLOATS), _k("aten::logit", "logit", ALL), _k("aten::nextafter", "nextafter", FLOATS),
       _k("aten::heaviside", "heaviside", ALL), _k("aten::fmax", "fmax", NUMERIC), _k("aten::fmin", "fmin", NUMERIC),
       _k("aten::gcd", "gcd", INTS), _k("aten::lcm", "lcm", INTS), _k("aten::polygamma", "polygamma", ALL),
       _k("aten::mvlgamma", "mvlgamma", FLOATS), _k("aten::isposinf", "isposinf", ALL),
       _k("aten::isneginf", "isneginf", ALL), _k("aten::signbit", "signbit", ALL)]
    + [_k(f"aten::bitwise_{d}_shift.{ov}", f"bitwise_{d}_shift", _BITS) for d in ("left", "right")
       for ov in ("Tensor", "Tensor_Scalar", "Scalar_Tensor")]
)
