"""Unary elementwise kernels: math functions, rounding, predicates.

Floating functions (exp, log, sqrt, erf, ...) of integer or bool tensors
produce float32, as in torch; sign-and-rounding functions keep the dtype.
``unary_matcher`` binds a same-dtype node to the bare ufunc.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import TensorType
from srcore.plugin import NodeInfo, Specialized

from .promotion import as_array, float_type


def _floating(ufunc, name):
    def kernel(self, *, out=None):
        if out is None:
            return as_array(ufunc(self, dtype=float_type(self.dtype)))
        # an integer input must not pick the integer loop (np.reciprocal(2) == 0)
        ufunc(self, out=out, dtype=None if self.dtype.kind in "fc" else out.dtype)
        return out
    kernel.__name__ = name
    kernel.__doc__ = f"``aten::{name}``: elementwise ``{ufunc.__name__}``, float32 for integer inputs."
    return kernel


def _same(ufunc, name, int_identity=False):
    def kernel(self, *, out=None):
        if int_identity and self.dtype.kind in "iub":
            # rounding an integer is the identity (numpy would return floats)
            if out is None:
                return self.copy()
            np.copyto(out, self)
            return out
        r = ufunc(self, out=out)
        return out if out is not None else as_array(r)
    kernel.__name__ = name
    kernel.__doc__ = f"``aten::{name}``: elementwise ``{ufunc.__name__}``, same dtype."
    return kernel


def _predicate(ufunc, name):
    def kernel(self, *, out=None):
        r = ufunc(self, out=out)
        return out if out is not None else as_array(r)
    kernel.__name__ = name
    kernel.__doc__ = f"``aten::{name}``: elementwise ``{ufunc.__name__}``, bool result."
    return kernel


exp = _floating(np.exp, "exp")
log = _floating(np.log, "log")
log1p = _floating(np.log1p, "log1p")
expm1 = _floating(np.expm1, "expm1")
sqrt = _floating(np.sqrt, "sqrt")
reciprocal = _floating(np.reciprocal, "reciprocal")
sin = _floating(np.sin, "sin")
cos = _floating(np.cos, "cos")
tanh = _floating(np.tanh, "tanh")
log2 = _floating(np.log2, "log2")
log10 = _floating(np.log10, "log10")
square = _same(np.square, "square")

neg = _same(np.negative, "neg")
abs = _same(np.absolute, "abs")
sign = _same(np.sign, "sign")
floor = _same(np.floor, "floor", int_identity=True)
ceil = _same(np.ceil, "ceil", int_identity=True)
trunc = _same(np.trunc, "trunc", int_identity=True)
round_ = _same(np.rint, "round", int_identity=True)  # half to even, like torch
bitwise_not = _same(np.invert, "bitwise_not")

isnan = _predicate(np.isnan, "isnan")
isinf = _predicate(np.isinf, "isinf")
logical_not = _predicate(np.logical_not, "logical_not")


def round(self, *, decimals=0, out=None):
    """``aten::round`` / ``round.decimals``: half to even; ``decimals`` scales by 10**decimals first."""
    if decimals == 0:
        return round_(self, out=out)
    r = np.round(self, decimals, out=out)
    return out if out is not None else as_array(r)


def rsqrt(self, *, out=None):
    """``aten::rsqrt``: ``1 / sqrt(self)``."""
    out = sqrt(self, out=out)
    np.reciprocal(out, out=out)
    return out


def erf(self, *, out=None):
    """``aten::erf`` via ``scipy.special.erf`` (float16 computes in float32 and rounds once, as torch)."""
    from scipy.special import erf as _erf

    if self.dtype == np.float16:
        r = _erf(self, dtype=np.float32)
        if out is None:
            return as_array(r.astype(np.float16))
        np.copyto(out, r, casting="unsafe")
        return out
    if out is None:
        return as_array(_erf(self, dtype=float_type(self.dtype)))
    _erf(self, out=out)
    return out


def nan_to_num(self, nan=None, posinf=None, neginf=None, *, out=None):
    """``aten::nan_to_num``: NaN -> ``nan`` (0), +-inf -> ``posinf``/``neginf`` (the dtype's extremes)."""
    if out is None:
        out = self.copy()
    else:
        np.copyto(out, self)
    if out.dtype.kind == "f":
        # np.nan_to_num's own steps (masks of the input first, then three masked copies) without its
        # ~5 us of Python (finfo lookups, isposinf/isneginf wrappers), most of a small call
        m_nan, m_pos, m_neg = np.isnan(self), np.equal(self, np.inf), np.equal(self, -np.inf)
        big = _FINFO_MAX.get(out.dtype)
        if big is None:
            big = _FINFO_MAX[out.dtype] = float(np.finfo(out.dtype).max)
        np.copyto(out, 0.0 if nan is None else nan, where=m_nan)
        np.copyto(out, big if posinf is None else posinf, where=m_pos)
        np.copyto(out, -big if neginf is None else neginf, where=m_neg)
    return out


_FINFO_MAX: dict = {}


# --- matcher -----------------------------------------------------------------------------------

_FLOAT_ONLY = {"aten::exp": np.exp, "aten::log": np.log, "aten::log1p": np.log1p, "aten::expm1": np.expm1,
               "aten::sqrt": np.sqrt, "aten::reciprocal": np.reciprocal, "aten::sin": np.sin,
               "aten::cos": np.cos, "aten::tanh": np.tanh, "aten::log2": np.log2, "aten::log10": np.log10, "aten::floor": np.floor, "aten::ceil": np.ceil,
               "aten::trunc": np.trunc, "aten::round": np.rint}
_ANY = {"aten::neg": np.negative, "aten::abs": np.absolute, "aten::square": np.square}


def unary_matcher(node: NodeInfo):
    """Same input and output dtype (and a known nonzero rank): the bare ufunc; else the generic kernel."""
    return _fast_unary(node) or globals().get(node.op.split("::")[1].split(".")[0])


def _fast_unary(node: NodeInfo):
    if node.op not in _FLOAT_ONLY and node.op not in _ANY and node.op != "aten::erf":
        return None
    src = node.args[0].type
    dst = node.output_types[0] if node.output_types else None
    if not (isinstance(src, TensorType) and isinstance(dst, TensorType)):
        return None
    if src.dtype is None or src.dtype != dst.dtype or not dst.shape:
        return None
    if node.op in _ANY:
        return Specialized(_ANY[node.op], args=(0,)) if src.dtype != "bool" else None
    if src.dtype not in ("float32", "float64"):
        return None
    if node.op == "aten::erf":
        from scipy.special import erf as _erf
        return Specialized(_erf, args=(0,))
    return Specialized(_FLOAT_ONLY[node.op], args=(0,))
