"""Convolutions whose weight is a graph value, not a constant: a hypernetwork's or dynamic filter's
kernels (``F.conv2d(x, k)`` with ``k`` computed from the input), a Siamese tracker's template
cross-correlation. The constant-weight kernels (``conv.make_conv``) pack their weight at load; these
cannot, and the plain impl (``conv_im2col.conv_forward``) pays ~50 us of Python per call (padding,
one sliced copy per tap, slice arithmetic) on a conv of a few us of arithmetic (the seventh
held-out zoo's ``dynamic_conv``: 12 -> 18 channels, 3 groups, 10x10).

Hyper-parameters are constants, so the gather of the column matrix depends on shapes only: per
(input shape, weight shape) it is planned once (``conv_small.gather_index``, every padding tap
reading a fixed 0), and a call is one copy of the input into a per-thread flat buffer, one
``np.take`` and one ``np.matmul`` with the weight as it arrives, straight into ``out``, plus the bias.
Inputs too large for the gather (``conv_small``'s limits) and anything it cannot plan (dtypes
that differ, a shape the weight does not fit: its error) go to the plain impl.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from . import conv_small as _small
from .conv_im2col import conv_forward


class DynamicWeightConv:
    """``fn(input, weight, bias=None, out=None)``: a forward conv of rank ``nd`` with fixed
    ``stride``/``pads``/``dilation``/``groups`` and a weight given per call."""

    def __init__(self, nd, stride, pads, dilation, groups):
        self.nd, self.stride, self.pads, self.dilation, self.groups = nd, stride, pads, dilation, groups
        self.plans: dict = {}
        self._lock = threading.Lock()

    def __call__(self, input, weight, bias=None, out=None):
        key = (input.shape, weight.shape, input.dtype, weight.dtype)
        plan = self.plans.get(key)
        if plan is None:
            plan = self._plan(key)
        return plan(input, weight, bias, out)

    def _plan(self, key):
        fn = self._build(*key) or self._plain
        with self._lock:
            if len(self.plans) >= _small.MAX_PLANS:   # dynamic shapes must not grow it forever
                self.plans.clear()
            self.plans[key] = fn
        return fn

    def _plain(self, x, w, bias, out):
        batched = x.ndim == self.nd + 2
        xb = x if batched else x[None]
        r = conv_forward(xb, w, bias, self.stride, self.pads, self.dilation, self.groups,
                         out=None if out is None else (out if batched else out[None]))
        return r if batched or out is not None else r[0]

    def _build(self, shape, wshape, dtype, wdtype):
        nd, g = self.nd, self.groups
        if dtype != wdtype or dtype not in (np.float32, np.float64) or len(wshape) != nd + 2:
            return None
        split = _small.split_batch(shape, nd)
        if split is None:
            return None
        N, C, sp = split
        O, Cg, ks = wshape[0], wshape[1], wshape[2:]
        if Cg * g != C or O % g or N == 0 or min(sp, default=1) == 0:
            return None   # the plain impl raises the error or returns the empty result
        osz = tuple((n + lo + hi - d * (k - 1) - 1) // s + 1
                    for n, (lo, hi), d, k, s in zip(sp, self.pads, self.dilation, ks, self.stride))
        if any(o <= 0 for o in osz):
            return None
        P, K = math.prod(osz), Cg * math.prod(ks)
        if N * g * K * P > min(_small.SMALL_COLS_MAX, _small.SMALL_COLS_PER_TAP * math.prod(ks)):
            return None
        idx, _ = _small.gather_index(C, sp, ks, self.stride, self.pads, self.dilation, g)
        idx = np.ascontiguousarray(idx[:, :K])          # (g, K, P): no ones row, the bias is added after
        L = C * math.prod(sp)
        oshape = ((N,) if len(shape) == nd + 2 else ()) + (O,) + osz
        wstack, ostack = (g, O // g, K), (N, g, O // g, P)
        bshape = (g, O // g, 1)
        local = threading.local()
        take, matmul, add, copyto, empty = np.take, np.matmul, np.add, np.copyto, np.empty

        def dynamic_conv(x, w, bias, out):
            xz = getattr(local, "xz", None)
            if xz is None:   # this thread's flat input (0 in its tail slot) and column matrix
                xz = local.xz = np.zeros((N, L + 1), dtype)
                local.flat = xz[:, :L].reshape(shape)
                local.cols = empty((N, g, K, P), dtype)
            copyto(local.flat, x)
            cols = local.cols
            take(xz, idx, axis=1, out=cols, mode="wrap")
            direct = out is not None and out.dtype == dtype and out.flags.c_contiguous
            res = out if direct else empty(oshape, dtype)
            r4 = res.reshape(ostack)
            matmul(w.reshape(wstack), cols, out=r4)
            if bias is not None:
                add(r4, bias.reshape(bshape), out=r4)
            if out is not None and not direct:
                copyto(out, res)
                return out
            return res
        return dynamic_conv
