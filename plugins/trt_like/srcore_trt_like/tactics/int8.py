"""Tactics of the int8 layers (a quantized segment's): precision ``"int8"`` in their records.

The conv and linear layers offer two exact GEMMs on shifted integers (:mod:`..kernels.int8`):
``int8_sgemm`` (float32 BLAS over blocks of the depth whose sums provably stay below 2^24, the
blocks added in float64) and ``int8_dgemm`` (float64 BLAS, exact in one call); the builder
times them. Their laid-out weights (the
shifted, transposed matrix) are what a serialized plan stores. The other int8 layers (quantize,
dequantize, relu, add, max pool) have one numpy tactic each.
"""
from __future__ import annotations

import numpy as np

from ..kernels import int8 as k8
from .records import Candidate, Kernel

INT8 = "int8"


def _requant(a: dict) -> k8.Requant:
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


def _candidates(layer, conv: bool) -> list[Candidate]:
    a = layer.attrs
    layout_of = _conv_layout if conv else _gemm_layout
    x_zp = a["x_q"][1]

    shifted = _shifted(a)
    depth = _depth(a, conv)

    def make(w_t: np.ndarray) -> Kernel:
        chunk = k8.float32_chunk(a["x_range"], shifted) if w_t.dtype == np.float32 else depth
        if conv:
            fn = k8.conv_kernel(w_t, a["groups"], tuple(a["weight"].shape[2:]), a["stride"], a["padding"],
                                a["dilation"], x_zp, _requant(a), chunk)
        else:
            fn = k8.gemm_kernel(w_t, x_zp, _requant(a), chunk)
        return Kernel(fn, w_t.nbytes, keep=w_t, layout={"w_t": w_t})

    def tactic(name: str, dtype) -> Candidate:
        def restore(layout: dict) -> Kernel:
            w_t = layout["w_t"]
            if w_t.dtype != dtype or w_t.shape != layout_of(a, dtype).shape:
                raise ValueError(f"{name}: stored weights {w_t.dtype}{list(w_t.shape)} do not fit the layer")
            return make(np.array(w_t, copy=True))
        return Candidate(name, lambda: make(layout_of(a, dtype)), blas="openblas", precision=INT8, restore=restore)

    return [tactic("int8_sgemm", np.float32), tactic("int8_dgemm", np.float64)]


def qconv_candidates(layer, net) -> list[Candidate]:
    return _candidates(layer, conv=True)


def qgemm_candidates(layer, net) -> list[Candidate]:
    return _candidates(layer, conv=False)


def _one(factory):
    def candidates(layer, net) -> list[Candidate]:
        return [Candidate("numpy", lambda: Kernel(factory(layer.attrs)), precision=INT8)]
    return candidates


quantize = _one(lambda a: k8.quantize_kernel(a["y_q"][0], a["y_q"][1], *a["range"]))
dequantize = _one(lambda a: k8.dequantize_kernel(*a["x_q"]))
qrelu = _one(lambda a: k8.relu_kernel(a["zero_point"]))
qadd = _one(lambda a: k8.add_kernel(a["a_q"], a["b_q"], a["y_q"], *a["range"], a["relu"]))
qmax_pool = _one(lambda a: k8.max_pool_kernel(a["kernel"], a["stride"], a["padding"], a["dilation"], a["qmin"]))
