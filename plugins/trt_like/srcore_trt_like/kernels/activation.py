"""In-place activations applied after a conv's store (the conv layer's ``activation`` epilogue) or a
group norm's (its ``activation``): hardswish, hardsigmoid, SiLU, sigmoid, GELU (erf and tanh), leaky
relu, relu6 (``clamp(x, 0, 6)``) and relu (the norm's; a conv fuses relu itself)
with the pointwise wing's float32 formulas (torch's), so a fused conv gives the same bits as the conv
followed by its ``fused_pointwise`` layer. The transcendental ones (SiLU, sigmoid, both GELUs) are
compiled twice, LLVM's default vector width and 512-bit vectors (the same bits), and the faster here
is used (:func:`_fastest`)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from srcore.plugin import clock

from . import fastmath as fm
from .jit import EXACT_JIT
from .simd import prefer_512

# no contraction: the same rounding as the fused pointwise kernels (EXACT_JIT), cached on disk
_JIT = dict(EXACT_JIT, cache=True)

#: the activations a layer can carry (a conv's ``relu`` is its kernels' own flag, not this one)
ACTIVATIONS = ("none", "hardswish", "hardsigmoid", "silu", "sigmoid", "gelu", "gelu_tanh", "leaky_relu", "relu6",
               "relu")

_ZERO, _SIX = np.float32(0.0), np.float32(6.0)


@njit(**_JIT)
def _hardswish(y):
    for i in range(y.size):
        y[i] = fm.hardswish(y[i])


@njit(**_JIT)
def _hardsigmoid(y):
    for i in range(y.size):
        y[i] = fm.hardsigmoid(y[i])


@njit(**_JIT)
def _silu(y):
    for i in range(y.size):
        y[i] = fm.silu(y[i])


@njit(**_JIT)
def _sigmoid(y):
    for i in range(y.size):
        y[i] = fm.sigmoid(y[i])


@njit(**_JIT)
def _gelu(y):
    for i in range(y.size):
        y[i] = fm.gelu(y[i])


@njit(**_JIT)
def _gelu_tanh(y):
    for i in range(y.size):
        y[i] = fm.gelu_tanh(y[i])


@njit(**_JIT)
def _relu6(y):
    for i in range(y.size):
        y[i] = fm.clamp(y[i], _ZERO, _SIX)


@njit(**_JIT)
def _relu(y):
    for i in range(y.size):
        y[i] = _ZERO if y[i] < _ZERO else y[i]   # NaN and -0.0 pass, as torch (pointwise/ops.py)


@njit(**_JIT)
def _leaky_relu(y, slope):
    for i in range(y.size):
        y[i] = fm.leaky_relu(y[i], slope)


#: the code of each activation in :func:`apply_span` (kernels fusing activations into their epilogue)
CODES = {name: i for i, name in enumerate(ACTIVATIONS)}


@njit(inline="always", **_JIT)
def apply_span(y, p0, p1, code, slope):
    """Activation ``code`` (:data:`CODES`; ``slope`` leaky relu's) in place on ``y[p0:p1]`` (1-D),
    one loop per activation (each vectorizes): for a kernel's epilogue, on the span it just
    stored, still in L1. The same formulas, so the same bits, as the in-place kernels above."""
    if code == 1:
        for i in range(p0, p1):
            y[i] = fm.hardswish(y[i])
    elif code == 2:
        for i in range(p0, p1):
            y[i] = fm.hardsigmoid(y[i])
    elif code == 3:
        for i in range(p0, p1):
            y[i] = fm.silu(y[i])
    elif code == 4:
        for i in range(p0, p1):
            y[i] = fm.sigmoid(y[i])
    elif code == 5:
        for i in range(p0, p1):
            y[i] = fm.gelu(y[i])
    elif code == 6:
        for i in range(p0, p1):
            y[i] = fm.gelu_tanh(y[i])
    elif code == 7:
        for i in range(p0, p1):
            y[i] = fm.leaky_relu(y[i], slope)
    elif code == 8:
        for i in range(p0, p1):
            y[i] = fm.clamp(y[i], _ZERO, _SIX)
    elif code == 9:
        for i in range(p0, p1):
            y[i] = _ZERO if y[i] < _ZERO else y[i]


@njit(**_JIT)
def _silu_512(y):
    prefer_512()
    for i in range(y.size):
        y[i] = fm.silu(y[i])


@njit(**_JIT)
def _sigmoid_512(y):
    prefer_512()
    for i in range(y.size):
        y[i] = fm.sigmoid(y[i])


@njit(**_JIT)
def _gelu_512(y):
    prefer_512()
    for i in range(y.size):
        y[i] = fm.gelu(y[i])


@njit(**_JIT)
def _gelu_tanh_512(y):
    prefer_512()
    for i in range(y.size):
        y[i] = fm.gelu_tanh(y[i])


_KERNELS = {"hardswish": _hardswish, "hardsigmoid": _hardsigmoid, "silu": _silu, "sigmoid": _sigmoid,
            "gelu": _gelu, "gelu_tanh": _gelu_tanh, "relu6": _relu6, "relu": _relu}
#: kernels with a 512-bit twin (Sapphire Rapids, 409,600 elements in place: the exact GELU 231 -> 168 us)
WIDE = {_silu: _silu_512, _sigmoid: _sigmoid_512, _gelu: _gelu_512, _gelu_tanh: _gelu_tanh_512}
_TIMING_ELEMENTS = 1 << 14
_chosen: dict = {}


def _fastest(kernel):
    """``kernel`` or its 512-bit twin (:data:`WIDE`), whichever ran faster here on 16k elements on
    the calling thread's own clock (``srcore.plugin.clock``; best of 7 alternating rounds after one
    warm-up round; the twin must win by 3%), once per kernel and process."""
    if kernel not in WIDE:
        return kernel
    if kernel not in _chosen:
        y = np.random.default_rng(0).standard_normal(_TIMING_ELEMENTS, dtype=np.float32)
        pair = (kernel, WIDE[kernel])
        best = [math.inf, math.inf]
        for r in range(8):              # round 0 warms up (compiled code loads), 7 count
            for i, k in enumerate(pair):
                t = clock.per_call_ns(lambda k=k: k(y), 1, "cpu")
                if r:
                    best[i] = min(best[i], t)
        _chosen[kernel] = pair[1] if best[1] * 1.03 < best[0] else kernel
    return _chosen[kernel]


def in_place(name: str, negative_slope: float = 0.01):
    """``fn(y)`` applying activation ``name`` (``negative_slope``: leaky relu's) to the C-contiguous
    float32 array ``y`` in place (``None`` for ``"none"``)."""
    if name == "none":
        return None
    if name == "leaky_relu":
        slope = np.float32(negative_slope)

        def leaky(y: np.ndarray) -> None:
            _leaky_relu(y.reshape(-1), slope)
        return leaky
    kernel = _fastest(_KERNELS[name])

    def apply(y: np.ndarray) -> None:
        kernel(y.reshape(-1))
    return apply
