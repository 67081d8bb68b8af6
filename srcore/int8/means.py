"""torch's quantized means on exact integer sums, rounded as its kernels round: shared by the backends
(``srcore.plugin.int8_means``). The result keeps the input's parameters, so a mean is the stored
integers' sum scaled and rounded; the kernels differ only in where the zero point enters, which
decides exact ties (a mean that is an odd multiple of one half)."""
from __future__ import annotations

import numpy as np

F32 = np.float32


def adaptive_avg(sums: np.ndarray, counts, recip, zero_point: int, nhwc: bool, qmin: int, qmax: int) -> np.ndarray:
    """torch's quantized ``adaptive_avg_pool2d`` of windows with integer ``sums`` of ``counts``
    values, ``recip`` the float32 ``(1 / kH) / kW``. Its NCHW kernel rounds ``sum * recip``; its NHWC
    kernel (a channels-last input, and a one-channel one) ``zp + (sum - n zp) * recip``. float32,
    rounded to even, clamped to ``[qmin, qmax]``."""
    sums = np.asarray(sums, np.int64)
    if nhwc:
        r = np.rint(F32(zero_point) + (sums - np.asarray(counts, np.int64) * zero_point).astype(F32) * recip)
    else:
        r = np.rint(sums.astype(F32) * recip)
    return np.clip(r, qmin, qmax, out=r)


def fast_mean(sums: np.ndarray, count: int, qmin: int, qmax: int) -> np.ndarray:
    """torch's integer fast path of ``mean`` over a contiguous tensor's innermost dims:
    ``nearbyint(float32(sum) / n)``, clamped to ``[qmin, qmax]`` (float32)."""
    r = np.rint(np.asarray(sums, np.int64).astype(F32) / F32(count))
    return np.clip(r, qmin, qmax, out=r)
