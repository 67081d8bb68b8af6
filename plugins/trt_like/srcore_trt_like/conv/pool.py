"""Pooling for the trt_like engine: max_pool2d, avg_pool2d, adaptive_avg_pool2d (float32, NCHW).

Each pool is an object built once per static shape and called as ``pool(x, out)`` (C-contiguous
float32 arrays of the built shapes). Semantics are torch's: output sizes (``ceil_mode``: the last
window must start inside the input or the left padding), max pooling treats padding as -inf
(NaN propagates), avg pooling's divisor follows ``count_include_pad`` / ``divisor_override``.

The windowed kernels are separable (max and sum are): per channel, each input row is reduced
across the ``kw`` taps into a row of output width (for a column stride > 1 after splitting the
row into its stride phases, so every tap is a contiguous, vectorised pass), then the output row
across the ``kh`` rows. The kernels are numba ``nogil`` loops over a channel range.
"""
from __future__ import annotations

import numpy as np

from ..errors import TacticSpecError
from ..kernels import pool as _k
from ..kernels.pool_gather import avg_pool_gather, max_pool_gather
from ..kernels.pool_vec import max_pool_s2, pool_s2
from .spec import as_pair, as_shape4, check_array


def _out_size(name, n, k, s, p, d, ceil_mode):
    """torch's pooling_output_shape for one spatial dim."""
    o = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= n + p:
        o -= 1
    if o < 1:
        raise TacticSpecError(f"{name}: input size {n} with padding {p} is too small for kernel {k} "
                              f"(dilation {d}): output size {o}")
    return o


class _WindowPool:
    """Shared geometry and checks of the windowed pools."""
    name = "pool"

    def __init__(self, x_shape, kernel, stride, padding, dilation, ceil_mode, max_pad):
        self.x_shape = as_shape4(x_shape)
        self.kernel = as_pair("kernel")(kernel)
        self.stride = self.kernel if stride is None or stride == () else as_pair("stride")(stride)
        self.padding, self.dilation = as_pair("padding")(padding), as_pair("dilation")(dilation)
        self.ceil_mode = bool(ceil_mode)
        if min(self.x_shape) < 1:
            raise TacticSpecError(f"{self.name}: x_shape {self.x_shape} has an empty dimension")
        for field in ("kernel", "stride", "dilation"):
            if min(getattr(self, field)) < 1:
                raise TacticSpecError(f"{self.name}: {field} {getattr(self, field)} must be >= 1")
        for p, limit in zip(self.padding, max_pad):
            if p < 0 or p > limit:
                raise TacticSpecError(f"{self.name}: padding {self.padding} must be between 0 and half the "
                                      f"kernel size {self.kernel}, here at most {max_pad}")
        H, W = self.x_shape[2:]
        self.out_shape = self.x_shape[:2] + tuple(
            _out_size(self.name, n, k, s, p, d, self.ceil_mode)
            for n, k, s, p, d in zip((H, W), self.kernel, self.stride, self.padding, self.dilation))

    def _check(self, x, out):
        check_array(f"{self.name}: x", x, self.x_shape)
        check_array(f"{self.name}: out", out, self.out_shape)

    @property
    def vectorized(self) -> bool:
        """Column stride 2, no dilation: the 16-lane kernel of ``kernels/pool_vec.py`` applies."""
        return self.stride[1] == 2 and self.dilation == (1, 1)

    def _reduce(self, x, out, is_max):
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = self.kernel, self.stride, self.padding, self.dilation
        _k.pool_rows(x, is_max, kh, kw, sh, sw, ph, pw, dh, dw, out, 0, self.x_shape[1])


class MaxPool2d(_WindowPool):
    """torch's ``max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)`` for one input shape."""
    name = "max_pool2d"

    def __init__(self, x_shape, kernel, stride=None, padding=0, dilation=1, ceil_mode=False):
        k = as_pair("kernel")(kernel)
        super().__init__(x_shape, kernel, stride, padding, dilation, ceil_mode, max_pad=tuple(ki // 2 for ki in k))

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        self._check(x, out)
        self._max(x, out)

    def _max(self, x, out) -> None:
        if self.vectorized:
            (kh, kw), (ph, pw) = self.kernel, self.padding
            max_pool_s2(x, kh, kw, self.stride[0], ph, pw, out, 0, self.x_shape[1])
        else:
            self._reduce(x, out, True)


# the largest offset table (int32 entries) a gathered max pool keeps: its small planes are the point
_GATHER_TAPS = 1 << 16


def gather_taps(pool: MaxPool2d) -> np.ndarray | None:
    """The offset table of :func:`..kernels.pool_gather.max_pool_gather` for ``pool`` (flat, tap-major,
    outputs rounded up to 16), or None when it would be larger than ``_GATHER_TAPS`` or a window
    holds no input element (dilated windows may: torch's -inf). A tap in the padding repeats its
    window's first element in range."""
    (H, W), (Ho, Wo) = pool.x_shape[2:], pool.out_shape[2:]
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = pool.kernel, pool.stride, pool.padding, pool.dilation
    P16 = -(-Ho * Wo // 16) * 16
    if kh * kw * P16 > _GATHER_TAPS:
        return None

    def per_dim(n_out, k, s, p, d, n):
        idx = np.arange(n_out)[:, None] * s - p + np.arange(k)[None, :] * d     # (outputs, taps)
        ok = (idx >= 0) & (idx < n)
        first = idx[np.arange(n_out), ok.argmax(1)]
        return np.where(ok, idx, first[:, None]) if ok.any(1).all() else None
    rows, cols = per_dim(Ho, kh, sh, ph, dh, H), per_dim(Wo, kw, sw, pw, dw, W)
    if rows is None or cols is None:
        return None
    taps = np.zeros((kh, kw, P16), np.int32)
    taps[:, :, :Ho * Wo] = (rows.T[:, None, :, None] * W + cols.T[None, :, None, :]).reshape(kh, kw, Ho * Wo)
    return taps.reshape(-1)


class MaxPool2dGather:
    """:class:`MaxPool2d` (built) through 16-lane gathers: the tactic of small planes."""

    def __init__(self, pool: MaxPool2d, taps: np.ndarray):
        self.pool, self.taps, self.ntaps = pool, taps, pool.kernel[0] * pool.kernel[1]
        self.planes, self.out_shape = pool.x_shape[0] * pool.x_shape[1], pool.out_shape

    @classmethod
    def of(cls, pool: MaxPool2d) -> MaxPool2dGather | None:
        taps = gather_taps(pool)
        return None if taps is None else cls(pool, taps)

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        self.pool._check(x, out)
        self._max(x, out)

    def _max(self, x, out) -> None:
        max_pool_gather(x, self.taps, self.ntaps, out, 0, self.planes)


class AvgPool2d(_WindowPool):
    """torch's ``avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)``."""
    name = "avg_pool2d"

    def __init__(self, x_shape, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        k = as_pair("kernel")(kernel)
        super().__init__(x_shape, kernel, stride, padding, 1, ceil_mode, max_pad=tuple(ki // 2 for ki in k))
        if divisor_override is not None and int(divisor_override) == 0:
            raise TacticSpecError("avg_pool2d: divisor_override must not be 0")
        self.divisor = self._divisors(bool(count_include_pad), divisor_override)

    def _divisors(self, count_include_pad, divisor_override):
        """The (Ho, Wo) divisor of every output, as torch computes it."""
        if divisor_override is not None:
            return np.full(self.out_shape[2:], float(divisor_override), np.float32)
        per_dim = []
        for n, o, k, s, p in zip(self.x_shape[2:], self.out_shape[2:], self.kernel, self.stride, self.padding):
            start = np.arange(o) * s - p
            end = np.minimum(start + k, n + p)
            size = end - start                                   # the window, padding included
            clipped = np.minimum(end, n) - np.maximum(start, 0)  # only the input's elements
            per_dim.append(size if count_include_pad else clipped)
        return np.multiply.outer(*per_dim).astype(np.float32)

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        self._check(x, out)
        self._avg(x, out)

    def _avg(self, x, out) -> None:
        # the 16-lane kernel where it applies (loaded SPR, CPU time: 1x16x112x112 3x3/2 86 us against
        # 160 by rows, 1x20x16x16 2x2/2 9 against 17)
        if self.vectorized:
            (kh, kw), (ph, pw) = self.kernel, self.padding
            pool_s2(x, False, kh, kw, self.stride[0], ph, pw, self.divisor, out, 0, self.x_shape[1])
        else:
            self._reduce(x, out, False)
            _k.scale_planes(out, self.divisor, 0, self.x_shape[1])


class AdaptiveAvgPool2d:
    """torch's ``adaptive_avg_pool2d(x, output_size)``: window i of a dim spans
    [floor(i * n / o), ceil((i + 1) * n / o))."""
    name = "adaptive_avg_pool2d"

    def __init__(self, x_shape, output_size):
        self.x_shape = as_shape4(x_shape)
        if min(self.x_shape) < 1:
            raise TacticSpecError(f"{self.name}: x_shape {self.x_shape} has an empty dimension")
        size = as_pair("output_size")(output_size)
        if min(size) < 1:
            raise TacticSpecError(f"{self.name}: output_size {size} must be >= 1")
        self.out_shape = self.x_shape[:2] + size
        (H, W), (Ho, Wo) = self.x_shape[2:], size
        self.h0 = np.array([i * H // Ho for i in range(Ho)], np.int64)
        self.h1 = np.array([-(-(i + 1) * H // Ho) for i in range(Ho)], np.int64)
        self.w0 = np.array([j * W // Wo for j in range(Wo)], np.int64)
        self.w1 = np.array([-(-(j + 1) * W // Wo) for j in range(Wo)], np.int64)

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        check_array(f"{self.name}: x", x, self.x_shape)
        check_array(f"{self.name}: out", out, self.out_shape)
        self._run(x, out)

    def _run(self, x, out) -> None:
        if self.out_shape[2:] == (1, 1):
            _k.global_avg(x, out, 0, self.x_shape[1])
        else:
            _k.adaptive_avg(x, self.h0, self.h1, self.w0, self.w1, out, 0, self.x_shape[1])


class AvgPool2dGather:
    """:class:`AvgPool2d` (built, dilation 1) through 16-lane gathers from a zero-padded copy of each
    plane: the tactic of small planes (per-row calls and slices cost the row kernels more than their
    adds there)."""

    def __init__(self, pool: AvgPool2d, taps: np.ndarray, padded: tuple[int, int]):
        self.pool, self.taps, self.ntaps, self.padded = pool, taps, pool.kernel[0] * pool.kernel[1], padded
        self.planes = pool.x_shape[0] * pool.x_shape[1]
        self.div = np.ascontiguousarray(pool.divisor.reshape(-1))

    @classmethod
    def of(cls, pool: AvgPool2d) -> AvgPool2dGather | None:
        """None when its offset table would be larger than ``_GATHER_TAPS``."""
        (Ho, Wo), (kh, kw), (sh, sw), (ph, pw) = pool.out_shape[2:], pool.kernel, pool.stride, pool.padding
        P16 = -(-Ho * Wo // 16) * 16
        if kh * kw * P16 > _GATHER_TAPS:
            return None
        # the buffer reaches the last window (ceil_mode's may pass the bottom / right padding)
        Hp = max(pool.x_shape[2] + 2 * ph, (Ho - 1) * sh + kh)
        Wp = max(pool.x_shape[3] + 2 * pw, (Wo - 1) * sw + kw)
        rows = np.arange(Ho)[:, None] * sh + np.arange(kh)[None, :]     # (outputs, taps), buffer rows
        cols = np.arange(Wo)[:, None] * sw + np.arange(kw)[None, :]
        taps = np.zeros((kh, kw, P16), np.int32)
        taps[:, :, :Ho * Wo] = (rows.T[:, None, :, None] * Wp + cols.T[None, :, None, :]).reshape(kh, kw, Ho * Wo)
        return cls(pool, taps.reshape(-1), (Hp, Wp))

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        self.pool._check(x, out)
        self._avg(x, out)

    def _avg(self, x, out) -> None:
        (ph, pw), (Hp, Wp) = self.pool.padding, self.padded
        avg_pool_gather(x, self.taps, self.ntaps, self.div, Hp, Wp, ph, pw, out, 0, self.planes)
