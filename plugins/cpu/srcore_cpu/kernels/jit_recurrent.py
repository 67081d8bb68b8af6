"""The recurrence of float32 LSTM and GRU layers as one compiled loop (numba).

``recurrent.run_lockstep`` runs a step as ~12 numpy calls on (batch, 4H) rows: one GEMV for
``h @ W_hh^T`` and one call per gate operation, each a few microseconds of call overhead on
128-wide rows (lstm_gru: 2 x 100 LSTM steps + 100 GRU steps, ~30-40 us a step). Here a whole
layer's steps run in one call: per step the GEMV as ``acc[g] += h[j] * W_hh^T[j, g]`` (contiguous,
vectorized loops over the gates, four rows of ``W_hh^T`` a pass), then the gates fused per hidden unit with the float32
``sigmoid`` / ``tanh`` of ``jit.py``, the states updated in preallocated rows. The input
projection of every step stays one GEMM (numpy's BLAS) before the loop, as in ``recurrent.py``.

Gate layouts are ``Prepared``'s: LSTM ``i, f, o, g`` with both biases folded into the projection;
GRU ``r, z, n`` with ``b_hn`` apart (``r`` multiplies it). Layers without an LSTM
projection (``proj_size``) take this path, a direction at a time (``recurrent._compiled_layer``:
the reverse one on its time-reversed projection); the others keep the numpy loop.
"""
from __future__ import annotations

import numba
import numpy as np

from . import jit as _J
from .jit import JIT, prefer_512, sigmoid, tanh
from .recurrent import aligned

_F = np.float32


@numba.njit(inline="always", **JIT)
def _gemv(h, b, whhT, acc):
    """``acc += h[b] @ whhT``, four rows of ``whhT`` per pass over ``acc`` (one load and store of
    ``acc`` per four multiply-adds)."""
    H, G = whhT.shape
    j = 0
    while j + 4 <= H:
        h0, h1, h2, h3 = h[b, j], h[b, j + 1], h[b, j + 2], h[b, j + 3]
        for g in range(G):
            acc[g] += h0 * whhT[j, g] + h1 * whhT[j + 1, g] + h2 * whhT[j + 2, g] + h3 * whhT[j + 3, g]
        j += 4
    while j < H:
        hj = h[b, j]
        for g in range(G):
            acc[g] += hj * whhT[j, g]
        j += 1


@numba.njit(inline="always", **JIT)
def _aligned_row(n):
    """An uninitialized float32 row of ``n`` starting on a 64-byte boundary: a zmm load of it
    never straddles two cache lines."""
    buf = np.empty(n + 16, np.float32)
    off = ((64 - (buf.ctypes.data & 63)) & 63) >> 2
    return buf[off:off + n]


@numba.njit(inline="always", **JIT)
def _lstm_body(gates, whhT, h, c, ys):
    """``gates`` (T, B, 4H) the input projections (i, f, o, g; biases in), ``whhT`` (H, 4H), the
    states ``h``, ``c`` (B, H) updated in place, ``ys`` (T, B, H) every step's ``h``."""
    T, B, G = gates.shape
    H = G // 4
    acc = _aligned_row(G)
    for t in range(T):
        for b in range(B):
            for g in range(G):
                acc[g] = gates[t, b, g]
            _gemv(h, b, whhT, acc)
            for u in range(H):
                ig = sigmoid(acc[u])
                fg = sigmoid(acc[H + u])
                og = sigmoid(acc[2 * H + u])
                gg = tanh(acc[3 * H + u])
                cu = fg * c[b, u] + ig * gg
                c[b, u] = cu
                hu = og * tanh(cu)
                h[b, u] = hu
                ys[t, b, u] = hu


@numba.njit(inline="always", **JIT)
def _gru_body(gates, whhT, bhn, h, ys):
    """``gates`` (T, B, 3H) the input projections (r, z, n; ``b_hh`` of r and z folded in),
    ``whhT`` (H, 3H), ``bhn`` (H,), the state ``h`` (B, H) updated in place, ``ys`` (T, B, H)."""
    T, B, G = gates.shape
    H = G // 3
    acc = _aligned_row(G)
    for t in range(T):
        for b in range(B):
            for g in range(G):
                acc[g] = _F(0.0)
            _gemv(h, b, whhT, acc)
            for u in range(H):
                r = sigmoid(gates[t, b, u] + acc[u])
                z = sigmoid(gates[t, b, H + u] + acc[H + u])
                n = tanh(gates[t, b, 2 * H + u] + r * (acc[2 * H + u] + bhn[u]))
                hu = n + z * (h[b, u] - n)
                h[b, u] = hu
                ys[t, b, u] = hu


@numba.njit(**JIT)
def _lstm_layer(gates, whhT, h, c, ys):
    _lstm_body(gates, whhT, h, c, ys)


@numba.njit(**JIT)
def _lstm_layer_512(gates, whhT, h, c, ys):
    prefer_512()
    _lstm_body(gates, whhT, h, c, ys)


@numba.njit(**JIT)
def _gru_layer(gates, whhT, bhn, h, ys):
    _gru_body(gates, whhT, bhn, h, ys)


@numba.njit(**JIT)
def _gru_layer_512(gates, whhT, bhn, h, ys):
    prefer_512()
    _gru_body(gates, whhT, bhn, h, ys)


_LSTM_SIG = ("void(float32[:, :, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1], "
             "float32[:, :, ::1])")
_GRU_SIG = ("void(float32[:, :, ::1], float32[:, ::1], float32[::1], float32[:, ::1], "
            "float32[:, :, ::1])")
_VARIANTS = {"lstm": ((_lstm_layer, _lstm_layer_512), _LSTM_SIG, 4),
             "gru": ((_gru_layer, _gru_layer_512), _GRU_SIG, 3)}
_chosen: dict[tuple[str, int], object] = {}
_STEPS = 32     # timesteps of the timing run: ~0.1 ms a call at hidden 128


def _args(mode, hidden, rng):
    g = _VARIANTS[mode][2] * hidden
    gates = rng.standard_normal((_STEPS, 1, g), dtype=np.float32)
    # laid out as recurrent.prepare lays out the weights (64-byte aligned)
    whhT = aligned(rng.standard_normal((hidden, g), dtype=np.float32) * _F(1.0 / np.sqrt(hidden)), np.float32)
    h = np.zeros((1, hidden), np.float32)
    ys = np.empty((_STEPS, 1, hidden), np.float32)
    if mode == "lstm":
        return gates, whhT, h, np.zeros((1, hidden), np.float32), ys
    return gates, whhT, np.zeros(hidden, np.float32), h, ys


def kernels(mode: str, hidden: int | None) -> dict:
    """``{mode: fn}``, the layer loop for ``mode`` (``"lstm"`` or ``"gru"``; :func:`kernel`), for
    ``run_lockstep``; ``hidden`` None (weights not known at load): LLVM's default vector width."""
    if hidden is None:
        dispatchers, sig, _ = _VARIANTS[mode]
        return {mode: _J.compiled(dispatchers[0], sig)}
    return {mode: kernel(mode, hidden)}


def kernel(mode: str, hidden: int):
    """The compiled layer loop of ``mode`` (``"lstm"`` or ``"gru"``) for ``hidden`` units: LLVM's
    default vector width or 512-bit vectors (:func:`.jit.prefer_512`), whichever ran a
    ``hidden``-unit layer faster here (once per mode and size and process; the wide one must win
    by 3%). Compiled now (or loaded from numba's cache): the matcher calls this at load."""
    key = (mode, hidden)
    if key not in _chosen:
        dispatchers, sig, _ = _VARIANTS[mode]
        fns = [_J.compiled(d, sig) for d in dispatchers]
        _chosen[key] = _J.fastest(fns, _args(mode, hidden, np.random.default_rng(0)))
    return _chosen[key]
