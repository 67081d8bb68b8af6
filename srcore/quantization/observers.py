"""Observers: running statistics of a float tensor over calibration batches, and the quantization
parameters they choose.

Activations are quantized per tensor, affine, to ``quint8``: :meth:`Observer.qparams` picks a
range ``[lo, hi]`` (always containing 0, so that zero is exact: padding, ReLU) and maps it onto
``[qmin, qmax]``. How the range is picked is the observer's job:

* :class:`MinMaxObserver`: the smallest and largest value seen;
* :class:`MovingAverageObserver`: per-batch minima and maxima averaged with ``averaging_constant``
  (torch's ``MovingAverageMinMaxObserver``): one outlier batch moves the range less;
* :class:`HistogramObserver`: a histogram of every value seen, then either the range that
  minimises the KL divergence between the float distribution and its quantized version
  (``method="entropy"``, TensorRT's calibration) or the ``percentile`` of the absolute values
  (``method="percentile"``).

Weights are quantized per output channel, symmetric, to ``qint8`` in ``[-127, 127]``
(:func:`weight_qparams`).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import QuantizationError
from ..ir.quant import QParams

#: the observers by the names ``srcore.quantize(observer=...)`` and ``srcore quantize --observer`` take
OBSERVERS = ("minmax", "moving_average", "histogram")
HISTOGRAM_METHODS = ("entropy", "percentile")


def affine_qparams(lo: float, hi: float, qmin: int, qmax: int) -> QParams:
    """``scale`` and ``zero_point`` mapping ``[min(lo, 0), max(hi, 0)]`` onto ``[qmin, qmax]``
    (torch's ``_calculate_qparams`` for affine quantization)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise QuantizationError(f"cannot quantize a tensor whose range [{lo}, {hi}] is not finite")
    scale = (hi - lo) / float(qmax - qmin)
    scale = max(scale, np.finfo(np.float32).eps)
    zp = qmin - int(round(lo / scale))
    return QParams(float(np.float32(scale)), int(min(max(zp, qmin), qmax)))


class Observer:
    """Statistics of one tensor; ``update(x)`` per calibration batch, then ``qparams(qmin, qmax)``."""

    name = "observer"

    def __init__(self) -> None:
        self.batches = 0
        self.min = math.inf
        self.max = -math.inf

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x)
        if x.size == 0:
            return
        lo, hi = float(x.min()), float(x.max())
        if not (math.isfinite(lo) and math.isfinite(hi)):
            bad = "NaN" if np.isnan(x).any() else "infinite"
            raise QuantizationError(f"a calibration batch produced {bad} values")
        self._update(x, lo, hi)
        self.min, self.max = min(self.min, lo), max(self.max, hi)
        self.batches += 1

    def _update(self, x: np.ndarray, lo: float, hi: float) -> None:
        pass

    def range(self) -> tuple[float, float]:
        return self.min, self.max

    def qparams(self, qmin: int, qmax: int) -> QParams:
        if not self.batches:
            raise QuantizationError("no calibration data reached this tensor")
        lo, hi = self.range()
        return affine_qparams(lo, hi, qmin, qmax)


class MinMaxObserver(Observer):
    name = "minmax"


class MovingAverageObserver(Observer):
    """torch's ``MovingAverageMinMaxObserver``: ``r = r + c * (batch_r - r)`` after the first batch."""

    name = "moving_average"

    def __init__(self, averaging_constant: float = 0.01) -> None:
        super().__init__()
        self.c = float(averaging_constant)
        self.avg_min = self.avg_max = None

    def _update(self, x, lo, hi) -> None:
        if self.avg_min is None:
            self.avg_min, self.avg_max = lo, hi
        else:
            self.avg_min += self.c * (lo - self.avg_min)
            self.avg_max += self.c * (hi - self.avg_max)

    def range(self) -> tuple[float, float]:
        return self.avg_min, self.avg_max


class HistogramObserver(Observer):
    """A histogram of the values (``bins`` bins over a range that grows as batches come: when a
    batch falls outside, the histogram is re-binned onto a range twice as wide, as often as needed),
    then the clipping range by KL divergence (``entropy``) or by ``percentile``."""

    name = "histogram"

    def __init__(self, method: str = "entropy", percentile: float = 99.99, bins: int = 2048) -> None:
        super().__init__()
        if method not in HISTOGRAM_METHODS:
            raise QuantizationError(f"histogram method {method!r}: expected one of {', '.join(HISTOGRAM_METHODS)}")
        if not 0.0 < percentile <= 100.0:
            raise QuantizationError(f"percentile {percentile!r} must be in (0, 100]")
        self.method, self.percentile, self.bins = method, float(percentile), int(bins)
        self.hist = np.zeros(self.bins, np.float64)
        self.edge = 0.0   # the histogram covers [-edge, edge]

    def _update(self, x, lo, hi) -> None:
        need = max(abs(lo), abs(hi))
        if need == 0.0:
            if self.edge == 0.0:
                return
        if self.edge == 0.0:
            self.edge = need
        while need > self.edge:  # widen: merge pairs of bins onto a range twice as wide
            h = self.hist.reshape(-1, 2).sum(1)
            self.hist = np.concatenate([np.zeros(self.bins // 4), h, np.zeros(self.bins // 4)])
            self.edge *= 2.0
        h, _ = np.histogram(x, bins=self.bins, range=(-self.edge, self.edge))
        self.hist += h

    def range(self) -> tuple[float, float]:
        if self.edge == 0.0 or not self.hist.any():
            return self.min, self.max
        t = self._percentile_threshold() if self.method == "percentile" else self._entropy_threshold()
        # clip the observed range to [-t, t]: a tensor that is never negative keeps lo = min >= 0
        return max(self.min, -t), min(self.max, t)

    # |x| histogram: bin i covers [i, i+1) * width
    def _abs_hist(self) -> tuple[np.ndarray, float]:
        half = self.bins // 2
        pos, neg = self.hist[half:], self.hist[:half][::-1]
        return pos + neg, self.edge / half

    def _percentile_threshold(self) -> float:
        h, width = self._abs_hist()
        c = np.cumsum(h)
        i = int(np.searchsorted(c, c[-1] * self.percentile / 100.0))
        return (min(i, len(h) - 1) + 1) * width

    def _entropy_threshold(self) -> float:
        """TensorRT's calibration: the threshold whose clipped, quantized distribution of ``|x|`` is
        closest (KL divergence) to the observed one; 256 levels for a tensor never negative (all of
        ``quint8`` on ``[0, t]``), else 128 (half of them per sign)."""
        levels = 256 if self.min >= 0 else 128
        h, width = self._abs_hist()
        nz = np.nonzero(h)[0]
        last = int(nz[-1]) + 1
        if last <= levels:
            return last * width
        best, best_i = math.inf, last
        step = max(1, (last - levels) // 256)  # at most ~256 candidates
        for i in range(levels, last + 1, step):
            p = h[:i].copy()
            p[i - 1] += h[i:].sum()            # clipped mass goes to the last bin
            q = _quantize_distribution(h[:i], levels, p > 0)
            kl = _kl(p, q)
            if kl < best:
                best, best_i = kl, i
        return best_i * width


def _quantize_distribution(p: np.ndarray, levels: int, nonzero: np.ndarray) -> np.ndarray:
    """``p`` merged into ``levels`` groups, each group's mass spread evenly over its bins where
    ``nonzero`` (those of the clipped distribution, whose last bin holds the clipped mass: so that
    clipping costs what the quantized distribution misses there)."""
    n = len(p)
    edges = np.linspace(0, n, levels + 1).astype(int)
    starts = np.unique(edges[:-1][edges[:-1] < edges[1:]])       # the non-empty groups
    mass = np.add.reduceat(p, starts)
    count = np.add.reduceat(nonzero.astype(np.int64), starts)
    group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
    per_bin = np.divide(mass, count, out=np.zeros_like(mass), where=count > 0)
    return np.where(nonzero, per_bin[group], 0.0)


def _kl(p: np.ndarray, q: np.ndarray, eps: float = 1e-4) -> float:
    """KL(p || q) of the normalized histograms; a bin where ``p`` has mass and ``q`` none gets
    ``eps`` of ``q``'s mass (as TensorRT's and MXNet's calibrators smooth), not an infinite cost."""
    ps, qs = p.sum(), q.sum()
    if ps == 0 or qs == 0:
        return math.inf
    p, q = p / ps, q / qs
    m = p > 0
    holes = m & (q == 0)
    if holes.any():
        q = q * (1.0 - eps) + np.where(holes, eps / holes.sum(), 0.0)
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def make_observer(name: str, *, histogram_method: str = "entropy", percentile: float = 99.99,
                  averaging_constant: float = 0.01) -> Observer:
    if name == "minmax":
        return MinMaxObserver()
    if name == "moving_average":
        return MovingAverageObserver(averaging_constant)
    if name == "histogram":
        return HistogramObserver(histogram_method, percentile)
    raise QuantizationError(f"unknown observer {name!r}: expected one of {', '.join(OBSERVERS)}")


def weight_qparams(w: np.ndarray, axis: int = 0) -> QParams:
    """Per-channel symmetric ``qint8`` parameters along ``axis``: ``scale = max|w| / 127``, zero
    point 0 (so integers stay in ``[-127, 127]``; a channel of zeros gets scale 1)."""
    w = np.asarray(w, np.float64)
    if not np.isfinite(w).all():
        raise QuantizationError("the weight has NaN or infinite values")
    amax = np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)).max(axis=1) if w.size else np.zeros(
        w.shape[axis])
    scales = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    scales = np.maximum(scales, np.finfo(np.float32).tiny)
    return QParams(tuple(float(s) for s in scales), (0,) * len(scales), axis)


def quantize_weight(w: np.ndarray, q: QParams) -> np.ndarray:
    """The ``int8`` integers of ``w`` with per-channel parameters ``q`` (round half to even, clamped)."""
    shape = [1] * w.ndim
    shape[q.axis] = -1
    s = np.asarray(q.scale, np.float64).reshape(shape)
    r = np.rint(np.asarray(w, np.float64) / s)
    return np.clip(r, -127, 127).astype(np.int8)
