"""Pooling: max/avg pool 1-D/2-D, adaptive avg pool 1-D/2-D, adaptive max pool 2-D.

Windowed pools pad once and fold the kernel taps with strided slices
(``np.maximum`` / ``np.add`` into ``out``). Adaptive average pooling is
separable: ``P_h @ x @ P_w.T`` with averaging matrices, and the
global (output 1) case is a plain mean.
"""
from __future__ import annotations

import itertools
import threading

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import NodeInfo, Specialized

from . import parallel as _par
from .per_shape import PerShape
from .workspace import SharedWorkspace


def _tup(v, nd, default=None):
    if v is None or (not isinstance(v, int) and len(v) == 0):
        return default
    if isinstance(v, int):
        return (v,) * nd
    v = tuple(int(i) for i in v)
    return v * nd if len(v) == 1 else v


def _geometry(sp, ks, stride, pad, dil, ceil_mode):
    """Output sizes and the padded extent each dim needs."""
    osz, ext = [], []
    for n, k, s, p, d in zip(sp, ks, stride, pad, dil):
        if p > k // 2:
            raise KernelError(f"pool: padding {p} should be at most half of kernel size {k}")
        span = n + 2 * p - d * (k - 1) - 1
        o = (span + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (o - 1) * s >= n + p:
            o -= 1  # the last window must start inside the input or left padding
        if o <= 0:
            raise KernelError(f"pool: output size {o} is too small for input size {n} and kernel {k}")
        osz.append(o)
        ext.append(max(n + 2 * p, (o - 1) * s + d * (k - 1) + 1))
    return tuple(osz), tuple(ext)


# per-thread padded-input scratch shared by every pooling node (see workspace.py)
_WS = SharedWorkspace()


def _padded(x, nd, pad, ext, fill):
    """``x`` padded with ``fill`` to ``ext``; float inputs use the shared scratch (only the
    border slabs are filled, then the interior copied), others a fresh array."""
    sp = x.shape[-nd:]
    if all(p == 0 for p in pad) and ext == sp:
        return x
    if x.dtype.kind != "f":
        xp = np.full(x.shape[:-nd] + ext, fill, x.dtype)
    else:
        xp = _WS.get(None, "pad", x.shape[:-nd] + ext, x.dtype)
        for d, (p, n, e) in enumerate(zip(pad, sp, ext)):
            pre = (Ellipsis,) + (slice(None),) * d
            post = (slice(None),) * (nd - d - 1)
            if p:
                xp[pre + (slice(0, p),) + post] = fill
            if p + n < e:
                xp[pre + (slice(p + n, e),) + post] = fill
    xp[(Ellipsis,) + tuple(slice(p, p + n) for p, n in zip(pad, sp))] = x
    return xp


def _taps(ks, dil, stride, osz):
    for idx in itertools.product(*[range(k) for k in ks]):
        yield (Ellipsis,) + tuple(slice(i * d, i * d + s * (o - 1) + 1, s)
                                  for i, d, s, o in zip(idx, dil, stride, osz))


def _lowest(dtype):
    """The padding value of max pooling: -inf, or the smallest integer of an integer dtype."""
    dtype = np.dtype(dtype)
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _tap_range(t, n, o, s, p, d):
    """Output indices ``[lo, hi)`` whose tap ``t`` reads inside an input of size ``n``, and the
    input index of the first one (input index = out index * s - p + t * d)."""
    off = t * d - p
    lo = max(0, -(off // s))
    hi = min(o, (n - 1 - off) // s + 1) if n - 1 - off >= 0 else 0
    return lo, max(lo, hi), lo * s + off


def _max_pool(nd, x, kernel_size, stride, padding, dilation, ceil_mode, out):
    ks = _tup(kernel_size, nd)
    st = _tup(stride, nd, ks)
    pad, dil = _tup(padding, nd, (0,) * nd), _tup(dilation, nd, (1,) * nd)
    osz, _ = _geometry(x.shape[-nd:], ks, st, pad, dil, ceil_mode)
    if out is None:
        out = np.empty(x.shape[:-nd] + osz, x.dtype)
    # max is separable: reduce one spatial dim at a time (k-1 maximum passes per dim instead of
    # prod(k) - 1 over the output; 3x3 s2 on 64x112x112: 4 passes instead of 8, ~2x faster).
    # No padded copy: a tap that reaches into the padding only updates the outputs whose input
    # index is inside; the intermediate comes from the per-thread workspace (resnet's pool,
    # 1x64x112x112 3x3 s2 p1: 1.02 -> 0.76 ms in one process, alternated)
    cur = x
    for dim in range(nd):
        ax = cur.ndim - nd + dim
        n, k, s, d, o, p = cur.shape[ax], ks[dim], st[dim], dil[dim], osz[dim], pad[dim]
        if dim == nd - 1:
            dst = out
        else:
            dst = _WS.get(None, f"maxpool{dim % 2}", cur.shape[:ax] + (o,) + cur.shape[ax + 1:], x.dtype)
        lead = (slice(None),) * ax
        taps = [_tap_range(t, n, o, s, p, d) for t in range(k)]
        full = next((i for i, (lo, hi, _) in enumerate(taps) if lo == 0 and hi == o), None)
        if full is None:
            dst.fill(_lowest(x.dtype))
        else:
            lo, hi, start = taps.pop(full)
            np.copyto(dst, cur[lead + (slice(start, start + s * (o - 1) + 1, s),)])
        for lo, hi, start in taps:
            if hi > lo:
                view = dst[lead + (slice(lo, hi),)]
                np.maximum(view, cur[lead + (slice(start, start + s * (hi - lo - 1) + 1, s),)], out=view)
        cur = dst
    return out


def _max_pool_parts(nd, threads, x, kernel_size, stride, padding, dilation, ceil_mode, out):
    """:func:`_max_pool` split by channel (dim -nd-1) over ``threads`` parts of :mod:`.parallel`;
    each part pads its own channels in its thread's scratch."""
    if threads <= 1 or x.ndim < nd + 1 or x.shape[-nd - 1] < 2 * threads:
        return _max_pool(nd, x, kernel_size, stride, padding, dilation, ceil_mode, out)
    if out is None:
        ks = _tup(kernel_size, nd)
        osz, _ = _geometry(x.shape[-nd:], ks, _tup(stride, nd, ks), _tup(padding, nd, (0,) * nd),
                           _tup(dilation, nd, (1,) * nd), ceil_mode)
        out = np.empty(x.shape[:-nd] + osz, x.dtype)
    chunks = _par.split(x.shape[-nd - 1], threads)
    lead = (Ellipsis,)

    def part(i):
        c = lead + (slice(*chunks[i]),) + (slice(None),) * nd
        _max_pool(nd, x[c], kernel_size, stride, padding, dilation, ceil_mode, out[c])
    _par.run_parts(part, threads, threads)
    return out


# a max pool is split over threads only when its input has at least this many elements
# (resnet's 64x112x112 pool: 800k; a hand-over costs ~20-100 us)
MAX_POOL_PARALLEL_MIN = 1 << 18


def _tiling_max_pool(nd, shape, dtype, ks):
    """A ``fn(x, out=None)`` for the max pool of ``shape`` inputs whose windows tile the input
    (stride == kernel, no padding, no dilation, floor mode): per spatial dim, k - 1
    ``np.maximum`` passes over strided views, the first straight from the input (no copy), the
    intermediate in a per-thread buffer made once. The generic kernel costs ~15 us of Python on
    a 1x16x8x8 2x2 pool (argument parsing, tap ranges, workspace look-ups); this ~3 us."""
    sp = shape[-nd:]
    osz = tuple(n // k for n, k in zip(sp, ks))
    if any(o == 0 for o in osz):
        return None
    lead = shape[:-nd]
    oshape = lead + osz
    # the input part each output covers (a remainder beyond the last window is never read)
    views = []
    for dim in range(nd):
        pre = (Ellipsis,) + (slice(None),) * dim   # dims already reduced
        post = tuple(slice(0, o * k) for o, k in zip(osz[dim + 1:], ks[dim + 1:]))
        k = ks[dim]
        views.append([pre + (slice(t, osz[dim] * k, k),) + post for t in range(k)])
    inter = [lead + osz[:d + 1] + tuple(o * k for o, k in zip(osz[d + 1:], ks[d + 1:])) for d in range(nd - 1)]
    local = threading.local()
    maximum, copyto, empty = np.maximum, np.copyto, np.empty

    def reduce_dim(src, sl, dst):
        if len(sl) == 1:
            copyto(dst, src[sl[0]])
            return
        maximum(src[sl[0]], src[sl[1]], out=dst)
        for t in sl[2:]:
            maximum(dst, src[t], out=dst)

    def tiling_max_pool(x, out=None):
        if out is None:
            out = empty(oshape, x.dtype)
        tmp = getattr(local, "tmp", None)
        if tmp is None:
            tmp = local.tmp = [empty(s, dtype) for s in inter]
        cur = x
        for dim in range(nd):
            dst = out if dim == nd - 1 else tmp[dim]
            reduce_dim(cur, views[dim], dst)
            cur = dst
        return out
    return tiling_max_pool


# max pool plans kept per node (one per input shape and dtype)
MAX_POOL_PLANS = 32


def _const_max_pool(nd, node: NodeInfo):
    """Constant hyper-parameters that make the windows tile the input: a per-shape planned
    :func:`_tiling_max_pool` (other shapes of the node: the generic kernel); else None."""
    have = {a.name for a in node.args}
    if not all(node.is_const(n) for n in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
               if n in have):
        return None
    get = lambda n, d: node.const(n) if n in have else d  # noqa: E731
    try:
        ks = _tup(get("kernel_size", None), nd)
        st = _tup(get("stride", ()), nd, ks)
        pad = _tup(get("padding", 0), nd, (0,) * nd)
        dil = _tup(get("dilation", 1), nd, (1,) * nd)
    except (TypeError, ValueError):
        return None
    if ks is None or st != ks or any(pad) or any(d != 1 for d in dil) or any(k <= 0 for k in ks):
        return None
    ceil_mode = bool(get("ceil_mode", False))
    plans: dict = {}
    lock = threading.Lock()

    def max_pool_tiled(self, out=None):
        key = (self.shape, self.dtype)
        fn = plans.get(key, False)
        if fn is False:
            fn = None
            if self.ndim in (nd + 1, nd + 2) and (not ceil_mode or all(n % k == 0 for n, k in zip(
                    self.shape[-nd:], ks))):
                fn = _tiling_max_pool(nd, self.shape, self.dtype, ks)
            with lock:
                if len(plans) >= MAX_POOL_PLANS:
                    plans.clear()
                plans[key] = fn
        if fn is None:
            return _max_pool(nd, self, ks, st, pad, dil, ceil_mode, out)
        return fn(self, out)
    return Specialized(max_pool_tiled, args=(0,))


def max_pool_matcher(node: NodeInfo):
    """``aten::max_pool{1,2}d``: the kernel with the intra-op thread count fixed at load
    (:func:`.parallel.split_threads`, opt-in); at 1 thread, constant windows that tile the input
    (stride == kernel, no padding) get :func:`_const_max_pool`, else the plain kernel (never None)."""
    nd = 2 if node.op.endswith("2d") else 1
    generic = max_pool2d if nd == 2 else max_pool1d
    threads = _par.split_threads()
    if threads <= 1:
        return _timed_max_pool_split(nd, node) or _const_max_pool(nd, node) or generic

    def max_pool_mt(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, out=None):
        if self.size < MAX_POOL_PARALLEL_MIN:
            return _max_pool(nd, self, kernel_size, stride, padding, dilation, ceil_mode, out)
        return _max_pool_parts(nd, threads, self, kernel_size, stride, padding, dilation, ceil_mode, out)
    return max_pool_mt


def _timed_max_pool_split(nd, node: NodeInfo):
    """At more than one intra-op thread, a float32 max pool of static input shape with at least
    :data:`MAX_POOL_PARALLEL_MIN` elements and constant hyper-parameters: split by channel on the
    part pool (:func:`_max_pool_parts`, the same bits) where that times faster at load than one
    thread (resnet_small's 1x64x112x112 3x3 s2 pool: ~0.9 ms on one thread); else None."""
    from . import row_split as RS

    shape = RS.static_shape(node.args[0].type if node.args else None)
    # the shape first: asking the BLAS its thread count (threadpoolctl) costs ~3 ms the first time
    if (shape is None or len(shape) < nd + 1 or node.args[0].type.dtype != "float32"
            or np.prod(shape) < MAX_POOL_PARALLEL_MIN):
        return None
    threads = _par.intra_op_threads()
    if threads <= 1 or shape[-nd - 1] < 2 * threads:
        return None
    have = {a.name for a in node.args}
    names = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
    if not all(node.is_const(n) for n in names if n in have):
        return None
    defaults = {"stride": (), "padding": 0, "dilation": 1, "ceil_mode": False}
    hp = tuple(node.const(n) if n in have else defaults[n] for n in names)
    try:
        x = RS.sample(shape)
        out = _max_pool(nd, x, *hp, None)
    except (KernelError, TypeError, ValueError):
        return None      # a bad pool: the generic kernel reports it, naming the node

    def one(x, out):
        return _max_pool(nd, x, *hp, out)

    def split(x, out):
        return _max_pool_parts(nd, threads, x, *hp, out)
    if not RS.split_pays(one, split, (x, out)):
        return None

    def max_pool_split(self, out=None):
        if self.shape == shape and self.dtype == np.float32:
            return _max_pool_parts(nd, threads, self, *hp, out)
        return _max_pool(nd, self, *hp, out)
    return Specialized(max_pool_split, args=(0,))


def max_pool1d(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, out=None):
    """``aten::max_pool1d`` (empty stride = kernel size); NaN propagates like torch."""
    return _max_pool(1, self, kernel_size, stride, padding, dilation, ceil_mode, out)


def max_pool2d(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, out=None):
    """``aten::max_pool2d``."""
    return _max_pool(2, self, kernel_size, stride, padding, dilation, ceil_mode, out)


def max_pool3d(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, out=None):
    """``aten::max_pool3d`` (video models)."""
    return _max_pool(3, self, kernel_size, stride, padding, dilation, ceil_mode, out)


def _max_pool_with_indices(nd, x, kernel_size, stride, padding, dilation, ceil_mode, out):
    ks = _tup(kernel_size, nd)
    st = _tup(stride, nd, ks)
    pad, dil = _tup(padding, nd, (0,) * nd), _tup(dilation, nd, (1,) * nd)
    sp = x.shape[-nd:]
    osz, ext = _geometry(sp, ks, st, pad, dil, ceil_mode)
    xp = _padded(x, nd, pad, ext, _lowest(x.dtype))
    if out is None:
        out = (np.empty(x.shape[:-nd] + osz, x.dtype), np.empty(x.shape[:-nd] + osz, np.int64))
    vals, idxs = out
    strides = [int(np.prod(sp[i + 1:])) for i in range(nd)]   # flat index over the spatial dims
    # torch starts from the first in-bounds element of each window, then keeps strictly larger ones (or NaN)
    first = 0
    for i, (o, s, p, d, n, m) in enumerate(zip(osz, st, pad, dil, sp, strides)):
        start = np.arange(o) * s - p
        f = np.where(start < 0, start + d * (-(start // d)), start)
        first = np.add.outer(first, f * m) if i else f * m
    vals.fill(_lowest(vals.dtype))
    idxs[...] = first
    for idx, sl in zip(itertools.product(*[range(k) for k in ks]), _taps(ks, dil, st, osz)):
        v = xp[sl]
        take = (v > vals) | np.isnan(v)
        pos = 0
        for i, (k, o, s, p, d, m) in enumerate(zip(idx, osz, st, pad, dil, strides)):
            h = (np.arange(o) * s - p + k * d) * m
            pos = np.add.outer(pos, h) if i else h
        np.copyto(vals, v, where=take)
        np.copyto(idxs, np.broadcast_to(pos, idxs.shape), where=take)
    return out


def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, out=None):
    """``aten::max_pool2d_with_indices`` (what torch.export emits): (values, int64 flat H*W indices)."""
    return _max_pool_with_indices(2, self, kernel_size, stride, padding, dilation, ceil_mode, out)


def max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, out=None):
    """``aten::max_pool3d_with_indices``: (values, int64 flat D*H*W indices)."""
    return _max_pool_with_indices(3, self, kernel_size, stride, padding, dilation, ceil_mode, out)


def max_pool1d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, out=None):
    """``aten::max_pool1d_with_indices``."""
    return _max_pool_with_indices(1, self, kernel_size, stride, padding, dilation, ceil_mode, out)


def _divisor(n, k, s, p, osz, include_pad):
    start = np.arange(osz) * s - p
    end = np.minimum(start + k, n + p)
    if not include_pad:
        start, end = np.maximum(start, 0), np.minimum(end, n)
    return end - start


def _avg_pool(nd, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out):
    ks = _tup(kernel_size, nd)
    st = _tup(stride, nd, ks)
    pad = _tup(padding, nd, (0,) * nd)
    sp = x.shape[-nd:]
    osz, ext = _geometry(sp, ks, st, pad, (1,) * nd, ceil_mode)
    xp = _padded(x, nd, pad, ext, 0)
    if out is None:
        out = np.empty(x.shape[:-nd] + osz, x.dtype)
    for t, sl in enumerate(_taps(ks, (1,) * nd, st, osz)):
        if t == 0:
            np.copyto(out, xp[sl])
        else:
            np.add(out, xp[sl], out=out)
    if divisor_override:
        np.divide(out, divisor_override, out=out)
        return out
    div = np.ones((1,) * nd)
    for i, (n, k, s, p, o) in enumerate(zip(sp, ks, st, pad, osz)):
        d = _divisor(n, k, s, p, o, count_include_pad)
        div = div * d.reshape((1,) * i + (o,) + (1,) * (nd - i - 1))
    np.divide(out, div.astype(x.dtype), out=out)
    return out


def avg_pool1d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, out=None):
    """``aten::avg_pool1d``."""
    return _avg_pool(1, self, kernel_size, stride, padding, ceil_mode, count_include_pad, None, out)


def avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None, out=None):
    """``aten::avg_pool2d``."""
    return _avg_pool(2, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out)


def avg_pool3d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None, out=None):
    """``aten::avg_pool3d``."""
    return _avg_pool(3, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out)


def _bounds(n, o):
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)   # floor(i*n/o), ceil((i+1)*n/o)


def _avg_matrix(n, o, dtype):
    start, end = _bounds(n, o)
    m = np.zeros((o, n), dtype)
    for i, (a, b) in enumerate(zip(start, end)):
        m[i, a:b] = 1.0 / (b - a)
    return m


def _adaptive_avg(nd, x, output_size, out):
    osz = _tup(output_size, nd)
    sp = x.shape[-nd:]
    if out is None:
        out = np.empty(x.shape[:-nd] + osz, x.dtype)
    if all(o == 1 for o in osz):
        return np.mean(x, axis=tuple(range(-nd, 0)), keepdims=True, out=out)
    if nd == 1:
        return np.matmul(x, _avg_matrix(sp[0], osz[0], x.dtype).T, out=out)
    if nd == 2:
        tmp = np.matmul(_avg_matrix(sp[0], osz[0], x.dtype), x)
        return np.matmul(tmp, _avg_matrix(sp[1], osz[1], x.dtype).T, out=out)
    mats = [_avg_matrix(n, o, x.dtype) for n, o in zip(sp, osz)]
    return np.einsum("...dhw,Dd,Hh,Ww->...DHW", x, *mats, out=out, optimize=True)


def adaptive_avg_pool1d(self, output_size, out=None):
    """``aten::adaptive_avg_pool1d``."""
    return _adaptive_avg(1, self, output_size, out)


def adaptive_avg_pool3d(self, output_size, out=None):
    """``aten::adaptive_avg_pool3d``: one averaging matrix per spatial dim."""
    return _adaptive_avg(3, self, output_size, out)


def adaptive_avg_pool2d(self, output_size, out=None):
    """``aten::adaptive_avg_pool2d``."""
    return _adaptive_avg(2, self, output_size, out)


def _global_avg_pool2d(self, out=None):
    return np.mean(self, axis=(-2, -1), keepdims=True, out=out)


def _global_avg_pool1d(self, out=None):
    return np.mean(self, axis=-1, keepdims=True, out=out)


def adaptive_avg_pool_matcher(node: NodeInfo):
    """Constant output size 1 (global average pooling): one ``np.mean``; else the generic kernel
    (never None: a declining matcher makes dispatch skip the kernel)."""
    size = node.const("output_size", None)
    if size is None or any(o != 1 for o in size):
        return adaptive_avg_pool2d if node.op.endswith("2d") else adaptive_avg_pool1d
    fn = _global_avg_pool2d if node.op.endswith("2d") else _global_avg_pool1d
    return Specialized(fn, args=(0,))


def adaptive_max_pool1d(self, output_size, out=None):
    """``aten::adaptive_max_pool1d`` (text CNNs' max over time): (values, int64 indices into L)."""
    (o,) = _tup(output_size, 1)
    lead = self.shape[:-1]
    if out is None:
        out = (np.empty(lead + (o,), self.dtype), np.empty(lead + (o,), np.int64))
    vals, idxs = out
    start, end = _bounds(self.shape[-1], o)
    for i in range(o):
        win = self[..., start[i]:end[i]]
        a = np.argmax(win, axis=-1)   # NaN wins, like torch
        vals[..., i] = np.take_along_axis(win, a[..., None], -1)[..., 0]
        idxs[..., i] = a + start[i]
    return out


def adaptive_max_pool2d(self, output_size, out=None):
    """``aten::adaptive_max_pool2d``: (values, flat int64 indices into H*W)."""
    oh, ow = _tup(output_size, 2)
    H, W = self.shape[-2:]
    lead = self.shape[:-2]
    if out is None:
        out = (np.empty(lead + (oh, ow), self.dtype), np.empty(lead + (oh, ow), np.int64))
    vals, idxs = out
    hs, he = _bounds(H, oh)
    ws_, we = _bounds(W, ow)
    for i in range(oh):
        for j in range(ow):
            win = self[..., hs[i]:he[i], ws_[j]:we[j]]
            ww = we[j] - ws_[j]
            flat = win.reshape(lead + (win.shape[-2] * ww,))   # not -1: an empty batch has no size to infer
            a = np.argmax(flat, axis=-1)   # NaN wins, like torch
            vals[..., i, j] = np.take_along_axis(flat, a[..., None], -1)[..., 0]
            idxs[..., i, j] = (hs[i] + a // ww) * W + ws_[j] + a % ww
    return out


# --- compiled max pools with indices (``jit_pool_indices.py``, numba) -------------------------------
_JIT_INDEX_DTYPES = ("float32", "float64")


def _planes_of(x):
    """``x`` as (planes, H, W) C-contiguous (a view when it is one already)."""
    x = np.ascontiguousarray(x)
    return x.reshape((-1,) + x.shape[-2:])


def _into(out, shape, dtype):
    """``(vals, idxs)`` of ``shape``: ``out``'s arrays when C-contiguous (written in place), else new."""
    if (out is not None and all(a.flags.c_contiguous and a.shape == shape for a in out)
            and out[0].dtype == dtype and out[1].dtype == np.int64):
        return out, False
    return (np.empty(shape, dtype), np.empty(shape, np.int64)), out is not None


def _handed_back(res, copy: bool, out):
    """``res``, or ``out`` with ``res`` copied into it (``copy``: ``out``'s arrays were not C-contiguous)."""
    if copy:
        np.copyto(out[0], res[0])
        np.copyto(out[1], res[1])
        return out
    return res


def _float_2d_input(node: NodeInfo) -> bool:
    from srcore.plugin import TensorType

    src = node.args[0].type if node.args else None
    return (isinstance(src, TensorType) and src.dtype in _JIT_INDEX_DTYPES and src.shape is not None
            and len(src.shape) in (3, 4))


def _max_pool2d_windows(sp, kernel_size, stride, padding, dilation, ceil_mode):
    """(output size, the kernel's geometry ints) of a 2-D max pool over ``sp``."""
    ks = _tup(kernel_size, 2)
    st = _tup(stride, 2, ks)
    pad, dil = _tup(padding, 2, (0, 0)), _tup(dilation, 2, (1, 1))
    osz, _ = _geometry(sp, ks, st, pad, dil, ceil_mode)
    return osz, (ks[0], ks[1], st[0], st[1], pad[0], pad[1], dil[0], dil[1])


def max_pool2d_with_indices_matcher(node: NodeInfo):
    """``aten::max_pool2d_with_indices`` on a float32/float64 tensor of rank 3 or 4: the compiled
    kernel (compiled now, at load); None otherwise (the numpy kernel)."""
    if not _float_2d_input(node):
        return None
    from . import jit_pool_indices as J

    J.compile_for(node.args[0].type.dtype)
    windows = PerShape(node, ("kernel_size", "stride", "padding", "dilation", "ceil_mode"), _max_pool2d_windows)

    def max_pool2d_with_indices_jit(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False,
                                    out=None):
        if self.dtype.name not in _JIT_INDEX_DTYPES or self.ndim not in (3, 4):
            return max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode, out)
        osz, geo = windows(self.shape[-2:], kernel_size, stride, padding, dilation, ceil_mode)
        shape = self.shape[:-2] + osz
        res, copy = _into(out, shape, self.dtype)
        J.max_pool2d_planes(_planes_of(self), res[0].reshape((-1,) + osz), res[1].reshape((-1,) + osz), *geo)
        return _handed_back(res, copy, out)
    return max_pool2d_with_indices_jit


def adaptive_max_pool2d_matcher(node: NodeInfo):
    """``aten::adaptive_max_pool2d`` on a float32/float64 tensor of rank 3 or 4: the compiled kernel
    (compiled now, at load); None otherwise (the numpy kernel)."""
    if not _float_2d_input(node):
        return None
    from . import jit_pool_indices as J

    J.compile_for(node.args[0].type.dtype)

    def adaptive_max_pool2d_jit(self, output_size, out=None):
        oh, ow = _tup(output_size, 2)
        if (self.dtype.name not in _JIT_INDEX_DTYPES or self.ndim not in (3, 4) or oh <= 0 or ow <= 0
                or 0 in self.shape[-2:]):
            return adaptive_max_pool2d(self, output_size, out)
        shape = self.shape[:-2] + (oh, ow)
        res, copy = _into(out, shape, self.dtype)
        J.adaptive_max_pool2d_planes(_planes_of(self), res[0].reshape(-1, oh, ow), res[1].reshape(-1, oh, ow))
        return _handed_back(res, copy, out)
    return adaptive_max_pool2d_jit


# --- compiled avg_pool3d (``jit_avg_pool.py``, numba) -----------------------------------------------


def _avg_pool_windows(nd: int):
    """``windows(sp, kernel_size, stride, padding, ceil_mode)`` of an ``nd``-D average pool: (output
    size, kernel + stride + padding as the 3-D kernel takes them: a missing depth is one plane, a window
    of 1, a stride of 1 and no padding)."""
    lead = 3 - nd

    def windows(sp, kernel_size, stride, padding, ceil_mode):
        ks = _tup(kernel_size, nd)
        st = _tup(stride, nd, ks)
        pad = _tup(padding, nd, (0,) * nd)
        osz, _ = _geometry(sp, ks, st, pad, (1,) * nd, ceil_mode)
        return osz, (1,) * lead + ks + (1,) * lead + st + (0,) * lead + pad
    return windows


def _avg_pool_matcher(node: NodeInfo, nd: int, plain):
    """The compiled average pool of ``nd`` (2 or 3) spatial dims on a float32/float64 tensor (compiled
    now, at load), or None (``plain``, the numpy kernel, runs). A 2-D pool is the 3-D kernel with a depth
    of one: ATen's 2-D and 3-D CPU kernels share their window, divisor and summation order."""
    from srcore.plugin import TensorType

    src = node.args[0].type if node.args else None
    if not (isinstance(src, TensorType) and src.dtype in _JIT_INDEX_DTYPES):
        return None
    from . import jit_avg_pool as J

    J.compile_for(src.dtype)
    windows = PerShape(node, ("kernel_size", "stride", "padding", "ceil_mode"), _avg_pool_windows(nd))
    name, lead = f"avg_pool{nd}d", (1,) * (3 - nd)   # (a 2-D pool's depth: one plane)

    def avg_pool_jit(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                     divisor_override=None, out=None):
        if self.dtype.name not in _JIT_INDEX_DTYPES or self.ndim not in (nd + 1, nd + 2):
            return plain(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out)
        if divisor_override is not None and divisor_override == 0:
            raise KernelError(f"{name}: divisor must be not zero")
        osz, geo = windows(self.shape[-nd:], kernel_size, stride, padding, ceil_mode)
        shape = self.shape[:-nd] + osz
        res = out if (out is not None and out.flags.c_contiguous and out.shape == shape
                      and out.dtype == self.dtype) else np.empty(shape, self.dtype)
        D, H, W = lead + self.shape[-nd:]
        J.avg_pool3d_flat(np.ascontiguousarray(self).reshape(-1), res.reshape(-1), self.size // (D * H * W) if D * H * W
                          else 0, D, H, W, *lead, *osz, *geo, bool(count_include_pad),
                          int(divisor_override or 0))
        if out is not None and res is not out:
            np.copyto(out, res)
            return out
        return res
    avg_pool_jit.__name__ = f"{name}_jit"
    return avg_pool_jit


def avg_pool3d_matcher(node: NodeInfo):
    """``aten::avg_pool3d`` on a float32/float64 tensor: the compiled kernel; None otherwise."""
    return _avg_pool_matcher(node, 3, avg_pool3d)


def avg_pool2d_matcher(node: NodeInfo):
    """``aten::avg_pool2d`` on a float32/float64 tensor: the compiled 3-D kernel with a depth of one
    (PoolFormer's 3x3 stride-1 ``count_include_pad=False`` token mixer took ~10 numpy calls: pad, 9
    slab adds, a divisor array); None otherwise."""
    return _avg_pool_matcher(node, 2, avg_pool2d)
