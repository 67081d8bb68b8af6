"""softmax / log_softmax (``.int`` with optional dtype, and ``aten::_softmax``), numerically stable."""
from __future__ import annotations

import numpy as np

from srcore.plugin import SCALAR_TYPE_CODES
from srcore.plugin import NodeInfo, Specialized

from .aliasing import disjoint_or_same


def _softmax_into(x, dim, out):
    # ufunc.reduce, not np.max / np.sum: their Python wrappers cost as much as a small row's work
    if x.size == 0:
        return out
    if x.ndim == 0:
        out[...] = 1.0
        return out
    m = np.maximum.reduce(x, axis=dim, keepdims=True)
    np.subtract(x, m, out=out)
    np.exp(out, out=out)
    np.divide(out, np.add.reduce(out, axis=dim, keepdims=True), out=out)
    return out


def _log_softmax_into(x, dim, out):
    if x.size == 0:
        return out
    if x.ndim == 0:
        out[...] = 0.0
        return out
    m = np.maximum.reduce(x, axis=dim, keepdims=True)
    np.subtract(x, m, out=out)
    lse = np.log(np.add.reduce(np.exp(out), axis=dim, keepdims=True))
    np.subtract(out, lse, out=out)
    return out


def _prep(x, dtype, out):
    if dtype is not None:
        x = x.astype(SCALAR_TYPE_CODES[dtype], copy=False)
    if out is None:
        out = np.empty(x.shape, x.dtype)
    return x, out


def softmax(self, dim, dtype=None, out=None):
    """``aten::softmax.int``; ``dtype`` (a ScalarType code) casts the input first."""
    x, out = _prep(self, dtype, out)
    return _softmax_into(x, dim, out)


def log_softmax(self, dim, dtype=None, out=None):
    """``aten::log_softmax.int``."""
    x, out = _prep(self, dtype, out)
    return _log_softmax_into(x, dim, out)


def _softmax(self, dim, half_to_float, out=None):
    """``aten::_softmax`` (half_to_float only matters for float16 inputs)."""
    x, out = _prep(self, 6 if half_to_float and self.dtype == np.float16 else None, out)
    return _softmax_into(x, dim, out)


def _log_softmax(self, dim, half_to_float, out=None):
    """``aten::_log_softmax``."""
    x, out = _prep(self, 6 if half_to_float and self.dtype == np.float16 else None, out)
    return _log_softmax_into(x, dim, out)


def _generic(node: NodeInfo):
    return {"aten::softmax": softmax, "aten::_softmax": _softmax, "aten::log_softmax": log_softmax,
            "aten::_log_softmax": _log_softmax}[node.op.split(".")[0]]


def _timed_split(node: NodeInfo, into, dim, one):
    """``one``, or at more than one intra-op thread for a large float32 node of static shape, the
    same kernel split over blocks of positions off ``dim`` when that times faster now
    (``row_split.py``; the same bits)."""
    from . import row_split as RS

    t = node.output_types[0] if node.output_types else None
    src = node.args[0].type if node.args else None
    threads = RS.split_threads_for(t)
    if threads <= 1 or RS.static_shape(src) != RS.static_shape(t) or getattr(src, "dtype", None) != "float32":
        return one
    shape = RS.static_shape(t)
    split = RS.split_softmax(into, shape, int(dim), threads)
    if split is None:
        return one
    x, y = RS.sample(shape), np.empty(shape, np.float32)
    return split if RS.split_pays(one, split, (x, y)) else one


#: softmax nodes of at least this many float32 elements get the compiled kernel (``jit_softmax.py``);
#: below, the numpy kernel, or the compiled one where numba is loaded anyway and it times faster at
#: the first call (``late_compiled.py``; a small model's cold start stays numpy)
MIN_COMPILED = 1 << 12


def _compiled_into(node: NodeInfo, dim: int, log: bool = False, least: int = MIN_COMPILED):
    """``into(x, dim, out)`` running the compiled last-dim softmax (:class:`.jit_softmax.Softmax`,
    or :class:`.jit_softmax.LogSoftmax` when ``log``; compiled now) for a float32 node softmaxed over
    its last dim with at least ``least`` elements (or of unknown shape); None for any other node.
    Arrays the kernel does not take (another dtype, non-contiguous, ``out`` overlapping ``x``
    elsewhere, a dim that is not the last of more than one element) go to the numpy kernel."""
    import math

    from . import row_split as RS

    t = node.output_types[0] if node.output_types else None
    src = node.args[0].type if node.args else None
    if getattr(t, "dtype", None) != "float32" or getattr(src, "dtype", None) != "float32":
        return None
    shape = RS.static_shape(t)
    nd = len(shape) if shape is not None else getattr(t, "rank", None)
    if nd is None or nd == 0 or dim not in (-1, nd - 1):
        return None
    if shape is not None and math.prod(shape) < least:
        return None
    from .jit_softmax import LogSoftmax, Softmax

    run = LogSoftmax() if log else Softmax()
    numpy_into = _log_softmax_into if log else _softmax_into

    def softmax_jit(x, d, out):
        # the split calls this on (rows, D, 1) blocks with d = 1: the trailing 1s are no dim of work
        if (x.dtype == np.float32 and out.dtype == np.float32 and x.ndim > 0 and x.size > 0
                and out.shape == x.shape and math.prod(x.shape[d % x.ndim + 1:]) == 1
                and x.flags.c_contiguous and out.flags.c_contiguous
                and disjoint_or_same(x, out)):
            D = x.shape[d]
            run(x.reshape(-1, D), out.reshape(-1, D))
            return out
        return numpy_into(x, d, out)
    return softmax_jit


def _bound(kernel, dim):
    def softmax_dim(self, out=None):
        if out is None:
            out = np.empty(self.shape, self.dtype)
        return kernel(self, dim, out)
    return softmax_dim


def _late(node: NodeInfo, into, dim, log: bool):
    """For a small float32 node of static shape softmaxed over its last dim: the numpy kernel or the
    compiled one, whichever is faster at the first call (``late_compiled.py``); else None."""
    from . import row_split as RS

    t = node.output_types[0] if node.output_types else None
    shape = RS.static_shape(t)
    if shape is None or not shape or getattr(t, "dtype", None) != "float32" or dim not in (-1, len(shape) - 1):
        return None
    from .late_compiled import late

    def build():
        jit = _compiled_into(node, int(dim), log, least=0)
        return None if jit is None else _bound(jit, dim)
    return late(_bound(into, dim), build, lambda: (RS.sample(shape), np.empty(shape, np.float32)), what=node.op)


def _matcher(into):
    """A constant dim (no dtype cast): bind it; else the generic kernel (a None would make dispatch skip it)."""
    log = into is _log_softmax_into

    def matcher(node: NodeInfo):
        if not node.is_const("dim"):
            return _generic(node)
        names = [a.name for a in node.args]
        if "dtype" in names and node.const("dtype", 0) is not None:
            return _generic(node)
        if "half_to_float" in names and node.const("half_to_float", True):
            return _generic(node)
        dim = node.const("dim")

        jit = _compiled_into(node, int(dim), log)
        if jit is None:
            small = _late(node, into, int(dim), log)
            if small is not None:
                return Specialized(small, args=(0,))
        kernel = jit or into
        return Specialized(_timed_split(node, kernel, dim, _bound(kernel, dim)), args=(0,))
    return matcher


softmax_matcher = _matcher(_softmax_into)
log_softmax_matcher = _matcher(_log_softmax_into)
