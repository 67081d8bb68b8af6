"""An exact ``u8 x s8 -> s32`` GEMM on AVX2 (``vpmaddubsw``/``vpmaddwd``, :mod:`.simd8`) or AVX512-VNNI
(``vpdpbusd``, where the CPU has it: :func:`simd_path`), for
quantized linear and convolution layers with ``quint8`` activations and ``qint8`` weights, with
fbgemm's requantization fused (:func:`gemm_requantize`) and convolution windows gathered straight
into its rows (:func:`conv_rows`). Plugins reach it as ``srcore.plugin.int8_gemm`` (quantized_cpu's
kernels and trt_like's ``int8_simd`` tactic share it); numba is imported on first use only, so a
plugin that calls it declares numba itself.

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
import math
import os
import threading
import time

import attrs
import numpy as np

from ..ir.quant import QDTYPES

#: panel width (output channels per packed panel) and micro-kernel rows
NR = 16
MR = 4
#: activation bytes of one block of rows (kept in L2 while every weight panel passes over it)
ROW_BLOCK_BYTES = 1 << 17
#: int32 sums of one block of rows in the one-call convolution (requantized while in L2)
C_BLOCK_BYTES = 1 << 17
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


#: the CPU features of ``vpdpbusd`` on 256-bit registers (AVX512-VNNI with VL), numpy's names
VNNI_FEATURES = frozenset({"AVX512F", "AVX512BW", "AVX512VL", "AVX512VNNI"})


def simd_path(features: frozenset[str] | None = None) -> str | None:
    """The GEMM's instructions on this machine, by feature test (``srcore.cpu_features``, never the
    vendor): ``"vnni"`` (``vpdpbusd``: exact for every byte in one pass), ``"avx2"``
    (``vpmaddubsw`` + ``vpmaddwd``: bytes above the int16 limit take a second, small product), or
    None (no AVX2, no numba, or ``SRCORE_INT8_GEMM=sgemm``). ``SRCORE_INT8_GEMM=avx2`` keeps a
    VNNI machine on the AVX2 pair. ``features``: another machine's, for tests."""
    env = os.environ.get("SRCORE_INT8_GEMM", "").lower()
    if env == "sgemm":
        return None
    if features is None:
        from ..cpu_features import cpu_features

        features = cpu_features()
    try:
        import numba  # noqa: F401
    except ImportError:
        return None
    if VNNI_FEATURES <= features and env != "avx2":
        return "vnni"
    return "avx2" if "AVX2" in features else None


#: the paths whose sums are exact for every byte (``vpdpbusd``, ``tdpbusd``: no int16 step)
EXACT_PATHS = ("vnni", "vnni512", "amx")
#: what ``SRCORE_INT8_GEMM`` may force on a VNNI CPU (``vnni256``: the ``ymm`` kernel)
_FORCED = {"vnni256": "vnni", "vnni512": "vnni512", "amx": "amx"}


@functools.lru_cache(maxsize=1)
def _active_path() -> str | None:
    """:func:`simd_path`, on VNNI CPUs with the kernel chosen (:func:`vnni_kernel`)."""
    path = simd_path()
    return vnni_kernel() if path == "vnni" else path


def _amx_permitted() -> bool:
    from . import amx

    return amx.permitted()


def vnni_kernel(timer=None) -> str:
    """On a VNNI CPU: ``"vnni"`` (``vpdpbusd`` on ``ymm``, 4 rows x 16 channels), ``"vnni512"``
    (``zmm``, 8 rows x 32 channels) or, where the CPU has AMX-INT8 and Linux lends the tile state
    (``amx.permitted``), ``"amx"`` (``tdpbusd`` tiles, 32 rows x 32 channels): whichever multiplies
    a layer-sized product fastest here, timed once per process in alternation. Intel's AVX-512 cores
    run 512-bit ``vpdpbusd`` at the full rate, AMD's Zen 4 in two halves, and only some CPUs have AMX.
    ``SRCORE_INT8_GEMM=vnni256``, ``=vnni512`` or ``=amx`` (where permitted) picks one without
    timing. ``timer``: ``fn -> seconds`` for tests."""
    env = _FORCED.get(os.environ.get("SRCORE_INT8_GEMM", "").lower())
    if env is not None and (env != "amx" or _amx_permitted()):
        return env
    rng = np.random.default_rng(0)
    m, k, n = 196, 576, 64
    a = rng.integers(0, 256, (m, k), dtype=np.uint8).reshape(-1)
    p = pack(rng.integers(-127, 128, (n, k), dtype=np.int8), np.zeros(n), align=64)
    c = np.empty(m * p.n_panels * NR, np.int32)
    rows = _row_block(m, p.kp, 16, 1)
    paths = ("vnni512", "vnni", "amx") if _amx_permitted() else ("vnni512", "vnni")
    cands = {path: functools.partial(_kernels(path), a, p.kp, m, p.panels, p.n_panels, c, rows) for path in paths}
    best = dict.fromkeys(cands, math.inf)
    for fn in cands.values():
        fn()                                    # compiled or loaded before it is timed
    for _ in range(5):
        for path, fn in cands.items():
            best[path] = min(best[path], (timer or _seconds)(fn))
    return min(best, key=best.get)


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _simd_supported() -> bool:
    return _active_path() is not None


@functools.lru_cache(maxsize=1)
def _kernel_module():
    """:mod:`._kernels` (imported on first use: it imports numba)."""
    from . import _kernels as module
    return module


@functools.lru_cache(maxsize=4)
def _kernels(path: str = "avx2"):
    from . import _kernels as k
    return {"vnni": k.gemm_u8s8_vnni, "vnni512": k.gemm_u8s8_vnni512, "amx": k.gemm_u8s8_amx}.get(path, k.gemm_u8s8)


def _rows_multiple() -> int:
    """Row blocks are multiples of this: the micro-kernel's rows, a tile's 16 on AMX."""
    return 16 if _active_path() == "amx" else MR


def _block_scale() -> int:
    """:data:`ROW_BLOCK_BYTES` and :data:`C_BLOCK_BYTES` times this: 4 on AMX, whose tiles take 16
    rows at a time (blocks of 128 kB left a 49 x 4608 product in blocks of 16 rows, each streaming
    the whole weight again; the CPUs with AMX have 2 MB of L2 per core)."""
    return 4 if _active_path() == "amx" else 1


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
    #: fbgemm's requantization constants of the calls so far, by their parameters (a layer's are
    #: the same on every call: computing them took a fifth of a small conv's Python time)
    requant: dict = attrs.field(factory=dict, repr=False)

    @property
    def has_zero_points(self) -> bool:
        got = self.requant.get("has_zero_points")
        if got is None:
            got = self.requant["has_zero_points"] = bool(self.zero_points.any())
        return got


def pack(w_int8: np.ndarray, zero_points: np.ndarray, align: int | None = None) -> PackedInt8:
    """Pack a ``(n, K)`` int8 weight (rows = output channels), its depth padded to a multiple of
    ``align`` (4, or 64 for AMX tiles: by default what this machine's kernel needs)."""
    n, k = w_int8.shape
    if align is None:
        align = 64 if _active_path() == "amx" else 4
    kp = -(-k // align) * align
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


def applies(k: int, x_qdtype: str = "quint8", w_qdtype: str = "qint8") -> bool:
    """Whether :func:`gemm` takes a layer of depth ``k`` with these operand dtypes (``quint8``
    activations, ``qint8`` weights) on this machine (the instructions, numba, and faster than SGEMM)."""
    return x_qdtype == "quint8" and w_qdtype == "qint8" and 0 < k <= MAX_K and faster_than_sgemm()


_local = threading.local()


def scratch(name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    """A per-thread reusable buffer (the GEMM's rows and int32 sums are large and die within the
    call: fresh arrays would fault their pages in on every call). Valid until the next request of
    the same name on the thread."""
    bufs = _local.__dict__.setdefault("bufs", {})
    entry = bufs.get(name)           # (buffer, {(shape, dtype): view of it})
    key = (shape, dtype)
    if entry is not None:
        view = entry[1].get(key)
        if view is not None:
            return view
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    if entry is None or entry[0].nbytes < nbytes:
        entry = bufs[name] = (np.empty(max(nbytes, 1), np.uint8), {})
        _local.generation = getattr(_local, "generation", 0) + 1     # views kept by plans are stale
    elif len(entry[1]) > 64:
        entry[1].clear()
    view = entry[1][key] = entry[0][:nbytes].view(dt).reshape(shape)
    return view


def _row_block(m: int, kp: int, mr: int | None = None, scale: int | None = None) -> int:
    """Rows per block, a multiple of ``mr`` (:func:`_rows_multiple`): about :data:`ROW_BLOCK_BYTES` of
    them, or all ``m`` when they are at most two such blocks (a few deep rows, as a linear layer's
    batch: every block streams all the weight panels, from memory when the weight is larger than
    the caches)."""
    mr = mr or _rows_multiple()
    rows = max(mr, (ROW_BLOCK_BYTES * (scale or _block_scale()) // max(kp, 1)) // mr * mr)
    return max(mr, -(-m // mr) * mr) if m <= 2 * rows else rows


def _raw_gemm(a: np.ndarray, m: int, p: PackedInt8, name: str = "c") -> np.ndarray:
    c = scratch(name, (m, p.n_panels * NR), np.int32)
    rows = _row_block(m, p.kp)
    _kernels(_active_path())(a.reshape(-1), p.kp, m, p.panels, p.n_panels, c.reshape(-1), rows)
    return c


def _exact_raw(a: np.ndarray, p: PackedInt8, overwrite: bool = False) -> np.ndarray:
    """``sum_k a[m, k] * w[n, k]`` (no zero points), int32 ``(m, n_panels * 16)``, exact: one pass
    when every byte is at most ``p.lim``; else the bytes above ``lim`` (few, as after a
    percentile-clipped calibration) clamped to it and their excess times the weight added after,
    byte by byte; else (more than 1/32 of the bytes) ``128 * hi + lo`` in two passes.
    ``overwrite``: ``a`` may be clamped in place."""
    from ._kernels import add_excess, clamp_excess

    m = a.shape[0]
    if not a.size or p.lim >= 255 or _active_path() in EXACT_PATHS:     # vpdpbusd has no int16 step
        return _raw_gemm(a, m, p)
    if not overwrite:
        if int(a.max()) <= p.lim:
            return _raw_gemm(a, m, p)
        a = a.copy()
    cap = max(256, a.size // 32)
    at = scratch("excess_at", (cap,), np.int64)
    excess = scratch("excess", (cap,), np.uint8)
    count = clamp_excess(a, p.lim, at, excess)     # one scan
    if count >= 0:
        c = _raw_gemm(a, m, p)
        if count:
            add_excess(c.reshape(-1), c.shape[1], p.panels, p.kp, p.n, at, excess, count)
        return c
    c = _raw_gemm(a & np.uint8(127), m, p)     # many: each byte as 128 * hi + lo
    c += _raw_gemm(a >> np.uint8(7), m, p, "c_hi") << 7
    return c


def gemm(a: np.ndarray, x_zp: int, p: PackedInt8) -> np.ndarray:
    """Exact ``sum_k (a[m, k] - x_zp) * (w[n, k] - zw[n])`` as int32 ``(m, n)``, for ``a`` uint8
    ``(m, kp)`` (C-contiguous, columns beyond ``p.k`` zero)."""
    c = _exact_raw(a, p)[:, :p.n].copy()      # out of the scratch buffer
    if x_zp:
        c -= np.int32(x_zp) * p.colsum
    if p.has_zero_points:
        rs = a.sum(axis=1, dtype=np.int32)[:, None]
        c -= p.zero_points * (rs - np.int32(p.k * x_zp))
    return c


_NO_ROWSUM = np.zeros(0, np.int64)


def gemm_requantize(a: np.ndarray, x_zp: int, p: PackedInt8, x_scale: float, w_scales: np.ndarray, bias,
                    y_scale: float, y_zero_point: int, relu: bool, out: np.ndarray, channels_first: bool,
                    overwrite: bool = False, _plan=None) -> np.ndarray:
    """:func:`gemm` then fbgemm's requantization to ``quint8`` (as ``gemm.requantize``), fused:
    one pass from the raw int32 sums to ``out``, a C-contiguous uint8 array holding
    (rows, channels) or, ``channels_first``, (images, channels, positions) with the rows of ``a``
    ordered (image, position). ``overwrite``: ``a`` is the caller's scratch and may be changed."""
    if not out.size:
        return out
    rowsum = a.sum(axis=1, dtype=np.int64) if p.has_zero_points else _NO_ROWSUM   # before any clamping
    c = _exact_raw(a, p, overwrite)
    return _requantize_sums(c, rowsum, x_zp, p, x_scale, w_scales, bias, y_scale, y_zero_point, relu, out,
                            channels_first, _plan)


def _requant_constants(p: PackedInt8, x_scale, w_scales, bias, y_scale):
    """fbgemm's float32 ``(multiplier, bias / (s_x s_w))`` per channel, kept on ``p`` by parameters."""
    f32 = np.float32
    key = (float(x_scale), float(y_scale), id(w_scales), id(bias))
    got = p.requant.get(key)
    if got is None:
        act_w = f32(x_scale) * np.asarray(w_scales, f32)
        mult = (act_w / f32(y_scale)).astype(f32)
        bias_div = (np.asarray(bias, f32) / act_w).astype(f32) if bias is not None else np.zeros(p.n, f32)
        if len(p.requant) > 16:
            p.requant.clear()
        # the arrays are kept with their constants: their ids stay theirs while the entry lives
        got = p.requant[key] = (mult, bias_div, w_scales, bias)
    return got[0], got[1]


def _requantize_sums(c, rowsum, x_zp, p: PackedInt8, x_scale, w_scales, bias, y_scale, y_zero_point, relu, out,
                     channels_first, _plan=None):
    """fbgemm's requantization of the raw sums ``c`` (int32 rows of ``n_panels * 16``) into ``out``."""
    from ._kernels import requantize_u8

    if _plan is not None:
        mult, bias_div = _plan.mult, _plan.bias_div
    else:
        mult, bias_div = _requant_constants(p, x_scale, w_scales, bias, y_scale)
    info = QDTYPES["quint8"]
    if not out.flags.c_contiguous:
        raise ValueError("gemm_requantize writes into a C-contiguous array")
    n = p.n
    rows = out.size // n
    # rows of channels (the GEMM's order, 8 channels per float32 vector); NCHW by one numpy
    # transposing copy after (3x faster than scattering bytes along the rows)
    flat = scratch("requantized", (rows * n,), np.uint8) if channels_first else out.reshape(-1)
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




def _channels_last(x_u8: np.ndarray) -> np.ndarray:
    """(N, C, *spatial) as a C-contiguous (N, *spatial, C) array: a view where the bytes already lie
    so (a quantized conv's result), else a copy in a scratch buffer."""
    src = x_u8.transpose((0,) + tuple(range(2, x_u8.ndim)) + (1,))
    if src.flags.c_contiguous:
        return src
    x_cl = scratch("x_cl", src.shape, np.uint8)
    np.copyto(x_cl, src)
    return x_cl


def _conv_geometry(x_cl: np.ndarray, kernel, stride, padding, dilation, out_sp):
    """A 1-d convolution as a 2-d one of height 1: (x_cl, kernel, stride, padding, dilation, out_sp)."""
    k, stride, padding, dilation, out_sp = tuple(kernel), tuple(stride), tuple(padding), tuple(dilation), tuple(out_sp)
    if len(k) == 1:
        x_cl, k, out_sp = x_cl[:, None], (1,) + k, (1,) + out_sp
        stride, padding, dilation = (1,) + stride, (0,) + padding, (1,) + dilation
    return x_cl, k, stride, padding, dilation, out_sp


def _rows_of(x_cl: np.ndarray, x_zp: int, p: PackedInt8, k, stride, padding, dilation, out_sp) -> np.ndarray:
    from ._kernels import im2col_u8

    N, C = x_cl.shape[0], x_cl.shape[-1]
    m = N * math.prod(out_sp)
    if all(v == 1 for v in k) and all(v == 1 for v in stride) and not any(padding) and p.kp == C:
        return x_cl.reshape(m, C)
    cols = scratch("cols", (m, p.kp), np.uint8)
    im2col_u8(x_cl, np.uint8(x_zp), k[0], k[1], stride[0], stride[1], padding[0], padding[1], dilation[0],
              dilation[1], out_sp[0], out_sp[1], cols)
    return cols


def conv_rows(x_u8: np.ndarray, x_zp: int, p: PackedInt8, kernel, stride, padding, dilation, out_sp) -> np.ndarray:
    """The rows :func:`gemm` multiplies for a groups-1 1-d or 2-d convolution of ``x_u8`` (N, C,
    *spatial) uint8 by a weight packed from (Cout, C, *kernel) as (Cout, C * taps) with the depth in
    (tap, channel) order: the input laid out channels-last once, its windows gathered (numba, one
    ``memcpy`` per run) as rows of (tap, channel) bytes, positions in the padding at ``x_zp``
    (padding stands for real zeros). A 1x1 stride-1 convolution's rows are its pixels. The rows
    live in a per-thread scratch buffer (valid until the next call)."""
    x_cl, k, stride, padding, dilation, out_sp = _conv_geometry(_channels_last(x_u8), kernel, stride, padding,
                                                                dilation, out_sp)
    return _rows_of(x_cl, x_zp, p, k, stride, padding, dilation, out_sp)


def conv_requantize(x_u8: np.ndarray, x_zp: int, p: PackedInt8, kernel, stride, padding, dilation, x_scale: float,
                    w_scales: np.ndarray, bias, y_scale: float, y_zero_point: int, relu: bool, out: np.ndarray,
                    channels_first: bool) -> np.ndarray:
    """A whole groups-1 quantized convolution on the GEMM: :func:`conv_rows` then
    :func:`gemm_requantize` into ``out`` ((N, *out, Cout) channels-last, or ``channels_first``
    (N, Cout, *out)), with the exactness scan on the input rather than on the gathered rows (which
    hold each input byte once per kernel tap): the input's bytes above ``p.lim`` are clamped in a
    copy, the windows gathered from it, and each clamped byte's excess times the weight added to
    every output position that reads it (:func:`._kernels.add_input_excess`). Where that does not
    apply (padding at a zero point above ``lim``, weight zero points, rows smaller than the input
    as in a strided 1x1 conv, or too many such bytes) the rows are scanned as in :func:`gemm_requantize`.
    The call's fixed work (geometry, requantization constants) is a :class:`ConvPlan`, made once per
    input shape and parameters and kept with ``p``."""
    if not out.size:
        return out
    return conv_plan(x_u8.shape, x_zp, p, kernel, stride, padding, dilation, x_scale, w_scales, bias, y_scale,
                     y_zero_point, relu, out.shape, channels_first).run(x_u8, out)


def conv_plan(x_shape, x_zp: int, p: PackedInt8, kernel, stride, padding, dilation, x_scale: float, w_scales, bias,
              y_scale: float, y_zero_point: int, relu: bool, out_shape, channels_first: bool) -> "ConvPlan":
    """The :class:`ConvPlan` of these arguments, made at the first call and kept on ``p`` (a layer's
    are the same on every call). ``w_scales`` and ``bias`` are kept by identity (the caller's
    constants)."""
    key = ("conv", tuple(x_shape), int(x_zp), float(x_scale), id(w_scales), id(bias), float(y_scale), int(y_zero_point),
           bool(relu), tuple(kernel), tuple(stride), tuple(padding), tuple(dilation), tuple(out_shape),
           bool(channels_first))
    plan = p.requant.get(key)
    if plan is None:
        plan = _make_conv_plan(x_shape, x_zp, p, kernel, stride, padding, dilation, x_scale, w_scales, bias, y_scale,
                               y_zero_point, relu, out_shape, channels_first)
        if len(p.requant) > 16:
            p.requant.clear()
        p.requant[key] = plan
    return plan


@attrs.frozen(eq=False)
class ConvPlan:
    """One groups-1 convolution's fixed work, done once: its 2-d geometry (a conv1d as height 1),
    the GEMM's rows ``m`` and row block, whether the rows are the input's pixels (1x1, stride 1) and
    whether the exactness scan runs on the input (``scan``; else on the rows), and fbgemm's
    requantization constants. :meth:`run` does the per-call work: the scan, the gathering, the GEMM,
    the corrections and the requantization, no argument handling in between."""

    p: PackedInt8
    x_zp: int
    k: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    out_sp: tuple
    m: int
    row_block: int
    pixels_are_rows: bool
    scan: bool
    channels_first: bool
    mult: np.ndarray
    bias_div: np.ndarray
    y_zp: int
    lo: int
    hi: int
    relu: bool
    keep: tuple        # w_scales, bias: their ids are in the plan's key
    #: the whole layer in one compiled call (``_kernels.conv_layer_u8``): its integer arguments
    #: (``_kernels.CONV_GEO``) and ``x_zp * colsum``; None where it does not apply (weight zero
    #: points, or a zero point above ``lim`` read as padding)
    geo: np.ndarray | None = None
    corr: np.ndarray | None = None
    #: :meth:`_scratch`'s buffers per thread
    buffers: dict = attrs.field(factory=dict, repr=False)

    def run(self, x_u8: np.ndarray, out: np.ndarray) -> np.ndarray:
        if self.geo is not None:
            done = self._run_fused(x_u8, out)
            if done is not None:
                return done
        return self._run_steps(x_u8, out)

    def _run_fused(self, x_u8: np.ndarray, out: np.ndarray, other=None, addf=None, addi=None):
        """:meth:`run` in one compiled call; None (nothing written) where the input's bytes above
        ``lim`` are more than the scan holds or ``out`` cannot take it (then the steps one by one)."""
        p = self.p
        xf = _channels_last(x_u8).reshape(-1)
        geo = self.geo
        if self.channels_first:
            tgt = scratch("requantized", (self.m * p.n,), np.uint8)
        elif out.flags.c_contiguous and not np.may_share_memory(out, x_u8):
            tgt = out.reshape(-1)
        else:
            return None
        bufs = self.buffers.get(threading.get_ident())
        if bufs is None or bufs[0] != getattr(_local, "generation", 0):
            bufs = self.buffers[threading.get_ident()] = self._scratch(xf.size)
        _, at, excess, xc, cols, c = bufs
        count = _conv_layer(_active_path())(xf, xc, at, excess, cols, p.panels, c, self.corr, p.zero_points,
                                            self.bias_div, self.mult, geo, tgt,
                                            _NO_EXCESS if other is None else other, _NO_ADDF if addf is None else addf,
                                            _NO_AT if addi is None else addi)
        if count < 0:
            return None
        if self.channels_first:
            imgs, n = out.shape[0], p.n
            np.copyto(out.reshape(imgs, n, -1), tgt.reshape(imgs, -1, n).transpose(0, 2, 1))
        return out

    def _scratch(self, size: int) -> tuple:
        """The per-thread buffers of :meth:`_run_fused` with the scratch generation they belong to
        (kept by the plan per thread: fetching them by name on every call cost as much as a small
        layer's kernel)."""
        p, geo = self.p, self.geo
        if geo[24]:
            cap = max(256, size // 32)
            at, excess = scratch("excess_at", (cap,), np.int64), scratch("excess", (cap,), np.uint8)
            xc = scratch("x_clamped", (size,), np.uint8)
        else:
            at, excess, xc = _NO_AT, _NO_EXCESS, _NO_EXCESS
        rb = int(geo[17])
        # 32 bytes of slack: _gather_rows moves short runs 32 bytes at a time
        cols = _NO_EXCESS if geo[23] else scratch("cols", (rb * p.kp + 32,), np.uint8)
        c = scratch("c", (rb * p.n_panels * NR,), np.int32)
        return (getattr(_local, "generation", 0), at, excess, xc, cols, c)

    def _run_steps(self, x_u8: np.ndarray, out: np.ndarray) -> np.ndarray:
        K = _kernel_module()
        p = self.p
        x_cl = _channels_last(x_u8)
        if len(self.k) != x_cl.ndim - 2:
            x_cl = x_cl[:, None]                                    # conv1d: height 1
        count = 0
        if self.scan:
            xf = x_cl.reshape(-1)
            cap = max(256, xf.size // 32)
            at = scratch("excess_at", (cap,), np.int64)
            excess = scratch("excess", (cap,), np.uint8)
            count = K.find_excess(xf, p.lim, at, excess)
            if count > 0:
                xc = scratch("x_clamped", x_cl.shape, np.uint8)
                K.clamp_copy_u8(xf, p.lim, xc.reshape(-1))
                x_cl = xc
        if count < 0 or not self.scan:
            rows = self._rows(x_cl)
            return gemm_requantize(rows, self.x_zp, p, 0.0, self.keep[0], self.keep[1], 1.0, self.y_zp,
                                   self.relu, out, self.channels_first,
                                   overwrite=not np.may_share_memory(rows, x_u8), _plan=self)
        rows = self._rows(x_cl)
        c = scratch("c", (self.m, p.n_panels * NR), np.int32)
        cf = c.reshape(-1)
        _kernels(_active_path())(rows.reshape(-1), p.kp, self.m, p.panels, p.n_panels, cf, self.row_block)
        if count:
            H, W, C = x_cl.shape[1:]
            k, s, pd, d, o = self.k, self.stride, self.padding, self.dilation, self.out_sp
            K.add_input_excess(cf, c.shape[1], p.panels, p.kp, p.n, at, excess, count, H, W, C, k[0], k[1], s[0], s[1],
                             pd[0], pd[1], d[0], d[1], o[0], o[1])
        n = p.n
        flat = scratch("requantized", (self.m * n,), np.uint8) if self.channels_first else out.reshape(-1)
        K.requantize_u8(cf, c.shape[1], flat, 0, n, 1, 1, self.m, n, p.colsum, p.zero_points, _NO_ROWSUM, self.x_zp,
                      p.k, self.bias_div, self.mult, self.y_zp, self.lo, self.hi)
        if self.channels_first:
            imgs = out.shape[0]
            np.copyto(out.reshape(imgs, n, -1), flat.reshape(imgs, -1, n).transpose(0, 2, 1))
        return out

    def _rows(self, x_cl: np.ndarray) -> np.ndarray:
        if self.pixels_are_rows:
            return x_cl.reshape(self.m, self.p.kp)
        k, s, pd, d, o = self.k, self.stride, self.padding, self.dilation, self.out_sp
        cols = scratch("cols", (self.m, self.p.kp), np.uint8)
        _kernel_module().im2col_u8(x_cl, np.uint8(self.x_zp), k[0], k[1], s[0], s[1], pd[0], pd[1], d[0], d[1], o[0], o[1], cols)
        return cols


def _make_conv_plan(x_shape, x_zp, p: PackedInt8, kernel, stride, padding, dilation, x_scale, w_scales, bias, y_scale,
                    y_zero_point, relu, out_shape, channels_first) -> ConvPlan:
    n_sp = len(x_shape) - 2
    out_sp = tuple(out_shape[2:]) if channels_first else tuple(out_shape[1:1 + n_sp])
    cl_shape = (x_shape[0],) + tuple(x_shape[2:]) + (x_shape[1],)
    k, stride, padding, dilation, out_sp = (tuple(int(v) for v in t) for t in (kernel, stride, padding, dilation,
                                                                                out_sp))
    if len(k) == 1:
        cl_shape, k, out_sp = (cl_shape[0], 1) + cl_shape[1:], (1,) + k, (1,) + out_sp
        stride, padding, dilation = (1,) + stride, (0,) + padding, (1,) + dilation
    C = cl_shape[-1]
    m = cl_shape[0] * math.prod(out_sp)
    size = math.prod(cl_shape)
    scan = not (p.lim >= 255 or p.lim < 128 or _active_path() in EXACT_PATHS or p.has_zero_points or x_zp > p.lim or m * p.kp < size
                or not size)
    mult, bias_div = _requant_constants(p, x_scale, w_scales, bias, y_scale)
    lo = int(y_zero_point) if relu else QDTYPES["quint8"].qmin
    hi = QDTYPES["quint8"].qmax
    pixels = all(v == 1 for v in k) and all(v == 1 for v in stride) and not any(padding) and p.kp == C
    row_block = _row_block(m, p.kp)
    geo = corr = None
    # one compiled call: the scan on the input whatever the geometry (a strided 1x1 conv's input is
    # larger than its rows, but screened 64 bytes at a time); not with weight zero points (their
    # row sums) nor where padding reads a zero point above lim (it would saturate the int16 pair)
    scan_input = not (p.lim >= 255 or _active_path() in EXACT_PATHS)
    if size and not p.has_zero_points and p.lim >= 128 and not (scan_input and x_zp > p.lim and any(padding)):
        # the block's int32 sums stay in L2 with its rows (requantized while there)
        mr = _rows_multiple()
        row_block = min(row_block, max(mr, (C_BLOCK_BYTES * _block_scale() // (p.n_panels * NR * 4)) // mr * mr))
        H, W = cl_shape[1], cl_shape[2]
        geo = np.array([cl_shape[0], H, W, C, k[0], k[1], stride[0], stride[1], padding[0], padding[1], dilation[0],
                        dilation[1], out_sp[0], out_sp[1], p.kp, p.n_panels, p.n, row_block, x_zp, y_zero_point, lo,
                        hi, p.lim, pixels, scan_input], np.int64)
        corr = (np.int64(x_zp) * p.colsum.astype(np.int64)).astype(np.int32)
    return ConvPlan(p, int(x_zp), k, stride, padding, dilation, out_sp, m, row_block, pixels,
                    scan, bool(channels_first), mult, bias_div, int(y_zero_point), lo, hi,
                    bool(relu), (w_scales, bias), geo, corr)


_NO_AT = np.zeros(0, np.int64)
_NO_EXCESS = np.zeros(0, np.uint8)
_NO_ADDF = np.zeros(0, np.float64)

#: ``_kernels._add_row``'s modes: which elements take torch's scalar path of ``quantized::add``
ADD_TAIL_NCHW, ADD_TAIL_MEMORY, ADD_ALL_SCALAR = 1, 2, 3


def conv_add_requantize(x_u8: np.ndarray, x_zp: int, p: PackedInt8, kernel, stride, padding, dilation,
                        x_scale: float, w_scales, bias, conv_scale: float, conv_zero_point: int, conv_relu: bool,
                        other: np.ndarray, other_scale: float, other_zero_point: int, scale: float,
                        zero_point: int, relu: bool, mode: int, kvec: int, out: np.ndarray,
                        channels_first: bool):
    """A groups-1 2-d :func:`conv_requantize` (to ``conv_scale``, ``conv_zero_point``) and then, in
    its epilogue, ``quantized::add(_relu)`` of that byte and ``other`` (uint8, the conv's output
    shape (N, C, H, W), any memory layout) to ``scale``, ``zero_point``: torch's vectorized path
    except on the elements ``mode`` leaves to its scalar path (:data:`ADD_TAIL_NCHW`: the NCHW
    positions from ``kvec`` on, :data:`ADD_TAIL_MEMORY`: the channels-last ones,
    :data:`ADD_ALL_SCALAR`). Returns ``out``, or None (nothing written) where the one-call
    convolution does not apply (the caller then runs the two ops)."""
    if not out.size or not x_u8.size:
        return None
    plan = conv_plan(x_u8.shape, x_zp, p, kernel, stride, padding, dilation, x_scale, w_scales, bias, conv_scale,
                     conv_zero_point, conv_relu, out.shape, channels_first)
    if plan.geo is None or len(plan.k) != 2 or x_u8.ndim != 4 or np.may_share_memory(out, other):
        return None
    if other.dtype != np.uint8:
        return None
    N, C, H, W = other.shape
    sn, sc, sh, sw = other.strides
    if min(other.strides) < 0 or not (H == 1 or W == 1 or sh == W * sw):
        other = np.ascontiguousarray(other)
        sn, sc, sh, sw = other.strides
    st = (sn, sw if W > 1 else sh, sc)          # image, position (oy * W + ox), channel
    # the bytes ``other`` spans, flat, from its first element on
    span = 1 + sum(s * (d - 1) for s, d in zip(other.strides, other.shape))
    flat = np.lib.stride_tricks.as_strided(other, (span,), (1,), writeable=False)
    info = QDTYPES["quint8"]
    key = ("add", float(conv_scale), int(conv_zero_point), float(other_scale), int(other_zero_point), float(scale),
           int(zero_point), bool(relu), int(mode), int(kvec), st)
    got = plan.buffers.get(key)
    if got is None:
        f32 = np.float32
        fa, fb = f32(conv_scale), f32(other_scale)
        addf = np.array([np.float64(fa), np.float64(f32(fa * f32(-conv_zero_point))), np.float64(fb),
                         np.float64(f32(fb * f32(-other_zero_point))), np.float64(f32(1.0) / f32(scale)), zero_point,
                         zero_point if relu else info.qmin, info.qmax, np.float64(fa), conv_zero_point,
                         np.float64(fb), other_zero_point, info.qmin], np.float64)
        addi = np.array([mode, kvec, st[0], st[1], st[2], relu], np.int64)
        got = plan.buffers[key] = (addf, addi)
    return plan._run_fused(x_u8, out, flat, *got)


@functools.lru_cache(maxsize=4)
def _conv_layer(path: str):
    from . import _kernels as k
    return {"vnni": k.conv_layer_u8_vnni, "vnni512": k.conv_layer_u8_vnni512,
            "amx": k.conv_layer_u8_amx}.get(path, k.conv_layer_u8)


def linear_rows(x_u8: np.ndarray, p: PackedInt8) -> np.ndarray:
    """The activations (..., K) as C-contiguous uint8 rows of ``p.kp`` bytes (zero-padded depth)."""
    a = x_u8.reshape(-1, p.k)
    if p.kp != p.k or not a.flags.c_contiguous:
        pad = np.zeros((a.shape[0], p.kp), np.uint8)
        pad[:, :p.k] = a
        a = pad
    return a
