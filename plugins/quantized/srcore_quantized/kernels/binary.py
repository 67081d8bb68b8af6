"""quantized:: add, mul (tensor and scalar, +relu) and cat, as torch's x86 kernels compute them."""
from __future__ import annotations

import functools

import numpy as np

from srcore.plugin import QDTYPES, KernelError, QuantizedArray, add_scalar_qparams, int8_gemm, mul_scalar_qparams

from ._common import (F32, buffer, channels_last, channels_last_buffer, dequant_scalar, dequant_vec, ints,
                      output_qparams, quant_scalar, quant_tensor, quant_vec,
                      require_per_tensor, split_tail, wrap)


def _pair(qa, qb, op: str):
    """Both operands' stored integers broadcast against each other and flattened, the result's
    shape, and the length of torch's inner loop (the whole tensor unless one operand broadcasts)."""
    require_per_tensor(qa, op, "first input")
    require_per_tensor(qb, op, "second input")
    if qa.qdtype != qb.qdtype:
        raise KernelError(f"{op}: operands must have the same dtype, got {qa.qdtype} and {qb.qdtype}")
    a, b = ints(qa), ints(qb)
    if a.shape == b.shape:
        return a.reshape(-1), b.reshape(-1), a.shape, a.size
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise KernelError(f"{op}: shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    row = _inner_loop(shape, a.shape, b.shape)
    return (np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1),
            np.ascontiguousarray(np.broadcast_to(b, shape)).reshape(-1), shape, row)


def _inner_loop(shape: tuple, *operands: tuple) -> int:
    """The length of TensorIterator's innermost (coalesced) loop over a C-order result of ``shape``:
    the trailing dims over which no operand switches between broadcast and not."""
    pads = [(1,) * (len(shape) - len(s)) + tuple(s) for s in operands]
    row, kinds = 1, None
    for d in range(len(shape) - 1, -1, -1):
        if shape[d] == 1:
            continue
        k = tuple(p[d] == 1 for p in pads)
        if kinds is not None and k != kinds:
            break
        kinds, row = k, row * shape[d]
    return row


def _vector_part(n: int, row: int, qdtype: str):
    """Which flat elements torch's vectorized loop handles, per inner loop of ``row`` elements:
    a slice when there is one loop, else a boolean mask."""
    if row >= n:
        return slice(0, split_tail(n, qdtype))
    return (np.arange(n) % row) < split_tail(row, qdtype)


def _add_channels_last(qa, qb, q, relu: bool, out, op: str, memory_tail: bool = False):
    """:func:`_add` on two channels-last inputs of the same shape (two quantized convs' outputs),
    in memory order into a channels-last result: elementwise, so only which elements take torch's
    scalar path depends on the order, and those (the last ``numel % block`` in NCHW order, or in
    memory order with ``memory_tail``: torch's on channels-last inputs) are redone after. None where
    it does not apply."""
    if not (isinstance(qa, np.ndarray) and isinstance(qb, np.ndarray)) or qa.shape != qb.shape:
        return None
    ma, mb = channels_last(ints(qa)), channels_last(ints(qb))
    if ma is None or mb is None or qa.qdtype not in ("quint8", "qint8") or not int8_gemm.numba_enabled():
        return None
    cl = channels_last_buffer(out, qa.shape, qa.qdtype)
    if cl is None:
        return None
    from ._int8_kernels import add_vec_u8

    res, mem = cl
    qdtype = qa.qdtype
    (sa, za), (sb, zb) = (qa.qparams.scale, qa.qparams.zero_point), (qb.qparams.scale, qb.qparams.zero_point)
    n = qa.size
    k = split_tail(n, qdtype)
    tail = None
    if k < n:   # torch's scalar path on the last elements, in memory or NCHW order (read before ``out`` is written)
        idx = _tail_index(mem.shape if memory_tail else qa.shape, k, n)
        ta, tb = (ma[idx], mb[idx]) if memory_tail else (ints(qa)[idx], ints(qb)[idx])
        c = dequant_scalar(ta, sa, za) + dequant_scalar(tb, sb, zb)
        if relu:
            np.maximum(c, F32(0), out=c)
        tail = quant_scalar(c, q.scale, q.zero_point, qdtype)
    add_vec_u8(ma.reshape(-1), mb.reshape(-1), *_add_constants(sa, za, sb, zb, q.scale, q.zero_point, relu, qdtype),
               mem.reshape(-1))
    if tail is not None:
        (mem if memory_tail else res)[idx] = tail
    return wrap(res, qdtype, q)


@functools.lru_cache(maxsize=64)
def _tail_index(shape: tuple, k: int, n: int) -> tuple:
    """The multi-indices of flat positions ``k .. n - 1`` of an array of ``shape`` (C order), kept:
    a layer's add has the same shape on every call."""
    idx = np.unravel_index(np.arange(k, n), shape)
    for a in idx:
        a.flags.writeable = False
    return idx


@functools.lru_cache(maxsize=512)
def _add_constants(sa, za, sb, zb, scale, zero_point, relu: bool, qdtype: str) -> tuple:
    """``add_vec_u8``'s float arguments (torch's vectorized path: ``fma(q, s, s * -zp)`` per input,
    ``1 / scale``; the clamp bounds), computed once per parameters."""
    info = QDTYPES[qdtype]
    fa, fb = F32(sa), F32(sb)
    return (np.float64(fa), np.float64(F32(fa * F32(-za))), np.float64(fb), np.float64(F32(fb * F32(-zb))),
            F32(1.0) / F32(scale), np.float64(zero_point), np.float64(zero_point if relu else info.qmin),
            np.float64(info.qmax))


def _add(qa, qb, scale, zero_point, relu: bool, out, op: str):
    if isinstance(qa, np.ndarray) and qa.ndim == 4:
        require_per_tensor(qa, op, "first input")
        require_per_tensor(qb, op, "second input")
        if qa.qdtype == getattr(qb, "qdtype", None):
            done = _add_channels_last(qa, qb, output_qparams(qa.qdtype, scale, zero_point, op), relu, out, op)
            if done is not None:
                return done
    a, b, shape, row = _pair(qa, qb, op)
    qdtype = qa.qdtype
    q = output_qparams(qdtype, scale, zero_point, op)
    (sa, za), (sb, zb) = (qa.qparams.scale, qa.qparams.zero_point), (qb.qparams.scale, qb.qparams.zero_point)
    res = buffer(out, shape, qdtype)
    flat = res.reshape(-1)
    if row < a.size:  # a broadcast operand: torch's vectorized path per inner loop, the scalar path on each tail
        vec = _vector_part(a.size, row, qdtype)
        for part, deq, qnt in ((vec, dequant_vec, quant_vec), (~vec, dequant_scalar, quant_scalar)):
            c = deq(a[part], sa, za) + deq(b[part], sb, zb)
            if relu:
                np.maximum(c, F32(0), out=c)
            flat[part] = qnt(c, q.scale, q.zero_point, qdtype)
        return wrap(res, qdtype, q)
    k = split_tail(a.size, qdtype)
    if k and qdtype in ("quint8", "qint8") and int8_gemm.numba_enabled():   # the same in one numba pass
        from ._int8_kernels import add_vec_u8

        add_vec_u8(a[:k], b[:k], *_add_constants(sa, za, sb, zb, q.scale, q.zero_point, relu, qdtype), flat[:k])
    elif k:  # vectorized path: fma dequantize, round then add the zero point
        c = dequant_vec(a[:k], sa, za) + dequant_vec(b[:k], sb, zb)
        if relu:
            np.maximum(c, F32(0), out=c)
        quant_vec(c, q.scale, q.zero_point, qdtype, out=flat[:k])
    if k < a.size:  # scalar path: (q - zp) * scale, zero point added before rounding
        c = dequant_scalar(a[k:], sa, za) + dequant_scalar(b[k:], sb, zb)
        if relu:
            np.maximum(c, F32(0), out=c)
        quant_scalar(c, q.scale, q.zero_point, qdtype, out=flat[k:])
    return wrap(res, qdtype, q)


def add_out(qa, qb, scale, zero_point, *, out=None):
    """``quantize(dequantize(qa) + dequantize(qb))`` with torch's two rounding paths."""
    return _add(qa, qb, scale, zero_point, False, out, "quantized::add")


def add_relu_out(qa, qb, scale, zero_point, *, out=None):
    return _add(qa, qb, scale, zero_point, True, out, "quantized::add_relu")


def _layouts_differ(qa, qb) -> bool:
    """Whether NCHW and channels-last order differ for these operands (torch's layout-specific paths
    apply): 4-D, the same shape, more than one channel and more than one pixel."""
    return (isinstance(qa, np.ndarray) and isinstance(qb, np.ndarray) and qa.ndim == 4
            and qa.shape == qb.shape and qa.shape[1] > 1 and qa.shape[2] * qa.shape[3] > 1)


def _add_in_channels_last(qa, qb, scale, zero_point, relu: bool, out, op: str):
    """torch's add of two channels-last tensors: its vectorized loop runs in memory (NHWC) order, so
    the scalar tail is the last ``numel % block`` elements of that order."""
    if not _layouts_differ(qa, qb):
        return _add(qa, qb, scale, zero_point, relu, out, op)
    require_per_tensor(qa, op, "first input")
    require_per_tensor(qb, op, "second input")
    if qa.qdtype != getattr(qb, "qdtype", None):
        raise KernelError(f"{op}: operands must have the same dtype, got {qa.qdtype} and {getattr(qb, 'qdtype', None)}")
    q = output_qparams(qa.qdtype, scale, zero_point, op)
    done = _add_channels_last(qa, qb, q, relu, out, op, memory_tail=True)
    if done is not None:
        return done
    nhwc = [wrap(np.ascontiguousarray(ints(t).transpose(0, 2, 3, 1)).reshape(-1), t.qdtype, t.qparams) for t in (qa, qb)]
    flat = ints(_add(*nhwc, scale, zero_point, relu, None, op))
    res = buffer(out, qa.shape, qa.qdtype)
    res[...] = flat.reshape(res.shape[0], res.shape[2], res.shape[3], res.shape[1]).transpose(0, 3, 1, 2)
    return wrap(res, qa.qdtype, q)


def _add_in_mixed_layout(qa, qb, scale, zero_point, relu: bool, out, op: str):
    """torch's add of a channels-last and an NCHW tensor: no common contiguous order, so its loop
    takes the scalar path (``(q - zp) * scale``, zero point added before rounding) on every element."""
    if not _layouts_differ(qa, qb):
        return _add(qa, qb, scale, zero_point, relu, out, op)
    a, b, _, _ = _pair(qa, qb, op)
    qdtype = qa.qdtype
    q = output_qparams(qdtype, scale, zero_point, op)
    c = dequant_scalar(a, qa.qparams.scale, qa.qparams.zero_point) + dequant_scalar(b, qb.qparams.scale, qb.qparams.zero_point)
    if relu:
        np.maximum(c, F32(0), out=c)
    res = buffer(out, qa.shape, qdtype)
    quant_scalar(c, q.scale, q.zero_point, qdtype, out=res.reshape(-1))
    return wrap(res, qdtype, q)


def add_channels_last_out(qa, qb, scale, zero_point, *, out=None):
    """``quantized::add`` as torch computes it when it holds both inputs channels-last (conv outputs)."""
    return _add_in_channels_last(qa, qb, scale, zero_point, False, out, "quantized::add_channels_last")


def add_relu_channels_last_out(qa, qb, scale, zero_point, *, out=None):
    return _add_in_channels_last(qa, qb, scale, zero_point, True, out, "quantized::add_relu_channels_last")


def add_mixed_layout_out(qa, qb, scale, zero_point, *, out=None):
    """``quantized::add`` as torch computes it when it holds one input channels-last, the other NCHW."""
    return _add_in_mixed_layout(qa, qb, scale, zero_point, False, out, "quantized::add_mixed_layout")


def add_relu_mixed_layout_out(qa, qb, scale, zero_point, *, out=None):
    return _add_in_mixed_layout(qa, qb, scale, zero_point, True, out, "quantized::add_relu_mixed_layout")


def requantize_vec(c: np.ndarray, multiplier, zero_point: int) -> np.ndarray:
    """Vectorized ``requantize_from_int``: ``nearbyint(float(c) * multiplier) + zp`` in float32."""
    return np.rint(c.astype(F32) * F32(multiplier)).astype(np.float64) + zero_point


def requantize_scalar(c: np.ndarray, multiplier, zero_point: int) -> np.ndarray:
    """Scalar ``requantize_from_int``: ``zp + lrintf(float(c * (double)multiplier))``."""
    return np.rint((c.astype(np.float64) * np.float64(F32(multiplier))).astype(F32)).astype(np.float64) + zero_point


def _requantize_into(c: np.ndarray, multiplier, zero_point: int, qdtype: str, relu: bool, flat: np.ndarray,
                     row: int | None = None) -> None:
    info = QDTYPES[qdtype]
    vec = _vector_part(c.size, c.size if row is None else row, qdtype)
    r = np.empty(c.size, np.float64)
    r[vec] = requantize_vec(c[vec], multiplier, zero_point)
    scalar = ~vec if isinstance(vec, np.ndarray) else slice(vec.stop, None)
    r[scalar] = requantize_scalar(c[scalar], multiplier, zero_point)
    np.clip(r, zero_point if relu else info.qmin, info.qmax, out=r)
    flat[...] = r


def _mul(qa, qb, scale, zero_point, relu: bool, out, op: str):
    a, b, shape, row = _pair(qa, qb, op)
    qdtype = qa.qdtype
    q = output_qparams(qdtype, scale, zero_point, op)
    multiplier = F32(qa.qparams.scale) * F32(qb.qparams.scale) * (F32(1.0) / F32(q.scale))
    c = (a.astype(np.int64) - qa.qparams.zero_point) * (b.astype(np.int64) - qb.qparams.zero_point)
    res = buffer(out, shape, qdtype)
    _requantize_into(c, multiplier, q.zero_point, qdtype, relu, res.reshape(-1), row)
    return wrap(res, qdtype, q)


def mul_out(qa, qb, scale, zero_point, *, out=None):
    """``requantize((qa - za) * (qb - zb), sa * sb / scale)``: integer products, one rounding."""
    return _mul(qa, qb, scale, zero_point, False, out, "quantized::mul")


def mul_relu_out(qa, qb, scale, zero_point, *, out=None):
    return _mul(qa, qb, scale, zero_point, True, out, "quantized::mul_relu")


def _scalar(b) -> float:
    return float(np.asarray(b).reshape(-1)[0]) if isinstance(b, np.ndarray) else float(b)


def _add_scalar(qa, b, relu: bool, out, op: str):
    require_per_tensor(qa, op)
    qdtype = qa.qdtype
    c = _scalar(b)
    q = add_scalar_qparams(qdtype, qa.qparams, c)
    x = ints(qa).reshape(-1)
    res = buffer(out, qa.shape, qdtype)
    flat = res.reshape(-1)
    s, z = qa.qparams.scale, qa.qparams.zero_point
    c_q = int(np.rint(c / s))
    if q.scale == s and q.zero_point == z - c_q:  # the zero point moved: the stored values stay
        np.maximum(x, q.zero_point, out=flat) if relu else np.copyto(flat, x)
    else:  # past the range's end: requantized to the grown scale
        multiplier = F32(s) * (F32(1.0) / F32(q.scale))
        _requantize_into(x.astype(np.int64) - z + c_q, multiplier, q.zero_point, qdtype, relu, flat)
    return wrap(res, qdtype, q)


def _mul_scalar(qa, b, relu: bool, out, op: str):
    require_per_tensor(qa, op)
    qdtype, info = qa.qdtype, QDTYPES[qa.qdtype]
    c = _scalar(b)
    q = mul_scalar_qparams(qdtype, qa.qparams, c)
    x = ints(qa)
    res = buffer(out, qa.shape, qdtype)
    if c > 0:
        np.maximum(x, qa.qparams.zero_point, out=res) if relu else np.copyto(res, x)
    elif c == 0:
        res[...] = 0
    else:  # mirrored: q' = qmax - (q - qmin)
        mirrored = (info.qmax + info.qmin) - x.astype(np.int64)
        if relu:
            np.maximum(mirrored, q.zero_point, out=mirrored)
        res[...] = mirrored
    return wrap(res, qdtype, q)


def add_scalar_out(qa, b, *, out=None):
    """``qa + b`` by torch's rule: the zero point moves by ``round(b / scale)``; past the range's end
    the scale grows and the values are requantized."""
    return _add_scalar(qa, b, False, out, "quantized::add_scalar")


def add_scalar_relu_out(qa, b, *, out=None):
    return _add_scalar(qa, b, True, out, "quantized::add_scalar_relu")


def mul_scalar_out(qa, b, *, out=None):
    """``qa * b`` by torch's rule: the scale times ``|b|`` (b < 0 mirrors the values, b = 0 zeroes them)."""
    return _mul_scalar(qa, b, False, out, "quantized::mul_scalar")


def mul_scalar_relu_out(qa, b, *, out=None):
    return _mul_scalar(qa, b, True, out, "quantized::mul_scalar_relu")


# -- cat ----------------------------------------------------------------------------------------------
def _cat(qx, dim, scale, zero_point, relu: bool, out, op: str):
    if not qx:
        raise KernelError(f"{op}: expects a non-empty list of tensors")
    for i, t in enumerate(qx):
        require_per_tensor(t, op, f"input {i}")
    qdtype = qx[0].qdtype
    if any(t.qdtype != qdtype for t in qx):
        raise KernelError(f"{op}: all inputs must have the same dtype, got {', '.join(t.qdtype for t in qx)}")
    if scale is None:
        q = qx[0].qparams
    else:
        q = output_qparams(qdtype, scale, zero_point, op)
    shape = np.concatenate([np.empty(t.shape, np.bool_) for t in qx], axis=dim).shape
    res = buffer(out, shape, qdtype)
    if all(t.qparams == q for t in qx) and not relu:
        np.concatenate([ints(t) for t in qx], axis=dim, out=res)
    else:  # torch dequantizes every input, concatenates, and quantizes the result
        real = np.concatenate([dequant_scalar(ints(t), t.qparams.scale, t.qparams.zero_point) for t in qx], axis=dim)
        quant_tensor(real, q.scale, q.zero_point, qdtype, out=res)
        if relu:
            np.maximum(res, q.zero_point, out=res)
    return wrap(res, qdtype, q)


def cat_out(qx, dim, scale=None, zero_point=None, *, out=None):
    """The inputs requantized to (scale, zero_point) (the first input's when None), concatenated."""
    return _cat(list(qx), dim, scale, zero_point, False, out, "quantized::cat")


def cat_relu_out(qx, dim, scale=None, zero_point=None, *, out=None):
    return _cat(list(qx), dim, scale, zero_point, True, out, "quantized::cat_relu")


def aten_cat_out(tensors, dim=0, *, out=None):
    """``aten::cat`` of quantized tensors: torch requantizes to the first input's parameters."""
    return _cat(list(tensors), dim, None, None, False, out, "aten::cat")



def prelu_out(qx, weight, output_scale, output_zero_point, *, out=None):
    """``quantized::prelu`` (what ``nn.quantized.PReLU`` runs), torch's integer form: with ``one`` the
    weight's quantized 1.0, ``(max(q, zx) - zx) * (one - zw) + (min(q, zx) - zx) * (w - zw)``,
    requantized with ``sx * sw / sy``; the weight (one value per channel, or one) broadcast along dim 1."""
    op = "quantized::prelu"
    require_per_tensor(qx, op, "input")
    require_per_tensor(weight, op, "weight")
    if qx.ndim == 0:
        raise KernelError(f"{op}: a zero-dim input is not allowed")
    w = ints(weight)
    if weight.ndim != qx.ndim:
        dims = [1] * qx.ndim
        if qx.ndim > 1:
            dims[1] = w.size
        elif w.size != 1:
            dims[0] = w.size
        w = w.reshape(dims)
    wq = wrap(w, weight.qdtype, weight.qparams)
    a, b, shape, row = _pair(qx, wq, op)
    q = output_qparams(qx.qdtype, output_scale, output_zero_point, op)
    zx, zw = qx.qparams.zero_point, weight.qparams.zero_point
    one = int(quant_scalar(np.ones(1, F32), weight.qparams.scale, zw, weight.qdtype)[0])
    a64 = a.astype(np.int64)
    c = (np.maximum(a64, zx) - zx) * (one - zw) + (np.minimum(a64, zx) - zx) * (b.astype(np.int64) - zw)
    multiplier = F32(qx.qparams.scale) * F32(weight.qparams.scale) * (F32(1.0) / F32(q.scale))
    res = buffer(out, shape, qx.qdtype)
    _requantize_into(c, multiplier, q.zero_point, qx.qdtype, False, res.reshape(-1), row)
    return wrap(res, qx.qdtype, q)


def aten_prelu_out(self, weight, *, out=None):
    """aten::prelu of a quantized input and weight (torch's ``_prelu_kernel``): quantized::prelu to the
    input's own parameters; a float weight is refused, as torch refuses it."""
    if not isinstance(weight, QuantizedArray):
        raise KernelError("aten::prelu: the weight is not quantized; torch does not promote a quantized input "
                          "and a float weight")
    return prelu_out(self, weight, self.qparams.scale, self.qparams.zero_point, out=out)
