"""The ``attention_heads`` tactics (:mod:`..builder.attention_fusion`): multi-head attention on
separate (B, L, E) query, key and value projections with an optional additive mask.

Per batch and head: ``S = Q_h K_h^T`` on strided column blocks of the projections (no copies),
``softmax(S / c + mask)`` in one compiled pass per row (:func:`..kernels.rows.softmax_rows_biased`,
into a second buffer: in place, LLVM's loops took their scalar path, 3x slower), ``O_h = P V_h``
written straight into the head's columns of the (B, L, E) output. The products are ``cblas_sgemm`` on
one MKL thread (``mkl``) or ``np.dot`` (``numpy``, numpy's BLAS):
each is 0.5-2 M multiply-adds, too small to split (see ``tactics/mkl.py``). Small heads on short
sequences are one compiled call for the whole layer (``numba``, :mod:`..kernels.heads`), where a
BLAS call per head costs more than its arithmetic; the build's timing picks. The packed
``attention`` layer (one (B, L, 3E) qkv tensor) has the same kernel as its ``numba_heads`` tactic.
"""
from __future__ import annotations

import threading

import numpy as np
from srcore.plugin import conv_team

from ..builder.network import Layer, Network
from ..kernels import heads_omp
from ..kernels import mkl as mkl_gemm
from ..kernels import threads as _threads
from ..kernels.heads import attention_heads
from ..kernels.rows import softmax_rows_biased
from .records import Candidate, Kernel

f32 = np.float32


def _dims(layer: Layer, net: Network):
    B, L, E = net.shape(layer.inputs[0])
    S = net.shape(layer.inputs[1])[1]
    H = layer.attrs["heads"]
    return B, L, S, E, H, E // H


def _mask_rows(layer: Layer, net: Network, B: int, H: int, S: int):
    """``rows(mask, b, h) -> (rows, step)``: the mask's (rows, S) block for batch ``b``, head ``h``
    and the row step (0: one row for every query); a zero row when the layer has no mask."""
    if len(layer.inputs) < 4:
        zero = np.zeros((1, S), f32)
        return lambda mask, b, h: (zero, 0)
    Bm, Hm, Lm, _ = net.shape(layer.inputs[3])
    step = 1 if Lm > 1 else 0
    return lambda mask, b, h: (mask[b if Bm > 1 else 0, h if Hm > 1 else 0], step)


def _scratch(tls, L: int, S: int, D: int):
    """This thread's scores, probabilities and head output buffers."""
    try:
        return tls.scratch
    except AttributeError:
        tls.scratch = np.empty((L, S), f32), np.empty((L, S), f32), np.empty((L, D), f32)
        return tls.scratch


def heads_numpy(layer: Layer, net: Network):
    B, L, S, E, H, D = _dims(layer, net)
    c, divide, safe = f32(layer.attrs["scale"]), bool(layer.attrs["divide"]), bool(layer.attrs.get("safe", False))
    rows = _mask_rows(layer, net, B, H, S)
    tls = threading.local()

    def run(q, k, v, *rest):
        mask, out = (rest[0], rest[1]) if len(rest) == 2 else (None, rest[0])
        s, p, t = _scratch(tls, L, S, D)
        for b in range(B):
            for h in range(H):
                cols = slice(h * D, (h + 1) * D)
                np.dot(q[b][:, cols], k[b][:, cols].T, out=s)
                m, step = rows(mask, b, h)
                softmax_rows_biased(s, p, c, divide, m, step, safe)
                np.dot(p, v[b][:, cols], out=t)
                out[b][:, cols] = t
    return run


def heads_mkl(layer: Layer, net: Network) -> list[Candidate]:
    lib = mkl_gemm.library()
    if lib is None:
        return []
    B, L, S, E, H, D = _dims(layer, net)
    c, divide, safe = f32(layer.attrs["scale"]), bool(layer.attrs["divide"]), bool(layer.attrs.get("safe", False))
    rows = _mask_rows(layer, net, B, H, S)
    tls = threading.local()
    sgemm = lib.cblas_sgemm
    rm, nt, tr = mkl_gemm.ROW_MAJOR, mkl_gemm.NO_TRANS, mkl_gemm.TRANS

    def head(q, k, v, mask, out, b, h):
        """Batch ``b``, head ``h`` on the calling thread's scratch (the same bits on any thread)."""
        s, p, _ = _scratch(tls, L, S, D)
        mkl_gemm.set_threads(lib, 1)
        off = 4 * h * D
        qp, kp, vp, op = q[b].ctypes.data, k[b].ctypes.data, v[b].ctypes.data, out[b].ctypes.data
        sgemm(rm, nt, tr, L, S, D, 1.0, qp + off, E, kp + off, E, 0.0, s.ctypes.data, S)
        m, step = rows(mask, b, h)
        softmax_rows_biased(s, p, c, divide, m, step, safe)
        sgemm(rm, nt, nt, L, D, S, 1.0, p.ctypes.data, S, vp + off, E, 0.0, op + off, E)

    def run(q, k, v, *rest):
        mask, out = (rest[0], rest[1]) if len(rest) == 2 else (None, rest[0])
        s, p, _ = _scratch(tls, L, S, D)
        mkl_gemm.set_threads(lib, 1)
        sp, pp = s.ctypes.data, p.ctypes.data
        for b in range(B):
            qp, kp, vp, op = q[b].ctypes.data, k[b].ctypes.data, v[b].ctypes.data, out[b].ctypes.data
            for h in range(H):
                off = 4 * h * D
                sgemm(rm, nt, tr, L, S, D, 1.0, qp + off, E, kp + off, E, 0.0, sp, S)
                m, step = rows(mask, b, h)
                softmax_rows_biased(s, p, c, divide, m, step, safe)
                sgemm(rm, nt, nt, L, D, S, 1.0, pp, S, vp + off, E, 0.0, op + off, E)
    out = [Candidate("mkl", lambda: Kernel(run), blas="mkl")]
    nt_ = _threads.count()
    if nt_ > 1 and B * H > 1:
        team = conv_team.team(nt_)

        def run_team(q, k, v, *rest):
            mask, o = (rest[0], rest[1]) if len(rest) == 2 else (None, rest[0])
            team.run(lambda i: head(q, k, v, mask, o, i // H, i % H), B * H)
        # the heads claimed one at a time by the caller and srcore.conv's team (ctypes and the compiled
        # softmax release the GIL): a worker that joins late leaves its heads to the caller, so the
        # layer never waits for a busy core (bert_encoder's 4 heads of 128x128: ~0.3 ms on one thread)
        out.append(Candidate("mkl_heads_team", lambda: Kernel(run_team), blas="mkl"))
        out.append(Candidate("mkl_heads_omp", lambda: _heads_omp(lib, layer, net, nt_), blas="mkl"))
    return out


def _heads_omp(lib, layer: Layer, net: Network, nt: int) -> Kernel:
    """The ``mkl`` tactic's heads claimed over numba's OpenMP team (:mod:`..kernels.heads_omp`), governed
    like the other regions: the team's worker spins between an engine call's regions, where
    ``mkl_heads_team``'s Python worker had to be woken for each layer."""
    B, L, S, E, H, D = _dims(layer, net)
    c, divide, safe = f32(layer.attrs["scale"]), bool(layer.attrs["divide"]), bool(layer.attrs.get("safe", False))
    if len(layer.inputs) < 4:
        zero, step = np.zeros((1, 1, 1, S), f32), 0
    else:
        zero, step = None, 1 if net.shape(layer.inputs[3])[2] > 1 else 0
    fn, one = heads_omp.addresses(lib)
    gov = _threads.Governor(nt)
    tls = threading.local()

    def run(q, k, v, *rest):
        mask, out = (rest[0], rest[1]) if len(rest) == 2 else (zero, rest[0])
        try:   # this calling thread's scratch, one (L, S) pair per part
            s, p = tls.scratch
        except AttributeError:
            s, p = tls.scratch = np.empty((nt, L, S), f32), np.empty((nt, L, S), f32)
        mkl_gemm.set_threads(lib, 1)   # the caller's own products, when the region runs on it alone
        gov.run(heads_omp.heads, nt, 1, B * H, fn, one, q.ctypes.data, q.strides[0], k.ctypes.data, k.strides[0],
                v.ctypes.data, v.strides[0], out.ctypes.data, out.strides[0], L, S, E, H, mask, step, c, divide, safe,
                s, p, E)   # (q, k, v with contiguous rows: E floats apart)
    return Kernel(run, keep=gov)


def _flat(a: np.ndarray) -> np.ndarray:
    """``a`` as a flat view (a copy only if it is not contiguous)."""
    return a.reshape(-1)


def _heads_kernel(B: int, L: int, S: int, D: int, c, divide: bool, safe: bool, H: int, zero, step: int):
    """``run(qf, q0, qs, kf, k0, ks, vf, v0, vs, mask, out)``: :func:`..kernels.heads.attention_heads`
    with this thread's scratch (``zero`` the mask when the layer has none)."""
    tls = threading.local()

    def run(qf, q0, qs, kf, k0, ks, vf, v0, vs, mask, out):
        try:
            kt, s, p, mxs = tls.scratch
        except AttributeError:
            kt, s, p, mxs = tls.scratch = (np.empty((D, S), f32), np.empty((L, S), f32), np.empty((L, S), f32),
                                           np.empty(L, f32))
        attention_heads(qf, q0, qs, kf, k0, ks, vf, v0, vs, B, L, S, zero if mask is None else mask, step, c,
                        divide, safe, H, kt, s, p, mxs, out)
    return run


def heads_numba(layer: Layer, net: Network):
    B, L, S, E, H, D = _dims(layer, net)
    c, divide, safe = f32(layer.attrs["scale"]), bool(layer.attrs["divide"]), bool(layer.attrs.get("safe", False))
    step = 0 if len(layer.inputs) < 4 or net.shape(layer.inputs[3])[2] == 1 else 1
    kernel = _heads_kernel(B, L, S, D, c, divide, safe, H, np.zeros((1, 1, 1, S), f32), step)

    def run(q, k, v, *rest):
        mask, out = (rest[0], rest[1]) if len(rest) == 2 else (None, rest[0])
        kernel(_flat(q), 0, E, _flat(k), 0, E, _flat(v), 0, E, mask, out)
    return run


def packed_numba(layer: Layer, net: Network):
    """The packed ``attention`` layer ((B, L, 3E) qkv, no mask, scores times ``scale``) on the same
    kernel, its q, k and v the column blocks of the one tensor."""
    B, L, E3 = net.shape(layer.inputs[0])
    E, H = E3 // 3, layer.attrs["heads"]
    kernel = _heads_kernel(B, L, L, E // H, f32(layer.attrs["scale"]), False, False, H,
                           np.zeros((1, 1, 1, L), f32), 0)

    def run(qkv, out):
        f = _flat(qkv)
        kernel(f, 0, E3, f, E, E3, f, 2 * E, E3, None, out)
    return run
