"""Small-input convolutions: one gather and one GEMM, planned once per input shape.

On images of a few dozen pixels (the digits demo: 1x1x8x8 and 1x16x4x4) the im2col path's
Python work (padding into the workspace, one sliced copy per tap, slice arithmetic) costs
~35 us against a few us of numpy work. Here the plan for an input shape holds the gather
indices of the whole column matrix into the flat input followed by two extra slots, a 0 (every
padding tap reads it) and a 1 (a row of ones, so the bias is a column of the weight and the
GEMM adds it). A call is then: copy the input into a per-thread flat buffer whose two tail
slots are fixed, ``np.take`` the columns, one ``np.matmul`` straight into ``out``. The take runs in
``mode="wrap"``: the planned indices are in range by construction, and numpy's default ``"raise"``
buffers ``out`` (a 10.8k-element gather: 19 us against 7.4 us).

The gather costs more per element than the strided copies of the im2col path, so this path is
only taken when the column matrix is at most :data:`SMALL_COLS_MAX` elements, and
:data:`SMALL_COLS_PER_TAP` per kernel tap (im2col's Python cost grows with the taps).
"""
from __future__ import annotations

import math
import threading

import numpy as np

# the column matrix of the largest conv this path takes, in elements: the lesser of these two.
# The gather costs ~1 ns per element more than im2col's strided copies, im2col ~4 us of Python
# per tap plus ~15 us per call (1 thread, float32, small path / im2col or Winograd: 3x3 16ch
# 14x14 0.34, 3x3 32ch 16x16 (74k) 0.72, 3x3 64ch 14x14 (113k) 0.74; 1x1 stride 2 256ch 14x14
# (12.6k) 0.90, 128ch 28x28 (25k) 0.98, 64ch 56x56 (51k) 1.32)
SMALL_COLS_MAX = 65536
SMALL_COLS_PER_TAP = 12288
# plans kept per kernel instance: one per input shape seen (dynamic shapes would grow it forever)
MAX_PLANS = 32


def gather_index(C, sp, ks, stride, pads, dilation, groups):
    """Indices (groups, Cg * prod(ks) + 1, prod(osz)) into ``x.ravel()`` (one sample) extended by
    a 0 at ``L`` and a 1 at ``L + 1`` (``L = C * prod(sp)``), and the output sizes.

    Row ``c * prod(ks) + tap`` of a group matches ``w.reshape(groups, Og, -1)``'s columns; the
    last row of each group reads the 1 (the bias column)."""
    nd = len(sp)
    osz = tuple((n + lo + hi - d * (k - 1) - 1) // s + 1
                for n, (lo, hi), d, k, s in zip(sp, pads, dilation, ks, stride))
    L = C * math.prod(sp)
    # per spatial dim: input position of (tap, out) and whether it is inside the input
    pos = []
    for n, (lo, _), d, k, s, o in zip(sp, pads, dilation, ks, stride, osz):
        p = np.arange(k)[:, None] * d + np.arange(o)[None, :] * s - lo   # (k, o)
        pos.append(p)
    # broadcast over (tap dims..., out dims...)
    flat = np.zeros((1,) * (2 * nd), np.int64)
    valid = np.ones((1,) * (2 * nd), bool)
    for i, (p, n) in enumerate(zip(pos, sp)):
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = p.shape
        pr = p.reshape(shape)
        flat = flat * n + pr
        valid = valid & (pr >= 0) & (pr < n)
    plane = math.prod(sp)
    ch = np.arange(C).reshape((C,) + (1,) * (2 * nd)) * plane
    idx = np.where(valid[None], flat[None] + ch, L)                     # (C, *ks, *osz)
    kk, P = math.prod(ks), math.prod(osz)
    idx = idx.reshape(groups, (C // groups) * kk, P)
    ones = np.full((groups, 1, P), L + 1, np.int64)
    return np.concatenate([idx, ones], axis=1).astype(np.intp), osz


def _thread_buffers(local, N, L, shape, cols_shape, dtype):
    """This thread's buffers of a plan: the (N, L + 2) flat input with its fixed 0 and 1 tail
    slots, its first L columns viewed as the input's ``shape``, and the column matrix."""
    xz = local.xz = np.empty((N, L + 2), dtype)
    xz[:, L] = 0
    xz[:, L + 1] = 1
    flat = xz[:, :L].reshape(shape)   # splits a unit-stride dim: always a view
    if not np.shares_memory(flat, xz):
        raise AssertionError("conv_small: the input view of the flat buffer is a copy")
    local.flat = flat
    local.cols = np.empty(cols_shape, dtype)
    return xz


def split_batch(shape, nd: int):
    """``(batch, channels, spatial sizes)`` of a conv input's ``shape`` with ``nd`` spatial dims (an
    unbatched input is a batch of 1), or None for another rank."""
    if len(shape) == nd + 1:
        shape = (1, *shape)
    elif len(shape) != nd + 2:
        return None
    return shape[0], shape[1], tuple(shape[2:])


class SmallConv:
    """The small-input path of one constant-weight conv (see the module doc); call :meth:`plan`
    per input shape (cached), then the plan's function."""

    def __init__(self, w, b, stride, pads, dilation, groups):
        self.w, self.b = w, b
        self.stride, self.pads, self.dilation, self.groups = stride, pads, dilation, groups
        self.nd = w.ndim - 2
        self.plans: dict = {}
        self._lock = threading.Lock()

    def _wm(self, dtype):
        """The weight (groups, Og, K + 1) with the bias as its last column, in ``dtype``."""
        O = self.w.shape[0]
        g = self.groups
        wm = self.w.reshape(g, O // g, -1).astype(dtype)
        bias = np.zeros(O, dtype) if self.b is None else self.b.astype(dtype)
        wm = np.concatenate([wm, bias.reshape(g, O // g, 1)], axis=2)
        return np.ascontiguousarray(wm[0] if g == 1 else wm)

    def plan(self, shape, dtype):
        """The call function for inputs of ``shape``/``dtype``, or None if this path does not apply."""
        key = (shape, dtype)
        try:
            return self.plans[key]
        except KeyError:
            pass
        fn = self._build(shape, dtype)
        with self._lock:
            if len(self.plans) >= MAX_PLANS:
                self.plans.clear()
            self.plans[key] = fn
        return fn

    def _build(self, shape, dtype):
        nd, w = self.nd, self.w
        split = split_batch(shape, nd)
        if split is None:
            return None
        N, C, sp = split
        O, Cg = w.shape[:2]
        ks = w.shape[2:]
        g = self.groups
        if Cg * g != C or O % g or N == 0:
            return None   # the general path raises the error
        osz = tuple((n + lo + hi - d * (k - 1) - 1) // s + 1
                    for n, (lo, hi), d, k, s in zip(sp, self.pads, self.dilation, ks, self.stride))
        if any(o <= 0 for o in osz):
            return None
        P = math.prod(osz)
        K1 = Cg * math.prod(ks) + 1
        if N * g * K1 * P > min(SMALL_COLS_MAX, SMALL_COLS_PER_TAP * math.prod(ks)):
            return None
        rdt = np.result_type(dtype, w.dtype)
        idx, _ = gather_index(C, sp, ks, self.stride, self.pads, self.dilation, g)
        idx = idx[0] if g == 1 else idx                                  # (K1, P) or (g, K1, P)
        wm = self._wm(rdt)
        L = C * math.prod(sp)
        oshape = ((N,) if len(shape) == nd + 2 else ()) + (O,) + osz
        gshape = (N, K1, P) if g == 1 else (N, g, K1, P)
        ostack = (N, O, P) if g == 1 else (N, g, O // g, P)
        local = threading.local()
        take, matmul, dot, empty, copyto = np.take, np.matmul, np.dot, np.empty, np.copyto

        def small_conv(x, out=None):
            xz = getattr(local, "xz", None)
            if xz is None:
                xz = _thread_buffers(local, N, L, shape, gshape, rdt)
            copyto(local.flat, x)
            cols = local.cols
            take(xz, idx, axis=1, out=cols, mode="wrap")
            if out is None:
                out = empty(oshape, rdt)
            elif out.dtype != rdt or not out.flags.c_contiguous:
                copyto(out, matmul(wm, cols).reshape(oshape))
                return out
            matmul(wm, cols, out=out.reshape(ostack))
            return out

        def small_conv_one(x, out=None):
            # one sample, one group: a 2-D np.dot (~0.3 us less than the broadcasting matmul)
            xz = getattr(local, "xz", None)
            if xz is None:
                xz = _thread_buffers(local, 1, L, shape, (K1, P), rdt)
            copyto(local.flat, x)
            cols = local.cols
            take(xz[0], idx, out=cols, mode="wrap")
            if out is None:
                out = empty(oshape, rdt)
            elif out.dtype != rdt or not out.flags.c_contiguous:
                copyto(out, dot(wm, cols).reshape(oshape))
                return out
            dot(wm, cols, out=out.reshape(O, P))
            return out
        return small_conv_one if N == 1 and g == 1 else small_conv


def small_conv_applies(w, stride, pads, groups) -> bool:
    """Whether a constant-weight conv can use this path at all (not a 1x1 stride-1 unpadded
    ungrouped conv, already one GEMM on the input; not depthwise, its own tap loop)."""
    if groups > 1 and w.shape[1] == 1:
        return False
    return not (groups == 1 and all(k == 1 for k in w.shape[2:]) and all(s == 1 for s in stride)
                and all(p == (0, 0) for p in pads))
