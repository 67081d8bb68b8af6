"""Shape and view kernels.

Where torch returns a view (view, reshape when possible, permute, transpose,
select, slice, narrow, squeeze, unsqueeze, expand, split, chunk, unbind,
movedim) these natives return numpy views of the input. Ops that make fresh
tensors (cat, stack, repeat, flip, roll, triu, tril) are out variants.
"""
from __future__ import annotations

import builtins as _b  # this module defines slice()


import numpy as np

from srcore.plugin import KernelError

from .promotion import dtype_of_code, result_type


def _wrap(dim: int, ndim: int) -> int:
    n = ndim if ndim else 1
    if not -n <= dim < n:
        raise KernelError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def _resolve_shape(shape, numel):
    shape = list(shape)
    if shape.count(-1) == 1:
        i = shape.index(-1)
        rest = int(np.prod(shape[:i] + shape[i + 1:]))
        shape[i] = numel // rest if rest else 0
    return tuple(shape)


def view(self, size):
    """``aten::view``: a view, or KernelError when the strides do not allow one (as in torch)."""
    if not isinstance(size, (list, tuple)):  # aten::view.dtype(Tensor self, ScalarType dtype)
        return self.view(dtype_of_code(size))
    v = self.view()
    try:
        v.shape = _resolve_shape(size, self.size)
    except AttributeError as exc:
        raise KernelError(f"view size is not compatible with input tensor's size and stride "
                          f"({self.shape} -> {tuple(size)}); use reshape") from exc
    except ValueError as exc:
        raise KernelError(f"shape {list(size)} is invalid for input of size {self.size}") from exc
    return v


def reshape(self, shape):
    """``aten::reshape``: a view when the layout allows it, else a copy."""
    return self.reshape(shape)


def view_as(self, other):
    return view(self, other.shape)


def reshape_as(self, other):
    return self.reshape(other.shape)


def flatten(self, start_dim=0, end_dim=-1):
    """``aten::flatten.using_ints``: a 0-d tensor becomes 1-d."""
    if self.ndim == 0:
        return self.reshape(1)
    s, e = _wrap(start_dim, self.ndim), _wrap(end_dim, self.ndim)
    if s > e:
        raise KernelError("flatten() has invalid args: start_dim cannot come after end_dim")
    return self.reshape(self.shape[:s] + (-1,) + self.shape[e + 1:]) if self.size else \
        self.reshape(self.shape[:s] + (int(np.prod(self.shape[s:e + 1])),) + self.shape[e + 1:])


def unflatten(self, dim, sizes):
    """``aten::unflatten.int``: split ``dim`` into ``sizes`` (one may be -1)."""
    d = _wrap(dim, self.ndim)
    inner = _resolve_shape(sizes, self.shape[d])
    return self.reshape(self.shape[:d] + inner + self.shape[d + 1:])


def permute(self, dims):
    return np.transpose(self, [_wrap(d, self.ndim) for d in dims])


def transpose(self, dim0, dim1):
    """``aten::transpose.int``."""
    if self.ndim == 0:
        return self.view()
    return np.swapaxes(self, _wrap(dim0, self.ndim), _wrap(dim1, self.ndim))


def t(self):
    """``aten::t``: transpose a <= 2-d tensor."""
    if self.ndim > 2:
        raise KernelError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return self.T


def unfold(self, dimension, size, step):
    """``Tensor.unfold`` (``aten::unfold``): windows of ``size`` every ``step`` along ``dimension``, as a
    new last dim (a strided view, like torch's)."""
    if step <= 0:
        raise KernelError(f"unfold: step is {step} but must be > 0")
    if self.ndim == 0:
        return self.reshape(1) if size == 1 else _unfold_error(size, 0)
    d = dimension % self.ndim
    if size > self.shape[d]:
        _unfold_error(size, self.shape[d])
    # the strided view directly (sliding_window_view's argument handling is ~10 us of Python, most of a
    # small unfold); writeable as torch's view is (as_strided keeps a read-only base read-only)
    shape, strides = list(self.shape), list(self.strides)
    shape[d] = (self.shape[d] - size) // step + 1
    strides[d] = self.strides[d] * step
    return np.lib.stride_tricks.as_strided(self, (*shape, size), (*strides, self.strides[d]), writeable=True)


def _unfold_error(size, n):
    raise KernelError(f"unfold: maximum size for tensor at dimension is {n} but size is {size}")


def meshgrid(tensors, *, indexing="ij"):
    """``aten::meshgrid`` (``.indexing``): grids of the 0-d/1-d inputs, torch's default
    ``"ij"`` (matrix) indexing or ``"xy"`` (cartesian: the first two dims swapped)."""
    if indexing not in ("ij", "xy"):
        raise KernelError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    if any(t.ndim > 1 for t in tensors):
        raise KernelError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list")
    # fresh arrays: the schema (Tensor[] -> Tensor[]) declares no alias, so the memory planner may
    # reuse the inputs' buffers once meshgrid has run
    return list(np.meshgrid(*[t.reshape(-1) for t in tensors], indexing=indexing, copy=True))


def tensor_split(self, indices_or_sections, dim=0):
    """``aten::tensor_split`` (sections, indices, or a tensor of either): views; ``n`` sections
    give the first ``size % n`` pieces one extra element, as ``np.array_split``."""
    s = indices_or_sections
    if isinstance(s, np.ndarray):
        if s.ndim > 1 or s.dtype.kind not in "iu":
            raise KernelError("tensor_split expects tensor_indices_or_sections to be a 0-D or 1-D int64 tensor")
        s = int(s) if s.ndim == 0 else [int(i) for i in s]
    if isinstance(s, int) and s <= 0:
        raise KernelError(f"number of sections must be larger than 0, got {s}")
    d = _wrap(dim, self.ndim)
    return np.array_split(self, s, axis=d)


def diagonal(self, offset=0, dim1=0, dim2=1):
    """``aten::diagonal``: a view of the diagonal (writable, as torch's; numpy hands it out read-only)."""
    d1, d2 = _wrap(dim1, self.ndim), _wrap(dim2, self.ndim)
    if d1 == d2:
        raise KernelError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    x = np.moveaxis(self, (d1, d2), (-2, -1))
    x = x[..., :, offset:] if offset >= 0 else x[..., -offset:, :]
    n = min(x.shape[-2], x.shape[-1])
    # a strided view of self itself (np.diagonal's would be read-only)
    return np.lib.stride_tricks.as_strided(x, x.shape[:-2] + (n,), x.strides[:-2] + (x.strides[-2] + x.strides[-1],),
                                           writeable=self.flags.writeable)


def numpy_T(self):
    """``aten::numpy_T`` (``x.T``): every dimension reversed (a view)."""
    return self.transpose()


def contiguous(self, *, memory_format=0):
    # np.ascontiguousarray would turn a 0-d array into shape (1,)
    return np.asarray(self, order="C")


def movedim(self, source, destination):
    """``aten::movedim.int`` / ``.intlist``."""
    return np.moveaxis(self, source, destination)


def select(self, dim, index):
    """``aten::select.int``: a view (0-d for a 1-d input)."""
    d = _wrap(dim, self.ndim)
    n = self.shape[d]
    if not -n <= index < n:
        raise KernelError(f"select(): index {index} out of range for tensor of size {self.shape} at dimension {dim}")
    return self[(_b.slice(None),) * d + (index, Ellipsis)]


def slice(self, dim=0, start=None, end=None, step=1):
    """``aten::slice.Tensor``: Python slicing clamps out-of-range bounds the way torch does."""
    if step <= 0:
        raise KernelError("slice step must be positive")
    d = _wrap(dim, self.ndim)
    return self[(_b.slice(None),) * d + (_b.slice(start, end, step),)]


def narrow(self, dim, start, length):
    """``aten::narrow`` / ``narrow.Tensor`` (``start`` a 0-d tensor); negative ``start`` wraps."""
    start = int(start)
    d = _wrap(dim, self.ndim)
    if start < 0:
        start += self.shape[d]
    if start < 0 or start + length > self.shape[d]:
        raise KernelError(f"start ({start}) + length ({length}) exceeds dimension size ({self.shape[d]}).")
    return self[(_b.slice(None),) * d + (_b.slice(start, start + length),)]


def unsqueeze(self, dim):
    # an indexing view (C): np.expand_dims normalizes its axis tuple in Python, ~1 us of a view
    return self[(_b.slice(None),) * _wrap(dim, self.ndim + 1) + (None,)]


def squeeze(self, dim=None):
    """``aten::squeeze`` / ``squeeze.dim`` / ``squeeze.dims``: only size-1 dims go."""
    if dim is None:
        return np.squeeze(self)
    if self.ndim == 0:
        return self.view()
    dims = [dim] if isinstance(dim, int) else dim
    axes = tuple(d for d in {_wrap(x, self.ndim) for x in dims} if self.shape[d] == 1)
    return np.squeeze(self, axes) if axes else self.view()


def expand(self, size, *, implicit=False):
    """``aten::expand``: a read-only broadcast view; -1 keeps a dimension."""
    lead = len(size) - self.ndim
    if lead < 0:
        raise KernelError(f"expand: the number of sizes provided ({len(size)}) must be greater or equal "
                          f"to the number of dimensions in the tensor ({self.ndim})")
    shape = tuple(size) if -1 not in size else tuple(self.shape[i - lead] if s == -1 else s for i, s in enumerate(size))
    return _broadcast_view(self, shape)


def expand_as(self, other):
    return _broadcast_view(self, other.shape)


def _broadcast_view(x, shape):
    """``np.broadcast_to(x, shape)`` (a read-only view): for a C-contiguous ``x``, the strided view
    over ``x``'s buffer straight from the ndarray constructor (~1 us; broadcast_to's Python is ~3.5,
    the bulk of a small expand). Anything else (a strided or empty ``x``, shapes that do not
    broadcast: numpy's error) takes np.broadcast_to."""
    lead = len(shape) - x.ndim
    if lead < 0 or not x.flags.c_contiguous or x.size == 0:
        return np.broadcast_to(x, shape)
    strides = [0] * lead
    for n, m, st in zip(x.shape, shape[lead:], x.strides):
        if n == m:
            strides.append(st)
        elif n == 1:
            strides.append(0)
        else:
            return np.broadcast_to(x, shape)
    v = np.ndarray(shape, x.dtype, x, 0, tuple(strides))
    v.flags.writeable = False
    return v


def _split_at(self, sizes, dim):
    d = _wrap(dim, self.ndim)
    if _b.sum(sizes) != self.shape[d]:
        raise KernelError(f"split_with_sizes expects split_sizes to sum exactly to {self.shape[d]}, got {list(sizes)}")
    pre = (_b.slice(None),) * d
    out, at = [], 0
    for s in sizes:
        out.append(self[pre + (_b.slice(at, at + s),)])
        at += s
    return out


def split(self, split_size, dim=0):
    """``aten::split.Tensor`` (int) / ``split.sizes`` / ``split`` / ``split_with_sizes``: views."""
    if not isinstance(split_size, int):
        return _split_at(self, list(split_size), dim)
    n = self.shape[_wrap(dim, self.ndim)]
    if split_size <= 0:
        return [self] if n == 0 else _split_at(self, [n], dim)
    sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size else [])
    return _split_at(self, sizes or [0], dim)


def chunk(self, chunks, dim=0):
    """``aten::chunk``: ``ceil(n / chunks)``-sized views (possibly fewer than ``chunks``)."""
    n = self.shape[_wrap(dim, self.ndim)]
    return split(self, -(-n // chunks) if n else 0, dim)


def unbind(self, dim=0):
    d = _wrap(dim, self.ndim)
    return [select(self, d, i) for i in range(self.shape[d])]


def _cat_inputs(tensors):
    if not len(tensors):
        raise KernelError("torch.cat(): expected a non-empty list of Tensors")
    # torch's legacy rule: 1-d empty tensors are skipped in cat
    keep = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    return keep or list(tensors[:1])


def cat(tensors, dim=0, *, out=None):
    """``aten::cat``: with torch's type promotion over the inputs."""
    ts = _cat_inputs(tensors)
    d = _wrap(dim, ts[0].ndim)
    if out is None:
        return np.concatenate(ts, axis=d, dtype=result_type(*ts))
    np.concatenate(ts, axis=d, out=out, casting="same_kind")
    return out


def stack(tensors, dim=0, *, out=None):
    if not len(tensors):
        raise KernelError("stack expects a non-empty TensorList")
    d = _wrap(dim, tensors[0].ndim + 1)
    if out is None:
        return np.stack(tensors, axis=d, dtype=result_type(*tensors))
    np.stack(tensors, axis=d, out=out, casting="same_kind")
    return out


def repeat(self, repeats, *, out=None):
    """``aten::repeat``: tile, writing through an interleaved view of ``out`` (no temporary)."""
    repeats = tuple(repeats)
    if len(repeats) < self.ndim:
        raise KernelError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    src = self.reshape((1,) * (len(repeats) - self.ndim) + self.shape)
    shape = tuple(r * s for r, s in zip(repeats, src.shape))
    if out is None:
        out = np.empty(shape, self.dtype)
    inter = [x for r, s in zip(repeats, src.shape) for x in (r, s)]
    src_b = src.reshape([x for s in src.shape for x in (1, s)])
    if out.flags.c_contiguous:
        np.copyto(out.reshape(inter), src_b)
    else:
        np.copyto(out, np.tile(src, repeats))
    return out


_REVERSED = _b.slice(None, None, -1)
_ALL = _b.slice(None)


def flip(self, dims, *, out=None):
    """``aten::flip``: a copy (torch's flip does not return a view). The reversed view by basic
    slicing, not np.flip (its axis normalization is ~2 us of a small flip's ~5)."""
    v = self
    if self.ndim:
        idx = [_ALL] * self.ndim
        for d in dims:
            d = _wrap(d, self.ndim)
            if idx[d] is _REVERSED:
                raise KernelError(f"flip: dim {d} appears multiple times in the list of dims")
            idx[d] = _REVERSED
        v = self[tuple(idx)]
    if out is None:
        return v.copy()
    np.copyto(out, v)
    return out


def roll(self, shifts, dims=(), *, out=None):
    """``aten::roll``: with no ``dims`` the flattened tensor rolls. Along ``dims``, the 2 ** len(dims)
    blocks are copied straight into the result: 6.7 / 3.8 us on a detection head's (2, 8, 4) boxes over
    two dims / (2, 8) scores over one, against np.roll's 8.6 / 6.4 (its Python and a second copy)."""
    if not dims or not self.ndim or len(shifts) != len(dims) or (out is not None and np.may_share_memory(out, self)):
        r = np.roll(self.reshape(-1), shifts).reshape(self.shape) if not dims else np.roll(self, tuple(shifts), tuple(dims))
        if out is None:
            return r
        np.copyto(out, r)
        return out
    if out is None:
        out = np.empty(self.shape, self.dtype)
    total = {}
    for shift, d in zip(shifts, dims):
        d = _wrap(d, self.ndim)
        total[d] = total.get(d, 0) + int(shift)
    blocks = [((), ())]   # (destination, source) index tuples, up to the last rolled dim
    every = (_b.slice(None),)
    for d in range(max(total) + 1):
        n = self.shape[d]
        k = total.get(d, 0) % n if n else 0
        if not k:
            blocks = [(dst + every, src + every) for dst, src in blocks]
            continue
        a, b = (_b.slice(k, None), _b.slice(0, n - k)), (_b.slice(0, k), _b.slice(n - k, None))
        blocks = [(dst + (p[0],), src + (p[1],)) for dst, src in blocks for p in (a, b)]
    for dst, src in blocks:
        out[dst] = self[src]
    return out


def _tri(self, diagonal, out, upper):
    if self.ndim < 2:
        raise KernelError(f"{'triu' if upper else 'tril'}: input tensor must have at least 2 dimensions")
    n, m = self.shape[-2:]
    keep = ~np.tri(n, m, diagonal - 1, dtype=bool) if upper else np.tri(n, m, diagonal, dtype=bool)
    if out is None:
        out = np.empty(self.shape, self.dtype)
    if out is not self:
        np.copyto(out, self)
    np.copyto(out, np.zeros((), out.dtype), where=~keep)  # a typed zero: bool tensors too
    return out


def triu(self, diagonal=0, *, out=None):
    return _tri(self, diagonal, out, True)


def tril(self, diagonal=0, *, out=None):
    return _tri(self, diagonal, out, False)


def triu_(self, diagonal=0):
    return _tri(self, diagonal, self, True)


def tril_(self, diagonal=0):
    return _tri(self, diagonal, self, False)
