"""``QuantizedArray``: a quantized tensor at run time, as numpy sees it.

A numpy array of the stored integers (``uint8`` for ``quint8``, ``int8`` for ``qint8``, ``int32``
for ``qint32``) that also carries its quantized dtype and :class:`srcore.ir.quant.QParams`. Model
inputs and outputs, parameters and the values between quantized kernels are ``QuantizedArray``s;
views (slices, reshapes) keep the parameters of the array they view. See docs/quantization.md.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import QuantizationError
from .ir.quant import QDTYPES, QParams, check_qparams


class QuantizedArray(np.ndarray):
    """Stored integers with their ``qdtype`` and ``qparams``: ``real = (stored - zero_point) * scale``.

    ``QuantizedArray(stored, "quint8", QParams(0.05, 64))`` checks the parameters against the
    dtype and shape and raises :class:`srcore.QuantizationError` naming the problem; stored values
    of another integer dtype are refused rather than wrapped around.
    """

    qdtype: str
    qparams: QParams

    def __new__(cls, stored: Any, qdtype: str, qparams: QParams | tuple) -> "QuantizedArray":
        q = QDTYPES.get(qdtype)
        if q is None:
            raise QuantizationError(f"{qdtype!r} is not a quantized dtype (expected one of {', '.join(QDTYPES)})")
        if not isinstance(qparams, QParams):
            qparams = QParams(*qparams)
        arr = np.asarray(stored)
        if arr.dtype != np.dtype(q.storage):
            if arr.dtype.kind not in "iub" or arr.size and (arr.min() < q.qmin or arr.max() > q.qmax):
                raise QuantizationError(f"{qdtype} stores {q.storage} values in [{q.qmin}, {q.qmax}]; got "
                                        f"{arr.dtype} values" + (f" from {arr.min()} to {arr.max()}" if arr.size
                                                                 and arr.dtype.kind in "iufb" else ""))
            arr = arr.astype(q.storage)
        check_qparams(qdtype, qparams, arr.shape)
        return cls.wrap(arr, qdtype, qparams)

    @classmethod
    def wrap(cls, stored: np.ndarray, qdtype: str, qparams: QParams) -> "QuantizedArray":
        """A view of ``stored`` (already of the storage dtype) with these parameters, unchecked:
        for kernels, which know their outputs' parameters are valid."""
        obj = stored.view(cls)
        obj.qdtype = qdtype
        obj.qparams = qparams
        return obj

    def __array_finalize__(self, obj) -> None:
        self.qdtype = getattr(obj, "qdtype", None)
        self.qparams = getattr(obj, "qparams", None)

    def __reduce__(self):  # a pickled array would lose its parameters; nothing in srcore pickles
        raise TypeError("QuantizedArray cannot be pickled; save the model (.srm) or use int_repr()")

    # -- parameters ------------------------------------------------------------------------------
    @property
    def per_channel(self) -> bool:
        return self.qparams is not None and self.qparams.axis is not None

    @property
    def scale(self) -> float:
        """The per-tensor scale (per channel: raises; see ``scales``)."""
        self._per_tensor("scale")
        return self.qparams.scale

    @property
    def zero_point(self) -> int:
        self._per_tensor("zero_point")
        return self.qparams.zero_point

    @property
    def axis(self) -> int | None:
        return self.qparams.axis

    @property
    def scales(self) -> np.ndarray:
        """Per-channel scales as float64 (per tensor: one element)."""
        s = self.qparams.scale
        return np.asarray(s if isinstance(s, tuple) else (s,), np.float64)

    @property
    def zero_points(self) -> np.ndarray:
        z = self.qparams.zero_point
        return np.asarray(z if isinstance(z, tuple) else (z,), np.int64)

    def _per_tensor(self, what: str) -> None:
        if self.qparams.axis is not None:
            raise QuantizationError(f"a per-channel quantized tensor (axis {self.qparams.axis}) has no single "
                                    f"{what}; use {what}s")

    # -- values ------------------------------------------------------------------------------------
    def int_repr(self) -> np.ndarray:
        """The stored integers as a plain numpy array (a view)."""
        return self.view(np.ndarray)

    def dequantize(self) -> np.ndarray:
        """The real values as float32: ``(stored - zero_point) * scale``, rounded as torch rounds them
        (per tensor in float32; per channel in float64, then to float32)."""
        if self.qparams.axis is None:
            q = self.view(np.ndarray).astype(np.float32)
            return (q - np.float32(self.qparams.zero_point)) * np.float32(self.qparams.scale)
        q = self.view(np.ndarray).astype(np.float64)
        shape = [1] * q.ndim
        shape[self.qparams.axis] = -1
        real = (q - self.zero_points.reshape(shape)) * self.scales.reshape(shape)
        return real.astype(np.float32)

    def __repr__(self) -> str:
        return f"QuantizedArray({np.asarray(self.view(np.ndarray))!r}, {self.qdtype!r}, {self.qparams!r})"

    __str__ = __repr__


# -- .npz files (srcore run -i / -o) ---------------------------------------------------------------
def npz_entries(name: str, qa: QuantizedArray) -> dict[str, np.ndarray]:
    """A quantized array as ``.npz`` entries: ``name`` (the stored integers), ``name.qdtype``,
    ``name.scale``, ``name.zero_point`` and, per channel, ``name.axis`` (no pickle needed)."""
    q = qa.qparams
    out = {name: np.asarray(qa.int_repr()), f"{name}.qdtype": np.asarray(qa.qdtype),
           f"{name}.scale": np.asarray(q.scale, np.float64), f"{name}.zero_point": np.asarray(q.zero_point, np.int64)}
    if q.axis is not None:
        out[f"{name}.axis"] = np.asarray(q.axis, np.int64)
    return out


def from_npz(entries, name: str) -> np.ndarray:
    """Entry ``name`` of a loaded ``.npz``: a QuantizedArray when its ``name.qdtype`` is there."""
    if f"{name}.qdtype" not in entries:
        return entries[name]
    axis = int(entries[f"{name}.axis"]) if f"{name}.axis" in entries else None
    scale, zp = entries[f"{name}.scale"], entries[f"{name}.zero_point"]
    q = QParams(tuple(scale.tolist()) if axis is not None else float(scale),
                tuple(zp.tolist()) if axis is not None else int(zp), axis)
    return QuantizedArray(entries[name], str(entries[f"{name}.qdtype"]), q)
