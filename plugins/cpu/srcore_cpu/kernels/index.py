"""Indexing kernels: gather, scatter, index_select, index.Tensor, masked_select, nonzero, one_hot.

gather/scatter index ``self`` with ``index``'s extent in every other dimension
(torch allows ``index`` to be smaller than ``self`` there), so they build the
fancy index themselves instead of using ``np.take_along_axis``.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from srcore.plugin import KernelError, NodeInfo


def _along(index, dim):
    """The fancy index selecting ``index`` values along ``dim`` and positions elsewhere."""
    if index.ndim == 0:   # a 0-d self: nothing to index along
        return ()
    idx = list(_positions(index.shape, dim))
    idx[dim] = index
    return tuple(idx)


@functools.lru_cache(maxsize=256)
def _positions(shape, dim):
    """Per dimension but ``dim``, the (read-only) broadcastable ``arange`` of its positions: made once
    per shape, as a static model's shapes repeat every call (a fresh arange per axis was a third of
    a small gather's time)."""
    nd = len(shape)
    out = []
    for d in range(nd):
        if d == dim:
            out.append(None)
        else:
            view = [1] * nd
            view[d] = shape[d]
            a = np.arange(shape[d]).reshape(view)
            a.flags.writeable = False
            out.append(a)
    return tuple(out)


def _dim(dim, ndim):
    return dim % ndim if ndim else 0


def _check_bounds(index, size, dim, op):
    """torch rejects negative or too large indices; numpy would wrap the negative ones silently."""
    if index.size:
        # (the ufuncs' reduce, not index.min(): numpy's wrapper is ~1 us of a small gather's call)
        lo, hi = int(np.minimum.reduce(index, axis=None)), int(np.maximum.reduce(index, axis=None))
        if lo < 0 or hi >= size:
            bad = lo if lo < 0 else hi
            raise KernelError(f"{op}: index {bad} is out of bounds for dimension {dim} with size {size}")


def _row_index(self, d, index):
    """``index`` without its trailing dims when it is broadcast along every dim after ``d`` (stride 0)
    over the whole of ``self`` there: ``gather(x, 1, idx.unsqueeze(-1).expand(-1, -1, C))``, the
    row gather of kNN / beam search / detection heads, whose rows then copy as blocks instead of
    element by element (and whose bounds check reads ``k`` indices, not ``k * C``); else None."""
    nd = self.ndim
    if d >= nd - 1 or index.ndim != nd:
        return None
    for j in range(d + 1, nd):
        if index.strides[j] != 0 or index.shape[j] != self.shape[j]:
            return None
    return index[(slice(None),) * (d + 1) + (0,) * (nd - d - 1)]


def gather(self, dim, index, *, sparse_grad=False, out=None):
    """``aten::gather``: ``out[i][j] = self[i][index[i][j]]`` (for dim 1)."""
    if index.size == 0:  # torch skips the rank check for an empty index
        r = np.empty(index.shape, self.dtype)
    else:
        d = _dim(dim, self.ndim)
        core = _row_index(self, d, index)
        if core is not None:   # whole rows: the index without its broadcast trailing dims
            _check_bounds(core, self.shape[d], d, "gather")
            r = self[_along(core, d)]
        else:
            _check_bounds(index, self.shape[d] if self.ndim else 1, d, "gather")
            r = self.reshape(1)[index.reshape(-1)].reshape(index.shape) if self.ndim == 0 else self[_along(index, d)]
    if out is None:
        return r
    np.copyto(out, r)
    return out


def scatter(self, dim, index, src=None, *, value=None, reduce=None, out=None):
    """``aten::scatter`` (src, value, reduce "add"/"multiply"): a copy of ``self`` with scattered values."""
    if out is None:
        out = self.copy()
    elif out is not self:
        np.copyto(out, self)
    if index.size == 0:
        return out
    d = _dim(dim, self.ndim)
    _check_bounds(index, self.shape[d] if self.ndim else 1, d, "scatter")
    at = _along(index, d)
    if isinstance(src, np.ndarray):
        vals = src[tuple(np.s_[: n] for n in index.shape)] if src.ndim else src
    else:
        # a Scalar is cast to self's dtype first (torch truncates 2.5 to 2 for an int tensor)
        vals = np.asarray(src if src is not None else value).astype(out.dtype)
    if reduce is None:
        out[at] = vals
    elif reduce == "add":
        np.add.at(out, at, vals)
    elif reduce == "multiply":
        np.multiply.at(out, at, vals)
    else:
        raise KernelError(f"scatter: reduce argument must be either add or multiply, got {reduce!r}")
    return out


def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
    """In-place ``scatter``."""
    return scatter(self, dim, index, src, value=value, reduce=reduce, out=self)


def scatter_add(self, dim, index, src, *, out=None):
    """``aten::scatter_add``: ``self`` plus ``src`` summed into the ``index`` positions along ``dim``."""
    return scatter(self, dim, index, src, reduce="add", out=out)


def scatter_add_(self, dim, index, src):
    """In-place ``scatter_add``."""
    return scatter(self, dim, index, src, reduce="add", out=self)


def index_add(self, dim, index, source, *, alpha=1, out=None):
    """``aten::index_add``: ``self`` plus ``alpha * source`` summed into the rows ``index`` along
    ``dim`` (repeated indices accumulate, as torch)."""
    if out is None:
        out = self.copy()
    elif out is not self:
        np.copyto(out, self)
    idx = index.reshape(-1)
    target = out.reshape(1) if out.ndim == 0 else out  # a view: a 0-d self is one row
    d = _dim(dim, out.ndim)
    _check_bounds(idx, target.shape[d], d, "index_add")
    vals = np.asarray(source) if alpha == 1 else np.asarray(source) * alpha
    np.add.at(target, (slice(None),) * d + (idx,), vals.reshape(-1) if out.ndim == 0 else vals)
    return out


def index_add_(self, dim, index, source, *, alpha=1):
    """In-place ``index_add``."""
    return index_add(self, dim, index, source, alpha=alpha, out=self)


def index_fill(self, dim, index, value, *, out=None):
    """``aten::index_fill`` (int_Scalar, int_Tensor with a 0-d value): ``self`` with the rows
    ``index`` along ``dim`` set to ``value``."""
    if out is None:
        out = self.copy()
    elif out is not self:
        np.copyto(out, self)
    idx = index.reshape(-1)
    target = out.reshape(1) if out.ndim == 0 else out
    d = _dim(dim, out.ndim)
    _check_bounds(idx, target.shape[d], d, "index_fill")
    target[(slice(None),) * d + (idx,)] = value
    return out


def bucketize(self, boundaries, *, out_int32=False, right=False, out=None):
    """``aten::bucketize`` (Tensor, Scalar): the bucket of each value among sorted ``boundaries``;
    ``right=False`` puts a value equal to a boundary in the bucket that boundary closes."""
    r = np.searchsorted(boundaries, self, side="right" if right else "left")
    r = np.asarray(r, np.int32 if out_int32 else np.int64)
    if out is None:
        return r
    np.copyto(out, r)
    return out


def _bisect(rows, vals, per_row: bool, right: bool):
    """ATen's binary search on every value at once (``log2(n)`` vector steps): ``start = mid + 1`` while
    ``not (row[mid] >= v)`` (``>`` for ``right``), so NaN in the values or the rows lands where torch's
    search puts it, not where a sort would."""
    v = vals.reshape(-1)
    n = rows.shape[1]
    if n == 0 or v.size == 0:
        return np.zeros(vals.shape, np.int64)
    which = np.repeat(np.arange(rows.shape[0]), vals.shape[-1]) if per_row else 0
    lo = np.zeros(v.size, np.int64)
    hi = np.full(v.size, n, np.int64)
    while True:
        live = lo < hi
        if not live.any():
            break
        mid = (lo + hi) >> 1
        m = rows[which, np.minimum(mid, n - 1)]
        go = ~(m > v) if right else ~(m >= v)
        lo = np.where(live & go, mid + 1, lo)
        hi = np.where(live & ~go, mid, hi)
    return lo.reshape(vals.shape)


def _search_side(right, side):
    """``right`` from torch's two spellings of it (``side`` wins when given; they may not disagree)."""
    if side is not None:
        if side not in ("left", "right"):
            raise KernelError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side!r}")
        if right and side == "left":
            raise KernelError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                              "while right was True")
        right = side == "right"
    return bool(right)


def _search_rows(seq, vals):
    """``seq`` as (rows, n): one row for a 1-D ``seq``, else one per leading index, which must be the
    values' leading dims."""
    if seq.ndim > 1 and (seq.shape[:-1] != vals.shape[:-1] or vals.ndim != seq.ndim):
        raise KernelError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                          f"dimensions of boundaries tensor and input value tensor must match, but we got "
                          f"boundaries tensor {list(seq.shape)} and input value tensor {list(vals.shape)}")
    if seq.ndim <= 1:
        return seq.reshape(1, seq.size)
    return seq.reshape(math.prod(seq.shape[:-1]), seq.shape[-1])


def searchsorted(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None, out=None):
    """``aten::searchsorted`` (Tensor, Scalar): for each value, its insertion index in the innermost
    rows of ``sorted_sequence`` (1-D: one row for every value; N-D: the leading dims match the values'),
    ``side="right"`` / ``right=True`` after equal elements; ``sorter`` the argsort of unsorted rows.
    The search is ATen's, NaN included (:func:`_bisect`)."""
    right = _search_side(right, side)
    seq = np.asarray(sorted_sequence)
    vals = np.asarray(self)
    if sorter is not None:
        seq = np.take_along_axis(seq, np.asarray(sorter), axis=-1)
    rows = _search_rows(seq, vals)
    if rows.size == 0:
        rows = np.zeros((1, 0), seq.dtype)
    r = _bisect(rows, vals, seq.ndim > 1, right)
    r = np.asarray(r, np.int32 if out_int32 else np.int64)
    if out is None:
        return r
    np.copyto(out, r)
    return out


#: the dtypes the compiled searchsorted (``jit_binning.py``) is compiled for
_JIT_SEARCH = ("float32", "float64", "int64", "int32", "int16", "int8", "uint8")


def searchsorted_matcher(node: NodeInfo):
    """``aten::searchsorted.Tensor`` with boundaries and values of one dtype of ``_JIT_SEARCH`` and
    no ``sorter``: the compiled kernel (compiled now, at load); None otherwise (the numpy kernel)."""
    from srcore.plugin import TensorType

    if node.op != "aten::searchsorted.Tensor" or len(node.args) < 2:
        return None
    seq_t, val_t = node.args[0].type, node.args[1].type
    if not (isinstance(seq_t, TensorType) and isinstance(val_t, TensorType) and seq_t.dtype == val_t.dtype
            and seq_t.dtype in _JIT_SEARCH):
        return None
    try:
        if not node.is_const("sorter") or node.const("sorter") is not None:
            return None
    except KeyError:    # a node without the argument (and no schema to give its default)
        pass
    from . import jit_binning as J

    try:
        int32 = node.const("out_int32", None)
    except KeyError:
        int32 = None
    for o in ("int32", "int64") if int32 is None else ("int32" if int32 else "int64",):
        J.compile_search(seq_t.dtype, o)

    def searchsorted_jit(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None, out=None):
        if (sorter is not None or not isinstance(self, np.ndarray) or self.dtype != sorted_sequence.dtype
                or self.dtype.name not in _JIT_SEARCH):
            return searchsorted(sorted_sequence, self, out_int32=out_int32, right=right, side=side, sorter=sorter,
                                out=out)
        right = _search_side(right, side)
        rows = _search_rows(sorted_sequence, self)
        vals = self.reshape(rows.shape[0], self.shape[-1]) if sorted_sequence.ndim > 1 else self.reshape(1, self.size)
        dt = np.int32 if out_int32 else np.int64
        res = out if (out is not None and out.flags.c_contiguous and out.dtype == dt and out.shape == self.shape) \
            else np.empty(self.shape, dt)
        J.search_rows(rows, vals, res.reshape(vals.shape), right)
        if out is not None and res is not out:
            np.copyto(out, res)
            return out
        return res
    return searchsorted_jit


def diag(self, diagonal=0, *, out=None):
    """``aten::diag``: a 1-D tensor to a matrix with it on diagonal ``k``, a matrix to its diagonal."""
    if self.ndim not in (1, 2):
        raise KernelError(f"diag(): Supports 1D or 2D tensors. Got {self.ndim}D")
    r = np.diag(self, diagonal)
    if out is None:
        return r.copy()
    np.copyto(out, r)
    return out


def index_select(self, dim, index, *, out=None):
    """``aten::index_select``: a 0-d or 1-d ``index`` along ``dim``."""
    idx = index.reshape(-1)
    _check_bounds(idx, self.shape[_dim(dim, self.ndim)] if self.ndim else 1, dim, "index_select")
    if self.ndim == 0:
        r = self.reshape(1)[idx].reshape(())
        if out is None:
            return r
        np.copyto(out, r)
        return out
    # the bounds are checked above, so "clip" changes nothing; with ``out`` numpy's default "raise"
    # first takes into a temporary copy (13.5 against 4.6 us for 8 rows of 4000 floats)
    return np.take(self, idx, axis=_dim(dim, self.ndim), out=out, mode="clip")


def _key(indices):
    # None keeps a dimension; uint8 masks are torch's legacy bool masks
    return tuple(slice(None) if i is None else i.astype(bool) if i.dtype == np.uint8 else i for i in indices)


def index(self, indices):
    """``aten::index.Tensor``: advanced indexing; a None entry keeps its dimension (``:``)."""
    try:
        r = self[_key(indices)]
    except IndexError as exc:
        raise KernelError(f"index: {exc}") from exc
    return r if isinstance(r, np.ndarray) else np.asarray(r)


def masked_select(self, mask):
    """``aten::masked_select``: a 1-d tensor of the elements where ``mask`` (broadcast) is true."""
    x, m = np.broadcast_arrays(self, mask)
    return x[m.astype(bool, copy=False)]


def nonzero(self):
    """``aten::nonzero``: an int64 ``(n, ndim)`` tensor of indices."""
    return np.argwhere(self).astype(np.int64, copy=False)


def where_nonzero(condition):
    """``aten::where(Tensor condition) -> Tensor[]``: one int64 index tensor per dimension."""
    return [i.astype(np.int64, copy=False) for i in np.nonzero(condition)]


def index_put_(self, indices, values, accumulate=False):
    """``aten::index_put_`` (``x[mask] = v``): writes into and returns ``self``; ``accumulate`` adds."""
    key = _key(indices)
    try:
        if accumulate:
            np.add.at(self, key, values)
        else:
            self[key] = values
    except IndexError as exc:
        raise KernelError(f"index_put_: {exc}") from exc
    return self


def index_put(self, indices, values, accumulate=False, *, out=None):
    """``aten::index_put``: a copy of ``self`` with the values put."""
    if out is None:
        out = self.copy()
    else:
        np.copyto(out, self)
    return index_put_(out, indices, values, accumulate)


def one_hot(self, num_classes=-1):
    """``aten::one_hot``: int64 ``self.shape + (num_classes,)``; ``-1`` infers ``max(self) + 1``.

    A native kernel: with ``num_classes=-1`` the output shape depends on the values.
    """
    if self.dtype != np.int64:
        raise KernelError(f"one_hot is only applicable to index tensor of type int64 (LongTensor), got {self.dtype}")
    if num_classes < -1:
        raise KernelError(f"one_hot: num_classes must be -1 (infer) or non-negative, got {num_classes}")
    if self.size == 0:
        if num_classes == -1:
            raise KernelError("one_hot: can not infer the total number of classes from an empty tensor")
        return np.zeros(self.shape + (num_classes,), np.int64)
    lo, hi = int(self.min()), int(self.max())
    if lo < 0:
        raise KernelError(f"one_hot: class values must be non-negative, got {lo}")
    if num_classes == -1:
        num_classes = hi + 1
    elif hi >= num_classes:
        raise KernelError(f"one_hot: class values must be smaller than num_classes={num_classes}, got {hi}")
    return (self[..., None] == np.arange(num_classes)).astype(np.int64)
