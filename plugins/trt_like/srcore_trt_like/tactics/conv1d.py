"""Small 1-D convs in one compiled call: the ``conv1d_simd`` tactic of a ``conv`` layer on (N, C, 1, L)
views (``builder/converters.py``'s 1-D convs), dense or grouped, strided, dilated, padded, with the
conv's fused activation.

A TCN's layers (16 channels, 100 samples, two images) are ~0.15 M multiply-adds: the 2-D tactics
spent 5-9 us a layer on their input copy, phase split and per-image calls for ~1 us of arithmetic.
Here one numba call does the whole layer: each image's rows are copied once into a zero-bordered
scratch row (the padding), then every block of 4 output channels and two vectors of output samples
keeps its 8 accumulators in registers over the group's input channels and taps (two vector loads,
4 broadcasts and 8 FMAs a tap), and stores with the bias (the accumulators' start), the residual and
relu (NaN stays NaN) in a masked store at the row's end; another activation (GELU, SiLU, ...) is
the conv tactics' in-place pass right after. A strided conv (wav2vec's k10 s5, k3 s2) reads a scratch
row split into phases. Offered where the output channels of a group come in blocks of 4; chosen by
the build's timing.
"""
from __future__ import annotations

import numba
import numpy as np

from srcore.plugin import simd_conv, simd_vec

from ..builder.fusion import CONV1D_OC_BLOCK as OC_BLOCK
from ..builder.fusion import conv1d_applies as applies
from ..builder.network import Layer, Network
from ..kernels.activation import in_place
from ..kernels.jit import JIT
from ..kernels.simd import prefer_512
from .records import Candidate, Kernel

vbcast, vclamp, vfma, vload, vload_n = simd_vec.vbcast, simd_vec.vclamp, simd_vec.vfma, simd_vec.vload, simd_vec.vload_n
vadd, vsplat, vstore, vstore_n = simd_vec.vadd, simd_vec.vsplat, simd_vec.vstore, simd_vec.vstore_n
fptr = simd_vec.fptr

_INF = np.float32(np.inf)


@numba.njit(inline="always", **JIT)
def _store(v, y, res, i, cnt, nl, has_res, relu, z):
    if cnt <= 0:
        return
    if has_res:
        v = vadd(v, vload_n(res, i, cnt, z))
    if relu:
        v = vclamp(v, 0.0, _INF)
    if cnt == nl:
        vstore(y, i, v)
    else:
        vstore_n(y, i, v, cnt)


@numba.njit(**JIT)
def _conv1d(x, wp, bias, res, y, pl, dil, stride, groups, has_res, relu, tag, nl):
    """``y = relu?(conv1d(x) + bias (+ res))``: ``x`` (N, C, 1, Lin), ``y`` / ``res`` (N, O, 1, Lout),
    stride ``stride``, ``pl`` zeros before each row and as many after as ``Lout`` needs (a causal
    conv's left-only padding too), dilation ``dil``; ``wp`` the weight packed as (O / 4, C / groups,
    K, 4) (:func:`pack`). A block is 4 channels x 2 vectors of samples: 8 independent FMA chains (4
    left half the FMA ports idle on their latency). A strided conv's scratch row is split into
    ``stride`` phases (padded sample ``m`` at phase ``m % stride``, position ``m // stride``), so a
    tap's samples for consecutive outputs are one contiguous vector load."""
    prefer_512()   # zmm registers for the 16-lane vectors (LLVM's AVX-512 tuning splits them in two)
    N, C, Lin = x.shape[0], x.shape[1], x.shape[3]
    O, Lout = y.shape[1], y.shape[3]
    Cg = C // groups
    Og = O // groups
    K = wp.size // (O * Cg)
    # a phase row: the outputs, the taps' reach past them, and two vectors' slack for the last block
    Lq = Lout + ((K - 1) * dil) // stride + 2 * nl + 1
    Lc = stride * Lq
    buf = np.zeros(C * Lc, np.float32)     # the borders stay zero: only the interiors are written
    # each tap's offset in a channel's scratch rows (no division in the inner loop)
    offs = np.empty(K, np.int64)
    for k in range(K):
        tap = k * dil
        offs[k] = (tap % stride) * Lq + tap // stride
    # raw pointers: the inlined helpers then take no reference counts (an atomic pair per array
    # a call: ~7 us of a 2x16x100 layer's stores)
    xf, yf, rf, wf, rows = fptr(x), fptr(y), fptr(res), fptr(wp), fptr(buf)
    z = vsplat(tag, 0.0)
    for n in range(N):
        for c in range(C):
            src = (n * C + c) * Lin
            if stride == 1:
                dst = c * Lc + pl
                for i in range(Lin):
                    rows[dst + i] = xf[src + i]
            else:   # phase by phase: input i, padded i + pl, lands at (i + pl) % stride, (i + pl) // stride
                for ph in range(stride):
                    i0 = (ph - pl) % stride
                    q0 = (i0 + pl) // stride
                    cnt = min((Lin - i0 + stride - 1) // stride, Lq - q0)
                    dst = c * Lc + ph * Lq + q0
                    for j in range(cnt):
                        rows[dst + j] = xf[src + i0 + j * stride]
        for ob in range(O // 4):
            o0 = ob * 4
            c0 = (o0 // Og) * Cg
            b0, b1, b2, b3 = vsplat(tag, bias[o0]), vsplat(tag, bias[o0 + 1]), vsplat(tag, bias[o0 + 2]), \
                vsplat(tag, bias[o0 + 3])
            for t0 in range(0, Lout, 2 * nl):
                a0, a1, a2, a3 = b0, b1, b2, b3
                e0, e1, e2, e3 = b0, b1, b2, b3
                for ci in range(Cg):
                    base = (c0 + ci) * Lc + t0
                    w = (ob * Cg + ci) * K * 4
                    for k in range(K):
                        at = base + offs[k]
                        xv = vload(rows, at, z)
                        xw = vload(rows, at + nl, z)
                        w0, w1, w2, w3 = vbcast(wf, w, z), vbcast(wf, w + 1, z), vbcast(wf, w + 2, z), \
                            vbcast(wf, w + 3, z)
                        a0 = vfma(w0, xv, a0)
                        a1 = vfma(w1, xv, a1)
                        a2 = vfma(w2, xv, a2)
                        a3 = vfma(w3, xv, a3)
                        e0 = vfma(w0, xw, e0)
                        e1 = vfma(w1, xw, e1)
                        e2 = vfma(w2, xw, e2)
                        e3 = vfma(w3, xw, e3)
                        w += 4
                cnt = min(nl, Lout - t0)
                rest = min(nl, Lout - t0 - nl)
                i = (n * O + o0) * Lout + t0
                _store(a0, yf, rf, i, cnt, nl, has_res, relu, z)
                _store(a1, yf, rf, i + Lout, cnt, nl, has_res, relu, z)
                _store(a2, yf, rf, i + 2 * Lout, cnt, nl, has_res, relu, z)
                _store(a3, yf, rf, i + 3 * Lout, cnt, nl, has_res, relu, z)
                _store(e0, yf, rf, i + nl, rest, nl, has_res, relu, z)
                _store(e1, yf, rf, i + Lout + nl, rest, nl, has_res, relu, z)
                _store(e2, yf, rf, i + 2 * Lout + nl, rest, nl, has_res, relu, z)
                _store(e3, yf, rf, i + 3 * Lout + nl, rest, nl, has_res, relu, z)


def _sig(lanes: int) -> str:
    a4 = "float32[:, :, :, ::1]"
    tag = "float32[:, ::1]" if lanes == 16 else "float32[::1]"
    return (f"void({a4}, float32[::1], float32[::1], {a4}, {a4}, int64, int64, int64, int64, boolean, boolean, "
            f"{tag}, int64)")


_kernel = {}


def kernel():
    """``(compiled kernel, width tag, lanes)`` for this CPU (compiled once a process)."""
    lanes = simd_conv.lanes()
    if lanes not in _kernel:
        _conv1d.compile(_sig(lanes))
        _kernel[lanes] = (_conv1d, np.zeros((1, 1) if lanes == 16 else 1, np.float32), lanes)
    return _kernel[lanes]


def pack(weight: np.ndarray) -> np.ndarray:
    """(O, C/g, 1, K) -> (O/4, C/g, K, 4), flat: a block's 4 weights of a tap side by side."""
    O, Cg, _, K = weight.shape
    return np.ascontiguousarray(weight[:, :, 0, :].reshape(O // OC_BLOCK, OC_BLOCK, Cg, K).transpose(0, 2, 3, 1),
                                np.float32).reshape(-1)


def candidates(layer: Layer, net: Network) -> list[Candidate]:
    if not applies(layer, net):
        return []
    a = layer.attrs

    def build(layout=None):
        fn, tag, lanes = kernel()
        w = a["weight"]
        wp = pack(w) if layout is None else np.asarray(layout["wp"], np.float32)
        bias = np.zeros(w.shape[0], np.float32) if a["bias"] is None else np.ascontiguousarray(a["bias"], np.float32)
        pl = int(a["pads"][0] if "pads" in a else a["padding"][1])
        dil, stride, groups, relu = int(a["dilation"][1]), int(a["stride"][1]), int(a["groups"]), bool(a["relu"])
        # another activation: the in-place kernel the other conv tactics use, right after (the
        # same bits as the conv and its pointwise layer; in the kernel's stores it did not vectorize)
        act = in_place(a.get("activation", "none"), a.get("negative_slope", 0.01))
        if a["residual"]:
            def run(x, res, y):
                fn(x, wp, bias, res, y, pl, dil, stride, groups, True, relu, tag, lanes)
                if act is not None:
                    act(y)
        else:
            def run(x, y):
                fn(x, wp, bias, y, y, pl, dil, stride, groups, False, relu, tag, lanes)
                if act is not None:
                    act(y)
        return Kernel(run, wp.nbytes + bias.nbytes, keep=wp, layout={"wp": wp})
    return [Candidate("conv1d_simd", build, restore=build)]
