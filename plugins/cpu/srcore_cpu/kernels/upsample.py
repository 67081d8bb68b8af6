"""Upsampling: nearest (1-3 d), (bi/tri)linear, bicubic, separable over the spatial dims, and
``aten::__interpolate``.

Index and weight arithmetic follows ATen's ``UpSample.h`` (``nearest_idx``,
``area_pixel_compute_source_index``, ``get_cubic_upsample_coefficients``) in the
input's float type, so results match torch bit-for-bit on the indices and
closely on the weights.
"""
from __future__ import annotations

import functools
import math
import os

import numpy as np

from srcore.plugin import KernelError, NodeInfo, Specialized


def _ftype(x):
    return x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)


def _scale(n_in, n_out, scale, align_corners, ft):
    if align_corners:
        return ft.type((n_in - 1) / (n_out - 1)) if n_out > 1 else ft.type(0)
    if scale is not None and scale > 0:
        return ft.type(1.0 / scale)
    return ft.type(n_in) / ft.type(n_out)


def _frozen_cache(fn):
    """Memoize ``fn`` (index and weight tables of a resize: a few small numpy ops, ~10 us per call on
    small tensors); the arrays are returned read-only, since every call shares them."""
    @functools.lru_cache(maxsize=256)
    def cached(*args):
        r = fn(*args)
        for a in (r if isinstance(r, tuple) else (r,)):
            a.setflags(write=False)
        return r
    return functools.wraps(fn)(cached)


@_frozen_cache
def _nearest_index(n_in, n_out, scale, exact, ft):
    if n_out == n_in and not exact:
        return np.arange(n_out)
    s = _scale(n_in, n_out, scale, False, ft)
    dst = np.arange(n_out, dtype=ft)
    src = np.floor((dst + ft.type(0.5)) * s) if exact else np.floor(dst * s)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _sizes(x, nd, output_size, scale_factors):
    sp = x.shape[-nd:]
    if output_size is not None:
        osz = tuple(int(o) for o in output_size)
        return osz, [None] * nd if not scale_factors else list(scale_factors)
    if scale_factors is None:
        raise KernelError("upsample: either output_size or scale_factors must be given")
    sf = list(scale_factors)
    if len(sf) == 1:
        sf = sf * nd
    return tuple(int(n * s) for n, s in zip(sp, sf)), sf


def nearest(x, osz, scales, exact=False, out=None):
    """Nearest-neighbour resize of the trailing ``len(osz)`` dims."""
    nd = len(osz)
    ft = _ftype(x)
    for i, (n, o, s) in enumerate(zip(x.shape[-nd:], osz, scales)):
        idx = _nearest_index(n, o, s, exact, ft)
        axis = x.ndim - nd + i
        last = i == nd - 1
        x = np.take(x, idx, axis=axis, out=out if last and out is not None else None)
    return x


@_frozen_cache
def linear_taps(n, o, scale, align_corners, ft):
    """The two source indices and weights ``(i0, i1, l0, l1)`` of each of ``o`` outputs resampled
    linearly from ``n`` inputs (ATen's ``area_pixel_compute_source_index``, in float type ``ft``)."""
    sc = _scale(n, o, scale, align_corners, ft)
    dst = np.arange(o, dtype=ft)
    if align_corners:
        src = sc * dst
    else:
        src = np.maximum(sc * (dst + ft.type(0.5)) - ft.type(0.5), ft.type(0))
    i0 = np.minimum(src.astype(np.int64), n - 1)
    i1 = i0 + (i0 < n - 1)
    l1 = np.clip(src - i0.astype(ft), 0, 1).astype(ft)
    l0 = (ft.type(1) - l1).astype(ft)
    return i0, i1, l0, l1


def linear(x, osz, align_corners, scales, out=None):
    """(Bi/tri)linear resize of the trailing dims, one separable pass per dim."""
    nd = len(osz)
    ft = _ftype(x)
    for i, (n, o, s) in enumerate(zip(x.shape[-nd:], osz, scales)):
        i0, i1, l0, l1 = linear_taps(n, o, s, align_corners, ft)
        axis = x.ndim - nd + i
        bshape = (o,) + (1,) * (x.ndim - axis - 1)
        a = np.take(x, i0, axis=axis)
        np.multiply(a, l0.reshape(bshape), out=a)
        b = np.take(x, i1, axis=axis)
        np.multiply(b, l1.reshape(bshape), out=b)
        if i == nd - 1 and out is not None:
            x = np.add(a, b, out=out)
        else:
            x = np.add(a, b, out=a)
    return x


#: the cubic convolution constant torch uses (Keys' kernel with A = -0.75, as in OpenCV)
CUBIC_A = -0.75


def _cubic_weights(t, ft):
    """The 4 weights of taps ``floor(src) - 1 .. floor(src) + 2`` for fractions ``t`` (ATen's formulas)."""
    a = ft.type(CUBIC_A)
    one = ft.type(1)

    def conv1(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + one

    def conv2(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    t2 = one - t
    return [conv2(t + one), conv1(t), conv1(t2), conv2(t2 + one)]


def cubic_taps(n: int, o: int, scale, align_corners, ft):
    """``(idx, w)``: for each of ``o`` outputs along an axis of ``n`` inputs, the 4 input indices
    ``floor(src) - 1 .. floor(src) + 2`` clamped to the border (int64, (o, 4)) and their weights
    (``ft``, (o, 4)); ATen's coordinates (not clamped at 0: ``cubic=true``)."""
    sc = _scale(n, o, scale, align_corners, ft)
    dst = np.arange(o, dtype=ft)
    src = (sc * dst if align_corners else sc * (dst + ft.type(0.5)) - ft.type(0.5)).astype(ft)
    base = np.floor(src)
    weights = _cubic_weights((src - base).astype(ft), ft)
    base = base.astype(np.int64)
    idx = np.stack([np.clip(base + (k - 1), 0, n - 1) for k in range(4)], axis=1)
    return idx, np.stack([w.astype(ft) for w in weights], axis=1)


def bicubic(x, osz, align_corners, scales, out=None):
    """Bicubic resize of the last two dims: ATen's cubic convolution, taps clamped to the border.

    Unlike linear, the source coordinate is not clamped at 0 (ATen's ``cubic=true``). The
    width pass runs first, as ATen's nested loop sums the inner (width) taps first.
    """
    ft = _ftype(x)
    for i in (1, 0):
        n, o = x.shape[-2 + i], osz[i]
        idx, w = cubic_taps(n, o, scales[i], align_corners, ft)
        axis = x.ndim - 2 + i
        bshape = (o,) + (1,) * (x.ndim - axis - 1)
        acc = None
        for k in range(4):
            tap = np.take(x, idx[:, k], axis=axis)
            np.multiply(tap, w[:, k].reshape(bshape), out=tap)
            acc = tap if acc is None else np.add(acc, tap, out=acc)
        if i == 0 and out is not None:
            np.copyto(out, acc)
            return out
        x = acc
    return x


def _upsample_nearest_exact1d(self, output_size, scales=None, out=None):
    """``aten::_upsample_nearest_exact1d`` (source index ``floor((dst + 0.5) * scale)``)."""
    return nearest(self, tuple(output_size), [scales], exact=True, out=out)


def _upsample_nearest_exact1d_vec(input, output_size, scale_factors, out=None):
    """``aten::_upsample_nearest_exact1d.vec``."""
    osz, sc = _sizes(input, 1, output_size, scale_factors)
    return nearest(input, osz, sc, exact=True, out=out)


def _upsample_nearest_exact2d(self, output_size, scales_h=None, scales_w=None, out=None):
    """``aten::_upsample_nearest_exact2d`` (``interpolate(mode="nearest-exact")``)."""
    return nearest(self, tuple(output_size), [scales_h, scales_w], exact=True, out=out)


def _upsample_nearest_exact2d_vec(input, output_size, scale_factors, out=None):
    """``aten::_upsample_nearest_exact2d.vec``."""
    osz, sc = _sizes(input, 2, output_size, scale_factors)
    return nearest(input, osz, sc, exact=True, out=out)


def _upsample_nearest_exact3d(self, output_size, scales_d=None, scales_h=None, scales_w=None, out=None):
    """``aten::_upsample_nearest_exact3d``."""
    return nearest(self, tuple(output_size), [scales_d, scales_h, scales_w], exact=True, out=out)


def _upsample_nearest_exact3d_vec(input, output_size, scale_factors, out=None):
    """``aten::_upsample_nearest_exact3d.vec``."""
    osz, sc = _sizes(input, 3, output_size, scale_factors)
    return nearest(input, osz, sc, exact=True, out=out)


def upsample_nearest1d(self, output_size, scales=None, out=None):
    """``aten::upsample_nearest1d``."""
    return nearest(self, tuple(output_size), [scales], out=out)


def upsample_nearest1d_vec(input, output_size, scale_factors, out=None):
    """``aten::upsample_nearest1d.vec``."""
    osz, sc = _sizes(input, 1, output_size, scale_factors)
    return nearest(input, osz, sc, out=out)


def upsample_nearest3d(self, output_size, scales_d=None, scales_h=None, scales_w=None, out=None):
    """``aten::upsample_nearest3d``."""
    return nearest(self, tuple(output_size), [scales_d, scales_h, scales_w], out=out)


def upsample_nearest3d_vec(input, output_size, scale_factors, out=None):
    """``aten::upsample_nearest3d.vec``."""
    osz, sc = _sizes(input, 3, output_size, scale_factors)
    return nearest(input, osz, sc, out=out)


def upsample_linear1d(self, output_size, align_corners, scales=None, out=None):
    """``aten::upsample_linear1d``."""
    return linear(self, tuple(output_size), align_corners, [scales], out=out)


def upsample_linear1d_vec(input, output_size, align_corners, scale_factors, out=None):
    """``aten::upsample_linear1d.vec``."""
    osz, sc = _sizes(input, 1, output_size, scale_factors)
    return linear(input, osz, align_corners, sc, out=out)


def upsample_trilinear3d(self, output_size, align_corners, scales_d=None, scales_h=None, scales_w=None, out=None):
    """``aten::upsample_trilinear3d``."""
    return linear(self, tuple(output_size), align_corners, [scales_d, scales_h, scales_w], out=out)


def upsample_trilinear3d_vec(input, output_size, align_corners, scale_factors, out=None):
    """``aten::upsample_trilinear3d.vec``."""
    osz, sc = _sizes(input, 3, output_size, scale_factors)
    return linear(input, osz, align_corners, sc, out=out)


def upsample_bicubic2d(self, output_size, align_corners, scales_h=None, scales_w=None, out=None):
    """``aten::upsample_bicubic2d``."""
    return bicubic(self, tuple(output_size), align_corners, [scales_h, scales_w], out=out)


def upsample_bicubic2d_vec(input, output_size, align_corners, scale_factors, out=None):
    """``aten::upsample_bicubic2d.vec``."""
    osz, sc = _sizes(input, 2, output_size, scale_factors)
    return bicubic(input, osz, align_corners, sc, out=out)


def upsample_nearest2d(self, output_size, scales_h=None, scales_w=None, out=None):
    """``aten::upsample_nearest2d``."""
    return nearest(self, tuple(output_size), [scales_h, scales_w], out=out)


def upsample_nearest2d_vec(input, output_size, scale_factors, out=None):
    """``aten::upsample_nearest2d.vec``."""
    osz, sc = _sizes(input, 2, output_size, scale_factors)
    return nearest(input, osz, sc, out=out)


def upsample_bilinear2d(self, output_size, align_corners, scales_h=None, scales_w=None, out=None):
    """``aten::upsample_bilinear2d``."""
    return linear(self, tuple(output_size), align_corners, [scales_h, scales_w], out=out)


def upsample_bilinear2d_vec(input, output_size, align_corners, scale_factors, out=None):
    """``aten::upsample_bilinear2d.vec``."""
    osz, sc = _sizes(input, 2, output_size, scale_factors)
    return linear(input, osz, align_corners, sc, out=out)


_LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3}


def __interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                  recompute_scale_factor=None, antialias=False, out=None):
    """``aten::__interpolate`` (all overloads): nearest, nearest-exact, linear, bilinear, bicubic, trilinear."""
    nd = input.ndim - 2
    if nd < 1 or antialias:
        raise KernelError(f"interpolate: unsupported input rank {input.ndim} or antialias={antialias}")
    if size is not None and isinstance(size, int):
        size = [size] * nd
    if scale_factor is not None and not isinstance(scale_factor, (list, tuple)):
        scale_factor = [scale_factor] * nd
    osz, sc = _sizes(input, nd, size, scale_factor)
    if size is not None or recompute_scale_factor:
        sc = [None] * nd   # torch passes no scales when the size was given or recomputed
    if mode in ("nearest", "nearest-exact"):
        return nearest(input, osz, sc, exact=mode == "nearest-exact", out=out)
    if _LINEAR_MODES.get(mode) == nd:
        return linear(input, osz, bool(align_corners), sc, out=out)
    if mode == "bicubic" and nd == 2:
        return bicubic(input, osz, bool(align_corners), sc, out=out)
    raise KernelError(f"interpolate: mode {mode!r} is not supported for a {input.ndim}-D input")


# --- the compiled bilinear and bicubic kernels (``jit_upsample.py``, numba) for float32 nodes -----

def _static_resize(node: NodeInfo, vec: bool, has_align: bool):
    """``(input shape, output size, align_corners, scales)`` of a 2-D resize node whose input shape is
    static and whose other arguments are constants (the output size computed as the kernel does), else
    None: what a split timed at load needs."""
    from . import row_split as RS

    shape = RS.static_shape(node.args[0].type if node.args else None)
    rest = [a.name for a in node.args[1:]]
    if shape is None or len(shape) != 4 or not all(node.is_const(n) for n in rest):
        return None
    vals = [node.const(n) for n in rest]
    if has_align:   # (input, output_size, align_corners, scales...): bilinear, bicubic
        align, vals = bool(vals[1]), [vals[0], *vals[2:]]
    else:
        align = False
    try:
        if vec:
            osz, sc = _sizes(np.empty(shape, np.float32), 2, vals[0], vals[1] if len(vals) > 1 else None)
        else:
            osz, sc = tuple(int(v) for v in vals[0]), list(vals[1:3]) + [None] * (2 - len(vals[1:3]))
    except (KernelError, TypeError, ValueError, IndexError):
        return None       # a bad resize: the kernel reports it at run time, naming the node
    osz = tuple(int(v) for v in osz)
    return (shape, osz, align, sc) if min(osz) > 0 and math.prod(shape) > 0 else None


def _plane_threads(node: NodeInfo, vec: bool, has_align: bool, make_run):
    """At more than one intra-op thread, the threads a large float32 2-D resize of static shape runs
    its (sample, channel) planes over: ``make_run(static)(x, out, threads)`` split where that times
    faster at load than one thread (``row_split.split_pays``, never by vendor; the same bits), else 1.
    ``(threads, static)``, ``static`` from :func:`_static_resize` (None: not static, not timed)."""
    from . import row_split as RS

    t = node.output_types[0] if node.output_types else None
    threads = RS.split_threads_for(t)
    if threads <= 1 or os.environ.get(PLANES_SPLIT_ENV, "1") == "0":
        return 1, None
    static = _static_resize(node, vec, has_align)
    if static is None or static[0][0] * static[0][1] < 2:
        return 1, None
    shape, osz = static[:2]
    x, out = RS.sample(shape), np.empty(shape[:2] + osz, np.float32)
    run = make_run(static)

    def one(x, out):
        return run(x, out, 1)

    def split(x, out):
        return run(x, out, threads)
    split.what = f"resize_planes_{node.op}"
    return (threads if RS.split_pays(one, split, (x, out)) else 1), static


#: ``SRCORE_CPU_RESIZE_SPLIT=0`` (read at load): no 2-D resize split over the intra-op threads (an A/B
#: switch; ``families_ab``'s runner suffix ``+noresizesplit``)
PLANES_SPLIT_ENV = "SRCORE_CPU_RESIZE_SPLIT"


def _compiled_resize_2d(node: NodeInfo, kernel_class: str, numpy_fn, name: str, least: int | None = None):
    """The ``Specialized`` call of ``jit_upsample.<kernel_class>`` for an ``aten::upsample_*2d`` node of
    either overload (``name``: its function's name), with ``numpy_fn`` (:func:`linear` or :func:`bicubic`)
    for what the kernel does not take (not float32 NCHW C-contiguous, empty); None when the node is not
    float32 or has fewer than ``least`` elements (:func:`.norm._f32_node`). At more than one intra-op
    thread a node of static shape runs its planes split where that timed faster at load
    (:func:`_plane_threads`)."""
    from . import jit_upsample
    from .norm import _f32_node

    if not _f32_node(node, least):
        return None
    kernel = getattr(jit_upsample, kernel_class)()
    vec = node.op.endswith(".vec")
    split = [1, None]

    def resize2d_jit(input, output_size, align_corners, s0=None, s1=None, out=None):
        if vec:
            osz, sc = _sizes(input, 2, output_size, s0)
        else:
            osz, sc = tuple(output_size), [s0, s1]
        osz = tuple(int(v) for v in osz)
        if (input.dtype != np.float32 or input.ndim != 4 or not input.flags.c_contiguous or input.size == 0
                or min(osz) <= 0):
            return numpy_fn(input, osz, align_corners, sc, out=out)
        if out is None:
            out = np.empty(input.shape[:2] + osz, np.float32)
        elif out.dtype != np.float32 or not out.flags.c_contiguous or out.shape != input.shape[:2] + osz:
            return numpy_fn(input, osz, align_corners, sc, out=out)
        threads = split[0] if split[0] > 1 and input.shape == split[1][0] and osz == split[1][1] else 1
        return kernel(input, osz, align_corners, sc, out, threads)
    resize2d_jit.__name__ = resize2d_jit.__qualname__ = name   # (what `srcore inspect --dispatch` shows)
    split[:] = _plane_threads(node, vec, True, lambda st: lambda x, o, n: kernel(x, st[1], st[2], st[3], o, n))
    return Specialized(resize2d_jit, args=(0, 1, 2, 3) if vec else (0, 1, 2, 3, 4))


def bicubic2d_matcher(node: NodeInfo):
    """``aten::upsample_bicubic2d`` (both overloads) on float32 tensors of any size: the compiled kernel
    (``jit_upsample.Bicubic2d``, compiled now), or None (the numpy kernel). Unlike bilinear, small ones
    too: the numpy kernel's ~24 calls took ~150 us on a 2x8x8x10 output (a BiFPN's), the kernel ~2."""
    return _compiled_resize_2d(node, "Bicubic2d", bicubic, "bicubic2d_jit", least=1)


def bilinear2d_matcher(node: NodeInfo):
    """``aten::upsample_bilinear2d`` (both overloads) on large float32 tensors: the compiled kernel
    (compiled now), or None (the numpy kernel)."""
    return _compiled_resize_2d(node, "Bilinear2d", linear, "bilinear2d_jit")


def _nearest_planes(x, osz, scales, out, threads):
    """:func:`nearest` of float32 C-contiguous (N, C, H, W) ``x`` into ``out``, its planes in ``threads``
    blocks on the part pool (``row_split.run_rows``; numpy's gathers release the GIL): the same bits."""
    from .row_split import run_rows

    N, C, H, W = x.shape
    x3, o3 = x.reshape(N * C, H, W), out.reshape(N * C, *osz)
    run_rows(lambda lo, hi: nearest(x3[lo:hi], osz, scales, out=o3[lo:hi]), N * C, threads)
    return out


def nearest2d_matcher(node: NodeInfo):
    """``aten::upsample_nearest2d`` (both overloads): at more than one intra-op thread, a large float32
    node of static shape and constant sizes runs its planes split over them where that times faster at
    load (:func:`_plane_threads`; the same bits); else None (the numpy kernel)."""
    vec = node.op.endswith(".vec")
    threads, static = _plane_threads(node, vec, False, lambda st: lambda x, o, n: _nearest_planes(
        x, st[1], st[3], o, n))
    if threads <= 1:
        return None
    shape, osz, _, sc = static
    oshape = shape[:2] + osz
    plain = upsample_nearest2d_vec if vec else upsample_nearest2d

    def nearest2d_split(input, *args, out=None):
        if (input.shape == shape and input.dtype == np.float32 and input.flags.c_contiguous
                and (out is None or (out.dtype == np.float32 and out.flags.c_contiguous and out.shape == oshape))):
            return _nearest_planes(input, osz, sc, np.empty(oshape, np.float32) if out is None else out, threads)
        return plain(input, *args, out=out)
    return Specialized(nearest2d_split, args=tuple(range(len(node.args))))
