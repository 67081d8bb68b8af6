"""The compiled row tactics: softmax and log-softmax over the last dim, layer norm, and multi-head
attention (BLAS products around the compiled softmax); see :mod:`..kernels.rows`."""
from __future__ import annotations

import threading

import numpy as np

from ..builder.network import Layer, Network
from ..kernels import threads as _threads
from ..kernels.activation import CODES
from ..kernels.heads import BLOCK_KEYS
from ..kernels.rows import (BLOCK_FLOATS, channel_norm_planes, group_norm_rows, layer_norm_rows, log_softmax_block, log_softmax_blocks,
                            log_softmax_rows, rms_norm_rows, softmax_block_biased, softmax_blocks, softmax_rows,
                            softmax_rows_biased, softmax_short_rows)
from ..kernels.rows_split import CHUNK, group_norm_split, layer_norm_split, softmax_split
from .records import Candidate, Kernel

f32 = np.float32


def softmax(layer: Layer, net: Network):
    """Softmax/log-softmax over the last dim (other dims: the numpy tactic); the plan never
    hands a layer overlapping input and output."""
    shape = net.shape(layer.inputs[0])
    if layer.attrs["dim"] != len(shape) - 1:
        return None
    m = shape[-1]
    one = f32(1.0)
    if layer.attrs.get("safe"):   # scaled_dot_product_attention's: fully masked rows give zeros
        zero = np.zeros((1, m), f32)

        def safe(x, out):
            softmax_rows_biased(x.reshape(-1, m), out.reshape(-1, m), one, False, zero, 0, True)
        return safe
    if 16 <= m <= BLOCK_KEYS:   # rows of 16-64: blocks of rows exponentiated at once (2.6x at 20)
        return _softmax_blocks(layer.kind, shape, m)
    if 0 < m < 16:   # short rows: vectorized across rows (kernels/rows.py)
        rows, log = int(np.prod(shape[:-1], dtype=np.int64)), layer.kind == "log_softmax"
        t, mxs, sums = np.empty(rows * m, f32), np.empty(rows, f32), np.empty(rows, f32)

        def run(x, out):
            softmax_short_rows(x.reshape(rows, m), out.reshape(rows, m), log, t, mxs, sums)
    elif layer.kind == "log_softmax":
        def run(x, out):
            log_softmax_rows(x.reshape(-1, m), out.reshape(-1, m))
    else:
        def run(x, out):
            softmax_rows(x.reshape(-1, m), out.reshape(-1, m), one)
    return run


def _softmax_blocks(kind: str, shape, m: int):
    """The block drivers (``kernels/rows.py``) over blocks of ~``BLOCK_FLOATS`` (in L1); the rows
    that do not fill a block go in one more call."""
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    per = max(1, min(rows, BLOCK_FLOATS // m))
    full, rest = divmod(rows, per)
    cut = full * per
    zero, mxs = np.zeros((1, m), f32), np.empty(per, f32)
    e = np.empty(per * m, f32)
    if rows <= per:   # one block: no views to cut (a microsecond a call on small layers)
        if kind == "log_softmax":
            def one(x, out):
                log_softmax_block(x.reshape(rows, m), out.reshape(rows, m), e)
        else:
            def one(x, out):
                softmax_block_biased(x.reshape(rows, m), out.reshape(rows, m), f32(1.0), False, zero, 0, mxs, False)
        return one

    def run(x, out):
        x2, o2 = x.reshape(rows, m), out.reshape(rows, m)
        x3, o3 = x2[:cut].reshape(full, per, m), o2[:cut].reshape(full, per, m)
        if kind == "log_softmax":
            log_softmax_blocks(x3, o3, e)
            if rest:
                log_softmax_block(x2[cut:], o2[cut:], e)
        else:
            softmax_blocks(x3, o3, zero, mxs)
            if rest:
                softmax_block_biased(x2[cut:], o2[cut:], f32(1.0), False, zero, 0, mxs, False)
    return run


def layer_norm(layer: Layer, net: Network):
    n, eps = layer.attrs["size"], f32(layer.attrs["eps"])
    w, b = _affine(layer, n)

    def run(x, out):
        layer_norm_rows(x.reshape(-1, n), w, b, eps, out.reshape(-1, n))
    return run


def channel_norm(layer: Layer, net: Network):
    """Layer norm over dim 1 of an NCHW tensor (``builder/channels_last.py``), plane by plane."""
    N, C, H, W = net.shape(layer.inputs[0])
    eps = f32(layer.attrs["eps"])
    w, b = _affine(layer, C)
    mu, rs = np.empty(H * W, f32), np.empty(H * W, f32)

    def run(x, out):
        channel_norm_planes(x.reshape(N, C, H * W), w, b, eps, out.reshape(N, C, H * W), mu, rs)
    return run


def _affine(layer: Layer, n: int):
    """A norm layer's weight and bias as contiguous float32 (ones and zeros where it has none)."""
    w = layer.attrs["weight"] if layer.attrs["weight"] is not None else np.ones(n, f32)
    b = layer.attrs["bias"] if layer.attrs["bias"] is not None else np.zeros(n, f32)
    return np.ascontiguousarray(w, f32), np.ascontiguousarray(b, f32)


def rms_norm(layer: Layer, net: Network):
    n, eps = layer.attrs["size"], f32(layer.attrs["eps"])
    w = np.ascontiguousarray(layer.attrs["weight"] if layer.attrs["weight"] is not None else np.ones(n, f32), f32)

    def run(x, out):
        rms_norm_rows(x.reshape(-1, n), w, eps, out.reshape(-1, n))
    return run


def rows_split(layer: Layer, net: Network) -> list[Candidate]:
    """At more than one intra-op thread, softmax (over the last dim) and layer norm with their rows
    split over numba's OpenMP team (``numba_split``, :mod:`..kernels.rows_split`), governed like the
    other regions; timed against the one-thread kernel (:func:`split_rows`: large layers only)."""
    nt = _threads.count()
    if not split_rows(layer, net):
        return []
    if layer.kind == "softmax":
        m, one = net.shape(layer.inputs[0])[-1], f32(1.0)

        def build() -> Kernel:
            gov = _threads.Governor(nt)

            def run(x, out):
                x = x.reshape(-1, m)
                gov.run(softmax_split, nt, CHUNK, x.shape[0], x, out.reshape(-1, m), one)
            return Kernel(run, keep=gov)
    else:
        n, eps = layer.attrs["size"], f32(layer.attrs["eps"])
        w, b = _affine(layer, n)

        def build() -> Kernel:
            gov = _threads.Governor(nt)

            def run(x, out):
                x = x.reshape(-1, n)
                gov.run(layer_norm_split, nt, CHUNK, x.shape[0], x, w, b, eps, out.reshape(-1, n))
            return Kernel(run, keep=gov)
    return [Candidate("numba_split", build, blas="omp")]


#: element operations charged per element of a softmax or layer norm row against
#: :data:`..kernels.threads.PARALLEL_MIN_WORK` (~0.3 ns an element here, as ~16 multiply-adds at
#: ~50 GMAC/s): a split needs rows of ~1.6 M elements (~0.5 ms); bert_encoder's 4x128x128 softmax
#: (0.15 ms) stays whole, as its small GEMMs do (see ``tactics.mkl.splits``: their tail)
ROW_WORK = 16


def split_rows(layer: Layer, net: Network) -> bool:
    """Whether ``layer`` has a ``numba_split`` candidate (the table's ``threaded``)."""
    shape = net.shape(layer.inputs[0])
    if _threads.count() <= 1 or not shape or shape[-1] == 0:
        return False
    if layer.kind == "softmax" and (layer.attrs["dim"] != len(shape) - 1 or layer.attrs.get("safe")):
        return False
    size = int(np.prod(shape, dtype=np.int64))
    return size // shape[-1] > 1 and size * ROW_WORK >= _threads.PARALLEL_MIN_WORK


def _group_affine(layer: Layer, C: int):
    G = layer.attrs["groups"]
    w = layer.attrs["weight"] if layer.attrs["weight"] is not None else np.ones(C, f32)
    b = layer.attrs["bias"] if layer.attrs["bias"] is not None else np.zeros(C, f32)
    return (np.ascontiguousarray(np.asarray(w, f32).reshape(G, C // G)),
            np.ascontiguousarray(np.asarray(b, f32).reshape(G, C // G)))


def _group_norm_args(layer: Layer, net: Network) -> tuple:
    """A group norm's rows shape (N * G, C / G, spatial), affine (G, C / G), eps, activation code and slope."""
    shape = net.shape(layer.inputs[0])
    N, C, G = shape[0], shape[1], layer.attrs["groups"]
    rows = (N * G, C // G, int(np.prod(shape[2:], dtype=np.int64)))
    w, b = _group_affine(layer, C)
    code, slope = CODES[layer.attrs.get("activation", "none")], f32(layer.attrs.get("negative_slope", 0.01))
    return rows, w, b, f32(layer.attrs["eps"]), code, slope


def group_norm(layer: Layer, net: Network):
    rows, w, b, eps, code, slope = _group_norm_args(layer, net)

    def run(x, out):
        group_norm_rows(x.reshape(rows), w, b, eps, out.reshape(rows), code, slope)
    return run


def group_norm_split_candidates(layer: Layer, net: Network) -> list[Candidate]:
    """At more than one intra-op thread, a large group norm with its (sample, group) rows claimed over
    numba's OpenMP team (``numba_split``, :func:`..kernels.rows_split.group_norm_split`: the same
    bits), timed against the one-thread kernel."""
    if not split_groups(layer, net):
        return []
    rows, w, b, eps, code, slope = _group_norm_args(layer, net)
    nt = _threads.count()

    def build() -> Kernel:
        gov = _threads.Governor(nt)

        def run(x, out):
            # one (sample, group) row a claim
            gov.run(group_norm_split, nt, 1, rows[0], x.reshape(rows), w, b, eps, out.reshape(rows), code, slope)
        return Kernel(run, keep=gov)
    return [Candidate("numba_split", build, blas="omp")]


def split_groups(layer: Layer, net: Network) -> bool:
    """Whether the group norm has a ``numba_split`` candidate (the table's ``threaded``): more than one
    intra-op thread, more than one (sample, group) row, :data:`.data.SPLIT_MIN_ELEMENTS` or more."""
    from .data import SPLIT_MIN_ELEMENTS

    shape = net.shape(layer.inputs[0])
    return (_threads.count() > 1 and len(shape) > 2 and shape[0] * layer.attrs["groups"] > 1
            and int(np.prod(shape, dtype=np.int64)) >= SPLIT_MIN_ELEMENTS)


def attention(layer: Layer, net: Network):
    """Per batch and head: ``S = q k^T`` (BLAS, into a per-thread scratch), the scaled softmax
    in place (compiled), ``out[:, head] = P v`` (BLAS, written straight into the (L, E) layout)."""
    B, L, E3 = net.shape(layer.inputs[0])
    E = E3 // 3
    H = layer.attrs["heads"]
    D = E // H
    scale = f32(layer.attrs["scale"])
    tls = threading.local()

    def run(qkv, out):
        try:
            s, p, t = tls.scratch
        except AttributeError:
            s, p, t = tls.scratch = np.empty((L, L), f32), np.empty((L, L), f32), np.empty((L, D), f32)
        for bi in range(B):
            x = qkv[bi]
            o = out[bi]
            for h in range(H):
                c = h * D
                np.dot(x[:, c:c + D], x[:, E + c:E + c + D].T, out=s)   # strided views: no copies
                softmax_rows(s, p, scale)
                np.dot(p, x[:, 2 * E + c:2 * E + c + D], out=t)
                o[:, c:c + D] = t
    return run
