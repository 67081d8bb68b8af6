"""What complex-aware and device ops are on real CPU tensors: views and identities (conj, real, mT, cpu),
and the small ops Static Runtime runs natively (IntImplicit, narrow_copy, _add_relu, autocast casts)."""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

from .promotion import dtype_of_code, result_type


def identity_view(self):
    """``conj``, ``_conj``, ``resolve_conj``, ``resolve_neg``, ``real``, ``alias``, ``cpu`` of a real tensor: a view."""
    return self.view()


def positive(self):
    if self.dtype == np.bool_:
        raise KernelError("The `+` operator, on a bool tensor is not supported.")
    return self.view()


def imag(self):
    raise KernelError("imag is not implemented for tensors with non-complex dtypes.")


def neg_view(self):
    """``_neg_view``: torch's lazily negated view; materialised, it is ``-self``."""
    return np.negative(self)


def matrix_transpose(self):
    """``mT``, ``mH``, ``matrix_H``, ``adjoint`` of a real tensor: the last two dims swapped (a view)."""
    if self.ndim < 2:
        raise KernelError(f"tensor.mT is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
    return np.swapaxes(self, -1, -2)


def linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return np.diagonal(A, offset, dim1, dim2)


def sgn(self, *, out=None):
    r = np.sign(self) if self.dtype != np.bool_ else self.copy()
    if out is None:
        return np.asarray(r)
    np.copyto(out, r)
    return out


def narrow_copy(self, dim, start, length, *, out=None):
    n = self.shape[dim]
    if start < 0:
        start += n
    if start < 0 or length < 0 or start + length > n:
        raise KernelError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    r = np.take(self, range(start, start + length), axis=dim)
    if out is None:
        return r
    np.copyto(out, r)
    return out


def int_implicit(a):
    """``aten::IntImplicit``: a 0-d integer tensor as an int (TorchScript's implicit conversion)."""
    if a.ndim != 0:
        raise KernelError("Cannot input a tensor of dimension other than 0 as a scalar argument")
    if a.dtype.kind not in "iub":
        raise KernelError(f"Cannot input a tensor of type {a.dtype} as an integral argument")
    return int(a)


def add_relu(self, other, *, alpha=1, out=None):
    """``aten::_add_relu``: ``relu(self + alpha * other)``."""
    dt = result_type(self, other)
    r = np.asarray(self, dt) + (np.asarray(other, dt) if alpha == 1 else alpha * np.asarray(other))
    r = np.maximum(r, 0).astype(dt, copy=False)
    if out is None:
        return r
    np.copyto(out, r)
    return out


def add_relu_scalar(self, other, alpha=1, *, out=None):
    return add_relu(self, other, alpha=alpha, out=out)


def addmm_activation(self, mat1, mat2, *, beta=1, alpha=1, use_gelu=False, out=None):
    """``aten::_addmm_activation``: ``relu`` (or tanh-approximated ``gelu``) of ``addmm``."""
    dt = result_type(self, mat1, mat2)
    r = (mat1 @ mat2).astype(dt) * alpha
    if beta != 0:
        r = r + beta * self
    if use_gelu:
        r = 0.5 * r * (1 + np.tanh(np.sqrt(2 / np.pi) * (r + 0.044715 * r ** 3)))
    else:
        r = np.maximum(r, 0)
    r = r.astype(dt, copy=False)
    if out is None:
        return r
    np.copyto(out, r)
    return out


def addcdiv(self, tensor1, tensor2, *, value=1, out=None):
    """``aten::addcdiv``: ``self + value * tensor1 / tensor2`` (torch refuses integer division here)."""
    if tensor1.dtype.kind in "iub" and tensor2.dtype.kind in "iub":
        raise KernelError("Integer division with addcdiv is no longer supported, and in a future release addcdiv "
                          "will perform a true division of tensor1 and tensor2.")
    dt = result_type(self, tensor1, tensor2)
    r = (self + value * (tensor1 / tensor2)).astype(dt, copy=False)
    if out is None:
        return r
    np.copyto(out, r)
    return out


def vstack(tensors, *, out=None):
    if not tensors:
        raise KernelError("vstack expects a non-empty TensorList")
    dt = result_type(*tensors)
    r = np.vstack([np.asarray(t, dt) for t in tensors])
    if out is None:
        return r
    np.copyto(out, r)
    return out


def autocast_to_reduced_precision(self, cuda_enabled, cpu_enabled, cuda_dtype, cpu_dtype):
    if cpu_enabled and self.dtype == np.float32:
        return self.astype(dtype_of_code(cpu_dtype))
    return self


def autocast_to_full_precision(self, cuda_enabled, cpu_enabled):
    if cpu_enabled and self.dtype.name in ("float16", "bfloat16"):
        return self.astype(np.float32)
    return self
