"""Tactics of the int8 layers (a quantized segment's): precision ``"int8"`` in their records.

The conv and linear layers offer two exact GEMMs on shifted integers (:mod:`..kernels.int8`):
``int8_sgemm`` (float32 BLAS over blocks of the depth whose sums provably stay below 2^24, the
blocks added in float64) and ``int8_dgemm`` (float64 BLAS, exact in one call); the builder
times them. Their laid-out weights (the
shifted, transposed matrix) are what a serialized plan stores. The other int8 layers (quantize,
dequantize, relu, add, max pool) have one numpy tactic each. A conv layer also offers the float
conv wing's tactics on the shifted integers (``int8_packed_gemm``, ``int8_im2col_gemm``,
``int8_gemm_1x1``, ``int8_depthwise_direct``, ``int8_depthwise_channels_last``), by blocks of input
channels whose sums are exact in float32 (:func:`_float_conv_candidates`). Where srcore's exact
int8 GEMM applies (``quint8`` input, ``qint8`` weights, groups 1, AVX2 and numba: ``srcore.plugin.int8_gemm``, the kernel
quantized_cpu runs), conv and linear layers also offer ``int8_simd``: ``vpmaddubsw`` on the bytes,
fbgemm's requantization fused, the same integers.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import int8_gemm

from ..conv.spec import ConvSpec
from ..conv.tactics import conv_tactic_builders
from ..kernels import int8 as k8
from .names import int8_reuses
from .records import Candidate, Kernel

INT8 = "int8"


def _requant(a: dict, kind: str):
    """The layer's requantization: fbgemm's, or oneDNN's where torch packed the weight for it."""
    if a.get("arith", "fbgemm") == "onednn":
        return k8.OnednnRequant(a["x_q"][0], a["w_scales"], a["bias"], a["y_q"][0], a["y_q"][1], a["y_dtype"],
                                a["relu"], kind)
    return k8.Requant(a["x_q"][0], a["w_scales"], a["bias"], a["y_q"][0], a["y_q"][1], *a["range"], a["relu"])


def _shifted(a: dict) -> np.ndarray:
    """The weight's integers minus its zero points (per output channel), exact in float64."""
    w = a["weight"]
    return w.astype(np.float64) - np.asarray(a["w_zero_points"], np.float64).reshape((-1,) + (1,) * (w.ndim - 1))


def _gemm_layout(a: dict, dtype) -> np.ndarray:
    return np.ascontiguousarray(_shifted(a).T, dtype)


def _conv_layout(a: dict, dtype) -> np.ndarray:
    w = _shifted(a)
    g = a["groups"]
    cout = w.shape[0]
    wg = w.reshape(g, cout // g, -1)                  # (g, Cout/g, C/g*kh*kw)
    return np.ascontiguousarray(wg.transpose(0, 2, 1), dtype)


def _depth(a: dict, conv: bool) -> int:
    w = a["weight"]
    return int(np.prod(w.shape[1:])) if conv else int(w.shape[1])


def _candidates(layer, conv: bool, net=None) -> list[Candidate]:
    a = layer.attrs
    layout_of = _conv_layout if conv else _gemm_layout
    x_zp = a["x_q"][1]

    shifted = _shifted(a)
    depth = _depth(a, conv)

    def make(w_t: np.ndarray) -> Kernel:
        chunk = k8.float32_chunk(a["x_range"], shifted) if w_t.dtype == np.float32 else depth
        if conv:
            fn = k8.conv_kernel(w_t, a["groups"], tuple(a["weight"].shape[2:]), a["stride"], a["padding"],
                                a["dilation"], x_zp, _requant(a, "conv"), chunk)
        else:
            fn = k8.gemm_kernel(w_t, x_zp, _requant(a, "linear"), chunk)
        return Kernel(fn, w_t.nbytes, keep=w_t, layout={"w_t": w_t})

    def tactic(name: str, dtype) -> Candidate:
        def restore(layout: dict) -> Kernel:
            w_t = layout["w_t"]
            if w_t.dtype != dtype or w_t.shape != layout_of(a, dtype).shape:
                raise ValueError(f"{name}: stored weights {w_t.dtype}{list(w_t.shape)} do not fit the layer")
            return make(np.array(w_t, copy=True))
        return Candidate(name, lambda: make(layout_of(a, dtype)), blas="openblas", precision=INT8, restore=restore)

    out = [tactic("int8_sgemm", np.float32), tactic("int8_dgemm", np.float64)]
    if conv and net is not None:
        out = _float_conv_candidates(layer, net, shifted) + out
    simd = _simd_candidate(layer, conv, net)
    return out + ([simd] if simd is not None else [])


def _simd_candidate(layer, conv: bool, net) -> Candidate | None:
    """``int8_simd``: srcore's exact int8 GEMM (``srcore.plugin.int8_gemm``) with the gathering of
    windows and fbgemm's requantization around it, where it applies (None elsewhere)."""
    a = layer.attrs
    w = a["weight"]
    x_dtype = net.tensors[layer.inputs[0]].dtype if net is not None else None
    if x_dtype != "quint8" or w.dtype != np.int8 or tuple(a["range"]) != (0, 255):
        return None
    if conv and (a["groups"] != 1 or w.ndim != 4):
        return None
    taps = int(np.prod(w.shape[2:])) if conv else 1
    if not int8_gemm.applies(int(np.prod(w.shape[1:]))):
        return None
    (x_scale, x_zp), (y_scale, y_zp) = a["x_q"], a["y_q"]
    w_scales, bias, relu = a["w_scales"], a["bias"], a["relu"]

    def make() -> Kernel:
        rows = w.reshape(w.shape[0], -1)
        if taps > 1:        # torch's (channel, tap) depth as the (tap, channel) the windows are gathered in
            rows = rows.reshape(w.shape[0], -1, taps).transpose(0, 2, 1).reshape(w.shape[0], -1)
        p8 = int8_gemm.pack(rows, a["w_zero_points"])
        if a.get("arith", "fbgemm") == "onednn":
            return _onednn_simd(a, p8, conv)

        def run(x, y, cols):
            tgt = y if y.flags.c_contiguous else np.empty(y.shape, y.dtype)
            int8_gemm.gemm_requantize(cols, x_zp, p8, x_scale, w_scales, bias, y_scale, y_zp, relu, tgt,
                                      channels_first=conv, overwrite=not np.may_share_memory(cols, x))
            if tgt is not y:
                y[...] = tgt

        if conv:
            def qconv_simd(x, y):
                tgt = y if y.flags.c_contiguous else np.empty(y.shape, y.dtype)
                int8_gemm.conv_requantize(x, x_zp, p8, w.shape[2:], a["stride"], a["padding"], a["dilation"], x_scale,
                                          w_scales, bias, y_scale, y_zp, relu, tgt, channels_first=True)
                if tgt is not y:
                    y[...] = tgt
            return Kernel(qconv_simd, p8.panels.nbytes, keep=p8)

        def qgemm_simd(x, y):
            run(x, y, int8_gemm.linear_rows(x, p8))
        return Kernel(qgemm_simd, p8.panels.nbytes, keep=p8)

    return Candidate("int8_simd", make, precision=INT8)


def _onednn_simd(a: dict, p8, conv: bool) -> Kernel:
    """``int8_simd`` for weights torch packed for oneDNN: the int8 GEMM's exact int32 sums (oneDNN's
    own on a VNNI CPU, which has no int16 saturation), then oneDNN's requantization (not fused)."""
    x_zp = a["x_q"][1]
    requant = _requant(a, "conv" if conv else "linear")
    if conv:
        k = a["weight"].shape[2:]

        def qconv_simd(x, y):
            cols = int8_gemm.conv_rows(x, x_zp, p8, k, a["stride"], a["padding"], a["dilation"], y.shape[2:])
            acc = int8_gemm.gemm(cols, x_zp, p8).reshape(y.shape[0], y.shape[2], y.shape[3], -1)
            requant(acc, y.transpose(0, 2, 3, 1))
        return Kernel(qconv_simd, p8.panels.nbytes, keep=p8)

    def qgemm_simd(x, y):
        requant(int8_gemm.gemm(int8_gemm.linear_rows(x, p8), x_zp, p8), y.reshape(-1, p8.n))
    return Kernel(qgemm_simd, p8.panels.nbytes, keep=p8)


def _float_conv_candidates(layer, net, shifted: np.ndarray) -> list[Candidate]:
    """The float32 conv tactics of the conv wing on the shifted integers: exact wherever every
    partial sum stays below 2^24, so the input channels go in blocks small enough for that (the
    blocks' results added in float64); Winograd's transforms are not integer sums and are left out.
    Named ``int8_`` + the float tactic's name."""
    a = layer.attrs
    N, C, H, W = net.shape(layer.inputs[0])
    cout, cg = shifted.shape[:2]
    kh, kw = shifted.shape[2:]
    g = a["groups"]
    chunk = k8.float32_chunk(a["x_range"], shifted)
    if g == 1:
        per_block = max(1, chunk // (kh * kw))
        blocks = [(c0, min(C, c0 + per_block)) for c0 in range(0, C, per_block)]
    elif cg * kh * kw <= chunk:
        blocks = [(0, C)]
    else:
        return []
    if len(blocks) > 8:   # tiny blocks: the numpy GEMM's blocks are cheaper
        return []
    w32 = shifted.astype(np.float32)
    builders = []
    for c0, c1 in blocks:
        spec = ConvSpec((N, c1 - c0, H, W), cout, (kh, kw), a["stride"], a["padding"], a["dilation"], g)
        wb = np.ascontiguousarray(w32 if len(blocks) == 1 else w32[:, c0:c1])
        builders.append({name: b for name, b in conv_tactic_builders(spec, wb, None) if int8_reuses(name)})
    names = [n for n in builders[0] if all(n in b for b in builders)]
    x_zp = np.float32(a["x_q"][1])
    out_shape = net.shape(layer.outputs[0])

    def make(name: str) -> Kernel:
        tactics = [b[name]() for b in builders]
        runs = [t._run for t in tactics]
        requant = _requant(a, "conv")
        one = len(blocks) == 1

        def qconv_float(x, y):
            xs = np.subtract(x, x_zp, dtype=np.float32)
            acc = np.empty(out_shape, np.float32)
            if one:
                runs[0](xs, acc, None)
            else:
                total = np.zeros(out_shape, np.float64)
                for run, (c0, c1) in zip(runs, blocks):
                    run(np.ascontiguousarray(xs[:, c0:c1]), acc, None)
                    total += acc
                acc = total
            requant(acc, y, channel_axis=1)
        return Kernel(qconv_float, sum(t.weight_bytes or 0 for t in tactics), keep=tactics)

    return [Candidate(f"int8_{name}", lambda name=name: make(name), blas="omp", precision=INT8) for name in names]


def qconv_candidates(layer, net) -> list[Candidate]:
    return _candidates(layer, conv=True, net=net)


def qgemm_candidates(layer, net) -> list[Candidate]:
    return _candidates(layer, conv=False, net=net)


def _one(factory):
    def candidates(layer, net) -> list[Candidate]:
        return [Candidate("numpy", lambda: Kernel(factory(layer.attrs)), precision=INT8)]
    return candidates


quantize = _one(lambda a: k8.quantize_kernel(a["y_q"][0], a["y_q"][1], *a["range"]))
dequantize = _one(lambda a: k8.dequantize_kernel(*a["x_q"]))
qrelu = _one(lambda a: k8.relu_kernel(a["zero_point"]))
qadd = _one(lambda a: k8.add_kernel(a["a_q"], a["b_q"], a["y_q"], *a["range"], a["relu"],
                                           a.get("layout", "nchw")))
qmean = _one(lambda a: k8.mean_kernel(a["inner_shape"], a["mode"], a["zero_point"], *a["range"]))
qmax_pool = _one(lambda a: k8.max_pool_kernel(a["kernel"], a["stride"], a["padding"], a["dilation"], a["qmin"]))
