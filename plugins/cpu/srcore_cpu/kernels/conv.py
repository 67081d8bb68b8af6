"""Convolutions (1-D/2-D/3-D, grouped, depthwise, transposed): the op entry points and matchers.

The plain impls run ``conv_im2col.py`` (im2col + one GEMM; a 1x1 stride-1 conv is a GEMM on
the input, depthwise a per-tap loop, transposed convs GEMM + col2im) and allocate per call.

Constant-weight kernels (the matchers', :func:`make_conv`) pick a path per input shape, once:

* small inputs (column matrix of at most 64k elements): one planned gather + GEMM
  (``conv_small.py``; the digits demo's 8x8 convs, ~35 -> ~4-6 us);
* 3x3 stride-1 ungrouped 2-D convs: Winograd F(4x4, 3x3) or F(2x2, 3x3) with every transform
  a GEMM, or im2col, as ``conv_winograd.choose`` says from the number of tiles (measured
  crossovers); the weight is transformed when the size is first seen (at load for a static
  input shape); with few channels (:data:`WINOGRAD_TIMED_BELOW`) and a static shape, Winograd
  against im2col is timed at load (``tactic.py``);
* grouped 1-D and 2-D float32 convs: a direct compiled loop (``conv_direct.py``, numba) for
  depthwise ones (one input channel per group); with up to :data:`DIRECT_MAX_CG` channels per
  group, the direct loop or the paths below, whichever is faster on this machine (``tactic.py``,
  timed once at load for a static input shape);
* everything else im2col; a kernel wider than twice its stride (the 7x7 stride-2 stem) copies
  its columns from column phases of the input instead of with strided inner loops;
* dense float32 1-D and 2-D convs (more than one input channel per group, or one group: a
  single-channel input) with a static input
  shape (unless ``SRCORE_CPU_SIMD_CONV=0``, read at load): srcore's explicit-SIMD direct conv
  (``srcore.plugin.simd_conv``, either layout of its input copy; on a 16-lane CPU also with output
  channels in the vector lanes) when it times faster than the path chosen above for that shape.

At more than one intra-op thread (numpy's BLAS thread count, or ``SRCORE_CPU_THREADS``) the SIMD
conv's layouts (split by bands of output rows, each part copying the input rows its band reads:
``parallel.run_bound``), the Winograd / im2col paths and the direct grouped conv are also timed split over
the threads on the part pool (``parallel.py``; one BLAS thread a part), and the threaded-BLAS path
after them: in two passes over the module's convs (``tactic.deferred``), the part-pool and one-thread
candidates as each conv is built, the threaded-BLAS ones (with the im2col copies' split and MKL's
GEMM against numpy's threaded one) of all of them at the first call of any (the load's warm-up run),
so OpenBLAS's spinning worker is waited out once, not once a conv; a split is kept where it times
faster (a tie against threaded BLAS keeps the split), one thread or threaded BLAS otherwise.

Scratch (padded input, columns, Winograd tiles) comes from :data:`SHARED_WS`, one per-thread
workspace shared by every conv node of the process (``workspace.py``), so memory is the largest
node's scratch, not the sum; a ``RuntimePool`` thread has its own.

Measured (1 thread, float32, OpenBLAS 0.3.31 SkylakeX, resnet_small's layers with their real
inputs, matcher kernel vs ``torch.nn.functional.conv2d``, interleaved, best-round medians, ms):
7x7 s2 stem 2.61 vs 1.54; 64ch 56x56 (F(4x4)) 1.39-1.44 vs 1.38-1.42; 3x3 s2 64->128 1.09 vs
0.78; 128ch 28x28 (F(4x4)) 1.01-1.03 vs 1.34-1.36; 256ch 14x14 (F(2x2)) 1.30-1.33 vs
1.43-1.48; 512ch 7x7 (im2col) 2.31-2.33 vs 2.11-2.14. Before the GEMM transforms (F(2x2) with
strided ufunc passes, im2col at 7x7): 2.50-2.54, 1.66-1.68, 1.49-1.54 for the three Winograd
sizes. Sum of the 20 convs 33.0 -> 25.8 ms (torch 25.2); at 2 BLAS threads 24.7 -> 20.3 ms.
Accuracy per algorithm: ``conv_winograd.py``. History: docs/performance-log.md.
"""
from __future__ import annotations

import math
import os
import threading

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import NodeInfo, Specialized

from . import conv_small as _small
from . import conv_winograd as _wg
from . import parallel as _par
from .conv_im2col import _NO_WS, COLS_CAP_BYTES, SHARED_WS, conv_forward, conv_transpose_forward  # noqa: F401


def _tactics():
    """:mod:`.tactic`, imported when a conv first times its ways: a start whose convs time nothing (digits'
    small conv) does not load it and ``srcore.clock`` (~0.5 ms of a cold start)."""
    from . import tactic

    return tactic


def __getattr__(name):   # ``conv._tactic`` as before (PEP 562), imported on first use
    if name == "_tactic":
        return _tactics()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# a constant-weight conv is split over intra-op threads only from this many multiply-adds: a
# hand-over to the pool's worker costs ~20-100 us, and resnet's 1x1 stride-2 convs (6.4 M MACs,
# ~0.13 ms) measured 0.6-0.8x split
PARALLEL_MIN_MACS = 20_000_000
# grouped convs with at most this many input channels per group may take the direct loop
DIRECT_MAX_CG = 16
# a 3x3 conv with fewer input or output channels than this and a static input shape takes Winograd
# only if it times faster than im2col at load: its input transform costs per input channel and is
# shared by only O outputs (1 thread, loaded machine, ms, F(4x4) / im2col: 16 -> 16ch 128x128
# 19.5 / 13.8, 48 -> 16ch 128x128 43 / 35, 16 -> 32ch 64x64 7.2 / 4.5, 32 -> 32ch 64x64 9.5 / 10.0,
# 96 -> 32ch 64x64 24 / 32)
WINOGRAD_TIMED_BELOW = 64
# an im2col conv of static shape whose column matrix has at least this many elements gets its
# column copies and bias add split over the intra-op threads (the GEMM left to BLAS's threads)
# timed against one thread at load, at more than one intra-op thread only (conv_im2col.py,
# ``gather``): below it the hand-over to the part pool (~20-100 us) is most of the copy
GATHER_SPLIT_MIN = 1 << 17


def _tup(v, nd):
    if isinstance(v, int):
        return (v,) * nd
    v = tuple(int(i) for i in v)
    return v * nd if len(v) == 1 else v


def _pads(padding, ks, stride, dilation, nd):
    """``[(lo, hi), ...]`` from an int list or torch's "same"/"valid"."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise KernelError("padding='same' is not supported for strided convolutions")
            total = [d * (k - 1) for d, k in zip(dilation, ks)]
            return [(t // 2, t - t // 2) for t in total]
        raise KernelError(f"invalid padding string {padding!r}, expected 'same' or 'valid'")
    return [(p, p) for p in _tup(padding, nd)]


def _batched(fn, x, nd, out, *args, **kw):
    """Run ``fn`` on a batched input; an unbatched (C, *spatial) input gets a batch of one."""
    if x.ndim == nd + 2:
        return fn(x, *args, out=out, **kw)
    if x.ndim != nd + 1:
        raise KernelError(f"conv{nd}d expects a {nd + 1}-D or {nd + 2}-D input, got shape {tuple(x.shape)}")
    r = fn(x[None], *args, out=None if out is None else out[None], **kw)
    return r[0] if out is None else out


def _conv_nd(nd, input, weight, bias, stride, padding, dilation, groups, out, ws=_NO_WS):
    stride, dilation = _tup(stride, nd), _tup(dilation, nd)
    pads = _pads(padding, weight.shape[2:], stride, dilation, nd)
    return _batched(conv_forward, input, nd, out, weight, bias, stride, pads, dilation, groups, ws=ws)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, out=None):
    """``aten::conv1d`` and ``aten::conv1d.padding``."""
    return _conv_nd(1, input, weight, bias, stride, padding, dilation, groups, out)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, out=None):
    """``aten::conv2d`` and ``aten::conv2d.padding``."""
    return _conv_nd(2, input, weight, bias, stride, padding, dilation, groups, out)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, out=None):
    """``aten::conv3d`` and ``aten::conv3d.padding``."""
    return _conv_nd(3, input, weight, bias, stride, padding, dilation, groups, out)


def _convt_nd(nd, input, weight, bias, stride, padding, output_padding, groups, dilation, out, ws=_NO_WS):
    return _batched(conv_transpose_forward, input, nd, out, weight, bias, _tup(stride, nd), _tup(padding, nd),
                    _tup(output_padding, nd), groups, _tup(dilation, nd), ws=ws)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                     out=None):
    """``aten::conv_transpose1d``."""
    return _convt_nd(1, input, weight, bias, stride, padding, output_padding, groups, dilation, out)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                     out=None):
    """``aten::conv_transpose2d.input``."""
    return _convt_nd(2, input, weight, bias, stride, padding, output_padding, groups, dilation, out)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                     out=None):
    """``aten::conv_transpose3d.input``."""
    return _convt_nd(3, input, weight, bias, stride, padding, output_padding, groups, dilation, out)


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, out=None):
    """``aten::convolution``: the spatial rank comes from the weight."""
    nd = weight.ndim - 2
    if transposed:
        return _convt_nd(nd, input, weight, bias, stride, padding, output_padding, groups, dilation, out)
    return _conv_nd(nd, input, weight, bias, stride, padding, dilation, groups, out)


def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
                 benchmark=False, deterministic=False, cudnn_enabled=True, allow_tf32=True, out=None):
    """``aten::_convolution`` (and ``.deprecated``); the backend flags are irrelevant here."""
    return convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, out=out)


# --- matchers: constant weight/bias and hyper-parameters -> a kernel instance with its own workspace

_CONV_ARGS = ("stride", "padding", "dilation", "groups")


def _page_in(a):
    """Read one element per 4 KiB page of ``a``. A model's weights are views of the mapped
    ``.srm`` file: paged in here, at load, they are not faulted in by the first call (resnet's
    7x7 convs, 9 MiB each, made the first call's peak RSS 28 MiB larger)."""
    np.add.reduce(a.reshape(-1)[::max(1, 4096 // a.itemsize)])


def make_conv(nd, weight, bias, stride, padding, dilation, groups, input_shape=None, epilogue=None, add=False):
    """A ``fn(input, out=None)`` convolution with fixed weights; scratch from :data:`SHARED_WS`.

    ``epilogue`` (``ep(out, other)``: relu of ``out`` (+ ``other`` when ``add``) in place, the fused
    convs'): then ``fn(input, out=None, other=None)`` returns that relu; the SIMD direct conv, where
    chosen, applies it in its own store (residual and clamp at 0: no pass over the output after it),
    the other paths call ``epilogue``; the timing at load charges each path its epilogue.

    3x3 stride-1 ungrouped 2-D convs (float32/64) run Winograd F(4x4) or F(2x2), or im2col, as
    :func:`conv_winograd.choose` says for the input's shape: decided once per shape, the weight
    transformed then (for a static ``input_shape``, the matcher's, here at load).
    ``SRCORE_CPU_THREADS=N`` (read here) splits large convs over N threads (``parallel.py``).
    """
    ws = SHARED_WS
    w = np.ascontiguousarray(weight)
    b = None if bias is None else np.ascontiguousarray(bias)
    _page_in(w)
    stride, dilation = _tup(stride, nd), _tup(dilation, nd)
    pads = _pads(padding, w.shape[2:], stride, dilation, nd)
    O, C = w.shape[:2]
    wino = nd == 2 and _wg.applies(w, stride, pads, dilation, groups)
    # intra-op parts (opt-in): fixed now, at module load (parallel.py)
    threads = _par.split_threads()
    # multiply-adds per input pixel (roughly: the output has 1/prod(stride) of the input's pixels)
    macs_per_pixel = O * w.shape[1] * math.prod(w.shape[2:]) // math.prod(stride)
    # small inputs: one gather + one GEMM, planned once per input shape (conv_small.py)
    small = _small.SmallConv(w, b, stride, pads, dilation, groups) if _small.small_conv_applies(
        w, stride, pads, groups) else None
    plans = small.plans if small is not None else {}
    gws = {}          # tile size m -> transformed weight
    by_shape = {}     # input shape -> (m, transformed weight); m == 0: im2col

    def winograd_for(shape, timed=False):
        N, _, H, W = shape
        Ho, Wo = H + sum(pads[0]) - 2, W + sum(pads[1]) - 2
        m = _wg.choose(N, C, O, Ho, Wo) if Ho > 0 and Wo > 0 else 0
        if m and m not in gws:
            gws[m] = _wg.transform_weight(w, m)
        if m and timed and min(C, O) < WINOGRAD_TIMED_BELOW:
            # few channels: Winograd's per-channel transforms against im2col, timed on this machine
            x0, o0 = np.zeros(shape, w.dtype), np.empty((N, O, Ho, Wo), w.dtype)
            way = _tactics().fastest({
                "winograd": lambda x, o: _wg.conv3x3(x, gws[m], b, pads, o, ws),
                "im2col": lambda x, o: _batched(conv_forward, x, nd, o, w, b, stride, pads, dilation, groups, ws=ws),
            }, (x0, o0))   # (both threaded; in the first pass: the split paths timed after depend on it)
            if way != "winograd":
                m = 0
        if len(by_shape) >= _small.MAX_PLANS:   # dynamic shapes must not grow it forever
            by_shape.clear()
        return by_shape.setdefault(shape, (m, gws.get(m)))

    if wino and input_shape is not None and len(input_shape) == 4 and all(isinstance(d, int) for d in input_shape):
        shape = tuple(input_shape)
        if small is None or small.plan(shape, w.dtype) is None:   # (a small input never gets here)
            winograd_for(shape, timed=True)
    direct = None
    if groups > 1 and nd in (1, 2) and w.dtype == np.float32 and w.shape[1] <= DIRECT_MAX_CG:
        from .conv_direct import DirectConv   # imports numba: only models with grouped convs pay it

        direct = DirectConv(w, b, stride, pads, dilation, groups, ws, threads)

    def conv_const(input, out=None):
        if input.size == 0:   # an empty batch: no algorithm to pick, the plain path returns at once
            return _batched(conv_forward, input, nd, out, w, b, stride, pads, dilation, groups, ws=ws)
        if (direct is not None and input.ndim == nd + 2 and input.dtype == np.float32
                and (out is None or (out.dtype == np.float32 and out.flags.c_contiguous))):
            if out is None:
                out = np.empty(direct.out_shape(input.shape), np.float32)
            return direct(input, out)
        return other_paths(input, out)

    on_caller = _par.blas_on_caller()
    # (SRCORE_CPU_SPLIT_HOLD=0, read at load: the split paths unheld, as before 2026-11-29; an A/B switch)
    hold_split = os.environ.get("SRCORE_CPU_SPLIT_HOLD", "1") != "0"
    gather = {}       # input shape -> parts of the column copies, where timing at load chose a split
    mkl = {}          # input shape -> MKL's im2col GEMM (mkl_gemm.matmul_rows), where timing at load chose it

    def other_paths(input, out=None, split=1):
        """The paths above; ``split > 1``: Winograd's or im2col's work in that many parts on the part
        pool (one BLAS thread each), the choice made at load (the SIMD conv's timing below). At more
        than one intra-op thread their BLAS outside the parts runs on this thread alone
        (``parallel.blas_on_caller``), split or not: a split path leaves some products whole on the
        caller (a 1x1 conv of fewer than ``2 * split`` output channels, a Winograd conv of few
        channels), and unheld those ran numpy's threaded OpenBLAS, whose worker then spun beside the
        part pool's through every call (unet_small's 16 -> 2 head at 2 threads on the AMD EPYC: that
        worker 17-22 ms of CPU a call beside the caller's 25-30; docs/performance-log.md)."""
        if on_caller and (split == 1 or hold_split):
            return held_paths(input, out, split)
        return paths(input, out, split)

    def paths(input, out=None, split=1):
        t = split
        if t == 1 and threads > 1 and input.size // max(input.shape[-nd - 1], 1) * macs_per_pixel >= PARALLEL_MIN_MACS:
            t = threads
        if small is not None and t == 1:   # a conv worth splitting over threads is not small
            fn = plans.get((input.shape, input.dtype), False)
            if fn is False:
                fn = small.plan(input.shape, input.dtype)
            if fn is not None:
                return fn(input, out)
        if (wino and input.ndim == 4 and input.dtype == w.dtype and input.shape[1] == C
                and (out is None or (out.dtype == w.dtype and out.flags.c_contiguous))
                and _wg.all_finite(input)):
            m, gw = by_shape.get(input.shape) or winograd_for(input.shape)
            if m:
                if out is None:
                    out = np.empty((input.shape[0], O, input.shape[2] + sum(pads[0]) - 2,
                                    input.shape[3] + sum(pads[1]) - 2), w.dtype)
                return _wg.conv3x3(input, gw, b, pads, out, ws, t)
        return _batched(conv_forward, input, nd, out, w, b, stride, pads, dilation, groups, ws=ws, threads=t,
                        gather=gather.get(input.shape, 1) if t == 1 else 1, gemm=mkl.get(input.shape))

    # only used on_caller: looking up the BLAS controller (threadpoolctl, ~5 ms cold) is not needed otherwise
    held_paths = _par.on_caller(paths) if on_caller else paths

    def _time_gather_split(shape):
        """At more than one intra-op thread, an im2col conv of ``shape`` with a large column matrix
        takes its split column copies where they time faster than one thread's (same bits)."""
        if (shape[1] != C * groups or (groups == C and groups > 1)
                or (groups == 1 and all(k == 1 for k in w.shape[2:]) and all(s == 1 for s in stride)
                    and all(p == (0, 0) for p in pads))):
            return          # the GEMM-on-the-input and depthwise paths gather nothing
        osz = tuple((n + lo + hi - d * (k - 1) - 1) // s + 1
                    for n, (lo, hi), d, k, s in zip(shape[2:], pads, dilation, w.shape[2:], stride))
        if any(o <= 0 for o in osz) or shape[0] * C * math.prod(w.shape[2:]) * math.prod(osz) < GATHER_SPLIT_MIN:
            return
        if small is not None and small.plan(shape, w.dtype) is not None:
            return
        if wino and by_shape.get(shape, (0,))[0]:
            return          # Winograd, not im2col
        intra = _par.intra_op_threads()
        if intra <= 1:
            return
        x0, o0 = np.zeros(shape, w.dtype), np.empty((shape[0], O) + osz, w.dtype)

        def split(x, o):
            return _batched(conv_forward, x, nd, o, w, b, stride, pads, dilation, groups, ws=ws, gather=intra)
        if _tactics().fastest({"one": other_paths, "split": split}, (x0, o0), threaded_blas={"one", "split"}) == "split":
            gather[shape] = intra

    shape = tuple(input_shape) if input_shape is not None else ()
    static = len(shape) == nd + 2 and all(isinstance(d, int) and d > 0 for d in shape)
    if direct is not None and w.shape[1] > 1:
        # several channels per group: the direct loop against im2col + GEMM, timed on this machine
        if static:
            x0 = np.zeros(shape, np.float32)
            o0 = np.empty(direct.out_shape(shape), np.float32)
            if _tactics().fastest({"direct": direct, "gemm": other_paths}, (x0, o0), threaded_blas={"gemm"}) != "direct":
                direct = None
        else:
            direct = None   # an unknown shape: the GEMM paths, which win at the larger sizes
    if static and threads == 1 and direct is not None:
        _time_direct_split(direct, shape)
    simd_ok = (static and nd in (1, 2) and w.dtype == np.float32 and (w.shape[1] > 1 or groups == 1)
               and shape[1] == C * groups
               and w.shape[0] % groups == 0   # else the paths above report the bad conv, naming the node
               and os.environ.get("SRCORE_CPU_SIMD_CONV", "1") != "0"
               and (small is None or small.plan(shape, w.dtype) is None
                    or _macs(shape, w, stride, pads, dilation) >= SIMD_SMALL_MIN_MACS))
    # on the wall clock (more than one intra-op thread) the SIMD conv's choice takes two passes over the
    # module's convs (tactic.deferred): the threaded-BLAS timings below wait for the second, in this order
    two_pass = simd_ok and _tactics().default_clock() == "wall"
    late = []
    if static and threads == 1 and direct is None:
        if two_pass:
            late.append(lambda: _time_gather_split(shape))
        else:
            _time_gather_split(shape)
    if (static and threads == 1 and direct is None and w.dtype == np.float32 and groups == 1 and shape[0] == 1
            # Winograd's and the small convs' shapes reach no im2col GEMM: no probe (a whole conv) needed
            and not (wino and by_shape.get(shape, (0,))[0])
            and (small is None or small.plan(shape, w.dtype) is None)):
        finish_mkl = _time_mkl_gemm(shape, other_paths, mkl, w, nd, b, stride, pads, dilation, ws, defer=two_pass)
        if finish_mkl is not None:
            late.append(finish_mkl)
    if simd_ok:
        # (not where one gather + GEMM serves a small input, unless its work is large: a few
        # microseconds, and a cold start that must not import numba, tests/test_cold_start_imports.py)
        # dense convs: srcore's explicit-SIMD direct conv (srcore.plugin.simd_conv), its input copy
        # as channel planes or row-interleaved, against the paths above, timed on this machine for
        # this input shape; it serves that shape only. On by default since it won on unet_small's
        # and detection_head's layers (cpu / eager 1.35 -> 1.10 and 0.87 -> 0.80, CPU time,
        # performance.md); SRCORE_CPU_SIMD_CONV=0 turns it off (the numba import and the timing
        # cost ~0.1 s a layer at load)
        from srcore.plugin import simd_conv

        # a fused relu: the SIMD conv's clamp at 0 (NaN stays NaN, as torch's relu)
        lo = 0.0 if epilogue is not None else -math.inf
        simd = simd_conv.SimdDirectConv(w, b, stride, pads, dilation, groups, lo=lo)
        oshape = simd.out_shape(shape)
        r0 = np.zeros(oshape, np.float32) if add else None   # the residual, for the timing

        # at more than one intra-op thread each layout also split over them (its tasks, rows or spans
        # of the output, on the part pool), timed in wall time against the other paths at that count
        counts = sorted({threads, _par.intra_op_threads()})
        fill_parts = _par.split_fill()   # (read at load: an A/B switch)

        def layout(rows, tile, n):
            def run(x, o):
                simd.rows_interleaved, simd.row_tile = rows, tile
                return _simd_run(simd, x, o, n, r0, fill_parts)
            return run
        ways, way_threads = {}, {}
        for n in counts:
            at = "" if n == threads else f"@{n}"
            ways["simd" + at], ways["simd_rows" + at] = layout(False, 0, n), layout(True, 0, n)
            if oshape[-1] > simd_conv.ROW_TILE:
                # a long row in pieces, every channel block of a piece in turn (1-D convs: one row)
                ways["simd_tiled" + at] = layout(False, simd_conv.ROW_TILE, n)
            way_threads.update({k: n for k in ways if k not in way_threads})
        simd_oc = None
        if simd.nl == 16:
            # on a 16-lane CPU, output channels in the lanes too (small planes; its own weights)
            simd_oc = simd_conv.SimdDirectConv(w, b, stride, pads, dilation, groups, oc_lanes=True, lo=lo)
            for n in counts:
                way = "simd_oc" + ("" if n == threads else f"@{n}")
                ways[way], way_threads[way] = (lambda x, o, n=n: _simd_run(simd_oc, x, o, n, r0, fill_parts)), n
        ep = epilogue or (lambda o, other=None: o)
        others = {"other": lambda x, o: ep(conv_const(x, o), r0)}
        if direct is None:
            # the other paths split on the part pool too: a threaded BLAS call anywhere in a module
            # leaves OpenBLAS's worker spinning ~0.1 s on the core every part-pool split then needs
            others.update({f"other@{n}": (lambda x, o, n=n: ep(other_paths(x, o, split=n), r0))
                           for n in counts if n > 1})

        def choose(t):
            """The kernel the timings ``t`` choose."""
            nonlocal conv_const, simd
            way = min((n for n in ways if n in t), key=t.get, default=None)
            other = _other_choice(t, t.get(way))
            if other is not None and other != "other":
                split_other = int(other.partition("@")[2])
                conv_const = _with_split(other_paths, split_other, shape, conv_const)
                conv_const.tactic = other
            if way is None or (other is not None and t[way] > SIMD_MARGIN * t[other]):
                return _with_epilogue(conv_const, epilogue)
            kind, run_threads = way.partition("@")[0], way_threads[way]
            if kind == "simd_oc":
                simd = simd_oc
            simd.rows_interleaved = kind == "simd_rows"
            simd.row_tile = simd_conv.ROW_TILE if kind == "simd_tiled" else 0
            fallback = _with_epilogue(conv_const, epilogue)

            def conv_simd(input, out=None, other=None):
                if (input.shape == shape and input.dtype == np.float32
                        and (out is None or (out.dtype == np.float32 and out.flags.c_contiguous))
                        and (other is None if not add else (isinstance(other, np.ndarray) and other.shape == oshape
                                                            and other.dtype == np.float32
                                                            and other.flags.c_contiguous))):
                    if out is None:
                        out = np.empty(oshape, np.float32)
                    return _simd_run(simd, input, out, run_threads, other, fill_parts)
                return fallback(input, out, other) if epilogue is not None else fallback(input, out)
            conv_simd.tactic = way
            return conv_simd

        def zeros():
            return np.zeros(shape, np.float32), np.empty(oshape, np.float32)
        if two_pass:
            return _tactics().deferred({**ways, **others}, zeros, {"other"}, choose,
                                    before=lambda: [step() for step in late])
        return choose(_tactics().timings({**ways, **others}, zeros(), threaded_blas={"other"}))
    return _with_epilogue(conv_const, epilogue)


def _with_epilogue(conv, epilogue):
    """``conv`` itself, or with ``epilogue`` a ``fn(input, out=None, other=None)`` applying it after."""
    if epilogue is None:
        return conv

    def conv_then_epilogue(input, out=None, other=None):
        return epilogue(conv(input, out), other)
    conv_then_epilogue.tactic = getattr(conv, "tactic", None)
    return conv_then_epilogue


def _time_direct_split(direct, shape) -> None:
    """At more than one intra-op thread, the direct grouped conv (``conv_direct.py``: mobilenet's
    depthwise convs) on ``shape`` split by output rows over them on the part pool where that times
    faster at load than one thread (the same bits); it keeps one thread otherwise."""
    intra = _par.intra_op_threads()
    if intra <= 1:
        return
    x0 = np.zeros(shape, np.float32)
    o0 = np.empty(direct.out_shape(shape), np.float32)

    def at(n):
        def run(x, o):
            direct.threads = n
            return direct(x, o)
        return run
    way = _tactics().fastest({"one": at(1), "split": at(intra)}, (x0, o0))
    direct.threads = intra if way == "split" else 1


def _other_choice(t: dict, simd_best=None):
    """Of the timed other paths in ``t`` (``"other"``: threaded BLAS; ``"other@N"``: split on the part
    pool), the one the SIMD conv (best time ``simd_best``, None: none ran) is then weighed against:
    threaded BLAS only where it is :data:`_MKL_WIN` faster than both the split and the SIMD conv (a
    tie keeps the part pool, as for MKL's split GEMMs: the worker a threaded OpenBLAS call wakes
    spins ~0.1 s on the core every split of the module needs), else the split; None when none ran."""
    split = min((n for n in t if n.startswith("other@")), key=t.get, default=None)
    if split is None:
        return "other" if "other" in t else None
    pool = min(t[split], simd_best if simd_best is not None else math.inf)
    if "other" in t and t["other"] < _MKL_WIN * pool:
        return "other"
    return split


def _with_split(other_paths, n: int, shape, conv):
    """``other_paths`` with its work split in ``n`` parts for inputs of ``shape``, ``conv`` for others."""
    def conv_split(input, out=None):
        if input.shape == shape:
            return other_paths(input, out, split=n)
        return conv(input, out)
    return conv_split


def _simd_run(simd, x, out, threads: int, residual=None, split_fill=True):
    """``simd`` (a ``SimdDirectConv``) on ``x`` (+ ``residual``) into ``out``, its tasks split over
    ``threads`` on the part pool (``parallel.run_bound``; ``split_fill``: each part copying the input
    rows it reads) when more than one."""
    if threads <= 1:
        return simd(x, out, residual)
    _par.run_bound(simd.bind(x, out, residual), threads, split_fill)
    return out


def _time_mkl_gemm(shape, other_paths, mkl, w, nd, b, stride, pads, dilation, ws, defer=False):
    """A single-sample ungrouped float32 conv of ``shape`` whose path is im2col takes MKL's GEMM
    (``mkl_gemm.matmul_rows``, on numpy's BLAS thread count) where that times faster than numpy's here
    (the torch eager models run theirs on MKL; 1-D convs of audio_conv1d on an Intel Sapphire Rapids:
    performance.md). ``defer`` (the first of :func:`tactic.deferred`'s passes): MKL's split timed now,
    numpy's threaded BLAS by the returned function, which then decides (None: nothing left to time)."""
    from .mkl_gemm import matmul_rows

    gemm = matmul_rows()
    if gemm is None or shape[1] != w.shape[1]:
        return None
    x0 = np.zeros(shape, np.float32)
    calls = []
    real = gemm

    def counting(a, bb, out):
        calls.append(1)
        return real(a, bb, out)
    mkl[shape] = counting
    with _par.one_blas_thread():   # a probe (and the output buffer): it must not wake OpenBLAS's worker
        o0 = other_paths(x0)       # does this shape's path reach the im2col GEMM at all?
    del mkl[shape]
    if not calls:
        return None

    def with_mkl(x, o):
        return _batched(conv_forward, x, nd, o, w, b, stride, pads, dilation, 1, ws=ws, gemm=gemm)
    if gemm.threads > 1:   # split on the part pool against numpy's threaded BLAS (as mkl_gemm's linears)
        if not defer:
            t_mkl, t_np = _tactics().split_vs_blas(lambda: with_mkl(x0, o0), lambda: other_paths(x0, o0))
            if _MKL_WIN * t_mkl <= t_np:
                mkl[shape] = gemm
            return None
        _par.wait_blas_idle()
        t_mkl, rounds = _tactics().split_rounds(lambda: with_mkl(x0, o0))
        oshape = o0.shape

        def finish():
            x, o = np.zeros(shape, np.float32), np.empty(oshape, np.float32)
            if _MKL_WIN * t_mkl <= _tactics().blas_rounds(lambda: other_paths(x, o), t_mkl, rounds):
                mkl[shape] = gemm
        return finish
    if _tactics().fastest({"numpy": other_paths, "mkl": with_mkl}, (x0, o0)) == "mkl":
        mkl[shape] = gemm
    return None


#: at more than one thread MKL's split im2col GEMM stays unless this much slower than numpy's threaded one
_MKL_WIN = 0.97

#: a conv the small-input path serves (one gather + one GEMM) is timed against the SIMD direct conv
#: from this many multiply-adds on: audio_conv1d's first conv (1 -> 128 channels, k10 s5, 16000
#: samples, 4.1M) ran 115-120 us on the SIMD conv, 170-270 on the gather + GEMM (Sapphire Rapids)
SIMD_SMALL_MIN_MACS = 1 << 20


def _macs(shape, w, stride, pads, dilation) -> int:
    """Multiply-adds of a conv of weight ``w`` on an input of ``shape`` (0 for an empty output)."""
    osz = [(n + lo + hi - d * (k - 1) - 1) // s + 1
           for n, (lo, hi), d, k, s in zip(shape[2:], pads, dilation, w.shape[2:], stride)]
    return shape[0] * w.shape[0] * math.prod(w.shape[1:]) * math.prod(max(o, 0) for o in osz)


# the SIMD direct conv replaces a conv's other paths only where it times this much faster: on a
# loaded machine a plain "fastest" picked it for resnet_small's layers where it was no faster, and
# the model ran 1.06x slower (performance.md)
SIMD_MARGIN = 0.9


def make_conv_transpose(nd, weight, bias, stride, padding, output_padding, groups, dilation, input_shape=None):
    """A constant-weight transposed conv: a float32 one runs the shared compiled kernel
    (``srcore.plugin.conv_transpose``), its form timed at load when ``input_shape`` is static."""
    ws = SHARED_WS
    w = np.ascontiguousarray(weight)
    b = None if bias is None else np.ascontiguousarray(bias)
    args = (_tup(stride, nd), _tup(padding, nd), _tup(output_padding, nd), groups, _tup(dilation, nd))
    if w.dtype == np.float32 and (b is None or b.dtype == np.float32) and w.ndim == nd + 2:
        return _ConvTransposeF32(nd, w, b, args, input_shape, ws)

    def conv_transpose_const(input, out=None):
        return _batched(conv_transpose_forward, input, nd, out, w, b, *args, ws=ws)
    return conv_transpose_const


class _ConvTransposeF32:
    """``srcore.plugin.conv_transpose.ConvTranspose`` behind the kernel's ``(input, out=None)`` call:
    per thread and input shape one prepared runner and its column scratch, a view of the thread's
    shared workspace taken once (kernels use it one at a time; if another grows it, the view keeps
    the old buffer, then private); another dtype, rank or channel count goes to
    ``conv_transpose_forward``."""

    def __init__(self, nd, w, b, args, input_shape, ws):
        from srcore.plugin import conv_transpose

        self.nd, self.w, self.b, self.args, self.ws = nd, w, b, args, ws
        self.ct = conv_transpose.ConvTranspose(w, b, *args)
        self.no_cols = conv_transpose.NO_COLS
        self.tls = threading.local()
        if input_shape is not None and len(input_shape) == nd + 2 and all(type(d) is int for d in input_shape) \
                and input_shape[1] == w.shape[0] and math.prod(input_shape) > 0:
            x = np.random.default_rng(0).standard_normal(input_shape, np.float32)
            self.ct.pick(x, np.empty(self.ct.out_shape(input_shape), np.float32))

    def _entry(self, shape):
        runs = self.tls.__dict__.setdefault("runs", {})
        cols = None if self.ct.form in self.no_cols else self.ws.get(None, "cols", self.ct.cols_shape(shape), np.float32)
        entry = runs[shape] = (self.ct.runner(shape, own_cols=False), cols, self.ct.out_shape(shape))
        return entry

    def __call__(self, input, out=None):
        if input.dtype != np.float32 or input.ndim != self.nd + 2 or input.shape[1] != self.w.shape[0]:
            return _batched(conv_transpose_forward, input, self.nd, out, self.w, self.b, *self.args, ws=self.ws)
        shape = input.shape
        entry = self.tls.__dict__.get("runs", _NO_RUNS).get(shape) or self._entry(shape)
        run, cols, oshape = entry
        res = out if out is not None and out.flags.c_contiguous else np.empty(oshape, np.float32)
        run(input if input.flags.c_contiguous else np.ascontiguousarray(input), res, cols)
        if out is not None and res is not out:
            np.copyto(out, res)
        return res


_NO_RUNS: dict = {}


def _consts(node: NodeInfo, names):
    vals = []
    for n in names:
        if not node.is_const(n):
            return None
        vals.append(node.const(n))
    return vals


def _const_weight(node: NodeInfo):
    vals = _consts(node, ("weight", "bias"))
    if vals is None or not isinstance(vals[0], np.ndarray):
        return None
    return vals


def static_input_shape(node: NodeInfo):
    """The input's shape when the graph knows it (a tuple, possibly with symbolic dims), else None."""
    return getattr(node.arg("input").type, "shape", None)


def _dynamic(nd, stride, padding, dilation, groups, ks):
    """A conv whose weight (or bias) is a graph value, its hyper-parameters constants: planned per
    shape (``conv_dynamic.py``), called with the input, weight and bias."""
    from .conv_dynamic import DynamicWeightConv

    stride, dilation = _tup(stride, nd), _tup(dilation, nd)
    return Specialized(DynamicWeightConv(nd, stride, _pads(padding, ks, stride, dilation, nd), dilation, groups),
                       args=(0, 1, 2))


def _weight_rank_and_taps(node: NodeInfo, nd):
    """The kernel size of a non-constant weight when the graph knows its shape (``padding='same'``
    needs it), else None; ``()`` when the padding does not need it."""
    if not isinstance(node.const("padding", None), str):
        return ()
    shape = getattr(node.arg("weight").type, "shape", None)
    if shape is None or len(shape) != nd + 2 or not all(isinstance(d, int) for d in shape[2:]):
        return None
    return tuple(shape[2:])


def _matcher(nd):
    def matcher(node: NodeInfo):
        hp = _consts(node, _CONV_ARGS)
        if hp is None:
            return None
        wb = _const_weight(node)
        if wb is None:
            ks = _weight_rank_and_taps(node, nd)
            return None if ks is None else _dynamic(nd, *hp, ks)
        return Specialized(make_conv(nd, *wb, *hp, input_shape=static_input_shape(node)), args=(0,))
    return matcher


def _or_generic(fast, generic):
    """A matcher that never declines (a decline makes dispatch skip the kernel): fast path or ``generic``."""
    def matcher(node: NodeInfo):
        return fast(node) or generic
    return matcher


conv1d_matcher = _or_generic(_matcher(1), conv1d)
conv2d_matcher = _or_generic(_matcher(2), conv2d)
conv3d_matcher = _or_generic(_matcher(3), conv3d)


def _transpose_matcher(nd):
    def matcher(node: NodeInfo):
        wb = _const_weight(node)
        hp = _consts(node, ("stride", "padding", "output_padding", "groups", "dilation"))
        if wb is None or hp is None:
            return None
        return Specialized(make_conv_transpose(nd, *wb, *hp, input_shape=static_input_shape(node)), args=(0,))
    return matcher


conv_transpose1d_matcher = _or_generic(_transpose_matcher(1), conv_transpose1d)
conv_transpose2d_matcher = _or_generic(_transpose_matcher(2), conv_transpose2d)
conv_transpose3d_matcher = _or_generic(_transpose_matcher(3), conv_transpose3d)


def _convolution_fast(node: NodeInfo):
    """``aten::convolution`` / ``aten::_convolution`` with constant weights and hyper-parameters."""
    wb = _const_weight(node)
    hp = _consts(node, ("stride", "padding", "dilation", "transposed", "output_padding", "groups"))
    if hp is None:
        return None
    stride, padding, dilation, transposed, output_padding, groups = hp
    if wb is None:   # a computed weight: forward convs planned per shape (the rank from the weight's type)
        shape = getattr(node.arg("weight").type, "shape", None)
        if transposed or shape is None or len(shape) not in (3, 4, 5):
            return None
        return _dynamic(len(shape) - 2, stride, padding, dilation, groups, ())
    nd = wb[0].ndim - 2
    if transposed:
        fn = make_conv_transpose(nd, *wb, stride, padding, output_padding, groups, dilation,
                                 input_shape=static_input_shape(node))
    else:
        fn = make_conv(nd, *wb, stride, padding, dilation, groups, input_shape=static_input_shape(node))
    return Specialized(fn, args=(0,))


def convolution_matcher(node: NodeInfo):
    """``aten::convolution`` / ``aten::_convolution``: the constant-weight kernel, else the generic one."""
    return _convolution_fast(node) or (_convolution if node.op.startswith("aten::_convolution") else convolution)
