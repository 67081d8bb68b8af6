"""An exact ``u8 x s8 -> s32`` GEMM on AVX2 (``vpmaddubsw``/``vpmaddwd``, :mod:`.simd8`), for
quantized linear and convolution layers with ``quint8`` activations and ``qint8`` weights.

Layout: the activations are rows of ``K`` bytes (``K`` padded to a multiple of 4 with zeros), the
weight is packed once into panels of 16 output channels, ``(K / 4, 16, 4)`` bytes each, so that one
32-byte load holds 4 consecutive depths of 8 channels. The micro-kernel keeps a 4 x 16 block of
int32 accumulators in 8 registers; per 4 depths it broadcasts 4 activation bytes per row and does
two ``vpmaddubsw`` + ``vpmaddwd`` per row. Rows are taken in blocks whose bytes stay in L2.

Exactness. ``vpmaddubsw`` adds two products in saturating int16: exact while every activation
byte is at most ``lim`` (from the weight: ``lim * (w[2i]+ + w[2i+1]+) <= 32767`` and
``lim * (w[2i]- + w[2i+1]-) <= 32768``; 129 for symmetric int8 weights in [-127, 127], so 7-bit
activations, torch's ``reduce_range`` and ``srcore.quantize``'s default, always are). Otherwise
the bytes are clamped to ``lim`` and the rows with larger ones get their excess (<= 127) in a
second, small product; when such rows are many, each byte is split as ``128 * hi + lo`` and the
GEMM runs twice. Zero points are applied afterwards, exactly, in
int32: ``sum((a - za)(w - zw)) = sum(a w) - za * colsum(w) - zw * rowsum(a) + K za zw``, which
stays in int32 for ``K <= 33000`` (larger: the caller's SGEMM path). The result is fbgemm's int32
accumulator without its int16 saturation.
"""
from __future__ import annotations

import functools
import os
import threading
import time

import attrs
import numpy as np

from srcore.plugin import QDTYPES

#: panel width (output channels per packed panel) and micro-kernel rows
NR = 16
MR = 4
#: activation bytes of one block of rows (kept in L2 while every weight panel passes over it)
ROW_BLOCK_BYTES = 1 << 17
#: the largest depth whose accumulators and zero-point corrections stay in int32
MAX_K = 33000
_I16_MAX = 32767


def numba_enabled() -> bool:
    """numba kernels may run (numba installed and ``SRCORE_INT8_GEMM`` is not ``sgemm``)."""
    if os.environ.get("SRCORE_INT8_GEMM", "").lower() == "sgemm":
        return False
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _simd_supported() -> bool:
    from srcore.plugin import cpu_features

    if os.environ.get("SRCORE_INT8_GEMM", "").lower() == "sgemm":
        return False
    if "AVX2" not in cpu_features():
        return False
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def _kernels():
    from ._int8_kernels import gemm_u8s8
    return gemm_u8s8


@attrs.frozen(eq=False)
class PackedInt8:
    """A ``qint8`` weight packed for :func:`gemm`: ``panels`` int8 ``(n_panels, kp/4, 16, 4)``
    flat, ``n`` output channels, ``k`` depth (``kp`` padded to 4), ``lim`` the largest activation
    byte whose pair sums stay in int16 with these weights (128 at least), ``colsum`` int32 per
    channel, ``zero_points`` int32 per channel."""

    panels: np.ndarray
    n: int
    k: int
    kp: int
    n_panels: int
    lim: int
    colsum: np.ndarray
    zero_points: np.ndarray


def pack(w_int8: np.ndarray, zero_points: np.ndarray) -> PackedInt8:
    """Pack a ``(n, K)`` int8 weight (rows = output channels)."""
    n, k = w_int8.shape
    kp = -(-k // 4) * 4
    n_panels = -(-n // NR)
    wp = np.zeros((n_panels * NR, kp), np.int8)
    wp[:n, :k] = w_int8
    panels = np.ascontiguousarray(wp.reshape(n_panels, NR, kp // 4, 4).transpose(0, 2, 1, 3)).ravel()
    w32 = wp.astype(np.int32)
    pos, neg = np.maximum(w32, 0), np.maximum(-w32, 0)
    # a pair a0*w0 + a1*w1 (a <= amax) lies in [-amax * pneg, amax * ppos]; int16 holds [-32768, 32767]
    ppos = int((pos[:, 0::2] + pos[:, 1::2]).max(initial=0))
    pneg = int((neg[:, 0::2] + neg[:, 1::2]).max(initial=0))
    lim = min(255, _I16_MAX // max(ppos, 1), (_I16_MAX + 1) // max(pneg, 1))
    return PackedInt8(panels, n, k, kp, n_panels, lim, w_int8.astype(np.int32).sum(axis=1, dtype=np.int32),
                      np.asarray(zero_points, np.int64).astype(np.int32).reshape(n))


def applies(k: int, x_qdtype: str, w_qdtype: str) -> bool:
    """Whether :func:`gemm` takes this layer (and the machine has the instructions and numba)."""
    return x_qdtype == "quint8" and w_qdtype == "qint8" and 0 < k <= MAX_K and faster_than_sgemm()


_local = threading.local()


def scratch(name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    """A per-thread reusable buffer (the GEMM's rows and int32 sums are large and die within the
    call: fresh arrays would fault their pages in on every call)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    bufs = getattr(_local, "bufs", None)
    if bufs is None:
        bufs = _local.bufs = {}
    buf = bufs.get(name)
    if buf is None or buf.nbytes < nbytes:
        buf = bufs[name] = np.empty(max(nbytes, 1), np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)


_scratch_buffer = scratch


def _raw_gemm(a: np.ndarray, m: int, p: PackedInt8, name: str = "c") -> np.ndarray:
    c = scratch(name, (m, p.n_panels * NR), np.int32)
    rows = max(MR, (ROW_BLOCK_BYTES // max(p.kp, 1)) // MR * MR)
    _kernels()(a.reshape(-1), p.kp, m, p.panels, p.n_panels, c.reshape(-1), rows)
    return c


def _exact_raw(a: np.ndarray, p: PackedInt8, scratch: bool = False) -> np.ndarray:
    """``sum_k a[m, k] * w[n, k]`` (no zero points), int32 ``(m, n_panels * 16)``, exact: one pass
    when every byte is at most ``p.lim``; else the bytes clamped to ``lim`` plus, for the rows that
    have larger ones (few, as after a percentile-clipped calibration), their excess (<= 127); else
    (many such rows) ``128 * hi + lo`` in two passes. ``scratch``: ``a`` may be clamped in place."""
    from ._int8_kernels import split_excess

    m = a.shape[0]
    if not a.size or int(a.max()) <= p.lim:
        return _raw_gemm(a, m, p)
    excess = np.empty((max(1, m // 4), a.shape[1]), np.uint8)
    rows = np.empty(excess.shape[0], np.int64)
    clamped = a if scratch else a.copy()
    count = split_excess(clamped, p.lim, excess, rows)
    if count >= 0:
        c = _raw_gemm(clamped, m, p)
        c[rows[:count]] += _raw_gemm(excess[:count], count, p, "c_excess")
        return c
    c = _raw_gemm(a & np.uint8(127), m, p)     # many rows: each byte as 128 * hi + lo
    c += _raw_gemm(a >> np.uint8(7), m, p, "c_hi") << 7
    return c


def gemm(a: np.ndarray, x_zp: int, p: PackedInt8) -> np.ndarray:
    """Exact ``sum_k (a[m, k] - x_zp) * (w[n, k] - zw[n])`` as int32 ``(m, n)``, for ``a`` uint8
    ``(m, kp)`` (C-contiguous, columns beyond ``p.k`` zero)."""
    c = _exact_raw(a, p)[:, :p.n].copy()      # out of the scratch buffer
    if x_zp:
        c -= np.int32(x_zp) * p.colsum
    if p.zero_points.any():
        rs = a.sum(axis=1, dtype=np.int32)[:, None]
        c -= p.zero_points * (rs - np.int32(p.k * x_zp))
    return c


_NO_ROWSUM = np.zeros(0, np.int64)


def gemm_requantize(a: np.ndarray, x_zp: int, p: PackedInt8, x_scale: float, w_scales: np.ndarray, bias,
                    y_scale: float, y_zero_point: int, relu: bool, out: np.ndarray, channels_first: bool,
                    scratch: bool = False) -> np.ndarray:
    """:func:`gemm` then fbgemm's requantization to ``quint8`` (as ``gemm.requantize``), fused:
    one pass from the raw int32 sums to ``out``, a C-contiguous uint8 array holding
    (rows, channels) or, ``channels_first``, (images, channels, positions) with the rows of ``a``
    ordered (image, position). ``scratch``: ``a`` is the caller's buffer and may be changed."""
    from ._int8_kernels import requantize_u8

    f32 = np.float32
    rowsum = a.sum(axis=1, dtype=np.int64) if p.zero_points.any() else _NO_ROWSUM   # before any clamping
    c = _exact_raw(a, p, scratch)
    act_w = f32(x_scale) * np.asarray(w_scales, f32)
    mult = (act_w / f32(y_scale)).astype(f32)
    bias_div = (np.asarray(bias, f32) / act_w).astype(f32) if bias is not None else np.zeros(p.n, f32)
    info = QDTYPES["quint8"]
    if not out.flags.c_contiguous:
        raise ValueError("gemm_requantize writes into a C-contiguous array")
    n = p.n
    rows = out.size // n
    # rows of channels (the GEMM's order, 8 channels per float32 vector); NCHW by one numpy
    # transposing copy after (3x faster than scattering bytes along the rows)
    flat = _scratch_buffer("requantized", (rows * n,), np.uint8) if channels_first else out.reshape(-1)
    requantize_u8(c.reshape(-1), c.shape[1], flat, 0, n, 1, 1, rows, n, p.colsum, p.zero_points, rowsum, int(x_zp),
                  p.k, bias_div, mult, int(y_zero_point), int(y_zero_point) if relu else info.qmin, info.qmax)
    if channels_first:
        imgs = out.shape[0]
        np.copyto(out.reshape(imgs, n, -1), flat.reshape(imgs, -1, n).transpose(0, 2, 1))
    return out


@functools.lru_cache(maxsize=1)
def faster_than_sgemm() -> bool:
    """This path where the CPU has AVX2 (a feature test) and, timed once per process on a
    layer-sized product, it beats float32 SGEMM on the same integers; ``SRCORE_INT8_GEMM=sgemm``
    turns it off, ``=simd`` skips the timing."""
    if not _simd_supported():
        return False
    if os.environ.get("SRCORE_INT8_GEMM", "").lower() == "simd":
        return True
    rng = np.random.default_rng(0)
    m, k, n = 196, 576, 64
    a = rng.integers(0, 128, (m, k), dtype=np.uint8)
    w = rng.integers(-127, 128, (n, k), dtype=np.int8)
    p = pack(w, np.zeros(n))
    af, wf = a.astype(np.float32), np.ascontiguousarray(w.T.astype(np.float32))

    def best(fn) -> float:
        fn()
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return min(ts)
    return best(lambda: gemm(a, 0, p)) < best(lambda: np.matmul(af, wf))


