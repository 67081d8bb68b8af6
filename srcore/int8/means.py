"""torch's quantized means on exact integer sums, rounded as its kernels round: shared by the backends
(``srcore.plugin.int8_means``). The result keeps the input's parameters, so a mean is the stored
integers' sum scaled and rounded; the kernels differ only in where the zero point enters, which
decides exact ties (a mean that is an odd multiple of one half)."""
from __future__ import annotations

import numpy as np

F32 = np.float32


def adaptive_avg(sums: np.ndarray, kh, kw, zero_point: int, nhwc: bool, qmin: int, qmax: int, kd=1) -> np.ndarray:
    """torch's quantized ``adaptive_avg_pool2d`` of windows of ``kh x kw`` values (broadcastable to
    ``sums``) with integer ``sums``. Its NCHW kernel rounds ``sum * ((1 / kH) / kW)``; its NHWC kernel
    (a channels-last input, and a one-channel one) ``zp + (sum - n zp) * (1 / n)`` with ``1 / n``
    divided in double and rounded once to float32 (``n = kH kW``): the two reciprocals differ in the
    last bit for some windows (11 x 10), which moves exact ties. float32, rounded to even, clamped to
    ``[qmin, qmax]``. ``adaptive_avg_pool3d``: ``kd`` deep windows, ``((1 / kD) / kH) / kW`` with
    ``1 / kD`` divided in double (``n = kD kH kW``)."""
    sums = np.asarray(sums, np.int64)
    kd, kh, kw = np.asarray(kd, np.int64), np.asarray(kh, np.int64), np.asarray(kw, np.int64)
    if nhwc:
        n = kd * kh * kw
        r = np.rint(F32(zero_point) + (sums - n * zero_point).astype(F32) * (1.0 / n).astype(F32))
    else:
        r = np.rint(sums.astype(F32) * (((1.0 / kd).astype(F32) / kh.astype(F32)) / kw.astype(F32)))
    return np.clip(r, qmin, qmax, out=r)


def fast_mean(sums: np.ndarray, count: int, qmin: int, qmax: int) -> np.ndarray:
    """torch's integer fast path of ``mean`` over a contiguous tensor's innermost dims:
    ``nearbyint(float32(sum) / n)``, clamped to ``[qmin, qmax]`` (float32)."""
    # (an array for 0-d sums too, a mean over every dim: numpy's arithmetic would give a scalar)
    r = np.asarray(np.rint(np.asarray(sums, np.int64).astype(F32) / F32(count)))
    return np.clip(r, qmin, qmax, out=r)
