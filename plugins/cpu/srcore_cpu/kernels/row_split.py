"""Row-block splits of the norms, softmax and elementwise binary ops over the intra-op threads,
kept only where timing at load says they pay (as the compiled activations, ``pointwise_match.py``).

Each op's rows are independent (a layer norm's leading rows, a softmax's positions off its dim, a
group norm's (sample, group) blocks, a binary op's leading output rows), so a split computes every
element with the same numpy (or compiled) code on a slice: the same bits as one call on the whole.
A node of known shape with at least :data:`MIN_SPLIT` elements, at more than one intra-op thread
(:func:`.parallel.intra_op_threads`), gets the split built beside its 1-thread kernel and both
timed now on inputs of its shape (:func:`.tactic.fastest`, alternating calls, <= ~50 ms); at 1
thread nothing is timed or split, so 1-thread speed and load time are unchanged. numpy releases
the GIL in its loops, so the parts run on separate cores through the plugin's part pool.
"""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import TensorType

from . import parallel as _par

#: nodes below this many elements are never split (nor timed): the hand-over to the part pool costs
#: tens of microseconds. Lower than the compiled activations' 2^18 (one pass each): the numpy
#: norms and softmax make 5-8 passes, so a BERT-base-like (1, 128, 256) layer norm (2^15) may pay
MIN_SPLIT = 1 << 15


def static_shape(t) -> tuple[int, ...] | None:
    """``t``'s shape when it is a tensor type of known, static shape, else None."""
    if not isinstance(t, TensorType) or t.shape is None or not all(isinstance(d, int) for d in t.shape):
        return None
    return tuple(t.shape)


def split_threads_for(t, dtype: str = "float32") -> int:
    """The threads a node with output type ``t`` may split over: 1 unless ``t`` is a ``dtype``
    tensor of static shape with at least :data:`MIN_SPLIT` elements and the process runs more than
    one intra-op thread (looked up only then)."""
    shape = static_shape(t)
    if shape is None or t.dtype != dtype or math.prod(shape) < MIN_SPLIT:
        return 1
    return _par.intra_op_threads()


def run_rows(body, rows: int, threads: int) -> None:
    """``body(lo, hi)`` over ``range(rows)`` in ``threads`` contiguous pieces on the part pool."""
    pieces = _par.split(rows, min(threads, rows))
    _par.run_parts(lambda i: body(*pieces[i]), len(pieces), threads)


def split_pays(one, split, args: tuple, timer=None) -> bool:
    """Whether ``split`` beats ``one`` on ``args`` on this machine, best of alternating calls
    (``timer``: :func:`.tactic.fastest`'s signature, injectable for tests), pooled with every earlier
    timing of the same problem (:mod:`.evidence`: the split's kind, ``split.what`` or its function's
    name, the arguments' shapes and values, the threads)."""
    from . import tactic as _tactic

    if timer is not None:
        return timer({"one": one, "split": split}, args) == "split"
    what = getattr(split, "what", None) or getattr(split, "__qualname__", type(split).__name__)
    return _tactic.fastest({"one": one, "split": split}, args, key=("row_split", what, args,
                                                                     _par.intra_op_threads())) == "split"


def sample(shape, seed: int = 0) -> np.ndarray:
    """float32 data of ``shape`` for the timing at load."""
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _contiguous(*arrays) -> bool:
    return all(isinstance(a, np.ndarray) and a.flags.c_contiguous for a in arrays)


# --- elementwise binary ops --------------------------------------------------------------------

#: ufuncs whose result per element does not depend on how the array is cut (correctly rounded)
SPLITTABLE_UFUNCS = (np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum)


def binary_rows(out_shape, shapes, threads: int):
    """``(L, R)``: the operands of ``shapes`` (broadcast to ``out_shape``) seen as ``R`` rows of the
    output's first ``L`` axes, each operand either spanning those axes or broadcast over all of
    them; the smallest such ``L`` with at least ``2 * threads`` rows. None if there is none."""
    nd = len(out_shape)
    padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
    for L in range(1, nd + 1):
        if not all(p[:L] == out_shape[:L] or all(d == 1 for d in p[:L]) for p in padded):
            return None
        R = math.prod(out_shape[:L])
        if R >= 2 * threads:
            return L, R
    return None


def split_binary(ufunc, out_shape, shapes, threads: int):
    """``fn(a, b, out=None)``: ``ufunc`` in blocks of the output's leading rows over ``threads``
    (see :func:`binary_rows`); operands of other shapes or layouts go to one ufunc call."""
    plan = binary_rows(out_shape, shapes, threads)
    if plan is None:
        return None
    L, R = plan
    nd = len(out_shape)
    rest = out_shape[L:]

    def rows_of(a):
        """``a`` as (R, ...) rows, or (...) when broadcast over the split axes."""
        if not isinstance(a, np.ndarray) or a.ndim == 0:
            return a, False
        p = (1,) * (nd - a.ndim) + a.shape
        if p[:L] == out_shape[:L]:
            return a.reshape((R,) + p[L:]), True
        return a.reshape(p[L:]), False

    def fn(a, b, out=None):
        if out is None:
            return ufunc(a, b)
        ok = out.shape == out_shape and _contiguous(out) and all(
            not isinstance(v, np.ndarray) or v.ndim == 0 or (v.shape == tuple(s) and v.flags.c_contiguous)
            for v, s in zip((a, b), shapes))
        if not ok:
            return ufunc(a, b, out=out)
        (ar, asl), (br, bsl) = rows_of(a), rows_of(b)
        o = out.reshape((R,) + rest)

        def body(lo, hi):
            ufunc(ar[lo:hi] if asl else ar, br[lo:hi] if bsl else br, out=o[lo:hi])
        run_rows(body, R, threads)
        return out
    fn.what = f"binary:{getattr(ufunc, '__name__', ufunc)}"   # (the timing evidence's key)
    return fn


# --- softmax / log_softmax ---------------------------------------------------------------------

def split_softmax(into, shape, dim: int, threads: int):
    """``fn(x, out=None)``: ``into(x, dim, out)`` (softmax or log_softmax along ``dim``) in blocks
    of the positions before ``dim`` (or, when those are fewer than ``threads``, after it)."""
    nd = len(shape)
    d = dim + nd if dim < 0 else dim
    if not 0 <= d < nd:
        return None
    A, D, B = math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:])
    if A < 2 * threads and B < 2 * threads:
        return None
    by_a = A >= 2 * threads

    def fn(x, out=None):
        if out is None:
            out = np.empty(x.shape, x.dtype)
        if x.shape != shape or not _contiguous(x, out) or out.shape != shape:
            return into(x, dim, out)
        x3, o3 = x.reshape(A, D, B), out.reshape(A, D, B)
        if by_a:
            run_rows(lambda lo, hi: into(x3[lo:hi], 1, o3[lo:hi]), A, threads)
        else:
            run_rows(lambda lo, hi: into(x3[:, :, lo:hi], 1, o3[:, :, lo:hi]), B, threads)
        return out
    return fn


# --- layer norm --------------------------------------------------------------------------------

def split_layer_norm(kernel, shape, normalized_shape, eps, threads: int):
    """``fn(x, weight, bias, out=None)``: ``kernel(x, normalized_shape, weight, bias, eps, out=)``
    (``norm.layer_norm``) in blocks of the rows before the normalized dims."""
    k = len(normalized_shape)
    if k == 0 or k > len(shape) or tuple(shape[len(shape) - k:]) != tuple(normalized_shape):
        return None
    R = math.prod(shape[:len(shape) - k])
    if R < 2 * threads:
        return None
    ns = tuple(normalized_shape)

    def fn(x, weight=None, bias=None, out=None):
        if out is None:
            out = np.empty(x.shape, x.dtype)
        if x.shape != shape or out.shape != shape or not _contiguous(x, out):
            return kernel(x, ns, weight, bias, eps, out=out)
        xr, orr = x.reshape((R,) + ns), out.reshape((R,) + ns)
        run_rows(lambda lo, hi: kernel(xr[lo:hi], ns, weight, bias, eps, out=orr[lo:hi]), R, threads)
        return out
    return fn


# --- the compiled group norm -------------------------------------------------------------------

def split_group_norm(kernel, threads: int):
    """``run(x, groups, weight, bias, eps, y, mean, rstd)`` as :class:`.jit_norm.GroupNorm`'s, in
    blocks of samples (or, for fewer samples than threads, of each sample's groups): each block
    one call of the compiled kernel on its rows, channels, statistics."""
    def run(x, groups, weight, bias, eps, y, mean, rstd):
        N, C = x.shape[:2]
        cpg = C // groups
        xs, ys = x.reshape(N, C, -1), y.reshape(N, C, -1)
        ms, rs = mean.reshape(N, groups), rstd.reshape(N, groups)
        if N >= threads:
            run_rows(lambda lo, hi: kernel(xs[lo:hi], groups, weight, bias, eps, ys[lo:hi], ms[lo:hi], rs[lo:hi]),
                     N, threads)
            return
        for n in range(N):
            def body(g0, g1, n=n):
                c0, c1 = g0 * cpg, g1 * cpg
                kernel(xs[n:n + 1, c0:c1], g1 - g0, weight[c0:c1], bias[c0:c1], eps, ys[n:n + 1, c0:c1],
                       ms[n, g0:g1], rs[n, g0:g1])
            run_rows(body, groups, threads)
    return run
