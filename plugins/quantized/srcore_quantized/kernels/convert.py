"""Float <-> quantized conversion, with torch's rounding (half to even) and clamping."""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import SCALAR_TYPE_CODES

from .. import QDTYPES
from ..qarray import QuantizedArray


def _qdtype(code) -> str:
    name = SCALAR_TYPE_CODES.get(code, code) if isinstance(code, int) else code
    if name not in QDTYPES:
        raise KernelError(f"quantize_per_tensor: dtype {code!r} is not a quantized dtype "
                          f"(expected one of {', '.join(QDTYPES)})")
    return name


def quantize_per_tensor(self, scale, zero_point, dtype):
    """``q = clamp(round(x / scale) + zero_point, qmin, qmax)``."""
    qdtype = _qdtype(dtype)
    storage, qmin, qmax = QDTYPES[qdtype]
    # torch multiplies by the float32 inverse scale, then rounds half to even (nearbyint)
    inv_scale = np.float32(1.0) / np.float32(scale)
    q = np.rint(np.asarray(self, dtype=np.float32) * inv_scale).astype(np.float64) + zero_point
    return QuantizedArray(np.clip(q, qmin, qmax).astype(storage), qdtype, scale, zero_point)


def dequantize_out(self, *, out=None):
    """``out = (q - zero_point) * scale`` as float32."""
    if not isinstance(self, QuantizedArray):
        raise KernelError("dequantize: input is not a quantized tensor (no scale/zero_point)")
    real = (self.int_repr().astype(np.float32) - np.float32(self.zero_point)) * np.float32(self.scale)
    if out is None:
        return real
    out[...] = real
    return out
