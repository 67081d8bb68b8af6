"""The im2col + GEMM engine of the convolutions (forward and transposed), any rank, grouped, depthwise.

A 1x1 stride-1 unpadded ungrouped conv is a plain GEMM on the input; a depthwise conv (groups ==
in channels) is a loop of per-tap multiply-adds over the whole tensor (no GEMM); everything else
copies the kernel taps into a column buffer (one strided copy per tap) and calls ``np.matmul``,
writing straight into ``out``. Transposed convs do the GEMM first and scatter-add the taps
(col2im). ``conv.py`` holds the op entry points and chooses between this and the other paths.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from srcore.plugin import KernelError

from . import parallel as _par
from .workspace import SharedWorkspace, pad_into


class _NoWorkspace:
    def get(self, key, role, shape, dtype, zero=False):
        return (np.zeros if zero else np.empty)(shape, dtype)


_NO_WS = _NoWorkspace()
# one per-thread workspace for every constant-weight conv node of the process (see workspace.py)
SHARED_WS = SharedWorkspace()
# im2col column buffers are built in chunks of output rows no bigger than this
COLS_CAP_BYTES = 2 << 20


def _slices(idx, dilation, stride, osz):
    return tuple(slice(i * d, i * d + s * (o - 1) + 1, s) for i, d, s, o in zip(idx, dilation, stride, osz))


def _rows(sl, stride0, r0, r1):
    """The tap slices ``sl`` restricted to output rows ``[r0, r1)`` of the first spatial dim."""
    d0 = sl[0]
    return (slice(d0.start + stride0 * r0, d0.start + stride0 * (r1 - 1) + 1, stride0),) + sl[1:]


def _tap_sources(xp, taps, dilation, stride, osz, ws, key):
    """``[(tap index, source, slices), ...]``: where each kernel tap's column copy reads from.

    Normally ``xp`` itself. With a stride s in the last dim every tap's copy has an s-strided
    inner loop; when the kernel is more than 2s wide (resnet's 7x7 stride-2 stem: 49 such copies
    of 3 channels, 0.58 ms) the padded input is first split into its s column phases
    ``xp[..., t::s]`` (one pass), and each tap copies contiguous runs of its phase (0.39 ms with
    the split). At 3x3 stride 2 it measured no faster, so those keep the strided copies.
    """
    s = stride[-1]
    if len(osz) < 2 or s == 1 or taps[-1][-1] + 1 <= 2 * s:
        return [(idx, xp, _slices(idx, dilation, stride, osz)) for idx in taps]
    Wp, d, wo = xp.shape[-1], dilation[-1], osz[-1]
    phases = ws.get(key, "phases", (s,) + xp.shape[:-1] + (-(-Wp // s),), xp.dtype)
    for t in range(s):
        phases[t, ..., :len(range(t, Wp, s))] = xp[..., t::s]
    out = []
    for idx in taps:
        c = idx[-1] * d                    # the tap's first input column: phase c % s, offset c // s
        sl = _slices(idx, dilation, stride, osz)[:-1] + (slice(c // s, c // s + wo),)
        out.append((idx, phases[c % s], sl))
    return out


def _gather_blocks(C, taps, gather):
    """The column matrix's row blocks for ``gather`` parts: ``[(channel slice, taps), ...]``, by
    input channels when there are at least ``gather`` of them, else by taps."""
    if C >= gather:
        return [(slice(*c), taps) for c in _par.split(C, gather)]
    return [(slice(None), taps[lo:hi]) for lo, hi in _par.split(len(taps), min(gather, len(taps)))]


def _im2col_rows(xp, wm, tv, ks, tap_slices, stride0, osz, lo, hi, ws, key, gather=1, gemm=None):
    """Output rows ``[lo, hi)``: columns in chunks of rows (each under :data:`COLS_CAP_BYTES`,
    resnet's 7x7 stem is 7 MiB in one piece) and one GEMM per chunk, which BLAS writes straight
    into its rows of ``tv`` (a strided view, no copy). ``gather > 1`` copies each chunk's columns
    in that many row blocks of the column matrix (input channels, or taps) on :mod:`.parallel`'s
    pool, then runs the same GEMM on the caller with BLAS's own threads: a copy moves the same
    values, so the bits are those of ``gather == 1``."""
    N, C = xp.shape[:2]
    rest = math.prod(osz[1:])
    row_bytes = N * C * math.prod(ks) * rest * xp.dtype.itemsize
    step = max(1, min(hi - lo, COLS_CAP_BYTES // max(row_bytes, 1)))
    full = (slice(None), slice(None))
    groups, Og, K = wm.shape
    for r0 in range(lo, hi, step):
        r1 = min(r0 + step, hi)
        cols = ws.get(key, "cols", (N, C) + tuple(ks) + (r1 - r0,) + osz[1:], xp.dtype)
        if gather > 1:
            blocks = _gather_blocks(C, tap_slices, gather)

            def part(i, r0=r0, r1=r1):
                c, these = blocks[i]
                for idx, src, sl in these:
                    cols[(slice(None), c) + idx] = src[(slice(None), c) + _rows(sl, stride0, r0, r1)]
            _par.run_parts(part, len(blocks), gather)
        else:
            for idx, src, sl in tap_slices:
                cols[full + idx] = src[full + _rows(sl, stride0, r0, r1)]
        if gemm is not None and N == 1 and groups == 1:   # MKL (mkl_gemm.matmul_rows), one matrix
            gemm(wm[0], cols.reshape(K, -1), tv[0, 0, :, r0:r1].reshape(Og, -1))
        else:
            np.matmul(wm, cols.reshape(N, groups, K, -1), out=tv[:, :, :, r0:r1].reshape(N, groups, Og, -1))


def _add_bias(target, bias, nd, o=slice(None)):
    if bias is not None:
        t = target[:, o]
        np.add(t, bias[o].reshape((-1,) + (1,) * nd), out=t)


def _add_bias_split(target, bias, nd, threads):
    """:func:`_add_bias` in blocks of output channels over ``threads`` parts (the same adds)."""
    O = target.shape[1]
    if bias is None or O < threads:
        return _add_bias(target, bias, nd)
    chunks = _par.split(O, threads)
    _par.run_parts(lambda i: _add_bias(target, bias, nd, slice(*chunks[i])), threads, threads)


def _row_split_ok(rows, threads):
    """Whether splitting output rows over ``threads`` parts is balanced enough (<= 1/8 off)."""
    return rows % threads == 0 or rows >= 8 * threads


def _sum_of_nothing(out, bias):
    """The result of a conv whose input is empty: for a batch of 0 an empty ``out``; with no
    input channels every output is a sum of no products, so the bias (or 0)."""
    out.fill(0)
    if bias is not None and out.size:
        out += bias.reshape((-1,) + (1,) * (out.ndim - 2))
    return out


def conv_forward(x, w, bias, stride, pads, dilation, groups, out=None, ws=_NO_WS, threads=1, gather=1, gemm=None):
    """The forward convolution of a batched ``x`` (N, C, *spatial).

    ``threads > 1`` splits the work into that many parts on :mod:`.parallel`'s pool (output
    channels of a 1x1 conv; output rows, or output channels when there are too few rows, of an
    im2col conv); the bias add is done by each part on its own slice. ``gather > 1`` (with
    ``threads == 1``) splits only an im2col conv's column copies and its bias add over that many
    parts and leaves each GEMM whole to BLAS's threads: the bits of ``gather == 1``. ``gemm``
    (``mkl_gemm.matmul_rows``): the one-thread im2col GEMM of a single-sample ungrouped conv.
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
    if x.size == 0:
        return _sum_of_nothing(out, bias)
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
            tap_slices = _tap_sources(xp, taps, dilation, stride, osz, ws, key)
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
                    for idx, src, sl in tap_slices:
                        cols[(slice(None), c) + idx] = src[(slice(None), c) + sl]
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
                _im2col_rows(xp, wm, tv, ks, tap_slices, stride[0], osz, 0, osz[0], ws, key, gather, gemm)
                if gather > 1:
                    _add_bias_split(target, bias, nd, gather)
                    bias = None
    _add_bias(target, bias, nd)
    if target is not out:
        np.copyto(out, target)
    return out


def conv_transpose_forward(x, w, bias, stride, padding, output_padding, groups, dilation, out=None, ws=_NO_WS):
    """The transposed convolution of a batched ``x``; weight is (C_in, C_out/groups, *k) (a constant
    float32 one: ``srcore.plugin.conv_transpose``)."""
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
    if x.size == 0:
        return _sum_of_nothing(out, bias)
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
