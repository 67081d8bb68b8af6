"""Affine quantization parameters (:class:`QParams`), part of a quantized tensor's IR type.

Its own module so that a start whose graphs hold no quantized tensor does not build the class (an attrs class is
~1 M instructions of a cold start; docs/performance-log.md's cold-start topic); ``srcore.ir.quant.QParams``,
``srcore.ir.QParams`` and ``srcore.QParams`` are this class. See docs/quantization.md.
"""
from __future__ import annotations

import attrs

from .._repr import shared_repr
from ..errors import QuantizationError
from .quant import _float, _scales, _zero_points

__all__ = ["QParams"]


@attrs.frozen
@shared_repr
class QParams:
    """Affine quantization parameters: ``real = (q - zero_point) * scale``.

    Per tensor: ``QParams(0.05, 64)``. Per channel: ``QParams((0.1, 0.2), (0, 0), axis=0)``, one
    scale and zero point per index along ``axis``. Scales must be positive and finite and zero
    points integers (else :class:`srcore.QuantizationError`); whether a zero point fits a dtype
    and the axis a shape is :func:`check_qparams`'s job.
    """

    scale: float | tuple[float, ...] = attrs.field(converter=_scales)
    zero_point: int | tuple[int, ...] = attrs.field(converter=_zero_points)
    axis: int | None = None

    def __attrs_post_init__(self) -> None:
        per_channel = isinstance(self.scale, tuple)
        if per_channel != isinstance(self.zero_point, tuple):
            raise QuantizationError("scale and zero_point must both be per tensor (numbers) or both per "
                                    "channel (sequences)")
        if per_channel:
            if isinstance(self.axis, bool) or not isinstance(self.axis, int) or self.axis < 0:
                raise QuantizationError(f"per-channel parameters need an axis >= 0, got {self.axis!r}")
            if not self.scale:
                raise QuantizationError("per-channel parameters need at least one scale")
            if len(self.scale) != len(self.zero_point):
                raise QuantizationError(f"{len(self.scale)} scales but {len(self.zero_point)} zero points")
        elif self.axis is not None:
            raise QuantizationError(f"per-tensor parameters take no axis (got axis={self.axis!r})")

    @property
    def per_channel(self) -> bool:
        return self.axis is not None

    @property
    def channels(self) -> int | None:
        """How many channels per-channel parameters cover (None per tensor)."""
        return len(self.scale) if self.axis is not None else None

    def describe(self) -> str:
        """``scale=0.05, zero_point=64`` or ``axis=0, scale=[...], zero_point=[...]``, as IR text writes it."""
        if self.axis is None:
            return f"scale={_float(self.scale)}, zero_point={self.zero_point}"
        scales = ", ".join(_float(s) for s in self.scale)
        zps = ", ".join(str(z) for z in self.zero_point)
        return f"axis={self.axis}, scale=[{scales}], zero_point=[{zps}]"

    def __str__(self) -> str:
        return self.describe()
