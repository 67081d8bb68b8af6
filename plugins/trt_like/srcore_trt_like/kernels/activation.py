"""In-place activations applied after a conv's store (the conv layer's ``activation`` epilogue):
hardswish, hardsigmoid, SiLU and sigmoid with the pointwise wing's float32 formulas (torch's), so a fused
conv gives the same bits as the conv followed by its ``fused_pointwise`` layer."""
from __future__ import annotations

import numpy as np
from numba import njit

from . import fastmath as fm
from .jit import EXACT_JIT

# no contraction: the same rounding as the fused pointwise kernels (EXACT_JIT), cached on disk
_JIT = dict(EXACT_JIT, cache=True)

#: the activations a conv layer can carry (besides ``relu``, which its kernels fuse themselves)
ACTIVATIONS = ("none", "hardswish", "hardsigmoid", "silu", "sigmoid")


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


_KERNELS = {"hardswish": _hardswish, "hardsigmoid": _hardsigmoid, "silu": _silu, "sigmoid": _sigmoid}


def in_place(name: str):
    """``fn(y)`` applying activation ``name`` to the C-contiguous float32 array ``y`` in place
    (``None`` for ``"none"``)."""
    if name == "none":
        return None
    kernel = _KERNELS[name]

    def apply(y: np.ndarray) -> None:
        kernel(y.reshape(-1))
    return apply
