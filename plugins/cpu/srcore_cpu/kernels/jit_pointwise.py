"""Activations as one compiled pass (numba): silu, gelu (erf and tanh), hardswish, hardsigmoid,
leaky_relu, sigmoid, hardtanh / relu6, out of place and in place.

The numpy kernels (``activation.py``) take 2-28 ufunc passes and temporaries: SiLU is ``expit``
then a multiply (scalar libm ``exp`` per element), exact GELU ~28 passes, leaky_relu a multiply and
a masked copy. Here each is one loop over the elements with vectorizable float32 math (``jit.py``),
so it costs one read and one write of the tensor (262k elements, 1 thread: SiLU 2.9 -> 0.2 ms,
leaky_relu 5.6 -> 0.04 ms, GELU 0.9 -> 0.6 ms; docs/performance-log.md).

The matcher (``pointwise_match.py``, which does not import numba) takes float32 nodes of at least
``MIN_ELEMENTS`` elements (or of unknown size) and compiles the kernel then (at load; numba's
on-disk cache makes later loads cheap). Smaller nodes, other dtypes and non-contiguous arrays keep
the numpy kernels: for a few thousand elements a ufunc pass costs about what the compiled call
does, and a model made only of small nodes never imports numba (the cold start of ``mlp_tiny`` and
friends stays numpy + scipy).

Formulas follow torch's float32 CPU kernels (``x / (1 + exp(-x))`` for SiLU, ``x * min(max(x + 3,
0), 6) / 6`` for hardswish, ...), NaN propagating through every clamp.
"""
from __future__ import annotations

import math
import threading

import numba
import numpy as np

from . import activation as _A
from . import jit as _J
from . import parallel as _par
from .aliasing import same_start
from .jit import JIT, prefer_512

_F = np.float32
#: elements per part when a kernel is split over SRCORE_CPU_THREADS threads (opt-in, untimed)
PART_MIN = 1 << 17
#: the smallest static-shape node offered a split timed at load (``pointwise_match.split_pays``):
#: bert_encoder's (1, 128, 1024) GELU (2^17 elements, ~65 us) sat on one thread at 2 threads under
#: the untimed 2 * PART_MIN; the timing keeps one thread where the hand-over does not pay
SPLIT_MIN = 1 << 16
_SIG = "void(float32[::1], float32[::1], float32, float32)"
_SQRT_2_OVER_PI = _F(math.sqrt(2.0 / math.pi))
#: elements per block of a call that writes over its input (:func:`_over_input`)
BLOCK = 8192
_scratch = threading.local()


@numba.njit(inline="always", **JIT)
def _silu_body(x, o):
    for i in range(x.size):
        v = x[i]
        o[i] = v / (_F(1.0) + _J.exp(-v))


@numba.njit(**JIT)
def _silu(x, o, a, b):
    _silu_body(x, o)


@numba.njit(inline="always", **JIT)
def _sigmoid_body(x, o):
    for i in range(x.size):
        o[i] = _J.sigmoid(x[i])


@numba.njit(**JIT)
def _sigmoid(x, o, a, b):
    _sigmoid_body(x, o)


@numba.njit(inline="always", **JIT)
def _gelu_erf_body(x, o):
    """``o = x * Phi(x)`` over four quarters of the array at once: each element's Phi is a chain of
    ~40 dependent operations, and four independent chains per iteration keep both vector ports
    busy where one left them waiting on latency (1.2x on Sapphire Rapids)."""
    n = x.size
    q = n // 4
    for i in range(q):
        v0 = x[i]
        v1 = x[i + q]
        v2 = x[i + 2 * q]
        v3 = x[i + 3 * q]
        o[i] = v0 * _J.phi(v0)
        o[i + q] = v1 * _J.phi(v1)
        o[i + 2 * q] = v2 * _J.phi(v2)
        o[i + 3 * q] = v3 * _J.phi(v3)
    for i in range(4 * q, n):
        v = x[i]
        o[i] = v * _J.phi(v)


@numba.njit(**JIT)
def _gelu_erf(x, o, a, b):
    _gelu_erf_body(x, o)


@numba.njit(**JIT)
def _gelu_erf_512(x, o, a, b):
    prefer_512()
    _gelu_erf_body(x, o)


@numba.njit(inline="always", **JIT)
def _gelu_tanh_body(x, o):
    for i in range(x.size):
        v = x[i]
        inner = _SQRT_2_OVER_PI * (v + _F(0.044715) * v * v * v)
        o[i] = _F(0.5) * v * (_F(1.0) + _J.tanh(inner))


@numba.njit(**JIT)
def _gelu_tanh(x, o, a, b):
    _gelu_tanh_body(x, o)


@numba.njit(**JIT)
def _hardsigmoid(x, o, a, b):
    for i in range(x.size):
        t = x[i] + _F(3.0)
        t = _F(0.0) if t < _F(0.0) else t
        t = _F(6.0) if t > _F(6.0) else t
        o[i] = t / _F(6.0)


@numba.njit(**JIT)
def _hardswish(x, o, a, b):
    for i in range(x.size):
        v = x[i]
        t = v + _F(3.0)
        t = _F(0.0) if t < _F(0.0) else t
        t = _F(6.0) if t > _F(6.0) else t
        o[i] = v * t / _F(6.0)


@numba.njit(**JIT)
def _leaky_relu(x, o, a, b):
    for i in range(x.size):
        v = x[i]
        o[i] = v if v > _F(0.0) else v * a


@numba.njit(**JIT)
def _hardtanh(x, o, a, b):
    for i in range(x.size):
        v = x[i]
        v = a if v < a else v
        o[i] = b if v > b else v


#: op (or gelu's approximation) -> (compiled kernel, numpy kernel)
KERNELS = {
    "aten::silu": (_silu, _A.silu),
    "aten::sigmoid": (_sigmoid, _A.sigmoid),
    "aten::hardsigmoid": (_hardsigmoid, _A.hardsigmoid),
    "aten::hardswish": (_hardswish, _A.hardswish),
    "aten::leaky_relu": (_leaky_relu, _A.leaky_relu),
    "aten::hardtanh": (_hardtanh, _A.hardtanh),
    "aten::relu6": (_hardtanh, _A.relu6),
    "gelu:none": (_gelu_erf, _A.gelu),
    "gelu:tanh": (_gelu_tanh, _A.gelu),
}


@numba.njit(**JIT)
def _silu_512(x, o, a, b):
    prefer_512()
    _silu_body(x, o)


@numba.njit(**JIT)
def _sigmoid_512(x, o, a, b):
    prefer_512()
    _sigmoid_body(x, o)


@numba.njit(**JIT)
def _gelu_tanh_512(x, o, a, b):
    prefer_512()
    _gelu_tanh_body(x, o)


#: kernels also compiled with 512-bit vectors (jit.prefer_512): the faster one here is used
#: (409,600 elements, Sapphire Rapids: exact GELU 1.5x, tanh GELU 420 -> 290 us, SiLU 281 -> 219)
WIDE = {_gelu_erf: _gelu_erf_512, _gelu_tanh: _gelu_tanh_512, _silu: _silu_512, _sigmoid: _sigmoid_512}
_TIMING_ELEMENTS = 1 << 14
_wide_chosen: dict = {}


def _compiled(kernel):
    """``kernel`` compiled now; for one in :data:`WIDE`, that or its 512-bit twin, whichever ran
    faster here on 16k elements (once per kernel and process; the same bits either way)."""
    k = _J.compiled(kernel, _SIG)
    if kernel not in WIDE:
        return k
    if kernel not in _wide_chosen:
        x = np.random.default_rng(0).standard_normal(_TIMING_ELEMENTS, dtype=np.float32)
        _wide_chosen[kernel] = _J.fastest([k, _J.compiled(WIDE[kernel], _SIG)],
                                          (x, np.empty_like(x), _F(0), _F(0)))
    return _wide_chosen[kernel]


def make_pointwise(kernel, a: float, b: float, fallback, threads: int = 1, min_split: int = 2 * PART_MIN):
    """``fn(x, out=None)``: ``kernel`` over contiguous float32 arrays (compiled now), ``fallback``
    (a numpy kernel taking ``out=``) for anything else. ``out`` may be ``x`` itself. At ``threads``
    > 1 an array of at least ``min_split`` elements is split over them."""
    k = _compiled(kernel)
    fa, fb = _F(a), _F(b)

    def run(x, out=None):
        if out is None:
            if x.dtype != np.float32 or not x.flags.c_contiguous:
                return fallback(x)
            out = np.empty(x.shape, np.float32)
        elif (x.dtype != np.float32 or out.dtype != np.float32 or not x.flags.c_contiguous
              or not out.flags.c_contiguous or out.shape != x.shape):
            if np.shares_memory(x, out):   # the numpy kernels read x after writing out
                np.copyto(out, fallback(x), casting="same_kind")
                return out
            return fallback(x, out=out)
        xf, of = x.reshape(-1), out.reshape(-1)
        part = _over_input if same_start(xf, of) else k
        n = xf.size
        if threads > 1 and n >= min_split:
            chunks = _par.split(n, threads)
            _par.run_parts(lambda i: part(xf[chunks[i][0]:chunks[i][1]], of[chunks[i][0]:chunks[i][1]], fa, fb),
                           threads, threads)
        else:
            part(xf, of, fa, fb)
        return out

    def _over_input(xf, of, fa, fb):
        """``k`` writing over its own input, a block at a time through per-thread scratch: LLVM
        vectorizes these loops only for an output that does not overlap the input (its run-time
        overlap check sends an in-place call to the scalar loop: GELU 5-7x slower)."""
        buf = getattr(_scratch, "buf", None)
        if buf is None:
            buf = _scratch.buf = np.empty(BLOCK, np.float32)
        n = xf.size
        for s in range(0, n, BLOCK):
            e = min(n, s + BLOCK)
            t = buf[:e - s]
            k(xf[s:e], t, fa, fb)
            of[s:e] = t
    return run
