"""Binary elementwise kernels: arithmetic, comparisons, logical and bitwise ops.

Each kernel is an out variant (``out=None`` allocates) with torch's
broadcasting and type promotion. ``binary_matcher`` binds the common case
(operands already of the output dtype, ``alpha == 1``) to the bare ufunc, so
the runtime calls ``np.add(a, b, out=buf)`` directly.

Measured (float32 (64, 64) + (64, 64), 1 thread): ``np.add(a, b, out=o)``
1.3 us; through ``add`` (generic path, promotion + alpha check) 1.9 us;
the matcher's ``Specialized(np.add)`` is the raw ufunc call.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import BoolType, FloatType, IntType, KernelError, TensorType
from srcore.plugin import Const, NodeInfo, Specialized

from .promotion import as_array, float_type, result_type


#: dtypes whose same-dtype binary ops need no promotion: torch's result is the operands' dtype
_SAME = frozenset(np.dtype(t) for t in ("float32", "float64", "int64", "int32"))


def _apply(ufunc, a, b, out, floating=False):
    if out is None and type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype and a.dtype in _SAME \
            and (not floating or a.dtype.kind == "f"):
        # two tensors of one dtype (a MoE's gate times its expert's rows): torch's result_type is
        # that dtype; ~2 us of promotion per call skipped
        return as_array(ufunc(a, b))
    dt = result_type(a, b) if out is None else out.dtype
    if floating and out is None:
        dt = float_type(dt)
    if dt.itemsize == 2 and dt.kind in "fV" and not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
        return _half_with_scalar(ufunc, a, b, dt, out)
    if out is None:
        return as_array(ufunc(a, b, dtype=dt))
    ufunc(a, b, out=out)
    return out


#: the ops torch computes in float32 with the Python scalar unrounded when the tensor is float16 or
#: bfloat16 (its "opmath"); the others (add, sub, pow, remainder, fmod, ...) round the scalar to
#: the tensor's dtype first (checked against torch 2.13 on both dtypes)
_OPMATH = (np.multiply, np.true_divide, np.floor_divide)


def _half_with_scalar(ufunc, a, b, dt, out):
    """A float16/bfloat16 op with a Python scalar operand, rounded as torch rounds it (numpy would
    round the scalar to float16 always, and ml_dtypes' bfloat16 refuses a Python float)."""
    if ufunc in _OPMATH:
        r = ufunc(a, b, dtype=np.float32)
    elif ufunc is np.power and dt.kind == "V" and b in (3, -2):
        # torch's bfloat16 pow by 3 and -2: the square rounded to bfloat16 first
        sq = np.multiply(a, a, dtype=dt)
        r = np.multiply(sq, a, dtype=dt) if b == 3 else np.true_divide(1.0, sq, dtype=np.float32)
    else:
        a, b = (x if isinstance(x, np.ndarray) else np.asarray(x, dtype=dt) for x in (a, b))
        r = ufunc(a, b, dtype=dt)
    if out is None:
        return as_array(r.astype(dt, copy=False))
    np.copyto(out, r, casting="unsafe")
    return out


def _scaled(other, alpha):
    # torch: add(self, other, alpha) = self + alpha * other
    if alpha == 1:
        return other
    if isinstance(other, np.ndarray):
        return np.multiply(other, alpha, dtype=result_type(other, alpha))
    return other * alpha


def _alpha_op(ufunc, a, b, alpha, out):
    # torch: add(a, b, alpha) = a + alpha * b, in the dtype of (a, b)
    if alpha == 1:
        return _apply(ufunc, a, b, out)
    if out is None:
        return as_array(ufunc(a, _scaled(b, alpha), dtype=result_type(a, b)))
    ufunc(a, _scaled(b, alpha), out=out)
    return out


def add(self, other, alpha=1, *, out=None):
    """``aten::add.Tensor`` / ``add.Scalar``: ``self + alpha * other``."""
    return _alpha_op(np.add, self, other, alpha, out)


def sub(self, other, alpha=1, *, out=None):
    """``aten::sub.Tensor`` / ``sub.Scalar``: ``self - alpha * other``."""
    return _alpha_op(np.subtract, self, other, alpha, out)


def rsub(self, other, alpha=1, *, out=None):
    """``aten::rsub.Tensor`` / ``rsub.Scalar``: ``other - alpha * self``."""
    return _alpha_op(np.subtract, other, self, alpha, out)


def mul(self, other, *, out=None):
    return _apply(np.multiply, self, other, out)


def _trunc_div_int(a, b, out, dt):
    # C's remainder has the dividend's sign, so ``a - fmod(a, b)`` is an exact multiple of ``b``
    # between 0 and ``a`` (no overflow): its floor quotient is the truncated one. Three ufunc passes
    # where floor-then-fix took eight (a small int64 tensor: 21 -> ~7 us, torch ~3)
    # (``out`` is written last: it may be ``a`` itself, an in-place div_)
    r = np.fmod(a, b, dtype=dt)
    if not isinstance(r, np.ndarray):   # 0-d operands give a numpy scalar
        r = np.array(r)
    np.subtract(a, r, out=r, casting="unsafe")
    if out is None:
        return np.floor_divide(r, b, out=r)
    return np.floor_divide(r, b, out=out, casting="unsafe")


def _int_divisor_check(self, other):
    """torch raises on an integer division by zero (numpy would give 0 and a warning)."""
    dt = result_type(self, other)
    if dt.kind in "iub":
        if isinstance(other, np.ndarray):
            if not other.all():
                raise KernelError("ZeroDivisionError")
        elif other == 0:   # a Python number: no array, no reduction
            raise KernelError("ZeroDivisionError")
    return dt


def div(self, other, *, rounding_mode=None, out=None):
    """``aten::div`` (Tensor, Scalar, *_mode): true, "trunc" or "floor" division."""
    if rounding_mode is None:
        return _apply(np.true_divide, self, other, out, floating=True)
    dt = _int_divisor_check(self, other)
    if rounding_mode == "floor":
        return _apply(np.floor_divide, self, other, out)
    if rounding_mode != "trunc":
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found {rounding_mode!r}")
    if dt.kind in "fc":
        r = _apply(np.true_divide, self, other, out)
        return as_array(np.trunc(r, out=r if isinstance(r, np.ndarray) else None))
    return _trunc_div_int(self, other, out, dt)


def floor_divide(self, other, *, out=None):
    _int_divisor_check(self, other)
    return _apply(np.floor_divide, self, other, out)


def remainder(self, other, *, out=None):
    """``aten::remainder`` (Tensor, Scalar, Scalar_Tensor): the sign of the divisor, like Python."""
    _int_divisor_check(self, other)
    return _apply(np.remainder, self, other, out)


def atan2(self, other, *, out=None):
    """``aten::atan2``: a floating result (integer inputs give float32, as torch)."""
    return _apply(np.arctan2, self, other, out, floating=True)


def fmod(self, other, *, out=None):
    """``aten::fmod`` (Tensor, Scalar): C's fmod, the sign of the dividend (numpy's ``fmod`` too)."""
    _int_divisor_check(self, other)
    return _apply(np.fmod, self, other, out)


def pow(self, exponent, *, out=None):
    """``aten::pow`` (Tensor_Tensor, Tensor_Scalar, Scalar). Integers to a negative exponent tensor
    give torch's ``powi``: 1 for base 1, +-1 for base -1, else 0 (numpy refuses); a negative Scalar
    exponent of an integer tensor is refused, as torch does."""
    dt = out.dtype if out is not None else result_type(self, exponent)
    if dt.kind in "iu":
        if not isinstance(exponent, np.ndarray):
            if exponent < 0:
                raise ValueError("Integers to negative integer powers are not allowed.")
        elif (exponent < 0).any():
            return _int_pow_negative(self, exponent, dt, out)
    if dt.itemsize == 2 and dt.kind in "fV" and not (isinstance(self, np.ndarray) and isinstance(exponent, np.ndarray)):
        return _half_with_scalar(np.power, self, exponent, dt, out)
    if out is None:
        return as_array(np.power(self, exponent, dtype=dt))
    np.power(self, exponent, out=out)
    return out


def _int_pow_negative(base, exponent: np.ndarray, dt, out):
    neg = exponent < 0
    r = np.power(base, np.where(neg, 0, exponent), dtype=dt)
    b = np.asarray(base)
    at_neg = np.where(b == 1, 1, np.where(b == -1, np.where(exponent % 2 == 0, 1, -1), 0))
    r = np.where(neg, at_neg, r).astype(dt, copy=False)
    if out is None:
        return as_array(r)
    out[...] = r
    return out


def minimum(self, other, *, out=None):
    return _apply(np.minimum, self, other, out)


def maximum(self, other, *, out=None):
    return _apply(np.maximum, self, other, out)


def _bool_binary(ufunc):
    def kernel(self, other, *, out=None):
        r = ufunc(self, other, out=out)
        return out if out is not None else as_array(r)
    kernel.__name__ = ufunc.__name__
    kernel.__doc__ = f"``{ufunc.__name__}`` with a bool result."
    return kernel


eq = _bool_binary(np.equal)
ne = _bool_binary(np.not_equal)
lt = _bool_binary(np.less)
le = _bool_binary(np.less_equal)
gt = _bool_binary(np.greater)
ge = _bool_binary(np.greater_equal)
logical_and = _bool_binary(np.logical_and)
logical_or = _bool_binary(np.logical_or)
logical_xor = _bool_binary(np.logical_xor)


def bitwise_and(self, other, *, out=None):
    return _apply(np.bitwise_and, self, other, out)


def bitwise_or(self, other, *, out=None):
    return _apply(np.bitwise_or, self, other, out)


def bitwise_xor(self, other, *, out=None):
    return _apply(np.bitwise_xor, self, other, out)


def _shift(self, other, out, left: bool):
    dt = result_type(self, other)
    a = np.asarray(self).astype(dt, copy=False)
    b = np.asarray(other)
    bits = dt.itemsize * 8
    # torch: a shift by a negative amount or by the width or more gives 0, or for a right shift the
    # sign fill (-1 for a negative signed value); numpy leaves those to the C compiler
    bad = (b < 0) | (b >= bits)
    safe = np.where(bad, 0, b).astype(dt, copy=False)
    r = np.left_shift(a, safe) if left else np.right_shift(a, safe)
    if bad.any():
        fill = 0 if left or dt.kind == "u" else np.where(a < 0, dt.type(-1), dt.type(0))
        r = np.where(bad, fill, r).astype(dt, copy=False)
    if out is None:
        return as_array(r)
    np.copyto(out, r)
    return out


def bitwise_left_shift(self, other, *, out=None):
    """``aten::bitwise_left_shift`` (wrapping, as torch; out-of-range amounts give 0)."""
    return _shift(self, other, out, True)


def bitwise_right_shift(self, other, *, out=None):
    """``aten::bitwise_right_shift`` (arithmetic for signed; out-of-range amounts give the sign fill)."""
    return _shift(self, other, out, False)


# --- matcher -----------------------------------------------------------------------------------

#: op base name -> (ufunc, kind): "arith" needs operands of the output dtype, "cmp" any equal dtypes
_FAST = {
    "aten::add": (np.add, "arith"), "aten::sub": (np.subtract, "arith"), "aten::mul": (np.multiply, "arith"),
    "aten::div": (np.true_divide, "float"), "aten::floor_divide": (np.floor_divide, "arith"),
    "aten::remainder": (np.remainder, "arith"), "aten::fmod": (np.fmod, "arith"), "aten::minimum": (np.minimum, "arith"),
    "aten::maximum": (np.maximum, "arith"), "aten::pow": (np.power, "arith"),
    "aten::max": (np.maximum, "arith"), "aten::min": (np.minimum, "arith"),  # max.other / min.other
    "aten::bitwise_and": (np.bitwise_and, "arith"), "aten::bitwise_or": (np.bitwise_or, "arith"),
    "aten::eq": (np.equal, "cmp"), "aten::ne": (np.not_equal, "cmp"), "aten::lt": (np.less, "cmp"),
    "aten::le": (np.less_equal, "cmp"), "aten::gt": (np.greater, "cmp"), "aten::ge": (np.greater_equal, "cmp"),
    "aten::logical_and": (np.logical_and, "cmp"), "aten::logical_or": (np.logical_or, "cmp"),
    "aten::logical_xor": (np.logical_xor, "cmp"),
}


def _nonzero_constant(a) -> bool:
    return a.is_constant and isinstance(a.value, (int, float)) and a.value != 0


def _out_type(node: NodeInfo):
    t = node.output_types[0] if node.output_types else None
    if not isinstance(t, TensorType) or t.dtype is None or t.shape is None or len(t.shape) == 0:
        return None  # a 0-d result from a bare ufunc with out=None would be a numpy scalar
    return t


def _scalar_fits(a, out_dtype: str) -> bool:
    # NEP 50: a Python scalar keeps an array's dtype when the kinds fit (float array + int/float, int + int)
    v = a.value if a.is_constant else None
    if a.is_constant:
        if isinstance(v, bool):
            return False
        if out_dtype == "float16":  # the bare ufunc would round the scalar to float16 (torch may not)
            return isinstance(v, (int, float)) and float(np.float16(v)) == v
        if isinstance(v, int):
            return out_dtype.startswith(("float", "int")) and (out_dtype != "int32" or -2**31 <= v < 2**31)
        return isinstance(v, float) and out_dtype.startswith("float")
    if isinstance(a.type, IntType):
        return out_dtype in ("float32", "float64", "int64")
    if isinstance(a.type, FloatType):
        return out_dtype in ("float32", "float64")
    return out_dtype in ("float32", "float64") and not isinstance(a.type, BoolType)


#: op base name -> the generic kernel, used when the fast path does not apply
_GENERIC = {"aten::add": add, "aten::sub": sub, "aten::mul": mul, "aten::div": div,
            "aten::floor_divide": floor_divide, "aten::remainder": remainder, "aten::fmod": fmod, "aten::minimum": minimum,
            "aten::maximum": maximum, "aten::max": maximum, "aten::min": minimum, "aten::pow": pow,
            "aten::bitwise_and": bitwise_and, "aten::bitwise_or": bitwise_or, "aten::eq": eq, "aten::ne": ne,
            "aten::lt": lt, "aten::le": le, "aten::gt": gt, "aten::ge": ge, "aten::logical_and": logical_and,
            "aten::logical_or": logical_or, "aten::logical_xor": logical_xor}


def binary_matcher(node: NodeInfo):
    """Bind ``(self, other)`` to the bare ufunc when no promotion, alpha or rounding is involved;
    otherwise the generic kernel (never declines an op it is registered for)."""
    return _fast_binary(node) or _GENERIC.get(node.op.split(".")[0])


def _fast_binary(node: NodeInfo):
    base = node.op.split(".")[0]
    ufunc, kind = _FAST.get(base, (None, None))
    out_t = _out_type(node)
    if ufunc is None or out_t is None or len(node.args) < 2:
        return None
    names = [a.name for a in node.args]
    if "alpha" in names and node.const("alpha", None) != 1:
        return None
    if "rounding_mode" in names:
        mode = node.const("rounding_mode", KeyError)
        if mode == "trunc":
            return _fast_trunc_div(node, out_t)
        if mode is KeyError or mode not in (None, "floor"):
            return None
        if mode == "floor":
            ufunc, kind = np.floor_divide, "arith"   # (an integer floor quotient stays an integer)
    if kind == "float" and not out_t.dtype.startswith("float"):
        return None
    if (base in ("aten::floor_divide", "aten::remainder", "aten::fmod") or ufunc is np.floor_divide) \
            and not out_t.dtype.startswith("float") and not _nonzero_constant(node.args[1]):
        return None  # the generic kernel checks for an integer division by zero
    operands = node.args[:2]
    tensor_dtypes = {a.type.dtype for a in operands if isinstance(a.type, TensorType)}
    if None in tensor_dtypes or not tensor_dtypes or len(tensor_dtypes) > 1:
        return None
    (in_dtype,) = tensor_dtypes
    if base in _INT_TO_FLOAT and _int_tensor_float_result(operands, in_dtype, out_t.dtype):
        # an integer tensor with a constant Python number into a float result (``k * 2.5``, ``k / 2``):
        # torch casts both to the result dtype and computes there; so does the ufunc given that dtype
        # (~0.8 us where the generic kernel's promotion took ~3.5 on a small tensor)
        dt = np.dtype(out_t.dtype)

        def int_to_float(a, b, out=None):
            return ufunc(a, b, out=out, dtype=dt)
        return Specialized(int_to_float, args=(0, Const(dt.type(operands[1].value))))
    if kind == "cmp":
        ok_dtype = in_dtype
    elif in_dtype != out_t.dtype:
        return None
    else:
        ok_dtype = out_t.dtype
    for a in operands:
        if not isinstance(a.type, TensorType) and not _scalar_fits(a, ok_dtype):
            return None
    if base == "aten::pow":
        if not out_t.dtype.startswith("float"):
            return None  # integer negative powers must raise, like torch
        e = node.args[1]
        if e.is_constant and isinstance(e.value, (int, float)) and not isinstance(e.value, bool) \
                and e.value in _POW_FAST:  # a constant tensor exponent (an array) is no such case
            return Specialized(_POW_FAST[e.value], args=(0,))  # as torch's CPU kernel does
    # a constant Python scalar becomes a numpy scalar of the computation's dtype once, at load:
    # numpy then skips converting it on every call (same values: NEP 50 casts it to that dtype)
    args = tuple(Const(np.dtype(ok_dtype).type(a.value)) if a.is_constant and not isinstance(a.type, TensorType)
                 else i for i, a in enumerate(operands))
    return Specialized(_timed_split(ufunc, operands, out_t, args), args=args)


def _fast_trunc_div(node: NodeInfo, out_t):
    """``div(k, c, rounding_mode="trunc")`` of an integer tensor by a nonzero constant Python int
    into the same dtype: :func:`_trunc_div_int` bound to it (no promotion or zero check per call)."""
    a, b = node.args[:2]
    if not (isinstance(a.type, TensorType) and a.type.dtype == out_t.dtype and out_t.dtype in ("int64", "int32")
            and not isinstance(b.type, TensorType) and _nonzero_constant(b) and isinstance(b.value, int)
            and not isinstance(b.value, bool) and -2**31 <= b.value < 2**31):
        return None
    dt = np.dtype(out_t.dtype)

    def trunc_div(x, c, out=None):
        return _trunc_div_int(x, c, out, dt)
    return Specialized(trunc_div, args=(0, Const(dt.type(b.value))))


#: the ops :func:`_fast_binary` runs on an integer tensor and a Python number as one ufunc with a float dtype
_INT_TO_FLOAT = ("aten::add", "aten::sub", "aten::mul", "aten::div")


def _int_tensor_float_result(operands, in_dtype: str, out_dtype: str) -> bool:
    """An integer tensor first, a constant Python int or float (not a bool) second, a float32/float64 result."""
    a, b = operands
    return (isinstance(a.type, TensorType) and in_dtype.startswith(("int", "uint")) and out_dtype in ("float32", "float64")
            and not isinstance(b.type, TensorType) and b.is_constant and isinstance(b.value, (int, float))
            and not isinstance(b.value, bool))


def _timed_split(ufunc, operands, out_t, args):
    """``ufunc``, or at more than one intra-op thread for a large float32 node of static shapes,
    the ufunc over blocks of the output's leading rows when that times faster now
    (``row_split.py``; the same bits: each element is one correctly rounded operation)."""
    if ufunc not in _SPLITTABLE or out_t.dtype != "float32":
        return ufunc
    from . import row_split as RS

    threads = RS.split_threads_for(out_t)
    if threads <= 1:
        return ufunc
    shapes = [RS.static_shape(a.type) if isinstance(a.type, TensorType) else () for a in operands]
    if any(s is None for s in shapes):
        return ufunc
    split = RS.split_binary(ufunc, RS.static_shape(out_t), shapes, threads)
    if split is None:
        return ufunc
    # (away from zero: a divisor)
    xs = [np.abs(RS.sample(s, i)) + np.float32(1.0) if isinstance(args[i], int) else args[i].value
          for i, s in enumerate(shapes)]
    y = np.empty(RS.static_shape(out_t), np.float32)
    return split if RS.split_pays(lambda a, b, out: ufunc(a, b, out=out), split, (*xs, y)) else ufunc


#: the ufuncs row_split may cut (see row_split.SPLITTABLE_UFUNCS)
_SPLITTABLE = (np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum)


#: constant exponents with a cheaper ufunc (x**2 is 3x faster as np.square)
_POW_FAST = {2: np.square, 0.5: np.sqrt, -1: np.reciprocal}  # 2.0 and -1.0 hash as 2 and -1
