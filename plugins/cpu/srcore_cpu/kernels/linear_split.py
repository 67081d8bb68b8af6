"""Constant-weight linears split by blocks of rows over the part pool, the epilogue in each part.

At more than one intra-op thread a linear's product may already run split (MKL's column blocks,
:mod:`.mkl_gemm`), but its bias add and activation (GELU, SiLU, ReLU) then run on the caller alone
after it: on an AMD EPYC (Zen 3) bert_encoder's (128, 1024) bias + compiled GELU took ~200 us of a
~1 ms linear_gelu node at one thread. Here each part computes its rows' product (numpy's BLAS, held
at one thread while the parts run), adds the bias and applies the activation on that contiguous
block, so the whole node is split with one hand-over. It is built beside the node's one kernel and
kept only where it timed faster at load (:func:`.row_split.split_pays`, pooled timing evidence;
never by vendor). At one intra-op thread nothing is built or timed. ``SRCORE_CPU_LINEAR_ROWS=0``
turns it off (``benchmarks.families_ab``'s ``+nolinrows``).

Beside it, the same product split over :mod:`.native_team` (:func:`native_candidates`: by rows or by
output columns, each part a ``cblas_sgemm`` with its bias add and activation called from compiled code
without the GIL) is timed too, and the fastest of the three kept: on the AMD EPYC the part pool's split
of a 0.2 ms product took 1.10-1.17x one thread (its worker woke 25-100 us late and then needed the GIL),
the native one 0.6x (docs/performance-log.md, "Products of 0.2 ms split without the GIL").
"""
from __future__ import annotations

import math
import os

import numpy as np

from . import parallel as _par

#: products under this many multiply-adds are not split (nor timed): ~50 us on one core, where the
#: part pool's hand-over (tens of microseconds) eats the gain
MIN_MACS = 1 << 21
_ENV = "SRCORE_CPU_LINEAR_ROWS"


def epilogue(b, act_):
    """``fn(o)``: ``o += b`` then ``act_`` in place on the 2-D block ``o`` (``act_``: None, a numpy
    ufunc, or ``act_(o) -> o`` as :func:`.linalg._linear_fast` takes it), or None when there is none."""
    if b is None and act_ is None:
        return None
    ufunc = act_ if isinstance(act_, np.ufunc) else None

    def fn(o):
        if b is not None:
            np.add(o, b, out=o)
        if ufunc is not None:
            ufunc(o, out=o)
        elif act_ is not None:
            r = act_(o)
            if r is not o:   # (an activation that returned a new array: its values into the block)
                np.copyto(o, r)
    return fn


def make_rows(wT: np.ndarray, b, act_, in_shape, threads: int, fallback):
    """``fn(input, out=None)``: ``act_(input @ wT + b)`` for a float32 C-contiguous ``input`` of
    exactly ``in_shape`` in blocks of its rows (all dims but the last) on the part pool, each block's
    product, bias add and activation in one part; anything else goes to ``fallback`` (the node's
    one kernel, same signature). ``wT``: C-contiguous (k, n). None when there are fewer than two
    rows a thread."""
    k, n = wT.shape
    rows = math.prod(in_shape[:-1])
    if len(in_shape) < 2 or in_shape[-1] != k or rows < 2 * threads:
        return None
    pieces = _par.split(rows, threads)
    out_shape = tuple(in_shape[:-1]) + (n,)
    epi = epilogue(b, act_)
    f32 = np.dtype(np.float32)

    def linear_rows(input, out=None):
        if input.shape != in_shape or input.dtype != f32 or not input.flags.c_contiguous:
            return fallback(input, out=out)
        if out is None:
            out = np.empty(out_shape, f32)
        elif out.shape != out_shape or out.dtype != f32 or not out.flags.c_contiguous:
            return fallback(input, out=out)
        x2, o2 = input.reshape(rows, k), out.reshape(rows, n)

        def part(i):
            lo, hi = pieces[i]
            o = o2[lo:hi]
            np.dot(x2[lo:hi], wT, out=o)
            if epi is not None:
                epi(o)
        _par.run_parts(part, len(pieces), threads)
        return out
    linear_rows.what = f"linear_rows:{'bias' if b is not None else ''}:{_act_name(act_)}"   # (evidence key)
    return linear_rows


def _act_name(act_) -> str:
    if act_ is None:
        return ""
    return (getattr(act_, "what", None) or getattr(act_, "__qualname__", None) or getattr(act_, "__name__", None)
            or type(act_).__name__)


def timed(one, w: np.ndarray, b, act_, in_shape):
    """``one`` (the node's kernel, ``one(input, out=None)``), or at more than one intra-op thread,
    for a float32 input of static ``in_shape`` and a product of at least :data:`MIN_MACS`
    multiply-adds, whichever of ``one``, :func:`make_rows`'s split (unless ``SRCORE_CPU_LINEAR_ROWS=0``)
    and the native team's splits (:func:`native_candidates`, unless ``SRCORE_CPU_NATIVE_SPLIT=0``)
    times fastest now."""
    if in_shape is None or len(in_shape) < 2 or not all(isinstance(d, int) for d in in_shape):
        return one
    n, k = w.shape
    if w.dtype != np.float32 or in_shape[-1] != k or math.prod(in_shape[:-1]) * k * n < MIN_MACS:
        return one
    threads = _par.intra_op_threads()
    if threads <= 1:
        return one
    from . import row_split as RS
    from .linalg import transposed

    wT = transposed(w)
    split = None
    if os.environ.get(_ENV, "1") != "0":
        split = make_rows(wT, b, act_, tuple(in_shape), threads, plain(wT, b, act_))
    if split is not None and _par.blas_on_caller():
        # (the parts' products run on one BLAS thread inside the pool's hold; this one covers a run
        # whose parts fall back to the calling thread: the pool busy with another runtime's call)
        split = _par.on_caller(split)
    x, y = RS.sample(tuple(in_shape)), np.empty(tuple(in_shape[:-1]) + (n,), np.float32)
    natives = native_candidates(wT, b, tuple(in_shape), threads, plain(wT, b, act_), act_)
    if not natives:
        return one if split is None else (split if RS.split_pays(one, split, (x, y)) else one)
    from . import tactic as _tactic

    cands = {"one": one, **({} if split is None else {"split": split}), **natives}
    best = _tactic.fastest(cands, (x, y), key=("linear_native", tuple(in_shape), n, b is not None, _act_name(act_),
                                                threads, sorted(cands)))
    return cands.get(best, one)


def native_candidates(wT: np.ndarray, b, in_shape, threads: int, fallback, act_=None) -> dict:
    """``{"native_rows": fn, "native_cols": fn}``: ``act_(input @ wT + b)`` split by blocks of rows or
    of output columns over :mod:`.native_team` (its parts never take the GIL; the bias add and the
    activation in each part, compiled), for a float32 C-contiguous ``input`` of ``in_shape`` (else
    ``fallback``); empty where that team is not available or turned off, or for an activation it
    does not compile (:func:`.native_team.epilogue`)."""
    from . import native_team as NT

    epi = NT.epilogue(_epilogue_key(act_))
    if epi is None:
        return {}
    team = NT.team(threads)
    fn_addr = NT.sgemm_address()
    if team is None or fn_addr is None or wT.dtype != np.float32 or not wT.flags.c_contiguous:
        return {}
    k, n = wT.shape
    rows = math.prod(in_shape[:-1])
    out_shape = tuple(in_shape[:-1]) + (n,)
    bias = None if b is None else np.ascontiguousarray(b, dtype=np.float32).reshape(-1)
    if bias is not None and bias.shape != (n,):
        return {}
    w_addr, b_addr = wT.ctypes.data, (0 if bias is None else bias.ctypes.data)
    row_parts = [(lo * k * 4, w_addr, lo * n * 4, b_addr, hi - lo, n, k, k, n, n, NT.NO_TRANS, NT.NO_TRANS, epi)
                 for lo, hi in _par.split(rows, threads)] if rows >= 2 * threads else []
    col_parts = [(0, w_addr + lo * 4, lo * 4, b_addr and b_addr + lo * 4, rows, hi - lo, k, k, n, n,
                  NT.NO_TRANS, NT.NO_TRANS, epi) for lo, hi in _col_blocks(n, threads)]
    f32 = np.dtype(np.float32)
    out = {}
    for name, parts in (("native_rows", row_parts), ("native_cols", col_parts)):
        if len(parts) < 2:
            continue
        gemm = NT.Gemm(parts, fn_addr, team)

        def native_linear(input, out=None, gemm=gemm):
            if input.shape != in_shape or input.dtype != f32 or not input.flags.c_contiguous:
                return fallback(input, out=out)
            if out is None:
                out = np.empty(out_shape, f32)
            elif out.shape != out_shape or out.dtype != f32 or not out.flags.c_contiguous:
                return fallback(input, out=out)
            gemm(input.ctypes.data, 0, out.ctypes.data)
            return out
        native_linear.keep = (wT, bias)   # (the parts hold their addresses)
        native_linear.what = f"linear_{name}"
        out[name] = _par.on_caller(native_linear)
    return out


def _epilogue_key(act_):
    """``act_`` as :data:`.native_team.EPILOGUES` names it (None: no activation; "?": another)."""
    from .linalg import relu_

    if act_ is None:
        return None
    if act_ is relu_:
        return "relu"
    if act_ is np.tanh:
        return "tanh"
    what = getattr(act_, "what", None)
    return what if what in ("gelu:none", "gelu:tanh", "aten::silu") else "?"


def _col_blocks(n: int, threads: int) -> list[tuple[int, int]]:
    """``n`` output columns in ``threads`` blocks of whole 16-column groups (a cache line of
    float32), or one block when there are fewer than two groups a thread."""
    groups = n // 16
    if groups < 2 * threads:
        return [(0, n)]
    cuts = [groups * i // threads * 16 for i in range(threads)] + [n]
    return list(zip(cuts[:-1], cuts[1:]))


def plain(wT, b, act_):
    """``fn(input, out=None)``: ``act_(input @ wT + b)`` on the calling thread, for the inputs a split
    does not take (kept instead of the node's one kernel: no second copy of the weight, MKL's packs)."""
    from .linalg import _gemm

    epi = epilogue(b, act_)

    def linear_plain(input, out=None):
        out = _gemm(input, wT, out)
        if epi is not None:
            epi(out)
        return out
    return linear_plain
