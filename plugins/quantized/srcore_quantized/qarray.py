"""``QuantizedArray``: a numpy array of stored integers plus its per-tensor quantization parameters."""
from __future__ import annotations

import numpy as np

from . import QDTYPES


class QuantizedArray(np.ndarray):
    """Stored values (``uint8``/``int8``/``int32``) with ``qdtype``, ``scale`` and ``zero_point``.

    ``real = (stored - zero_point) * scale``. Views keep the parameters.
    """

    qdtype: str
    scale: float
    zero_point: int

    def __new__(cls, stored: np.ndarray, qdtype: str, scale: float, zero_point: int) -> "QuantizedArray":
        storage = QDTYPES[qdtype][0]
        obj = np.asarray(stored, dtype=storage).view(cls)
        obj.qdtype, obj.scale, obj.zero_point = qdtype, float(scale), int(zero_point)
        return obj

    def __array_finalize__(self, obj) -> None:
        self.qdtype = getattr(obj, "qdtype", None)
        self.scale = getattr(obj, "scale", 1.0)
        self.zero_point = getattr(obj, "zero_point", 0)

    def int_repr(self) -> np.ndarray:
        """The stored integers as a plain array."""
        return self.view(np.ndarray)
