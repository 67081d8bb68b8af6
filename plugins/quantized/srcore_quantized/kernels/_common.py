"""What every quantized kernel shares: output buffers, parameters, and torch's rounding.

Kernels follow srcore's calling convention (docs/architecture.md): out variants write the stored
integers into ``out`` (a plain array from the planned arena, or ``None``: allocate) and return them
wrapped as a :class:`QuantizedArray` with the output's parameters.

Rounding is torch's x86 (fbgemm) backend's, bit for bit: float32 arithmetic, ``nearbyint`` (half to
even). torch's elementwise quantized kernels run two code paths over one tensor: a vectorized one
over whole blocks of ``2 * lanes`` elements (:func:`vec_block`) and a
scalar one over the rest, which round differently
(e.g. ``dequantize`` as ``fma(q, scale, -scale * zp)`` vs ``(q - zp) * scale``); :func:`split_tail`
gives the boundary so that kernels reproduce both.
"""
from __future__ import annotations

import functools

import numpy as np

from srcore.plugin import QDTYPES, KernelError, QParams, QuantizedArray, vector_bytes

F32 = np.float32

#: bytes per element of each quantized dtype's storage (lanes = vector bytes / this)
_ELEMENT_BYTES = {"quint8": 1, "qint8": 1, "qint32": 4}


def vec_block(qdtype: str) -> int:
    """Elements per vectorized step of torch's quantized TensorIterator loops: 2 x the lanes of
    ``Vectorized<qdtype>``; these kernels have no AVX512 build (``vector_bytes(avx512_kernel=False)``:
    32 bytes on every x86 CPU), so 64 for 8-bit dtypes, 16 for qint32."""
    return 2 * vector_bytes(avx512_kernel=False) // _ELEMENT_BYTES[qdtype]


def qinfo(qdtype: str):
    return QDTYPES[qdtype]


@functools.lru_cache(maxsize=None)
def storage(qdtype: str) -> np.dtype:
    return np.dtype(QDTYPES[qdtype].storage)


def require_quantized(x, op: str, what: str = "input") -> QuantizedArray:
    if not isinstance(x, QuantizedArray):
        raise KernelError(f"{op}: the {what} is not a quantized tensor (a plain {getattr(x, 'dtype', type(x))} "
                          f"array has no scale or zero point)")
    return x


def require_per_tensor(x: QuantizedArray, op: str, what: str = "input") -> QuantizedArray:
    require_quantized(x, op, what)
    if x.qparams.axis is not None:
        raise KernelError(f"{op}: the {what} is quantized per channel (axis {x.qparams.axis}); this op takes "
                          f"per-tensor quantized tensors")
    return x


def ints(x: np.ndarray) -> np.ndarray:
    """The stored integers of a quantized array, as a plain array view."""
    return x.view(np.ndarray)


def buffer(out, shape, qdtype: str) -> np.ndarray:
    """The plain array to write a quantized result into: ``out`` (planned) or a new one."""
    if out is None:
        return np.empty(shape, storage(qdtype))
    out = out.view(np.ndarray) if isinstance(out, QuantizedArray) else out
    if out.shape != tuple(shape) or out.dtype != storage(qdtype):
        raise KernelError(f"output buffer {out.dtype}{list(out.shape)} does not fit a {qdtype}{list(shape)} result")
    return out


def channels_last(x: np.ndarray):
    """The C-contiguous (N, H, W, C) array whose memory a 4-D (N, C, H, W) array ``x`` is a view of
    (the layout the int8 convolutions return), or None."""
    if x.ndim != 4:
        return None
    t = x.transpose(0, 2, 3, 1)      # not np.moveaxis: its argument checks cost more than this
    return t if t.flags.c_contiguous else None


def channels_last_buffer(out, shape, qdtype: str):
    """``(result, memory)``: an (N, C, H, W)-shaped view ``result`` of a buffer (``out`` or new)
    whose bytes hold it channels-last, ``memory`` the same bytes as a C-contiguous (N, H, W, C)
    array; None where ``out`` is not C-contiguous. Quantized convolutions, adds and pools keep
    chains of 4-D tensors channels-last this way (no transposes between them); every kernel reads
    its inputs by shape and strides, so the layout is invisible to them."""
    res = buffer(out, shape, qdtype)
    if not res.flags.c_contiguous:
        return None
    mem = res.reshape(-1).reshape((shape[0],) + tuple(shape[2:]) + (shape[1],))
    return mem.transpose((0, mem.ndim - 1) + tuple(range(1, mem.ndim - 1))), mem


def wrap(arr: np.ndarray, qdtype: str, qparams: QParams) -> QuantizedArray:
    return QuantizedArray.wrap(arr, qdtype, qparams)


def output_qparams(qdtype: str, scale, zero_point, op: str) -> QParams:
    """Checked output parameters from a node's arguments (constants are checked at load already);
    the same arguments give the same (cached) object, so a node's call does not re-validate."""
    from srcore.plugin import QuantizationError

    try:
        try:
            return _checked_qparams(qdtype, scale, zero_point)
        except TypeError:   # unhashable arguments (a list, an array): checked each time
            return _checked_qparams.__wrapped__(qdtype, scale, zero_point)
    except QuantizationError as exc:
        raise KernelError(f"{op}: {exc}") from None


@functools.lru_cache(maxsize=4096)
def _checked_qparams(qdtype: str, scale, zero_point) -> QParams:
    from srcore.plugin import QuantizationError

    q = QParams(scale, zero_point)
    info = QDTYPES[qdtype]
    if not info.qmin <= q.zero_point <= info.qmax:
        raise QuantizationError(f"zero point {q.zero_point} is outside the range of {qdtype} "
                                f"[{info.qmin}, {info.qmax}]")
    return q


def split_tail(n: int, qdtype: str) -> int:
    """How many leading elements torch's vectorized loop handles (the rest go through its scalar path)."""
    block = vec_block(qdtype)
    return (n // block) * block


def fma_f32(a, b, c) -> np.ndarray:
    """``fmaf(a, b, c)`` over float32 arrays: ``a * b + c`` rounded to float32 once, as the FMA a compiler
    contracts torch's ``a * b + c`` into (its AVX2 / AVX-512 kernels are built with FMA and GCC's default
    contraction). The product is exact in float64; the sum's float64 rounding error (TwoSum) makes it
    round to odd, so rounding that to float32 is the single correct rounding."""
    p = np.asarray(a, F32).astype(np.float64) * np.asarray(b, F32).astype(np.float64)
    c = np.asarray(c, F32).astype(np.float64)
    s = p + c
    v = s - p
    err = (p - (s - v)) + (c - v)          # p + c == s + err exactly
    even = (s.view(np.int64) & 1) == 0
    s = np.where((err != 0) & even, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(F32)


# -- torch's dequantize / quantize, both code paths ---------------------------------------------------
def dequant_vec(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Vectorized path: ``fma(float(q), scale, scale * -zp)`` in float32 (one rounding: done in float64)."""
    s = F32(scale)
    premul = F32(s * F32(-zero_point))
    return (q.astype(np.float64) * np.float64(s) + np.float64(premul)).astype(F32)


def dequant_scalar(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Scalar path: ``float(scale) * (q - zp)``."""
    return (q.astype(np.int64) - zero_point).astype(F32) * F32(scale)


def quant_vec(x: np.ndarray, scale: float, zero_point: int, qdtype: str, out: np.ndarray | None = None) -> np.ndarray:
    """Vectorized path: ``nearbyint(x * (1 / scale)) + zp``, clamped (NaN to the minimum, as
    ``cvtps2dq``'s INT_MIN saturates)."""
    info = QDTYPES[qdtype]
    inv = F32(1.0) / F32(scale)
    r = np.rint(x.astype(F32, copy=False) * inv).astype(np.float64)
    r += zero_point
    return _clamp_into(r, info, out, nan_to_max=False)


def quant_scalar(x: np.ndarray, scale: float, zero_point: int, qdtype: str, out: np.ndarray | None = None) -> np.ndarray:
    """Scalar path (``at::native::quantize_val``): ``nearbyint(zp + x * (1 / scale))`` in float32
    (the sum rounded to float32 before a tie is rounded to even), clamped; NaN is stored as the dtype's
    minimum (torch casts it to int64 first, which gives INT64_MIN on x86)."""
    info = QDTYPES[qdtype]
    inv = F32(1.0) / F32(scale)
    r = np.rint(F32(zero_point) + x.astype(F32, copy=False) * inv).astype(np.float64)
    return _clamp_into(r, info, out, nan_to_max=False)


def quant_tensor(x: np.ndarray, scale: float, zero_point: int, qdtype: str, out: np.ndarray | None = None) -> np.ndarray:
    """``quantize_per_tensor`` (fbgemm's ``Quantize``): 8-bit dtypes as ``nearbyint(fma(x, 1 / scale, zp))``
    in float32 (one rounding of the exact ``x * inv + zp``; done in float64, where the product of two
    float32 values is exact), NaN stored as the dtype's maximum (as fbgemm's vector and scalar loops both
    store it); qint32 as ``quantize_val`` (:func:`quant_scalar`)."""
    if qdtype == "qint32":
        return quant_scalar(x, scale, zero_point, qdtype, out)
    info = QDTYPES[qdtype]
    inv = np.float64(F32(1.0) / F32(scale))
    r = x.astype(np.float64) * inv
    r += zero_point
    r = np.rint(r.astype(F32)).astype(np.float64)
    return _clamp_into(r, info, out, nan_to_max=True)


def _clamp_into(r: np.ndarray, info, out, nan_to_max: bool) -> np.ndarray:
    # fmin/fmax take the number where the other operand is NaN: the first bound applied is where NaN lands
    if nan_to_max:
        np.fmax(np.fmin(r, info.qmax, out=r), info.qmin, out=r)
    else:
        np.fmin(np.fmax(r, info.qmin, out=r), info.qmax, out=r)
    if out is None:
        return r.astype(info.storage)
    out[...] = r
    return out


def elementwise(fn_vec, fn_scalar, n: int, qdtype: str, *arrays):
    """Apply torch's two code paths over flat arrays: ``fn_vec`` on the vectorized blocks, ``fn_scalar``
    on the tail; returns float64/float32 results concatenated (same as fn's)."""
    k = split_tail(n, qdtype)
    if k == n:
        return fn_vec(*arrays)
    if k == 0:
        return fn_scalar(*arrays)
    head = fn_vec(*(a[:k] for a in arrays))
    tail = fn_scalar(*(a[k:] for a in arrays))
    return np.concatenate([head, tail])
