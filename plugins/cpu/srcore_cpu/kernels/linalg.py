"""Matrix products: linear, addmm, matmul, mm, bmm, baddbmm, dot, einsum.

Measured (1 thread, float32): for ``(1,64) x (64,64)`` ``np.dot`` with a
pre-transposed C-contiguous weight is the fastest (0.57 us vs 1.12 us for
``np.matmul`` with a transposed view); for ``(64,1024) x (1024,4096)`` a
pre-transposed copy is ~10% faster than a transposed view. So the linear
matcher transposes constant weights once at load and calls ``np.dot`` on 2-D
operands (``np.dot`` == ``np.matmul`` when the right operand is 2-D).
"""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import NodeInfo, Specialized


def _arr(r, dtype):
    # numpy returns scalars for 0-d results; torch returns 0-d tensors
    return r if isinstance(r, np.ndarray) else np.asarray(r, dtype=dtype)


def _gemm(x, wT, out, dot=np.dot):
    """``x @ wT`` for a 2-D C-contiguous ``wT``, flattening leading dims of ``x``; ``dot`` is
    ``np.dot`` or a kernel's MKL GEMM (:mod:`.mkl_gemm`, same calling convention)."""
    k, n = wT.shape
    if x.ndim == 2:
        if out is None:
            return dot(x, wT)
        try:
            return dot(x, wT, out=out)
        except ValueError:  # np.dot wants a C-contiguous out of the exact dtype
            return np.matmul(x, wT, out=out)
    if x.ndim == 1:
        return np.matmul(x, wT, out=out)
    lead = x.shape[:-1]
    x2 = x.reshape(-1, k)
    if out is None:
        return dot(x2, wT).reshape(*lead, n)
    if out.flags.c_contiguous:
        dot(x2, wT, out=out.reshape(-1, n))
        return out
    return np.matmul(x, wT, out=out)


def linear(input, weight, bias=None, out=None):
    """``aten::linear``: ``input @ weight.T + bias``."""
    out = np.matmul(input, weight.T, out=out)
    if bias is not None:
        np.add(out, bias, out=out)
    return out


_TILE = 64  # transposing in 64x64 tiles keeps source and destination in cache: 3x faster at 4096x4096


def transposed(w: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of the 2-D ``w.T`` (tiled for large matrices: load time of big linears)."""
    n, m = w.shape
    if n * m < 1 << 20:
        return np.ascontiguousarray(w.T)
    out = np.empty((m, n), w.dtype)
    for i in range(0, n, _TILE):
        for j in range(0, m, _TILE):
            out[j:j + _TILE, i:i + _TILE] = w[i:i + _TILE, j:j + _TILE].T
    return out


def _linear_fast(node: NodeInfo, act_=None):
    """Constant weight (and bias): transpose the weight once, call ``np.dot``; else None.

    ``act_`` is applied to the result in place: :func:`relu_`, a unary numpy ufunc (called as
    ``act_(out, out=out)``) or any function ``act_(out) -> out``. For a 2-D input (known from the
    node's type) the kernel is one flat function: ``np.dot``, the bias ``np.add`` and the
    activation in one Python frame, since at batch 1 each extra call level costs about as much
    as a numpy call.
    """
    if not node.is_const("weight") or not node.is_const("bias"):
        return None
    w = node.const("weight")
    b = node.const("bias")
    if not isinstance(w, np.ndarray) or w.ndim != 2:
        return None
    b = None if b is None else np.asarray(b)
    shape = getattr(node.arg("input").type, "shape", None)
    # MKL packs its own copy of the weight: the kernel's fallback np.dot reads a view of torch's
    # (the same object: the MKL GEMM checks that it is given the weight it packed)
    wT = w.T
    dot = _mkl_gemm(shape, wT)
    if dot is None:
        wT, dot = transposed(w), _on_caller(np.dot, shape, *w.shape[::-1])
    act_given = act_
    if shape is not None and len(shape) == 2:
        return Specialized(_split_timed(_flat_linear_2d(wT, b, act_, dot), w, b, act_given, shape), args=(0,))
    if isinstance(act_, np.ufunc):
        ufunc = act_

        def act_(out):
            return ufunc(out, out=out)

    def linear_const(input, out=None):
        out = _gemm(input, wT, out, dot)
        if b is not None:
            np.add(out, b, out=out)
        return out if act_ is None else act_(out)
    return Specialized(_split_timed(linear_const, w, b, act_given, shape), args=(0,))


def _split_timed(one, w, b, act_, shape):
    """``one``, or at more than one intra-op thread its row-block split with the bias add and
    activation in each part where that times faster now (:mod:`.linear_split`)."""
    if shape is None:
        return one
    from .linear_split import timed

    return timed(one, w, b, act_, tuple(shape))


#: OpenBLAS runs a product of fewer multiply-adds than this on the calling thread by itself (its
#: ``SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD``): no hold needed below it
_BLAS_THREADED_MIN = 1 << 18


def _on_caller(fn, shape, k: int, n: int):
    """``fn`` (a numpy product) held on the calling thread's one BLAS thread where the cpu plugin
    keeps numpy's BLAS off its own workers (``parallel.blas_on_caller``: more than one intra-op
    thread) and the product may be large enough to thread (``shape``: the left operand's, None or
    symbolic: may), else ``fn``."""
    from . import parallel as _par

    if not _par.blas_on_caller():
        return fn
    rows = int(np.prod(shape[:-1])) if shape is not None and all(isinstance(d, int) for d in shape[:-1]) else None
    if rows is not None and rows * k * n < _BLAS_THREADED_MIN:
        return fn
    return _par.on_caller(fn)


def relu_(out):
    """ReLU in place on ``out``."""
    return np.maximum(out, 0, out=out)


def _mkl_gemm(shape, wT):
    """MKL's GEMM (:mod:`.mkl_gemm`) of a constant-weight linear (``wT``: (in, out)) whose input
    has ``shape`` (None, or dims that may be symbolic) where it timed faster at this shape, else
    None."""
    if shape is None or len(shape) < 2 or not all(isinstance(d, int) for d in shape[:-1]):
        return None
    from .mkl_gemm import gemm_for

    return gemm_for(int(np.prod(shape[:-1])), wT)


def _flat_linear_2d(wT, b, act_, dot=np.dot):
    """``act_(x @ wT + b)`` for a 2-D ``x`` as one generated function (see :func:`_linear_fast`)."""
    lines = ["def linear_2d(input, out=None):",
             "    try:",
             "        out = dot(input, wT, out=out)",
             "    except ValueError:  # np.dot wants a C-contiguous out of the exact result dtype",
             "        out = matmul(input, wT, out=out)"]
    if b is not None:
        lines.append("    add(out, b, out=out)")
    if act_ is relu_:
        lines.append("    maximum(out, zero, out=out)")  # a numpy scalar zero: no conversion per call
    elif isinstance(act_, np.ufunc):
        lines.append("    act(out, out=out)")
    elif act_ is not None:
        lines.append("    out = act(out)")
    lines.append("    return out")
    env = {"dot": dot, "matmul": np.matmul, "add": np.add, "maximum": np.maximum,
           "zero": wT.dtype.type(0), "wT": wT, "b": b, "act": act_}
    exec(compile("\n".join(lines) + "\n", f"<srcore_cpu linear {wT.shape}>", "exec"), env)
    return env["linear_2d"]


def _scaled_add(self, prod, beta, alpha, out):
    """``beta * self + alpha * prod`` written into ``out`` (== prod's buffer allowed)."""
    if alpha != 1:
        np.multiply(prod, alpha, out=out)
    elif out is not prod:
        np.copyto(out, prod)
    if beta == 0:  # torch ignores self (NaN/inf included) when beta == 0
        return out
    if beta == 1:
        np.add(out, self, out=out)
    else:
        np.add(out, np.multiply(self, beta, dtype=out.dtype), out=out)
    return out


def addmm(self, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``aten::addmm``: ``beta * self + alpha * (mat1 @ mat2)``. With ``alpha == 0`` torch's GEMM never
    reads the product (a NaN in ``mat1`` does not reach the result), unlike ``baddbmm``'s."""
    prod = np.matmul(mat1, mat2, out=out)
    if alpha == 0:
        prod[...] = 0
        return _scaled_add(self, prod, beta, 1, prod)
    return _scaled_add(self, prod, beta, alpha, prod)


def baddbmm(self, batch1, batch2, *, beta=1, alpha=1, out=None):
    """``aten::baddbmm``: ``beta * self + alpha * bmm(batch1, batch2)``."""
    prod = np.matmul(batch1, batch2, out=out)
    return _scaled_add(self, prod, beta, alpha, prod)


def _addmm_fast(node: NodeInfo):
    """beta == alpha == 1: a matmul and an add, no scaling."""
    if node.const("beta", None) != 1 or node.const("alpha", None) != 1:
        return None

    def addmm_11(self, mat1, mat2, out=None):
        out = np.matmul(mat1, mat2, out=out)
        np.add(out, self, out=out)
        return out
    return Specialized(addmm_11, args=(0, 1, 2))


def linear_matcher(node: NodeInfo):
    """The constant-weight fast path, else the generic :func:`linear`."""
    # never None: a declining matcher makes dispatch skip this kernel, so use the generic impl
    return _linear_fast(node) or linear


def addmm_matcher(node: NodeInfo):
    """The beta == alpha == 1 fast path, else the generic :func:`addmm`."""
    return _addmm_fast(node) or addmm


def matmul(self, other, out=None):
    """``aten::matmul`` (numpy's matmul has torch's broadcasting and 1-D rules)."""
    return _arr(np.matmul(self, other, out=out), np.result_type(self, other))


def mm(self, mat2, out=None):
    """``aten::mm``."""
    return np.matmul(self, mat2, out=out)


def bmm(self, mat2, out=None):
    """``aten::bmm``."""
    return np.matmul(self, mat2, out=out)


def _split_matcher(generic, other: str):
    """A matcher for the product of ``self`` and ``other`` (constant or not): the part-pool split of
    :mod:`.split_gemm` where it timed no slower (more than one BLAS thread, static float shapes),
    else ``generic``."""
    def matcher(node: NodeInfo):
        a, b = node.arg("self").type, node.arg(other).type
        dtype = getattr(a, "dtype", None)
        if dtype != getattr(b, "dtype", None):
            return generic
        from .split_gemm import split_for

        a_shape, b_shape = getattr(a, "shape", None), getattr(b, "shape", None)
        fn = split_for(a_shape, b_shape, dtype)
        if fn is not None:
            return Specialized(fn, args=(0, 1))
        if dtype not in ("float32", "float64"):   # (integer products never reach BLAS)
            return generic
        static = a_shape is not None and b_shape is not None and all(
            isinstance(d, int) for d in (*a_shape, *b_shape)) and len(a_shape) >= 1 and len(b_shape) >= 2
        macs = int(np.prod(a_shape, dtype=np.int64)) * b_shape[-1] if static else None
        if macs is not None and macs < _BLAS_THREADED_MIN:
            return generic
        return _on_caller(generic, None, 1, 1)
    return matcher


matmul_matcher = _split_matcher(matmul, "other")
mm_matcher = _split_matcher(mm, "mat2")
bmm_matcher = _split_matcher(bmm, "mat2")


def dot(self, tensor, out=None):
    """``aten::dot`` of two 1-D tensors: a 0-d tensor."""
    if out is None:
        return np.asarray(np.dot(self, tensor), dtype=np.result_type(self, tensor))
    out[()] = np.dot(self, tensor)
    return out


def outer(self, vec2, out=None):
    """``aten::outer`` (``ger``) of two 1-D tensors (RoPE's ``positions x inv_freq``)."""
    r = np.multiply.outer(self, vec2)
    if out is None:
        return r
    np.copyto(out, r)
    return out


def cosine_similarity(x1, x2, dim=1, eps=1e-8, out=None):
    """``aten::cosine_similarity`` as ATen computes it: each input divided by its 2-norm along
    ``dim`` clamped to ``eps``, then the product summed over ``dim`` (inputs broadcast)."""
    a, b = np.broadcast_arrays(x1, x2)
    d = dim % max(a.ndim, 1)
    na = np.maximum(np.sqrt(np.sum(np.square(a), axis=d, keepdims=True)), eps)
    nb = np.maximum(np.sqrt(np.sum(np.square(b), axis=d, keepdims=True)), eps)
    return np.sum((a / na) * (b / nb), axis=d, out=out)


def linalg_norm(self, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """``aten::linalg_norm`` (and ``.ord_str``): a vector norm over one dim (or all, flattened, when
    ``ord`` and ``dim`` are None), a matrix norm over two (``fro``, ``nuc``, +-1, +-2, +-inf);
    numpy's ``linalg.norm`` has torch's semantics."""
    if dtype is not None:
        from .promotion import dtype_of_code

        self = self.astype(dtype_of_code(dtype))
    axis = None if dim is None else (tuple(dim) if len(dim) > 1 else dim[0])
    if axis is None and ord is None:
        r = np.linalg.norm(self.reshape(-1))
        r = np.reshape(r, (1,) * self.ndim if keepdim else ())
    elif axis is None and self.ndim > 2:
        raise KernelError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                          f"Got {self.ndim}D.")
    else:
        r = np.linalg.norm(self, ord=ord, axis=axis, keepdims=keepdim)
    r = np.asarray(r, dtype=self.dtype)
    if out is None:
        return r
    np.copyto(out, r)
    return out


def cdist(x1, x2, p=2.0, compute_mode=None, out=None):
    """``aten::cdist``: the p-norm distance between every row of ``x1`` and of ``x2`` (batched)."""
    if p < 0:
        raise KernelError(f"cdist only supports non-negative p values, got {p}")
    d = np.subtract(x1[..., :, None, :], x2[..., None, :, :])
    # p = 1 and 2 (the common ones) in place through ufuncs: np.einsum / np.sum's wrappers and the
    # separate abs pass were half of a small cdist's ~10 us
    if p == 2:
        np.multiply(d, d, out=d)
        r = np.add.reduce(d, axis=-1)
        np.sqrt(r, out=r)
    elif p == 1:
        np.abs(d, out=d)
        r = np.add.reduce(d, axis=-1)
    else:
        d = np.abs(d, out=d)
        if p == 0:   # the count of differing features; NaN where a difference is NaN, as torch
            r = np.count_nonzero(d, axis=-1).astype(x1.dtype)
            r[np.isnan(d).any(axis=-1)] = np.nan
        elif np.isinf(p):   # torch's running max from 0 with std::max drops a NaN difference
            r = np.fmax.reduce(d, axis=-1, initial=0)
        else:
            r = np.sum(d ** p, axis=-1) ** (1.0 / p)
    r = np.asarray(r, dtype=np.result_type(x1, x2))
    if out is None:
        return r
    np.copyto(out, r)
    return out


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False, out=None):
    """``aten::pairwise_distance``: ``norm(x1 - x2 + eps, p, dim=-1)`` (torch adds eps to the difference)."""
    diff = np.abs(np.subtract(x1, x2) + np.asarray(eps, np.result_type(x1, x2)))
    if diff.ndim == 0:
        diff = diff.reshape(1)
        keepdim = False
    if p == 0:
        r = np.count_nonzero(diff, axis=-1, keepdims=keepdim).astype(diff.dtype)
    elif np.isinf(p):
        r = diff.max(axis=-1, keepdims=keepdim) if p > 0 else diff.min(axis=-1, keepdims=keepdim)
    else:
        r = np.sum(diff ** p, axis=-1, keepdims=keepdim) ** (1.0 / p)
    r = np.asarray(r, dtype=diff.dtype)
    if out is None:
        return r
    np.copyto(out, r)
    return out


def einsum(equation, tensors, *, path=None, out=None):
    """``aten::einsum`` (torch's equation syntax is numpy's, ``...`` included)."""
    eq = equation.replace(" ", "")
    dtype = np.result_type(*tensors)
    if len(tensors) == 1 and dtype.kind in "biu" and "->" in eq:
        lhs, rhs = eq.split("->")
        if set(lhs) - set(rhs) - {"."}:   # torch sums integers (and bools) into int64
            dtype = np.dtype(np.int64)
            r = np.einsum(eq, tensors[0], dtype=dtype, out=out)
            return _arr(r, dtype)
    r = np.einsum(eq, *tensors, out=out, optimize=_einsum_optimize(eq, tensors))
    return _arr(r, dtype)


#: numpy's C loop over every index combination up to this many: a contraction path costs ~20 us of
#: Python per call (43 us with its search) where "bthd,bhde,bth->bthe" on (2,7,2,4) takes 3.2 us unoptimized
_EINSUM_NAIVE_MAX = 1 << 15
_EINSUM_PATHS: dict = {}


def _einsum_optimize(eq: str, tensors) -> object:
    """``optimize`` for ``np.einsum``: False for two operands or a small index space, else the
    contraction path, searched once per equation and shapes."""
    if len(tensors) <= 2:
        return False
    key = (eq, tuple(np.shape(t) for t in tensors))
    path = _EINSUM_PATHS.get(key)
    if path is None:
        path = False if _einsum_work(eq, tensors) <= _EINSUM_NAIVE_MAX else np.einsum_path(eq, *tensors, optimize=True)[0]
        if len(_EINSUM_PATHS) < 1024:
            _EINSUM_PATHS[key] = path
    return path


def _einsum_work(eq: str, tensors) -> float:
    """The product of the index sizes: the unoptimized loop's iterations (inf with ``...``)."""
    lhs = eq.split("->")[0]
    if "." in lhs:
        return math.inf
    sizes: dict = {}
    for sub, t in zip(lhs.split(","), tensors):
        sizes.update(zip(sub, np.shape(t)))
    return math.prod(sizes.values())
