"""ONNX element types <-> srcore dtype names (numpy's) and torch ScalarType codes."""
from __future__ import annotations

import numpy as np

from ...ir.types import DTYPE_TO_SCALAR_TYPE_CODE, ML_DTYPES

#: ``TensorProto.DataType`` code -> srcore dtype name, for the types srcore's kernels handle
ONNX_TO_DTYPE: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
    10: "float16", 11: "float64", 16: "bfloat16", 4: "uint16", 12: "uint32", 13: "uint64",
    17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz", 21: "uint4", 22: "int4",
}
DTYPE_TO_ONNX = {v: k for k, v in ONNX_TO_DTYPE.items()}

#: every ``TensorProto.DataType`` name, for messages about the ones srcore lacks
ONNX_TYPE_NAMES: dict[int, str] = {
    0: "UNDEFINED", 1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
    8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64", 14: "COMPLEX64",
    15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2",
    20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1", 24: "FLOAT8E8M0", 25: "UINT2",
    26: "INT2",
}

FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})
INTS = frozenset({"uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"})
#: ml_dtypes' storage types: Cast/CastLike, Q/DQ and data movement take them, arithmetic does not
FLOAT8 = frozenset({"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"})
INT4 = frozenset({"uint4", "int4"})


class UnsupportedDtype(ValueError):
    """An ONNX element type srcore has no kernels for."""


def dtype_of(elem_type: int) -> str:
    """The srcore dtype of an ONNX element type (raises :class:`UnsupportedDtype`)."""
    try:
        return ONNX_TO_DTYPE[elem_type]
    except KeyError:
        name = ONNX_TYPE_NAMES.get(elem_type, str(elem_type))
        raise UnsupportedDtype(f"element type {name} is not supported (srcore handles "
                               f"{', '.join(ONNX_TYPE_NAMES[k] for k in sorted(ONNX_TO_DTYPE))})") from None


def np_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a dtype name; bfloat16 is ml_dtypes' (numpy has none; a dependency of
    srcore-cpu, and onnx's own numpy_helper needs it)."""
    if dtype in ML_DTYPES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, dtype))
    return np.dtype(dtype)


def scalar_type(dtype: str) -> int:
    """The torch ScalarType code of a dtype name (what ``aten::to(x, 6)`` carries)."""
    return DTYPE_TO_SCALAR_TYPE_CODE[dtype]
