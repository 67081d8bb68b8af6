"""torch's type promotion and dtype-code helpers for the cpu kernels.

numpy (NEP 50) and torch disagree on mixed categories: ``int64 + float32``
is float64 in numpy and float32 in torch, and a Python float next to an int
tensor makes float32 (torch's default dtype), not float64. Kernels call
:func:`result_type` to pick the dtype torch would produce.
"""
from __future__ import annotations

import importlib

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import DTYPE_TO_SCALAR_TYPE_CODE, ML_DTYPES, SCALAR_TYPE_CODES

DEFAULT_FLOAT = np.dtype(np.float32)
INT64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
# bfloat16 is ml_dtypes' (numpy has none), recognised by name: ml_dtypes (~5-10 ms of a cold start) is
# imported only when a dtype code asks for one of its types (below) or the load sees one
# (srcore imports it then); an array of such a dtype cannot exist before it is imported
def _is_bf16(dtype: np.dtype) -> bool:
    return dtype.kind == "V" and dtype.name == "bfloat16"  # kind first: a cheap attribute, "V" for ml_dtypes'


def _category(dtype: np.dtype) -> int:
    return 2 if _is_bf16(dtype) else _CATEGORY[dtype.kind]


def dtype_of_code(code: int | None, default=None) -> np.dtype | None:
    """The numpy dtype of a torch ScalarType code (``6`` -> float32); ``None`` -> ``default``."""
    if code is None:
        return default
    try:
        name = SCALAR_TYPE_CODES[code]
        if name in ML_DTYPES:
            importlib.import_module("ml_dtypes")  # registers bfloat16, the float8s and int4s with numpy
        return np.dtype(name)
    except (KeyError, TypeError) as exc:
        raise KernelError(f"unsupported ScalarType code {code!r} on backend cpu") from exc


def code_of_dtype(dtype) -> int:
    """The torch ScalarType code of a numpy dtype (float32 -> 6)."""
    return DTYPE_TO_SCALAR_TYPE_CODE[np.dtype(dtype).name]


def category(dtype: np.dtype) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex."""
    return _category(dtype)


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch.promote_types: like numpy within a category, the higher category across them."""
    ca, cb = _category(a), _category(b)
    if ca == cb or (ca >= 2 and cb >= 2):
        if (_is_bf16(a) or _is_bf16(b)) and a != b:  # torch: bfloat16 with float16 is float32; with wider, the wider
            other = b if _is_bf16(a) else a
            return np.dtype(np.float32) if other.itemsize <= 2 else other
        return np.promote_types(a, b)
    return a if ca > cb else b


def scalar_dtype(v) -> np.dtype:
    """The dtype torch gives a Python scalar operand (a 'wrapped number')."""
    if isinstance(v, (bool, np.bool_)):
        return BOOL
    if isinstance(v, (int, np.integer)):
        return INT64
    if isinstance(v, (float, np.floating)):
        return DEFAULT_FLOAT
    if isinstance(v, complex):
        return np.dtype(np.complex64)
    raise KernelError(f"expected a tensor or a number, got {type(v).__name__}")


def _combine(higher, lower):
    # c10's combine_categories: a lower-priority operand only matters if its category is higher
    if higher is None:
        return lower
    if lower is None:
        return higher
    hc, lc = _category(higher), _category(lower)
    if hc == 3 or hc == 2 and lc < 3:
        return higher
    if lc == 3 and hc == 2:
        return np.promote_types(higher, lower)
    if higher == BOOL or lc >= 2:
        return promote_types(higher, lower)
    return higher


def result_type(*operands) -> np.dtype:
    """torch.result_type over tensors (ndarrays) and Python scalars (``None`` is skipped).

    Dimensioned tensors win over zero-dim tensors, which win over Python
    numbers, unless the lower-priority operand is of a higher category.
    """
    dim = zero = wrapped = None
    for o in operands:
        if isinstance(o, np.ndarray):
            if o.ndim:
                dim = o.dtype if dim is None else promote_types(dim, o.dtype)
            else:
                zero = o.dtype if zero is None else promote_types(zero, o.dtype)
        elif o is not None:
            d = scalar_dtype(o)
            wrapped = d if wrapped is None else promote_types(wrapped, d)
    r = _combine(dim, _combine(zero, wrapped))
    if r is None:
        raise KernelError("result_type needs at least one operand")
    return r


def float_type(dtype: np.dtype) -> np.dtype:
    """The dtype of a floating op (exp, sigmoid, true divide) on ``dtype``: ints and bool -> float32."""
    return dtype if dtype.kind in "fc" or _is_bf16(dtype) else DEFAULT_FLOAT


def as_array(r, dtype=None) -> np.ndarray:
    """numpy returns scalars for 0-d results; torch returns 0-d tensors."""
    return r if isinstance(r, np.ndarray) else np.asarray(r, dtype=dtype)
