"""The out-of-place forms of writes into views, as torch.export's functionalization emits them.

``acc[i] = row`` becomes ``copy(select(acc, 0, i), row)`` (the view's new values) and
``select_scatter(acc, that, 0, i)`` (``acc`` with them embedded); ``acc[a:b] = x`` becomes
``slice_scatter``. Each returns a fresh tensor and never writes its inputs.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError


def _dim(dim, ndim, op):
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise KernelError(f"{op}: dim {dim} out of range for a tensor of rank {ndim}")
    return dim % ndim if ndim else 0


def _embed(self, key, src, op, out):
    view_shape = np.empty(self.shape, np.bool_)[key].shape  # the view's shape, without copying data
    if tuple(src.shape) != view_shape:
        raise KernelError(f"{op}: expected src to have a size equal to the slice of self. "
                          f"src size = {list(src.shape)}, slice size = {list(view_shape)}")
    if out is None:
        out = self.copy()
    else:
        np.copyto(out, self)
    out[key] = src  # numpy casts like torch's copy_ (float -> int truncates)
    return out


def select_scatter(self, src, dim, index, *, out=None):
    """``aten::select_scatter``: a copy of ``self`` with ``self.select(dim, index)`` replaced by ``src``."""
    if self.ndim == 0:
        raise KernelError("select_scatter: select() cannot be applied to a 0-dim tensor")
    d = _dim(dim, self.ndim, "select_scatter")
    n = self.shape[d]
    if not -n <= index < n:
        raise KernelError(f"select_scatter: index {index} out of range for tensor of size {list(self.shape)} "
                          f"at dimension {d}")
    key = (slice(None),) * d + (index % n,)
    return _embed(self, key, src, "select_scatter", out)


def slice_scatter(self, src, dim=0, start=None, end=None, step=1, *, out=None):
    """``aten::slice_scatter``: a copy of ``self`` with ``self[start:end:step]`` along ``dim`` replaced by ``src``.

    ``start``/``end`` clamp to the dim as Python slices do; ``step`` must be positive.
    """
    if step <= 0:
        raise KernelError(f"slice_scatter: slice step must be positive, got {step}")
    if self.ndim == 0:
        raise KernelError("slice_scatter: slice() cannot be applied to a 0-dim tensor")
    d = _dim(dim, self.ndim, "slice_scatter")
    key = (slice(None),) * d + (slice(start, end, step),)
    return _embed(self, key, src, "slice_scatter", out)


def copy(self, src, non_blocking=False, *, out=None):
    """``aten::copy`` (out of place): ``self``'s shape and dtype holding ``src``, broadcast and cast."""
    try:
        shape = np.broadcast_shapes(self.shape, src.shape)
    except ValueError as exc:
        raise KernelError(f"copy: src of shape {list(src.shape)} does not broadcast to self's shape "
                          f"{list(self.shape)}") from exc
    if shape != self.shape:
        raise KernelError(f"copy: src of shape {list(src.shape)} does not broadcast to self's shape "
                          f"{list(self.shape)}")
    if out is None:
        out = np.empty(self.shape, self.dtype)
    np.copyto(out, src, casting="unsafe")
    return out
