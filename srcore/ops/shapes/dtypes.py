"""torch's dtype promotion (``torch.result_type``) on srcore dtype names.

Three tiers, as in ATen's ``ResultTypeState``: tensors with dims, zero-dim
tensors, and wrapped numbers (Python scalars). A lower tier only matters when
it is of a higher category (bool < integer < floating < complex): ``int32
tensor + 2.5`` is float32 (the default float), ``float32 tensor + float64
0-dim tensor`` stays float32.
"""
from __future__ import annotations

DEFAULT_FLOAT = "float32"

_INTS = ("uint8", "int8", "int16", "int32", "int64")
_FLOATS = ("float16", "bfloat16", "float32", "float64")
_COMPLEX = ("complex32", "complex64", "complex128")
_INT_BITS = {"uint8": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64}
_FLOAT_RANK = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}


def category(dtype: str | None) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex, -1 unknown/other."""
    if dtype == "bool":
        return 0
    if dtype in _INTS:
        return 1
    if dtype in _FLOATS:
        return 2
    if dtype in _COMPLEX:
        return 3
    return -1


def is_floating(dtype: str | None) -> bool:
    return dtype in _FLOATS


def is_integral(dtype: str | None, include_bool: bool = True) -> bool:
    return dtype in _INTS or (include_bool and dtype == "bool")


def promote_types(a: str | None, b: str | None) -> str | None:
    """``torch.promote_types`` for two dtype names (None if either is unknown)."""
    if a is None or b is None:
        return None
    if a == b:
        return a
    ca, cb = category(a), category(b)
    if ca < 0 or cb < 0:
        return None
    if ca != cb:
        hi, lo = (a, b) if ca > cb else (b, a)
        if category(hi) == 3 and lo == "float64":
            return "complex128"
        return hi
    if ca == 1:
        if "uint8" in (a, b):
            other = b if a == "uint8" else a
            return "int16" if other == "int8" else other
        return a if _INT_BITS[a] >= _INT_BITS[b] else b
    if ca == 2:
        if {a, b} == {"float16", "bfloat16"}:
            return "float32"
        return a if _FLOAT_RANK[a] >= _FLOAT_RANK[b] else b
    return "complex128" if "complex128" in (a, b) else "complex64"


def _combine(higher: str | None, lower: str | None) -> str | None:
    if higher is None:
        return lower
    if lower is None:
        return higher
    ch, cl = category(higher), category(lower)
    if ch >= cl:
        return higher
    return promote_types(higher, lower)


def result_type(dim_dtypes, zero_dtypes=(), wrapped=()) -> str | None:
    """The promoted dtype of an op's operands, by tier. Any unknown dtype makes the result unknown."""
    tiers = []
    for group in (dim_dtypes, zero_dtypes, wrapped):
        acc = None
        for d in group:
            if d is None:
                return None
            acc = d if acc is None else promote_types(acc, d)
        tiers.append(acc)
    dim_r, zero_r, wrap_r = tiers
    return _combine(dim_r, _combine(zero_r, wrap_r))
