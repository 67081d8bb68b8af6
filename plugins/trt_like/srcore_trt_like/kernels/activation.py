"""In-place activations applied after a conv's store (the conv layer's ``activation`` epilogue):
hardswish, hardsigmoid, SiLU, sigmoid, GELU (erf and tanh) and leaky relu with the pointwise wing's float32 formulas (torch's), so a fused
conv gives the same bits as the conv followed by its ``fused_pointwise`` layer."""
from __future__ import annotations

import numpy as np
from numba import njit

from . import fastmath as fm
from .jit import EXACT_JIT

# no contraction: the same rounding as the fused pointwise kernels (EXACT_JIT), cached on disk
_JIT = dict(EXACT_JIT, cache=True)

#: the activations a conv layer can carry (besides ``relu``, which its kernels fuse themselves)
ACTIVATIONS = ("none", "hardswish", "hardsigmoid", "silu", "sigmoid", "gelu", "gelu_tanh", "leaky_relu")


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
def _leaky_relu(y, slope):
    for i in range(y.size):
        y[i] = fm.leaky_relu(y[i], slope)


_KERNELS = {"hardswish": _hardswish, "hardsigmoid": _hardsigmoid, "silu": _silu, "sigmoid": _sigmoid,
            "gelu": _gelu, "gelu_tanh": _gelu_tanh}


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
    kernel = _KERNELS[name]

    def apply(y: np.ndarray) -> None:
        kernel(y.reshape(-1))
    return apply
