"""Linear algebra: BLAS-2 products, inverse, determinant, solvers, powers, norms (numpy.linalg / scipy.linalg).

Errors are torch's: a singular matrix cannot be inverted or solved, a non positive-definite
factor cannot be used, integers are refused where torch refuses them.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sl

from srcore.plugin import KernelError

from .promotion import result_type


def _store(r, out, dtype):
    r = np.asarray(r, dtype=dtype)
    if out is None:
        return r
    np.copyto(out, r, casting="unsafe")
    return out


def _floating(name, *ts):
    for t in ts:
        if t.dtype.kind not in "fc":
            raise KernelError(f"{name}: Expected a floating point or complex tensor as input. Got {_tname(t.dtype)}")


def _tname(dt):
    return {"int64": "Long", "int32": "Int", "bool": "Bool", "float32": "Float", "float64": "Double"}.get(
        np.dtype(dt).name, str(dt))


def _square(name, a):
    if a.ndim < 2:
        raise KernelError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise KernelError(f"{name}: A must be batches of square matrices, but they are "
                          f"{a.shape[-2]} by {a.shape[-1]} matrices")


def _scaled(beta, base, alpha, prod, dt, *, blas_alpha=False):
    """``beta * base + alpha * prod``; beta == 0 ignores base (NaN included), as torch; integer results take
    integer coefficients (torch casts 0.6 to 0). ``blas_alpha``: alpha == 0 ignores the product too, as
    torch's BLAS-backed ops do (addmv, addbmm; not addr)."""
    if np.dtype(dt).kind in "iu":
        alpha, beta = int(alpha), int(beta)
    if blas_alpha and alpha == 0:
        prod = np.zeros_like(prod)
    r = prod if alpha == 1 else alpha * prod
    if beta != 0:
        r = r + (base if beta == 1 else beta * base)
    return np.broadcast_to(np.asarray(r, dt), np.broadcast_shapes(np.shape(r), np.shape(base)) if beta != 0
                           else np.shape(r))


def mv(self, vec, *, out=None):
    if self.ndim != 2 or vec.ndim != 1:
        raise KernelError(f"vector + matrix @ vector expected, got {self.ndim}, {vec.ndim}")
    return _store(self @ vec, out, result_type(self, vec))


def addmv(self, mat, vec, *, beta=1, alpha=1, out=None):
    dt = result_type(self, mat, vec)
    return _store(_scaled(beta, self, alpha, mat.astype(dt) @ vec.astype(dt), dt, blas_alpha=True), out, dt)


def addr(self, vec1, vec2, *, beta=1, alpha=1, out=None):
    dt = result_type(self, vec1, vec2)
    if dt == np.bool_:  # torch: logical and/or for bool
        prod = np.logical_and.outer(vec1, vec2) & bool(alpha)
        return _store((self & bool(beta)) | prod if beta else prod, out, dt)
    return _store(_scaled(beta, self, alpha, np.outer(vec1, vec2).astype(dt), dt), out, dt)


def addbmm(self, batch1, batch2, *, beta=1, alpha=1, out=None):
    dt = result_type(self, batch1, batch2)
    prod = np.einsum("bij,bjk->ik", batch1.astype(dt), batch2.astype(dt)) if batch1.shape[0] else \
        np.zeros((batch1.shape[1], batch2.shape[2]), dt)
    return _store(_scaled(beta, self, alpha, prod, dt, blas_alpha=True), out, dt)


def vdot(self, other, *, out=None):
    if self.ndim != 1 or other.ndim != 1:
        raise KernelError(f"1D tensors expected, but got {self.ndim}D and {other.ndim}D tensors")
    if self.dtype != other.dtype:
        raise KernelError(f"vdot : expected both vectors to have same dtype, but found {_tname(self.dtype)} "
                          f"and {_tname(other.dtype)}")
    return _store(np.vdot(self, other), out, self.dtype)


def inner(self, other, *, out=None):
    dt = result_type(self, other)
    if self.ndim == 0 or other.ndim == 0:
        return _store(self * other, out, dt)
    if self.shape[-1] != other.shape[-1]:
        raise KernelError(f"inner() the last dimension must match on both input tensors but got shapes "
                          f"{list(self.shape)} and {list(other.shape)}")
    return _store(np.inner(self.astype(dt), other.astype(dt)), out, dt)


def kron(self, other, *, out=None):
    return _store(np.kron(self, other), out, result_type(self, other))


def linalg_inv(A, *, out=None):
    _floating("linalg.inv", A)
    _square("linalg.inv", A)
    try:
        r = np.linalg.inv(A) if A.size else A.copy()
    except np.linalg.LinAlgError:
        raise KernelError("linalg.inv: The diagonal element of the LU factorization is zero, the inversion "
                          "could not be completed because the input matrix is singular.") from None
    return _store(r, out, A.dtype)


def linalg_det(A, *, out=None):
    _floating("linalg.det", A)
    _square("linalg.det", A)
    return _store(np.linalg.det(A) if A.size else np.ones(A.shape[:-2], A.dtype), out, A.dtype)


def linalg_solve(A, B, *, left=True, out=None):
    _floating("linalg.solve", A, B)
    _square("linalg.solve", A)
    dt = result_type(A, B)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    a = A if left else np.swapaxes(A, -1, -2)
    b = B[..., None] if vector else (B if left else np.swapaxes(B, -1, -2))
    try:
        x = np.linalg.solve(a.astype(dt), b.astype(dt))
    except np.linalg.LinAlgError:
        raise KernelError("linalg.solve: The solver failed because the input matrix is singular.") from None
    x = x[..., 0] if vector else (x if left else np.swapaxes(x, -1, -2))
    return _store(x, out, dt)


def linalg_matrix_power(self, n, *, out=None):
    _square("linalg.matrix_power", self)
    if n < 0:
        _floating("linalg.matrix_power", self)
        try:
            return _store(np.linalg.matrix_power(self, n), out, self.dtype)
        except np.linalg.LinAlgError:
            raise KernelError("linalg.inv: The diagonal element of the LU factorization is zero, the inversion "
                              "could not be completed because the input matrix is singular.") from None
    return _store(np.linalg.matrix_power(self, n), out, self.dtype)


def linalg_matrix_exp(self, *, out=None):
    _floating("linalg.matrix_exp", self)
    _square("linalg.matrix_exp", self)
    r = sl.expm(self.astype(np.float64)) if self.size else self
    return _store(r, out, self.dtype)


def linalg_cond(self, p=None, *, out=None):
    _floating("linalg.cond", self)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.linalg.cond(self.astype(np.float64), p)
    return _store(r, out, self.dtype)


def linalg_tensorinv(self, ind=2, *, out=None):
    _floating("linalg.tensorinv", self)
    try:
        return _store(np.linalg.tensorinv(self, ind), out, self.dtype)
    except np.linalg.LinAlgError:
        raise KernelError("linalg.inv: The diagonal element of the LU factorization is zero, the inversion "
                          "could not be completed because the input matrix is singular.") from None


def _batched(fn, a, b):
    """``fn(a_i, b_i)`` over the broadcast batch dims of two stacks of matrices (results of b's matrix shape)."""
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, shape + a.shape[-2:])
    b = np.broadcast_to(b, shape + b.shape[-2:])
    out = np.zeros(shape + b.shape[-2:], np.result_type(a, b))
    if out.size == 0 or a.size == 0:
        return out
    fa, fb, fo = a.reshape((-1,) + a.shape[-2:]), b.reshape((-1,) + b.shape[-2:]), out.reshape((-1,) + out.shape[-2:])
    for i in range(fo.shape[0]):
        fo[i] = fn(fa[i], fb[i])
    return out


def linalg_solve_triangular(self, B, *, upper, left=True, unitriangular=False, out=None):
    _floating("linalg.solve_triangular", self, B)
    dt = result_type(self, B)
    if left:
        fn = lambda a, b: sl.solve_triangular(a, b, lower=not upper, unit_diagonal=unitriangular)  # noqa: E731
        r = _batched(fn, self.astype(dt), B.astype(dt))
    else:  # X A = B  <=>  A^T X^T = B^T
        fn = lambda a, b: sl.solve_triangular(a.T, b.T, lower=upper, unit_diagonal=unitriangular).T  # noqa: E731
        r = _batched(fn, self.astype(dt), B.astype(dt))
    return _store(r, out, dt)


def _chol_factor(L, upper):
    """The lower factor torch reads from ``L``: only its lower (upper) triangle counts."""
    return np.swapaxes(np.triu(L), -1, -2) if upper else np.tril(L)


def cholesky_inverse(self, upper=False, *, out=None):
    _floating("cholesky_inverse", self)
    low = _chol_factor(self, upper)
    a = low @ np.swapaxes(low, -1, -2)
    try:
        return _store(np.linalg.inv(a), out, self.dtype)
    except np.linalg.LinAlgError:
        raise KernelError("cholesky_inverse: The factor has a zero on its diagonal: the matrix is not "
                          "positive-definite.") from None


def cholesky_solve(self, input2, upper=False, *, out=None):
    _floating("cholesky_solve", self, input2)
    dt = result_type(self, input2)
    def fn(L, b):
        return sl.cho_solve((np.triu(L) if upper else np.tril(L), not upper), b)
    return _store(_batched(fn, input2.astype(dt), self.astype(dt)), out, dt)  # results have B's shape


def nuclear_norm(self, dim=None, keepdim=False, *, out=None):
    if isinstance(dim, bool):  # nuclear_norm(self, keepdim)
        dim, keepdim = None, dim
    _floating("linalg.matrix_norm", self)
    axes = tuple(dim) if dim is not None else (-2, -1)
    return _store(np.linalg.norm(self, "nuc", axis=axes, keepdims=keepdim), out, self.dtype)


def cross(self, other, dim=None, *, out=None):
    a, b = np.broadcast_arrays(self, other)
    if dim is None:
        sizes = [i for i, s in enumerate(a.shape) if s == 3]
        if not sizes:
            raise KernelError("no dimension of size 3 in input")
        dim = sizes[0]
    if a.shape[dim] != 3:
        raise KernelError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[dim]} and "
                          f"{b.shape[dim]}")
    return _store(np.cross(a, b, axis=dim), out, result_type(self, other))


def linalg_cross(self, other, *, dim=-1, out=None):
    return cross(self, other, dim, out=out)


def _lapack(name, dtype):
    from scipy.linalg import lapack
    return getattr(lapack, ("s" if dtype == np.float32 else "d") + name)


def linalg_householder_product(input, tau, *, out=None):  # noqa: A002 - torch's argument name
    """``aten::linalg_householder_product`` (``orgqr``): Q from Householder reflectors (LAPACK ?orgqr)."""
    _floating("linalg.householder_product", input, tau)
    if input.shape[-1] > input.shape[-2] or tau.shape[-1] > input.shape[-1]:
        raise KernelError("torch.linalg.householder_product: input.shape[-2] must be greater than or equal to "
                          "input.shape[-1] and tau.shape[-1] must be at most input.shape[-1]")
    if input.size == 0:  # an empty batch or empty matrices: nothing to apply
        return _store(np.zeros(input.shape, input.dtype), out, input.dtype)
    orgqr = _lapack("orgqr", input.dtype)
    nb = int(np.prod(input.shape[:-2], dtype=np.int64))
    a = input.reshape((nb,) + input.shape[-2:])
    t = tau.reshape((nb, tau.shape[-1]))
    r = np.empty_like(a)
    for i in range(a.shape[0]):
        q, _work, info = orgqr(a[i], t[i])
        r[i] = q
    return _store(r.reshape(input.shape), out, input.dtype)


def ormqr(self, input2, input3, left=True, transpose=False, *, out=None):
    """``aten::ormqr``: multiply ``input3`` by Q (from ``self``'s reflectors and ``input2``), LAPACK ?ormqr."""
    _floating("ormqr", self, input2, input3)
    if input3.size == 0 or self.size == 0:
        return _store(np.array(input3, copy=True), out, input3.dtype)
    fn = _lapack("ormqr", input3.dtype)
    nb = int(np.prod(input3.shape[:-2], dtype=np.int64))
    a = np.broadcast_to(self, input3.shape[:-2] + self.shape[-2:]).reshape((nb,) + self.shape[-2:])
    t = np.broadcast_to(input2, input3.shape[:-2] + input2.shape[-1:]).reshape((nb, input2.shape[-1]))
    c = input3.reshape((nb,) + input3.shape[-2:])
    r = np.empty_like(c)
    for i in range(c.shape[0]):
        res, _work, info = fn("L" if left else "R", "T" if transpose else "N", a[i], t[i], c[i].copy(),
                              lwork=max(1, c.shape[-1] * 64, c.shape[-2] * 64))
        r[i] = res
    return _store(r.reshape(input3.shape), out, input3.dtype)
