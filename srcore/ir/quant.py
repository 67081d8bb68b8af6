"""Quantized dtypes and their parameters, as part of a value's IR type.

An affine quantized tensor stores integers ``q`` that stand for ``real = (q - zero_point) * scale``.
:class:`QParams` holds the parameters: per tensor, one ``scale`` and one ``zero_point``; per channel,
one of each per index along ``axis``. A :class:`srcore.ir.TensorType` whose dtype is ``quint8``,
``qint8`` or ``qint32`` may carry them (``QUInt8(1, 8, scale=0.05, zero_point=64)``); shape and dtype
propagation carries them through quantized ops. See docs/quantization.md.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import attrs

from .._repr import shared_repr
from ..errors import QuantizationError


@attrs.frozen
@shared_repr
class QDType:
    """A quantized dtype: its name, the numpy dtype of its stored integers and their range."""

    name: str
    storage: str
    qmin: int
    qmax: int


#: the quantized dtypes, as torch defines them
QDTYPES: dict[str, QDType] = {
    "quint8": QDType("quint8", "uint8", 0, 255),
    "qint8": QDType("qint8", "int8", -128, 127),
    "qint32": QDType("qint32", "int32", -(2 ** 31), 2 ** 31 - 1),
}


def is_quantized(dtype: str | None) -> bool:
    return dtype in QDTYPES


def storage_dtype(dtype: str) -> str:
    """The numpy dtype a tensor of ``dtype`` is stored in (``quint8`` -> ``uint8``; others as they are)."""
    q = QDTYPES.get(dtype)
    return q.storage if q is not None else dtype


def _check_scale(s: Any, what: str) -> float:
    if isinstance(s, bool) or not isinstance(s, numbers.Real):
        raise QuantizationError(f"{what} must be a number, not {s!r}")
    s = float(s)
    if not (math.isfinite(s) and s > 0.0):
        raise QuantizationError(f"{what} must be positive and finite, got {s!r}")
    return s


def _check_zero_point(z: Any, what: str) -> int:
    if isinstance(z, bool) or not isinstance(z, numbers.Integral):
        raise QuantizationError(f"{what} must be an integer, not {z!r}")
    return int(z)


def _is_sequence(value) -> bool:
    return isinstance(value, (list, tuple)) or getattr(value, "ndim", 0) > 0


def _scalar(value):
    return value.item() if getattr(value, "ndim", None) == 0 else value  # a 0-d array


def _scales(value) -> float | tuple[float, ...]:
    if _is_sequence(value):
        return tuple(_check_scale(s, f"scale[{i}]") for i, s in enumerate(value))
    return _check_scale(_scalar(value), "scale")


def _zero_points(value) -> int | tuple[int, ...]:
    if _is_sequence(value):
        return tuple(_check_zero_point(z, f"zero_point[{i}]") for i, z in enumerate(value))
    return _check_zero_point(_scalar(value), "zero_point")


def _float(x: float) -> str:
    return repr(float(x))  # shortest text that reads back to the same double


def check_qparams(dtype: str, qparams: QParams | None, shape: Sequence | None = None) -> None:
    """Raise :class:`QuantizationError` unless ``qparams`` fit a tensor of ``dtype`` and ``shape``:
    zero points within the dtype's range; per channel, an axis within the rank and one scale per
    index along it (where the dim is known)."""
    q = QDTYPES.get(dtype)
    if q is None:
        if qparams is not None:
            raise QuantizationError(f"dtype {dtype} is not quantized: it takes no scale or zero point")
        return
    if qparams is None:
        return
    zps = qparams.zero_point if isinstance(qparams.zero_point, tuple) else (qparams.zero_point,)
    for z in zps:
        if not q.qmin <= z <= q.qmax:
            raise QuantizationError(f"zero point {z} is outside the range of {dtype} [{q.qmin}, {q.qmax}]")
    if qparams.axis is not None and shape is not None:
        if qparams.axis >= len(shape):
            raise QuantizationError(f"axis {qparams.axis} is out of range for a tensor of rank {len(shape)}")
        d = shape[qparams.axis]
        if isinstance(d, int) and d != len(qparams.scale):
            raise QuantizationError(f"{len(qparams.scale)} per-channel scales for dim {qparams.axis} of size {d}")


def qparams_from_kwargs(kwargs: dict[str, Any]) -> QParams | None:
    """The :class:`QParams` of IR text's ``scale=``, ``zero_point=`` and ``axis=`` (None if absent)."""
    from .qparams import QParams

    if not ({"scale", "zero_point", "axis"} & set(kwargs)):
        return None
    missing = [k for k in ("scale", "zero_point") if k not in kwargs]
    if missing:
        raise QuantizationError(f"quantization parameters lack {' and '.join(missing)}")
    scale, zp = kwargs["scale"], kwargs["zero_point"]
    if isinstance(scale, list) != isinstance(zp, list):
        raise QuantizationError("scale and zero_point must both be numbers (per tensor) or both lists "
                                "(per channel)")
    axis = kwargs.get("axis")
    if isinstance(scale, list) and axis is None:
        raise QuantizationError("per-channel scale=[...] needs axis=")
    return QParams(tuple(scale) if isinstance(scale, list) else scale,
                   tuple(zp) if isinstance(zp, list) else zp, axis)


def add_scalar_qparams(dtype: str, q: QParams, c: float) -> QParams:
    """torch's output parameters of ``quantized::add_scalar``: the zero point moves by round(c / s);
    past the dtype's range the scale grows instead."""
    from .qparams import QParams

    qd = QDTYPES[dtype]
    s, z = q.scale, q.zero_point
    c_q = nearbyint(c / s)
    if qd.qmin > z - c_q:
        return QParams((qd.qmax - (z - c_q)) / (qd.qmax - qd.qmin) * s, qd.qmin)
    if qd.qmax < z - c_q:
        return QParams(((z - c_q) - qd.qmin) / (qd.qmax - qd.qmin) * s, qd.qmax)
    return QParams(s, z - c_q)


def mul_scalar_qparams(dtype: str, q: QParams, c: float) -> QParams:
    """torch's output parameters of ``quantized::mul_scalar``: the scale times |c|; c < 0 mirrors the
    zero point, c = 0 gives (1.0, 0)."""
    from .qparams import QParams

    qd = QDTYPES[dtype]
    if c > 0:
        return QParams(c * q.scale, q.zero_point)
    if c == 0:
        return QParams(1.0, 0)
    return QParams(abs(c) * q.scale, qd.qmax - (q.zero_point - qd.qmin))


def nearbyint(x: float) -> int:
    r = math.floor(x + 0.5)
    if r - x == 0.5 and r % 2:  # a tie: to even, as std::nearbyint
        r -= 1
    return int(r)


def __getattr__(name: str):   # ``quant.QParams`` as before (PEP 562), from its own module
    if name == "QParams":
        from .qparams import QParams

        return QParams
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
