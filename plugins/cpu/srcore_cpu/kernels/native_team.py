"""The cpu plugin's side of the native team (``srcore.plugin.native_team``: split float32 products whose
parts call numpy's OpenBLAS from compiled code without the GIL): the switch
``SRCORE_CPU_NATIVE_SPLIT=0`` (``families_ab``'s ``+nonative``) and the activations a part applies to
its block after the bias, as compiled epilogues (``numba.cfunc``: the compiled activations' own loops
and options, :mod:`.jit_pointwise`, so the same bits as the unsplit kernels'). The team itself
(:class:`Team`, :class:`Gemm`, :func:`batched_parts`, :func:`sgemm_address`) is the core's."""
from __future__ import annotations

import os

import numpy as np
from numba import carray, cfunc, njit

from srcore.plugin import native_team as _core

from . import jit as _J
from . import jit_pointwise as _JP

Gemm, Team, batched_parts, sgemm_address = _core.Gemm, _core.Team, _core.batched_parts, _core.sgemm_address
NO_TRANS, TRANS, spin_iters = _core.NO_TRANS, _core.TRANS, _core.spin_iters
_ENV = "SRCORE_CPU_NATIVE_SPLIT"
_Z = np.float32(0.0)
_f32_ptr = _core.f32_ptr
#: the activations a part may apply (their keys, as :func:`.linear_split._epilogue_key` names them);
#: None: no activation
EPILOGUES = (None, "relu", "gelu:none", "gelu:tanh", "tanh", "aten::silu")


@njit(**_J.JIT)
def _activate(x, epi):
    """Epilogue ``epi`` in place on the contiguous ``x``: the compiled activations' own loops and
    options (:mod:`.jit_pointwise`: GELU's four independent chains; the same bits)."""
    if epi == 1:
        for j in range(x.size):
            v = x[j]
            x[j] = v if v > _Z else _Z
    elif epi == 2:
        _JP._gelu_erf_body(x, x)
    elif epi == 3:
        _JP._gelu_tanh_body(x, x)
    elif epi == 4:
        for j in range(x.size):
            x[j] = _J.tanh(x[j])
    elif epi == 5:
        _JP._silu_body(x, x)


@njit(**_J.JIT)
def _block(c, m, n, ldc, epi):
    if ldc == n:   # (a block of whole rows: one pass over it)
        _activate(carray(_f32_ptr(c), (m * n,)), epi)
    else:
        for r in range(m):
            _activate(carray(_f32_ptr(c + 4 * r * ldc), (n,)), epi)


@cfunc(_core.EPILOGUE_SIG, cache=True)
def _relu(c, m, n, ldc):
    _block(c, m, n, ldc, 1)


@cfunc(_core.EPILOGUE_SIG, cache=True)
def _gelu_erf(c, m, n, ldc):
    _block(c, m, n, ldc, 2)


@cfunc(_core.EPILOGUE_SIG, cache=True)
def _gelu_tanh(c, m, n, ldc):
    _block(c, m, n, ldc, 3)


@cfunc(_core.EPILOGUE_SIG, cache=True)
def _tanh(c, m, n, ldc):
    _block(c, m, n, ldc, 4)


@cfunc(_core.EPILOGUE_SIG, cache=True)
def _silu(c, m, n, ldc):
    _block(c, m, n, ldc, 5)


_ADDRESSES = {None: 0, "relu": _relu, "gelu:none": _gelu_erf, "gelu:tanh": _gelu_tanh, "tanh": _tanh,
              "aten::silu": _silu}


def epilogue(key) -> int | None:
    """The address of the compiled epilogue of activation ``key`` (:data:`EPILOGUES`; 0 for None), or
    None for an activation it does not compile."""
    f = _ADDRESSES.get(key, -1)
    return None if f == -1 else (0 if f == 0 else f.address)


def enabled() -> bool:
    """``SRCORE_CPU_NATIVE_SPLIT`` is not ``0``."""
    return os.environ.get(_ENV, "1") != "0"


def team(size: int):
    """The process's native team of ``size`` threads (the core's), or None: one thread, turned off, or
    no ILP64 OpenBLAS of numpy's to call."""
    return _core.team(size) if enabled() else None
