"""Views and data movement of quantized tensors: the stored integers move, the parameters stay.

Per-tensor parameters survive any rearrangement; a per-channel tensor is refused (its axis would
have to follow the view), which torch's quantized activations never are.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError, QuantizedArray

from ._common import F32, buffer, dequant_scalar, ints, quant_scalar, quant_tensor, require_per_tensor, wrap


def _same(x, arr):
    return wrap(arr, x.qdtype, x.qparams)


def flatten(self, start_dim=0, end_dim=-1):
    x = require_per_tensor(self, "aten::flatten")
    a = ints(x)
    if a.ndim == 0:
        return _same(x, a.reshape(1))
    s, e = start_dim % a.ndim, end_dim % a.ndim
    shape = a.shape[:s] + (int(np.prod(a.shape[s:e + 1])),) + a.shape[e + 1:]
    return _same(x, a.reshape(shape))


def reshape(self, shape):
    x = require_per_tensor(self, "aten::reshape")
    return _same(x, ints(x).reshape(tuple(shape)))


def permute(self, dims):
    x = require_per_tensor(self, "aten::permute")
    return _same(x, ints(x).transpose(tuple(dims)))


def transpose(self, dim0, dim1):
    x = require_per_tensor(self, "aten::transpose")
    return _same(x, np.swapaxes(ints(x), dim0, dim1))


def contiguous(self, memory_format=0):
    x = require_per_tensor(self, "aten::contiguous")
    return _same(x, np.ascontiguousarray(ints(x)))


def clone_out(self, *, memory_format=None, out=None):
    x = require_per_tensor(self, "aten::clone")
    res = buffer(out, x.shape, x.qdtype)
    res[...] = ints(x)
    return _same(x, res)


def squeeze(self, dim=None):
    x = require_per_tensor(self, "aten::squeeze")
    a = ints(x)
    if dim is None:
        return _same(x, a.squeeze())
    dims = [d % max(a.ndim, 1) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
    return _same(x, a.squeeze(tuple(d for d in dims if a.ndim and a.shape[d] == 1)))


def unsqueeze(self, dim):
    x = require_per_tensor(self, "aten::unsqueeze")
    a = ints(x)
    return _same(x, np.expand_dims(a, dim % (a.ndim + 1)))


def slice_(self, dim=0, start=None, end=None, step=1):
    x = require_per_tensor(self, "aten::slice")
    a = ints(x)
    idx = [slice(None)] * a.ndim
    idx[dim] = slice(start, end, step)
    return _same(x, a[tuple(idx)])


def select(self, dim, index):
    x = require_per_tensor(self, "aten::select")
    return _same(x, np.take(ints(x), index, axis=dim))


def identity(self, *args, **kwargs):
    """dropout (inference), detach: the tensor itself."""
    return self


def pixel_shuffle(self, upscale_factor):
    """``(*, C*r*r, H, W) -> (*, C, H*r, W*r)`` of the stored integers, parameters kept (torch
    shuffles quantized tensors as such; the cpu plugin's kernel would drop the parameters)."""
    x = require_per_tensor(self, "aten::pixel_shuffle")
    a, r = ints(x), upscale_factor
    if a.ndim < 3 or r <= 0 or a.shape[-3] % (r * r):
        raise KernelError(f"aten::pixel_shuffle: shape {a.shape} cannot be shuffled by upscale_factor {r}")
    *b, c, h, w = a.shape
    n, oc = len(b), c // (r * r)
    v = a.reshape(*b, oc, r, r, h, w).transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return _same(x, np.ascontiguousarray(v).reshape(*b, oc, h * r, w * r))


def pixel_unshuffle(self, downscale_factor):
    """``(*, C, H*r, W*r) -> (*, C*r*r, H, W)`` of the stored integers, parameters kept."""
    x = require_per_tensor(self, "aten::pixel_unshuffle")
    a, r = ints(x), downscale_factor
    if a.ndim < 3 or r <= 0 or a.shape[-2] % r or a.shape[-1] % r:
        raise KernelError(f"aten::pixel_unshuffle: shape {a.shape} cannot be unshuffled by downscale_factor {r}")
    *b, c, h, w = a.shape
    n = len(b)
    v = a.reshape(*b, c, h // r, r, w // r, r).transpose(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return _same(x, np.ascontiguousarray(v).reshape(*b, c * r * r, h // r, w // r))


def repeat(self, repeats):
    """``Tensor.repeat`` of the stored integers (leading new dims as torch adds them), parameters kept."""
    x = require_per_tensor(self, "aten::repeat")
    a, reps = ints(x), tuple(int(r) for r in repeats)
    if len(reps) < a.ndim:
        raise KernelError(f"aten::repeat: {len(reps)} repeats for a {a.ndim}-D tensor (need at least {a.ndim})")
    return _same(x, np.tile(a.reshape((1,) * (len(reps) - a.ndim) + a.shape), reps))


# -- more views and data movement torch runs on quantized tensors (dispatch gives a cpu "*" kernel no
# quantized dtype: each op a quantized model uses needs one here) --------------------------------------
def _parts(x, pieces):
    """Views of the stored integers, each with ``x``'s parameters (``chunk``, ``split``, ``unbind``)."""
    return [_same(x, p) for p in pieces]


def chunk(self, chunks, dim=0):
    """``torch.chunk``: pieces of ``ceil(size / chunks)`` along ``dim`` (so maybe fewer than ``chunks``)."""
    x = require_per_tensor(self, "aten::chunk")
    if int(chunks) <= 0:
        raise KernelError(f"aten::chunk: chunks must be positive, got {chunks}")
    n = ints(x).shape[dim]
    return split(x, -(-n // int(chunks)) or 1, dim)


def split(self, split_size, dim=0):
    """``split.Tensor`` (one size: pieces of that size, the last smaller) and ``split.sizes`` /
    ``split_with_sizes`` (a list of sizes that must add up to the dim)."""
    x = require_per_tensor(self, "aten::split")
    a = ints(x)
    d = dim % a.ndim
    n = a.shape[d]
    if isinstance(split_size, (list, tuple)):
        sizes = [int(s) for s in split_size]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise KernelError(f"aten::split_with_sizes: split sizes {sizes} do not add up to dim {dim}'s size {n}")
    else:
        step = int(split_size)
        if step <= 0 and n:
            raise KernelError(f"aten::split: split_size must be positive, got {step}")
        sizes = [min(step, n - i) for i in range(0, n, step)] if n else [0]
    starts = np.cumsum([0, *sizes[:-1]])
    pre = (slice(None),) * d
    return _parts(x, [a[pre + (slice(int(s), int(s) + k),)] for s, k in zip(starts, sizes)])


def unbind(self, dim=0):
    x = require_per_tensor(self, "aten::unbind")
    a = ints(x)
    d = dim % a.ndim
    return _parts(x, [a[(slice(None),) * d + (i,)] for i in range(a.shape[d])])


def narrow(self, dim, start, length):
    x = require_per_tensor(self, "aten::narrow")
    a = ints(x)
    d = dim % a.ndim
    s = int(start) % a.shape[d] if int(start) < 0 else int(start)
    if s + int(length) > a.shape[d]:
        raise KernelError(f"aten::narrow: start ({start}) + length ({length}) exceeds dim {dim}'s size {a.shape[d]}")
    return _same(x, a[(slice(None),) * d + (slice(s, s + int(length)),)])


def expand(self, size, implicit=False):
    """A broadcast view (-1 keeps a dim), parameters kept."""
    x = require_per_tensor(self, "aten::expand")
    a = ints(x)
    size = [int(s) for s in size]
    lead = len(size) - a.ndim
    if lead < 0:
        raise KernelError(f"aten::expand: {len(size)} sizes for a {a.ndim}-D tensor")
    if any(s == -1 for s in size[:lead]):
        raise KernelError(f"aten::expand: -1 is not allowed for a new leading dim (sizes {size})")
    shape = [a.shape[i - lead] if s == -1 else s for i, s in enumerate(size)]
    try:
        return _same(x, np.broadcast_to(a, shape))
    except ValueError as exc:
        raise KernelError(f"aten::expand: cannot expand shape {list(a.shape)} to {size}") from exc


def t(self):
    x = require_per_tensor(self, "aten::t")
    a = ints(x)
    if a.ndim > 2:
        raise KernelError(f"aten::t: expects a tensor of at most 2 dims, got {a.ndim}")
    return _same(x, a.T)


def flip_out(self, dims, *, out=None):
    x = require_per_tensor(self, "aten::flip")
    res = buffer(out, x.shape, x.qdtype)
    res[...] = np.flip(ints(x), tuple(int(d) for d in dims))
    return _same(x, res)


def index_select_out(self, dim, index, *, out=None):
    x = require_per_tensor(self, "aten::index_select")
    a = ints(x)
    idx = np.asarray(index).reshape(-1)
    d = dim % max(a.ndim, 1)
    if idx.size and (idx.min() < 0 or idx.max() >= a.shape[d]):   # torch takes no negative index here
        raise KernelError(f"aten::index_select: index out of range for dim {dim} of size {a.shape[d]}")
    shape = a.shape[:d] + (idx.size,) + a.shape[d + 1:]
    res = buffer(out, shape, x.qdtype)
    np.take(a, idx, axis=d, out=res)
    return _same(x, res)


def stack_out(tensors, dim=0, *, out=None):
    """``torch.stack``: ``cat`` of the inputs each unsqueezed at ``dim`` (requantized to the first input's
    parameters, as torch's quantized cat)."""
    from .binary import aten_cat_out

    xs = [require_per_tensor(t, "aten::stack", f"input {i}") for i, t in enumerate(tensors)]
    if not xs:
        raise KernelError("aten::stack: expects a non-empty list of tensors")
    d = dim % (xs[0].ndim + 1)
    return aten_cat_out([_same(x, np.expand_dims(ints(x), d)) for x in xs], d, out=out)


def view_as(self, other):
    """``view_as`` / ``reshape_as``: the stored integers in ``other``'s shape."""
    return reshape(self, other.shape)


def expand_as(self, other):
    return expand(self, other.shape)


def movedim(self, source, destination):
    x = require_per_tensor(self, "aten::movedim")
    return _same(x, np.moveaxis(ints(x), source, destination))


def unflatten(self, dim, sizes):
    x = require_per_tensor(self, "aten::unflatten")
    a = ints(x)
    d = dim % a.ndim
    return _same(x, a.reshape(a.shape[:d] + tuple(int(s) for s in sizes) + a.shape[d + 1:]))


def diagonal(self, offset=0, dim1=0, dim2=1):
    """``aten::diagonal``: a view of the stored integers' diagonal (writable, as torch's; numpy's own
    ``np.diagonal`` is read-only), parameters kept."""
    x = require_per_tensor(self, "aten::diagonal")
    a = ints(x)
    if a.ndim < 2 or not (-a.ndim <= dim1 < a.ndim and -a.ndim <= dim2 < a.ndim):
        raise KernelError(f"aten::diagonal: dims ({dim1}, {dim2}) out of range for a {a.ndim}-D tensor")
    d1, d2 = dim1 % a.ndim, dim2 % a.ndim
    if d1 == d2:
        raise KernelError(f"aten::diagonal: diagonal dimensions cannot be identical {dim1}, {dim2}")
    v = np.moveaxis(a, (d1, d2), (-2, -1))
    v = v[..., :, offset:] if offset >= 0 else v[..., -offset:, :]
    n = min(v.shape[-2], v.shape[-1])
    return _same(x, np.lib.stride_tricks.as_strided(v, v.shape[:-2] + (n,), v.strides[:-2] + (v.strides[-2] + v.strides[-1],),
                                                    writeable=a.flags.writeable))


def tensor_split(self, indices_or_sections, dim=0):
    """``aten::tensor_split`` (a number of sections, a list of indices, or a tensor of either): views;
    ``n`` sections give the first ``size % n`` pieces one more element (``np.array_split``'s rule)."""
    x = require_per_tensor(self, "aten::tensor_split")
    a, s = ints(x), indices_or_sections
    if isinstance(s, np.ndarray):
        if s.ndim > 1 or s.dtype.kind not in "iu":
            raise KernelError("aten::tensor_split: tensor_indices_or_sections must be a 0-D or 1-D integer tensor, "
                              f"got {s.dtype}{list(s.shape)}")
        s = int(s) if s.ndim == 0 else [int(i) for i in s]
    if isinstance(s, int) and s <= 0:
        raise KernelError(f"aten::tensor_split: number of sections must be larger than 0, got {s}")
    if not -a.ndim <= dim < max(a.ndim, 1):
        raise KernelError(f"aten::tensor_split: dim {dim} out of range for a {a.ndim}-D tensor")
    return _parts(x, np.array_split(a, s, axis=dim % a.ndim))


def repeat_interleave(self, repeats, dim=None, *, output_size=None):
    """``aten::repeat_interleave.self_int`` / ``.self_Tensor``: each slice along ``dim`` (each element of
    the flattened tensor when None) ``repeats`` times, or ``repeats[i]`` times the i-th."""
    op = "aten::repeat_interleave"
    x = require_per_tensor(self, op)
    a = ints(x)
    a, axis = (a.reshape(-1), 0) if dim is None else (a, dim)
    if a.ndim == 0 or not -a.ndim <= axis < a.ndim:
        raise KernelError(f"{op}: dim {dim} out of range for a {x.ndim}-D tensor")
    r = np.asarray(repeats)
    if r.dtype.kind not in "iu" or r.ndim > 1:
        raise KernelError(f"{op}: repeats must be an int or a 0-D or 1-D integer tensor, got {r.dtype}{list(r.shape)}")
    r = r.astype(np.int64, copy=False).reshape(-1) if r.ndim else r.astype(np.int64)
    if r.size and r.min() < 0:
        raise KernelError(f"{op}: repeats can not be negative")
    n = a.shape[axis]
    if r.ndim == 1 and r.size not in (1, n):
        raise KernelError(f"{op}: repeats must have the same size as input along dim: {r.size} vs {n}")
    res = np.repeat(a, r.reshape(()) if r.size == 1 else r, axis=axis)
    if output_size is not None and res.shape[axis] != output_size:
        raise KernelError(f"{op}: the repeated size is {res.shape[axis]}, but output_size={output_size}")
    return _same(x, res)


def index(self, indices):
    """``aten::index.Tensor`` (``x[idx]``, ``x[:, mask]``): advanced indexing of the stored integers, a
    None entry keeping its dimension; uint8 masks are torch's legacy bool masks."""
    x = require_per_tensor(self, "aten::index")
    if len(indices) > x.ndim:
        raise KernelError(f"aten::index: too many indices ({len(indices)}) for a {x.ndim}-D tensor")
    key = tuple(slice(None) if i is None else i.astype(bool) if i.dtype == np.uint8 else i for i in indices)
    for i in key:
        if isinstance(i, np.ndarray) and i.dtype.kind not in "iub":
            raise KernelError(f"aten::index: tensors used as indices must be long, int, byte or bool, got {i.dtype}")
    try:
        r = ints(x)[key]
    except IndexError as exc:
        raise KernelError(f"aten::index: {exc}") from exc
    return _same(x, np.asarray(r))


def masked_fill_out(self, mask, value, *, out=None):
    """``aten::masked_fill.Scalar`` / ``.Tensor`` (a 0-D value): ``value`` quantized with the tensor's own
    parameters (torch's ``quantize_val``, the value first rounded to float32) where ``mask``; the shape is
    ``self``'s and ``mask``'s broadcast. torch takes bool masks and per-tensor parameters only."""
    op = "aten::masked_fill"
    x = require_per_tensor(self, op)
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise KernelError(f"{op}: only supports boolean masks, got a {m.dtype} mask")
    if isinstance(value, np.ndarray):
        if value.ndim:
            raise KernelError(f"{op}: only supports a 0-dimensional value tensor, got {value.ndim} dimension(s)")
        if isinstance(value, QuantizedArray):   # torch takes its value (``item()``): the dequantized one
            value = dequant_scalar(ints(value), value.qparams.scale, value.qparams.zero_point)
    q = quant_scalar(np.asarray(value, F32).reshape(1), x.qparams.scale, x.qparams.zero_point, x.qdtype)
    try:
        shape = np.broadcast_shapes(x.shape, m.shape)
    except ValueError as exc:
        raise KernelError(f"{op}: the mask's shape {list(m.shape)} does not broadcast with the input's "
                          f"{list(x.shape)}") from exc
    res = buffer(out, shape, x.qdtype)
    res[...] = ints(x)
    np.copyto(res, q[0], where=m)
    return _same(x, res)


def _scalar_value(value, op: str) -> np.ndarray:
    """A Scalar or 0-D tensor value as a 1-element float32 array (a quantized one dequantized, as
    torch's ``item()``)."""
    if isinstance(value, np.ndarray):
        if value.ndim:
            raise KernelError(f"{op}: only supports a 0-dimensional value tensor, got {value.ndim} dimension(s)")
        if isinstance(value, QuantizedArray):
            value = dequant_scalar(ints(value), value.qparams.scale, value.qparams.zero_point)
    return np.asarray(value, F32).reshape(1)


def fill_(self, value):
    """``aten::fill_`` (``.Scalar``, ``.Tensor``) in place: torch fills a float32 tensor and copies it in,
    quantizing as ``quantize_per_tensor`` does (fbgemm's ``Quantize``: one rounding of
    ``fma(v, 1 / scale, zp)``), not as ``masked_fill`` (``quantize_val``); measured on ties."""
    op = "aten::fill_"
    x = require_per_tensor(self, op)
    q = quant_tensor(_scalar_value(value, op), x.qparams.scale, x.qparams.zero_point, x.qdtype)
    ints(x)[...] = q[0]
    return x


def _put_key(indices, ndim: int, op: str) -> tuple:
    if len(indices) > ndim:
        raise KernelError(f"{op}: too many indices ({len(indices)}) for a {ndim}-D tensor")
    key = tuple(slice(None) if i is None else np.asarray(i).astype(bool) if np.asarray(i).dtype == np.uint8
                else np.asarray(i) for i in indices)
    for i in key:
        if isinstance(i, np.ndarray) and i.dtype.kind not in "iub":
            raise KernelError(f"{op}: tensors used as indices must be long, int, byte or bool, got {i.dtype}")
    return key


def index_put_(self, indices, values, accumulate=False):
    """``aten::index_put_`` (``q[idx] = v``) in place: torch's quantized kernel takes float values and
    quantizes each with the tensor's parameters as ``quantize_val`` does (``nearbyint(zp + v * (1 /
    scale))``, measured on ties); per-tensor tensors and ``accumulate=False`` only, as torch."""
    op = "aten::index_put_"
    x = require_per_tensor(self, op)
    if accumulate:
        raise KernelError(f"{op}: accumulate=True is not supported on quantized tensors (torch refuses it too)")
    if isinstance(values, QuantizedArray):
        raise KernelError(f"{op}: the values must not be quantized (torch refuses quantized values)")
    v = np.asarray(values, F32)
    q = quant_scalar(v.reshape(-1), x.qparams.scale, x.qparams.zero_point, x.qdtype).reshape(v.shape)
    try:
        ints(x)[_put_key(indices, x.ndim, op)] = q
    except (IndexError, ValueError) as exc:
        raise KernelError(f"{op}: {exc}") from exc
    return x


def index_put_out(self, indices, values, accumulate=False, *, out=None):
    """``aten::index_put``: :func:`index_put_` on a copy."""
    x = require_per_tensor(self, "aten::index_put")
    res = buffer(out, x.shape, x.qdtype)
    res[...] = ints(x)
    return index_put_(_same(x, res), indices, values, accumulate)


def unfold(self, dimension, size, step):
    """``Tensor.unfold``: a view of every ``size``-long window along ``dimension``, ``step`` apart (the
    windows replace the dim, their elements a new last dim), parameters kept."""
    op = "aten::unfold"
    x = require_per_tensor(self, op)
    a = ints(x)
    if not -max(a.ndim, 1) <= dimension < max(a.ndim, 1):
        raise KernelError(f"{op}: dimension {dimension} out of range for a {a.ndim}-D tensor")
    n = a.shape[dimension] if a.ndim else 1
    if int(step) <= 0 or int(size) < 0 or int(size) > n:
        raise KernelError(f"{op}: size {size} and step {step} do not fit dimension {dimension} of size {n} "
                          f"(0 <= size <= {n}, step > 0)")
    if a.ndim == 0:
        return _same(x, a.reshape(1)[:int(size)])
    d = dimension % a.ndim
    w = np.lib.stride_tricks.sliding_window_view(a, int(size), axis=d, writeable=a.flags.writeable)
    return _same(x, w[(slice(None),) * d + (slice(None, None, int(step)),)])


def channel_shuffle_out(self, groups, *, out=None):
    """``(N, g * k, H, W) -> (N, k * g, H, W)``: output channel ``c * g + i`` is input channel ``i * k + c``
    (torch's quantized kernel: 4-D inputs only, its checks), parameters kept."""
    x = require_per_tensor(self, "aten::channel_shuffle")
    a, g = ints(x), int(groups)
    if g <= 0:
        raise KernelError(f"aten::channel_shuffle: groups must be positive, got {g}")
    if a.ndim != 4:
        raise KernelError(f"aten::channel_shuffle: expects a 4-D input, got shape {list(a.shape)}")
    n, c, h, w = a.shape
    if c <= 0 or c % g:
        raise KernelError(f"aten::channel_shuffle: {c} channels are not divisible by {g} groups")
    res = buffer(out, a.shape, x.qdtype)
    res.reshape(n, c // g, g, h, w)[...] = a.reshape(n, g, c // g, h, w).transpose(0, 2, 1, 3, 4)
    return wrap(res, x.qdtype, x.qparams)
