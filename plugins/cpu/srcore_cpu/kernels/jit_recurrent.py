"""The recurrence of float32 LSTM and GRU layers as one compiled loop (numba).

``recurrent.run_lockstep`` runs a step as ~12 numpy calls on (batch, 4H) rows: one GEMV for
``h @ W_hh^T`` and one call per gate operation, each a few microseconds of call overhead on
128-wide rows (lstm_gru: 2 x 100 LSTM steps + 100 GRU steps, ~30-40 us a step). Here a whole
layer's steps run in one call: per step the GEMV of every batch row as ``acc[g] += h[j] * W_hh^T[j, g]`` (contiguous,
vectorized loops over the gates, four rows of ``W_hh^T`` a pass), then the gates with the float32
``sigmoid`` / ``tanh`` of ``jit.py`` (LSTM: flat passes over the gate rows, then the state update; GRU: fused per
hidden unit), the states updated in preallocated rows. The input
projection of every step stays one GEMM (numpy's BLAS) before the loop, as in ``recurrent.py``.

Gate layouts are ``Prepared``'s: LSTM ``i, f, o, g`` with both biases folded into the projection;
GRU ``r, z, n`` with ``b_hn`` apart (``r`` multiplies it); a flag makes the GRU candidate's
activation relu (``"gru_relu"``: relu RNNs as pinned GRUs, ``recurrent.rnn_as_gru``; no function
of its own to compile). Layers without an LSTM
projection (``proj_size``) take this path, a direction a call (``recurrent.run_compiled``): each
reads its columns of the layer's projection and adds its biases itself, the reverse one walks
time backwards, and each writes its half of the layer's output in place, in the input's own
order (batch-first through a transposed view): no copies between the GEMM and the loop.
"""
from __future__ import annotations

import numba
import numpy as np

from srcore.plugin import simd_conv, simd_vec

from . import jit as _J
from .jit import JIT, prefer_512
from .jit import sigmoid_lean as sigmoid, tanh_lean as tanh
from .recurrent import aligned

vfma, vload, vsplat, vstore = simd_vec.vfma, simd_vec.vload, simd_vec.vsplat, simd_vec.vstore

_F = np.float32


#: vectors of gates one pass of :func:`_gemv_regs` keeps in registers (8 zmm at 16 lanes)
_REG_VECS = 8


@numba.njit(**JIT)
def _gemv_regs(h, b, whhT, acc, tag, nl):
    """``acc += h[b] @ whhT`` with the accumulators in vector registers (``simd_vec``, the width
    from ``tag``, ``nl`` its lanes): a pass takes :data:`_REG_VECS` vectors of gates through every row of ``whhT``,
    one broadcast of ``h[b, j]`` and a load and FMA per vector a row, and stores them once, where
    :func:`_gemv_rows` loads and stores ``acc`` for every four rows. A timed candidate: at hidden 128
    it gained ~8% on an LSTM step, which is bound by reading ``whhT`` (256 KB) from L2."""
    prefer_512()   # its 16-lane vectors stay whole (``min-legal-vector-width``)
    H, G = whhT.shape
    w = whhT.reshape(H * G)
    z = vsplat(tag, 0.0)
    g0 = 0
    while g0 + _REG_VECS * nl <= G:
        a0 = vload(acc, g0, z)
        a1 = vload(acc, g0 + nl, z)
        a2 = vload(acc, g0 + 2 * nl, z)
        a3 = vload(acc, g0 + 3 * nl, z)
        a4 = vload(acc, g0 + 4 * nl, z)
        a5 = vload(acc, g0 + 5 * nl, z)
        a6 = vload(acc, g0 + 6 * nl, z)
        a7 = vload(acc, g0 + 7 * nl, z)
        for j in range(H):
            hv = vsplat(tag, h[b, j])
            r = j * G + g0
            a0 = vfma(hv, vload(w, r, z), a0)
            a1 = vfma(hv, vload(w, r + nl, z), a1)
            a2 = vfma(hv, vload(w, r + 2 * nl, z), a2)
            a3 = vfma(hv, vload(w, r + 3 * nl, z), a3)
            a4 = vfma(hv, vload(w, r + 4 * nl, z), a4)
            a5 = vfma(hv, vload(w, r + 5 * nl, z), a5)
            a6 = vfma(hv, vload(w, r + 6 * nl, z), a6)
            a7 = vfma(hv, vload(w, r + 7 * nl, z), a7)
        vstore(acc, g0, a0)
        vstore(acc, g0 + nl, a1)
        vstore(acc, g0 + 2 * nl, a2)
        vstore(acc, g0 + 3 * nl, a3)
        vstore(acc, g0 + 4 * nl, a4)
        vstore(acc, g0 + 5 * nl, a5)
        vstore(acc, g0 + 6 * nl, a6)
        vstore(acc, g0 + 7 * nl, a7)
        g0 += _REG_VECS * nl
    # the rest in blocks of 4, 2, 1 vectors: one vector a pass would be one chain of dependent
    # FMAs (latency-bound; crnn's H 24 has 6 vectors of gates, none in the 8-vector loop)
    if g0 + 4 * nl <= G:
        a0 = vload(acc, g0, z)
        a1 = vload(acc, g0 + nl, z)
        a2 = vload(acc, g0 + 2 * nl, z)
        a3 = vload(acc, g0 + 3 * nl, z)
        for j in range(H):
            hv = vsplat(tag, h[b, j])
            r = j * G + g0
            a0 = vfma(hv, vload(w, r, z), a0)
            a1 = vfma(hv, vload(w, r + nl, z), a1)
            a2 = vfma(hv, vload(w, r + 2 * nl, z), a2)
            a3 = vfma(hv, vload(w, r + 3 * nl, z), a3)
        vstore(acc, g0, a0)
        vstore(acc, g0 + nl, a1)
        vstore(acc, g0 + 2 * nl, a2)
        vstore(acc, g0 + 3 * nl, a3)
        g0 += 4 * nl
    if g0 + 2 * nl <= G:
        a0 = vload(acc, g0, z)
        a1 = vload(acc, g0 + nl, z)
        for j in range(H):
            hv = vsplat(tag, h[b, j])
            r = j * G + g0
            a0 = vfma(hv, vload(w, r, z), a0)
            a1 = vfma(hv, vload(w, r + nl, z), a1)
        vstore(acc, g0, a0)
        vstore(acc, g0 + nl, a1)
        g0 += 2 * nl
    if g0 + nl <= G:
        a0 = vload(acc, g0, z)
        for j in range(H):
            a0 = vfma(vsplat(tag, h[b, j]), vload(w, j * G + g0, z), a0)
        vstore(acc, g0, a0)
        g0 += nl
    for j in range(H):
        hj = h[b, j]
        for g in range(g0, G):
            acc[g] += hj * whhT[j, g]


# The layer loops below are one function each (the gate math written out in them), with the small
# helpers here inlined by numba and the GEMV in registers called: ``inline="always"`` of every step
# helper into each of four layer loops (two widths per cell) had numba inline and type the same
# gates ~20 times, 13-17 s of compilation per loop; helpers called instead (compiled once, linked)
# cost ~50 ns a step in calls and reference counts, 10-25% of a small layer's step.


@numba.njit(inline="always", **JIT)
def _aligned_row(n):
    """An uninitialized float32 row of ``n`` starting on a 64-byte boundary: a zmm load of it
    never straddles two cache lines."""
    buf = np.empty(n + 16, np.float32)
    off = ((64 - (buf.ctypes.data & 63)) & 63) >> 2
    return buf[off:off + n]


@numba.njit(inline="always", **JIT)
def _gate_rows(xp, t, ts, bs, goff, bias, rows, b0, b1):
    """``rows[(b - b0) * G:][:G] = xp[t * ts + b * bs, goff:goff + G] + bias`` for the batch rows ``b0 <=
    b < b1`` (through slices: an index ``goff + g`` of unknown sign costs a wraparound check per
    element, which kept the loop scalar)."""
    G = bias.size
    for b in range(b0, b1):
        src = xp[t * ts + b * bs, goff:goff + G]
        dst = rows[(b - b0) * G:(b - b0 + 1) * G]
        for g in range(G):
            dst[g] = src[g] + bias[g]


@numba.njit(inline="always", **JIT)
def _gemv_rows(h, whhT, accs):
    """``accs[b*G:(b+1)*G] += h[b] @ whhT`` for every batch row ``b``: four rows of ``whhT`` a pass
    for all batch rows, so a step reads ``W_hh^T`` from L2 once and each 4-row block again from L1
    for the other rows (a row at a time, a step read all of it once a row: a stacked LSTM's
    hidden 64, 64 KB of ``W_hh^T``, at batch 4)."""
    H, G = whhT.shape
    B = h.shape[0]
    j = 0
    while j + 4 <= H:
        w0, w1, w2, w3 = whhT[j], whhT[j + 1], whhT[j + 2], whhT[j + 3]
        for b in range(B):
            h0, h1, h2, h3 = h[b, j], h[b, j + 1], h[b, j + 2], h[b, j + 3]
            a = accs[b * G:(b + 1) * G]
            for g in range(G):
                a[g] += h0 * w0[g] + h1 * w1[g] + h2 * w2[g] + h3 * w3[g]
        j += 4
    while j < H:
        w0 = whhT[j]
        for b in range(B):
            hj = h[b, j]
            a = accs[b * G:(b + 1) * G]
            for g in range(G):
                a[g] += hj * w0[g]
        j += 1


@numba.njit(**JIT)
def _lstm_layer(xp, ts, bs, goff, bias, whhT, h, c, y, yoff, rev, tag, nl):
    """One direction of an LSTM layer: ``xp`` (T*B, *) the input projections, the row of time
    ``t`` and batch row ``b`` at ``t * ts + b * bs`` (time- or batch-major: the input's own order),
    this direction's (i, f, o, g) at columns ``goff:goff + 4H`` (``bias``, both biases, added here),
    ``whhT`` (H, 4H), the states ``h``, ``c`` (B, H) updated in place, every step's ``h`` into its
    row of ``y`` at columns ``yoff:yoff + H``; ``rev``: the steps from the last time to the first
    (the reverse direction, in place in time order: no reversed copies). ``nl`` > 0: the GEMV in
    registers of ``nl`` lanes (:func:`_gemv_regs`, ``tag`` their width, a batch row at a time), else
    :func:`_gemv_rows` (every batch row a pass). 512-bit vectors (:func:`.jit.prefer_512`)."""
    prefer_512()
    B = h.shape[0]
    T = xp.shape[0] // B
    G = whhT.shape[1]
    H = G // 4
    accs = _aligned_row(B * G)
    nb = 1 if nl > 0 else B     # batch rows a pass: one with the GEMV in registers, else all
    for s in range(T):
        t = T - 1 - s if rev else s
        for b0 in range(0, B, nb):
            _gate_rows(xp, t, ts, bs, goff, bias, accs, b0, b0 + nb)
            if nl > 0:
                _gemv_regs(h, b0, whhT, accs, tag, nl)
            else:
                _gemv_rows(h, whhT, accs)
            for b in range(b0, b0 + nb):
                acc = accs[(b - b0) * G:(b - b0 + 1) * G]
                # the gates as two flat passes (i, f, o: one sigmoid loop over 3H; g: tanh over H), then
                # the state update: independent vectors the core overlaps; one loop over the hidden
                # units doing all five per unit was a chain of two activations per 16-lane vector
                # (B 2, H 24, T 200: 96.5 -> 82.3 us a direction)
                sg = acc[:3 * H]
                for k in range(3 * H):
                    sg[k] = sigmoid(sg[k])
                gt = acc[3 * H:]
                for u in range(H):
                    gt[u] = tanh(gt[u])
                cb = c[b]
                for u in range(H):
                    cb[u] = acc[H + u] * cb[u] + acc[u] * gt[u]
                hb = h[b]
                for u in range(H):
                    hb[u] = acc[2 * H + u] * tanh(cb[u])
                dst = y[t * ts + b * bs, yoff:yoff + H]
                for u in range(H):
                    dst[u] = hb[u]


@numba.njit(**JIT)
def _gru_layer(xp, ts, bs, goff, bias, whhT, bhn, h, y, yoff, rev, tag, nl, relu):
    """One direction of a GRU layer, as :func:`_lstm_layer`: (r, z, n) at columns ``goff:goff + 3H``
    of ``xp``, ``bias`` the input biases with ``b_hh`` of r and z folded in, ``bhn`` (H,) apart (r
    multiplies it), the state ``h`` (B, H) updated in place. ``relu``: the candidate's activation is
    relu (a relu RNN as a pinned GRU); the branch outside the loops keeps each vectorized."""
    prefer_512()
    B = h.shape[0]
    T = xp.shape[0] // B
    G = whhT.shape[1]
    H = G // 3
    accs = _aligned_row(B * G)
    rows = _aligned_row(B * G)
    nb = 1 if nl > 0 else B
    for s in range(T):
        t = T - 1 - s if rev else s
        for b0 in range(0, B, nb):
            _gate_rows(xp, t, ts, bs, goff, bias, rows, b0, b0 + nb)
            for k in range(nb * G):
                accs[k] = _F(0.0)
            if nl > 0:
                _gemv_regs(h, b0, whhT, accs, tag, nl)
            else:
                _gemv_rows(h, whhT, accs)
            for b in range(b0, b0 + nb):
                row = rows[(b - b0) * G:(b - b0 + 1) * G]
                acc = accs[(b - b0) * G:(b - b0 + 1) * G]
                if relu:
                    for u in range(H):
                        r = sigmoid(row[u] + acc[u])
                        z = sigmoid(row[H + u] + acc[H + u])
                        n = row[2 * H + u] + r * (acc[2 * H + u] + bhn[u])
                        n = _F(0.0) if n < _F(0.0) else n   # NaN stays NaN, as torch's relu
                        h[b, u] = n + z * (h[b, u] - n)
                else:
                    # (r and z as a flat sigmoid pass first, as the LSTM's gates, was 0.90-1.13x of this:
                    # no gain at B 1-4, H 16-128)
                    for u in range(H):
                        r = sigmoid(row[u] + acc[u])
                        z = sigmoid(row[H + u] + acc[H + u])
                        n = tanh(row[2 * H + u] + r * (acc[2 * H + u] + bhn[u]))
                        h[b, u] = n + z * (h[b, u] - n)
                dst = y[t * ts + b * bs, yoff:yoff + H]
                for u in range(H):
                    dst[u] = h[b, u]


def _sig(mode: str, lanes: int) -> str:
    tag = "float32[:, ::1]" if lanes == 16 else "float32[::1]"   # simd_vec's width tag
    state = "float32[:, ::1]" if mode == "lstm" else "float32[::1]"
    return (f"void(float32[:, ::1], int64, int64, int64, float32[::1], float32[:, ::1], {state}, "
            f"float32[:, ::1], float32[:, ::1], int64, boolean, {tag}, int64{'' if mode == 'lstm' else ', boolean'})")


_VARIANTS = {"lstm": (_lstm_layer, 4), "gru": (_gru_layer, 3)}
#: ``"gru_relu"``: the GRU loops with a relu candidate (a relu RNN as a pinned GRU): the same
#: compiled functions as ``"gru"``'s, a flag apart
_BASE = {"lstm": "lstm", "gru": "gru", "gru_relu": "gru"}
_candidates: dict[str, list] = {}
_chosen: dict[tuple[str, int], object] = {}
_STEPS = 32     # timesteps of the timing run: ~0.1 ms a call at hidden 128


def _args(mode, hidden, rng):
    mode = _BASE[mode]
    g = _VARIANTS[mode][1] * hidden
    xp = rng.standard_normal((_STEPS, g), dtype=np.float32)
    bias = np.zeros(g, np.float32)
    # laid out as recurrent.prepare lays out the weights (64-byte aligned)
    whhT = aligned(rng.standard_normal((hidden, g), dtype=np.float32) * _F(1.0 / np.sqrt(hidden)), np.float32)
    h = np.zeros((1, hidden), np.float32)
    y = np.empty((_STEPS, hidden), np.float32)
    state = np.zeros((1, hidden), np.float32) if mode == "lstm" else np.zeros(hidden, np.float32)
    if mode == "lstm":
        return xp, 1, 0, 0, bias, whhT, h, state, y, 0, False
    return xp, 1, 0, 0, bias, whhT, state, h, y, 0, False


def candidates(mode: str) -> list:
    """The layer loops of ``mode`` (``"lstm"``, ``"gru"`` or ``"gru_relu"``), one direction a call, each
    ``fn(xp, ts, bs, goff, bias, whhT, h, c, y, yoff, rev)`` (LSTM) or ``fn(xp, ts, bs, goff, bias,
    whhT, bhn, h, y, yoff, rev)`` (GRU; see :func:`_lstm_layer`), compiled now (or loaded from numba's
    cache): the GEMV by rows (:func:`_gemv_rows`, every batch row a pass), and in registers at the CPU's
    vector width (:func:`_gemv_regs`); the first is the default. One compiled function does both
    (``nl``), 512-bit vectors: a 256-bit twin (LLVM's default width on AVX-512) was a third
    candidate, as fast as the 512-bit one to 1.6x slower at every size timed (hidden 24-128, batch 1-4),
    and cost its own 13-15 s compilation."""
    if mode not in _candidates:
        base = _BASE[mode]
        layer, _ = _VARIANTS[base]
        lanes = simd_conv.lanes()
        tag = np.zeros((1, 1) if lanes == 16 else 1, np.float32)
        fn = _J.compiled(layer, _sig(base, lanes))
        bind = _bind if base == "lstm" else (lambda fn, tag, nl: _bind_gru(fn, tag, nl, mode == "gru_relu"))
        _candidates[mode] = [bind(fn, tag, 0), bind(fn, tag, lanes)]
    return _candidates[mode]


def _bind(fn, tag, nl):
    def run(xp, ts, bs, goff, bias, whhT, a, b, y, yoff, rev):
        fn(xp, ts, bs, goff, bias, whhT, a, b, y, yoff, rev, tag, nl)
    # the compiled entry and its trailing arguments, for callers that call it straight
    # (``recurrent.run_compiled``'s bound calls: one Python frame less a direction)
    run.entry, run.tail = fn, (tag, nl)
    return run


def _bind_gru(fn, tag, nl, relu):
    def run(xp, ts, bs, goff, bias, whhT, a, b, y, yoff, rev):
        fn(xp, ts, bs, goff, bias, whhT, a, b, y, yoff, rev, tag, nl, relu)
    run.entry, run.tail = fn, (tag, nl, relu)
    return run


def kernels(mode: str, hidden: int | None) -> dict:
    """``{mode: fn}``, the layer loop for ``mode`` (``"lstm"``, ``"gru"``, ``"gru_relu"``; :func:`kernel`), for
    ``run_lockstep``; ``hidden`` None (weights not known at load): the default of :func:`candidates`."""
    if hidden is None:
        return {mode: candidates(mode)[0]}
    return {mode: kernel(mode, hidden)}


def kernel(mode: str, hidden: int):
    """The layer loop of ``mode`` (``"lstm"``, ``"gru"``, ``"gru_relu"``) for ``hidden`` units: whichever of
    :func:`candidates` ran a ``hidden``-unit layer fastest here (once per mode and size and process;
    another than the default must win by 3%). The matcher calls this at load."""
    key = (mode, hidden)
    if key not in _chosen:
        _chosen[key] = _J.fastest(candidates(mode), _args(mode, hidden, np.random.default_rng(0)))
    return _chosen[key]
