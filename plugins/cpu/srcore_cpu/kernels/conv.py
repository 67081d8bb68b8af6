"""Convolutions (1-D/2-D/3-D, grouped, depthwise, transposed) as im2col + one GEMM.

Algorithm by shape: a 1x1 stride-1 unpadded ungrouped conv is a plain GEMM on
the input; a depthwise conv (groups == in channels) is a loop of per-tap
multiply-adds over the whole tensor (no GEMM); everything else copies the
kernel taps into a column buffer (one strided copy per tap) and calls
``np.matmul`` once, writing straight into ``out``. Transposed convs do the
GEMM first and scatter-add the taps (col2im).

Constant-weight kernels (the matchers') run small inputs (column matrix of at
most 64k elements) as one planned gather + GEMM (``conv_small.py``: the digits
demo's 8x8 convs, ~35 -> ~4-6 us), and 3x3 stride-1 convs with outputs of
at least 14x14 as Winograd F(2x2, 3x3) (``conv_winograd.py``). Their scratch
(padded input, columns, Winograd tiles) comes from :data:`SHARED_WS`, one
per-thread workspace shared by every conv node of the process
(``workspace.py``), so memory is the largest node's scratch, not the sum; a
``RuntimePool`` thread has its own. The plain impls allocate per call.

Measured (1 thread, float32, OpenBLAS Haswell kernels, matcher kernel vs
``torch.nn.functional.conv2d``): 1x64x56x56 3x3 p1 3.2 ms vs 1.3 ms;
1x3x224x224 7x7 s2 p3 3.9 ms vs 1.4 ms; 1x256x14x14 1x1 0.26 ms vs 0.29 ms;
1x32x112x112 depthwise 3x3 1.1 ms vs 0.23 ms. The GEMM is ~85% of the 3x3
time (numpy's sgemm is as fast as torch's; torch's conv uses oneDNN direct
convolution), the im2col copies the rest. With OpenBLAS's SkylakeX kernels
(OPENBLAS_CORETYPE unset), 3x3 p1, im2col vs Winograd vs torch, ms:
64ch 56x56 2.25 / 2.16 / 1.30; 128ch 28x28 1.86 / 1.51 / 1.24;
256ch 14x14 1.54 / 1.23 / 1.57; 512ch 7x7 2.88 / 7.57 / 3.79 (im2col kept).
Winograd's transforms are strided numpy passes with 28-element inner loops,
~60% of its time at 56x56; the GEMM part is 0.77 ms.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from srcore.errors import KernelError
from srcore.plugin import NodeInfo, Specialized

from . import conv_small as _small
from . import conv_winograd as _wg
from . import parallel as _par
from .workspace import SharedWorkspace, pad_into


def _tup(v, nd):
    if isinstance(v, int):
        return (v,) * nd
    v = tuple(int(i) for i in v)
    return v * nd if len(v) == 1 else v


def _flat(out, shape):
    """A reshaped view of ``out`` or None when that would copy."""
    if out.flags.c_contiguous:
        return out.reshape(shape)
    return None


class _NoWorkspace:
    def get(self, key, role, shape, dtype, zero=False):
        return (np.zeros if zero else np.empty)(shape, dtype)


_NO_WS = _NoWorkspace()
# one per-thread workspace for every constant-weight conv node of the process (see workspace.py)
SHARED_WS = SharedWorkspace()
# Winograd only pays off once the GEMM has enough tiles: at 7x7 outputs (16 tiles) the 16 small
# GEMMs run at a fraction of BLAS speed (512ch: 7.6 ms vs im2col 2.9 ms); at 14x14 it wins by 20%
WINOGRAD_MIN_OUTPUT = 14 * 14
# with more than one BLAS thread at load, outputs of this many pixels and more use im2col: its one
# big GEMM scales with OpenBLAS's threads, Winograd's 16 small GEMMs and serial transforms do not
# (2 BLAS threads, ms, Winograd / im2col: 64ch 56x56 2.41 / 1.78; 128ch 28x28 1.44 / 1.31;
# 256ch 14x14 1.09 / 1.18)
WINOGRAD_MAX_OUTPUT_MT = 28 * 28
# im2col column buffers are built in chunks of output rows no bigger than this
COLS_CAP_BYTES = 2 << 20
# a constant-weight conv is split over intra-op threads only from this many multiply-adds: a
# hand-over to the pool's worker costs ~20-100 us, and resnet's 1x1 stride-2 convs (6.4 M MACs,
# ~0.13 ms) measured 0.6-0.8x split
PARALLEL_MIN_MACS = 20_000_000


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


def _slices(idx, dilation, stride, osz):
    return tuple(slice(i * d, i * d + s * (o - 1) + 1, s) for i, d, s, o in zip(idx, dilation, stride, osz))


def _rows(sl, stride0, r0, r1):
    """The tap slices ``sl`` restricted to output rows ``[r0, r1)`` of the first spatial dim."""
    d0 = sl[0]
    return (slice(d0.start + stride0 * r0, d0.start + stride0 * (r1 - 1) + 1, stride0),) + sl[1:]


def _im2col_rows(xp, wm, tv, ks, tap_slices, stride0, osz, lo, hi, ws, key):
    """Output rows ``[lo, hi)``: columns in chunks of rows (each under :data:`COLS_CAP_BYTES`,
    resnet's 7x7 stem is 7 MiB in one piece) and one GEMM per chunk, which BLAS writes straight
    into its rows of ``tv`` (a strided view, no copy)."""
    N, C = xp.shape[:2]
    rest = math.prod(osz[1:])
    row_bytes = N * C * math.prod(ks) * rest * xp.dtype.itemsize
    step = max(1, min(hi - lo, COLS_CAP_BYTES // max(row_bytes, 1)))
    full = (slice(None), slice(None))
    groups, Og, K = wm.shape
    for r0 in range(lo, hi, step):
        r1 = min(r0 + step, hi)
        cols = ws.get(key, "cols", (N, C) + tuple(ks) + (r1 - r0,) + osz[1:], xp.dtype)
        for idx, sl in tap_slices:
            cols[full + idx] = xp[full + _rows(sl, stride0, r0, r1)]
        np.matmul(wm, cols.reshape(N, groups, K, -1), out=tv[:, :, :, r0:r1].reshape(N, groups, Og, -1))


def _add_bias(target, bias, nd, o=slice(None)):
    if bias is not None:
        t = target[:, o]
        np.add(t, bias[o].reshape((-1,) + (1,) * nd), out=t)


def _row_split_ok(rows, threads):
    """Whether splitting output rows over ``threads`` parts is balanced enough (<= 1/8 off)."""
    return rows % threads == 0 or rows >= 8 * threads


def conv_forward(x, w, bias, stride, pads, dilation, groups, out=None, ws=_NO_WS, threads=1):
    """The forward convolution of a batched ``x`` (N, C, *spatial).

    ``threads > 1`` splits the work into that many parts on :mod:`.parallel`'s pool (output
    channels of a 1x1 conv; output rows, or output channels when there are too few rows, of an
    im2col conv); the bias add is done by each part on its own slice.
    """
    nd = x.ndim - 2
    N, C = x.shape[:2]
    O, Cg = w.shape[:2]
    ks = w.shape[2:]
    if Cg * groups != C or O % groups:
        raise KernelError(f"conv: input has {C} channels, weight {tuple(w.shape)} with groups={groups}")
    sp = x.shape[2:]
    osz = tuple((n + lo + hi - d * (k - 1) - 1) // s + 1
                for n, (lo, hi), d, k, s in zip(sp, pads, dilation, ks, stride))
    if any(o <= 0 for o in osz):
        raise KernelError(f"conv: output size {osz} is too small (input {tuple(x.shape)}, kernel {tuple(ks)})")
    dtype = np.result_type(x, w)
    oshape = (N, O) + osz
    if out is None:
        out = np.empty(oshape, dtype)
    target = out if out.flags.c_contiguous and out.dtype == dtype else np.empty(oshape, dtype)
    key = (x.shape, x.dtype)
    depthwise = groups == C and groups > 1
    if (groups == 1 and all(k == 1 for k in ks) and all(s == 1 for s in stride)
            and all(p == (0, 0) for p in pads)):
        # 1x1 stride 1: a GEMM on the input itself
        w2, x3, t3 = w.reshape(O, C), x.reshape(N, C, -1), target.reshape(N, O, -1)
        if threads > 1 and O >= 2 * threads:
            chunks = _par.split(O, threads)

            def part(i):
                o = slice(*chunks[i])
                np.matmul(w2[o], x3, out=t3[:, o])
                _add_bias(target, bias, nd, o)
            _par.run_parts(part, threads, threads)
            bias = None
        else:
            np.matmul(w2, x3, out=t3)
    else:
        if any(p != (0, 0) for p in pads):
            xp = pad_into(ws, key, x, pads)
        else:
            xp = x
        taps = list(itertools.product(*[range(k) for k in ks]))
        full = (slice(None), slice(None))
        if depthwise:
            # depthwise: out[n, c, m] = sum over taps of w[c, m, tap] * shifted x[n, c]
            mult = O // C
            ov = target.reshape((N, C, mult) + osz)
            wv = w.reshape((C, mult) + tuple(ks) + (1,) * nd)
            tmp = ws.get(key, "tmp", ov.shape, dtype)
            for t, idx in enumerate(taps):
                src = xp[full + _slices(idx, dilation, stride, osz)][:, :, None]
                wt = wv[full + idx]
                if t == 0:
                    np.multiply(src, wt, out=ov)
                else:
                    np.multiply(src, wt, out=tmp)
                    np.add(ov, tmp, out=ov)
        else:
            Og = O // groups
            K = Cg * math.prod(ks)
            tv = target.reshape(N, groups, Og, osz[0], math.prod(osz[1:]))
            wm = w.reshape(groups, Og, K)
            tap_slices = [(idx, _slices(idx, dilation, stride, osz)) for idx in taps]
            cols_bytes = N * C * math.prod(ks) * math.prod(osz) * x.dtype.itemsize
            if threads > 1 and _row_split_ok(osz[0], threads):
                chunks = _par.split(osz[0], threads)

                def part(i):
                    lo, hi = chunks[i]
                    _im2col_rows(xp, wm, tv, ks, tap_slices, stride[0], osz, lo, hi, SHARED_WS, key)
                    if bias is not None:
                        t = target[:, :, lo:hi]
                        np.add(t, bias.reshape((O,) + (1,) * nd), out=t)
                _par.run_parts(part, threads, threads)
                bias = None
            elif threads > 1 and Og >= 2 * threads and cols_bytes <= COLS_CAP_BYTES:
                # few output rows (7x7): the whole column buffer, built split by input channel,
                # then the GEMM split by output channel
                cols = ws.get(key, "cols", (N, C) + tuple(ks) + osz, x.dtype)
                cchunks, ochunks = _par.split(C, threads), _par.split(Og, threads)

                def build(i):
                    c = slice(*cchunks[i])
                    for idx, sl in tap_slices:
                        cols[(slice(None), c) + idx] = xp[(slice(None), c) + sl]
                cm = cols.reshape(N, groups, K, -1)
                tm = tv.reshape(N, groups, Og, -1)

                def gemm(i):
                    o = slice(*ochunks[i])
                    np.matmul(wm[:, o], cm, out=tm[:, :, o])
                    if bias is not None:
                        t = tv[:, :, o]
                        np.add(t, bias.reshape(groups, Og)[:, o].reshape((groups, -1) + (1,) * 2), out=t)
                _par.run_parts(build, threads, threads)
                _par.run_parts(gemm, threads, threads)
                bias = None
            else:
                _im2col_rows(xp, wm, tv, ks, tap_slices, stride[0], osz, 0, osz[0], ws, key)
    _add_bias(target, bias, nd)
    if target is not out:
        np.copyto(out, target)
    return out


def conv_transpose_forward(x, w, bias, stride, padding, output_padding, groups, dilation, out=None, ws=_NO_WS):
    """The transposed convolution of a batched ``x``; weight is (C_in, C_out/groups, *k)."""
    nd = x.ndim - 2
    N, C = x.shape[:2]
    ks = tuple(w.shape[2:])
    Og = w.shape[1]
    O = Og * groups
    if w.shape[0] != C or C % groups:
        raise KernelError(f"conv_transpose: input has {C} channels, weight {tuple(w.shape)} with groups={groups}")
    sp = x.shape[2:]
    osz = tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1
                for n, s, p, d, k, op in zip(sp, stride, padding, dilation, ks, output_padding))
    fsz = tuple((n - 1) * s + d * (k - 1) + 1 + op
                for n, s, d, k, op in zip(sp, stride, dilation, ks, output_padding))
    dtype = np.result_type(x, w)
    if out is None:
        out = np.empty((N, O) + osz, dtype)
    Cig = C // groups
    KK = Og * math.prod(ks)
    key = (x.shape, x.dtype)
    cols = ws.get(key, "cols", (N, groups, KK, math.prod(sp)), dtype)
    wt = w.reshape(groups, Cig, KK).transpose(0, 2, 1)
    np.matmul(wt, x.reshape(N, groups, Cig, -1), out=cols)
    colv = cols.reshape((N, O) + ks + tuple(sp))
    acc = ws.get(key, "acc", (N, O) + fsz, dtype)
    acc.fill(0)
    full = (slice(None), slice(None))
    for idx in itertools.product(*[range(k) for k in ks]):
        dst = acc[full + _slices(idx, dilation, stride, sp)]
        np.add(dst, colv[full + idx], out=dst)
    np.copyto(out, acc[full + tuple(slice(p, p + o) for p, o in zip(padding, osz))])
    if bias is not None:
        np.add(out, bias.reshape((O,) + (1,) * nd), out=out)
    return out


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


def make_conv(nd, weight, bias, stride, padding, dilation, groups):
    """A ``fn(input, out=None)`` convolution with fixed weights; scratch from :data:`SHARED_WS`.

    3x3 stride-1 convs (float32/64, ungrouped) with outputs of at least
    :data:`WINOGRAD_MIN_OUTPUT` pixels run Winograd F(2x2, 3x3), the weight transformed here once;
    loaded with more than one BLAS thread, only below :data:`WINOGRAD_MAX_OUTPUT_MT` pixels.
    ``SRCORE_CPU_THREADS=N`` (read here) splits large convs over N threads (``parallel.py``).
    """
    ws = SHARED_WS
    w = np.ascontiguousarray(weight)
    b = None if bias is None else np.ascontiguousarray(bias)
    stride, dilation = _tup(stride, nd), _tup(dilation, nd)
    pads = _pads(padding, w.shape[2:], stride, dilation, nd)
    gw = _wg.transform_weight(w) if nd == 2 and _wg.applies(w, stride, pads, dilation, groups) else None
    # intra-op parts (opt-in) and the BLAS thread count: fixed now, at module load (parallel.py)
    threads = _par.split_threads()
    # (threadpoolctl costs ~3 ms on first use: only asked when Winograd is possible at all)
    wg_max = WINOGRAD_MAX_OUTPUT_MT if gw is not None and max(threads, _par.blas_threads()) > 1 else math.inf
    # multiply-adds per input pixel (roughly: the output has 1/prod(stride) of the input's pixels)
    macs_per_pixel = w.shape[0] * w.shape[1] * math.prod(w.shape[2:]) // math.prod(stride)
    # small inputs: one gather + one GEMM, planned once per input shape (conv_small.py)
    small = _small.SmallConv(w, b, stride, pads, dilation, groups) if _small.small_conv_applies(
        w, stride, pads, groups) else None
    plans = small.plans if small is not None else {}

    def conv_const(input, out=None):
        t = 1
        if threads > 1 and input.size // max(input.shape[-nd - 1], 1) * macs_per_pixel >= PARALLEL_MIN_MACS:
            t = threads
        if small is not None and t == 1:   # a conv worth splitting over threads is not small
            fn = plans.get((input.shape, input.dtype), False)
            if fn is False:
                fn = small.plan(input.shape, input.dtype)
            if fn is not None:
                return fn(input, out)
        if (gw is not None and input.ndim == 4 and input.dtype == w.dtype and input.shape[1] == w.shape[1]
                and WINOGRAD_MIN_OUTPUT <= (input.shape[2] + sum(pads[0]) - 2) * (input.shape[3] + sum(pads[1]) - 2)
                < wg_max
                and (out is None or (out.dtype == w.dtype and out.flags.c_contiguous))):
            if out is None:
                out = np.empty((input.shape[0], w.shape[0], input.shape[2] + sum(pads[0]) - 2,
                                input.shape[3] + sum(pads[1]) - 2), w.dtype)
            return _wg.conv3x3(input, gw, b, pads, out, ws, t)
        return _batched(conv_forward, input, nd, out, w, b, stride, pads, dilation, groups, ws=ws, threads=t)
    return conv_const


def make_conv_transpose(nd, weight, bias, stride, padding, output_padding, groups, dilation):
    ws = SHARED_WS
    w = np.ascontiguousarray(weight)
    b = None if bias is None else np.ascontiguousarray(bias)
    args = (_tup(stride, nd), _tup(padding, nd), _tup(output_padding, nd), groups, _tup(dilation, nd))

    def conv_transpose_const(input, out=None):
        return _batched(conv_transpose_forward, input, nd, out, w, b, *args, ws=ws)
    return conv_transpose_const


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


def _matcher(nd):
    def matcher(node: NodeInfo):
        wb = _const_weight(node)
        hp = _consts(node, _CONV_ARGS)
        if wb is None or hp is None:
            return None
        return Specialized(make_conv(nd, *wb, *hp), args=(0,))
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
        return Specialized(make_conv_transpose(nd, *wb, *hp), args=(0,))
    return matcher


conv_transpose1d_matcher = _or_generic(_transpose_matcher(1), conv_transpose1d)
conv_transpose2d_matcher = _or_generic(_transpose_matcher(2), conv_transpose2d)


def _convolution_fast(node: NodeInfo):
    """``aten::convolution`` / ``aten::_convolution`` with constant weights and hyper-parameters."""
    wb = _const_weight(node)
    hp = _consts(node, ("stride", "padding", "dilation", "transposed", "output_padding", "groups"))
    if wb is None or hp is None:
        return None
    stride, padding, dilation, transposed, output_padding, groups = hp
    nd = wb[0].ndim - 2
    if transposed:
        fn = make_conv_transpose(nd, *wb, stride, padding, output_padding, groups, dilation)
    else:
        fn = make_conv(nd, *wb, stride, padding, dilation, groups)
    return Specialized(fn, args=(0,))


def convolution_matcher(node: NodeInfo):
    """``aten::convolution`` / ``aten::_convolution``: the constant-weight kernel, else the generic one."""
    return _convolution_fast(node) or (_convolution if node.op.startswith("aten::_convolution") else convolution)
