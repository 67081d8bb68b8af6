"""Conversion kernels: ``aten::to`` (every overload), type_as, detach, clone, copy_, and tensor ->
Python number conversions (item, Int, Float, Bool, ScalarImplicit).

``to`` returns ``self`` itself when nothing changes and ``copy`` is false
(torch aliases too); devices other than "cpu" are a KernelError.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

from .promotion import dtype_of_code


def _to(self, dtype, copy, device=None):
    if device is not None and str(device).split(":")[0] != "cpu":
        raise KernelError(f"backend cpu cannot move a tensor to device {device!r}")
    dt = self.dtype if dtype is None else dtype_of_code(dtype)
    if dt == self.dtype and not copy:
        return self
    return self.astype(dt)


def to_dtype(self, dtype, non_blocking=False, copy=False, memory_format=None):
    """``aten::to.dtype``."""
    return _to(self, dtype, copy)


def to_device(self, device, dtype, non_blocking=False, copy=False, memory_format=None):
    """``aten::to.device``."""
    return _to(self, dtype, copy, device)


def to_other(self, other, non_blocking=False, copy=False, memory_format=None):
    """``aten::to.other``: ``other``'s dtype."""
    if other.dtype == self.dtype and not copy:
        return self
    return self.astype(other.dtype)


def to_dtype_layout(self, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
                    copy=False, memory_format=None):
    """``aten::to.dtype_layout`` (keyword-only arguments)."""
    return _to(self, dtype, copy, device)


def to_prim_device(self, device, dtype=None, non_blocking=False, copy=False):
    """``aten::to.prim_Device``."""
    return _to(self, dtype, copy, device)


def to_prim_dtype(self, dtype=None, non_blocking=False, copy=False):
    """``aten::to.prim_dtype``."""
    return _to(self, dtype, copy)


def to_prim_other(self, non_blocking=False, copy=False):
    """``aten::to.prim_other``."""
    return self.copy() if copy else self


def type_as(self, other):
    return self if self.dtype == other.dtype else self.astype(other.dtype)


def detach(self):
    """``aten::detach``: a view sharing ``self``'s data."""
    return self.view()


def clone(self, *, memory_format=None, out=None):
    """``aten::clone``: a copy (contiguous)."""
    if out is None:
        return np.array(self, copy=True, order="C")
    np.copyto(out, self)
    return out


def copy_(self, src, non_blocking=False):
    """``aten::copy_`` (Tensor, int, float): broadcast ``src`` into ``self``, casting like torch."""
    np.copyto(self, src, casting="unsafe")
    return self


def _scalar(a, what):
    if a.size != 1:
        raise KernelError(f"a Tensor with {a.size} elements cannot be converted to {what}")
    return a.reshape(-1)[0].item()


def item(self):
    """``aten::item`` / ``aten::ScalarImplicit``: the Python number of a one-element tensor."""
    return _scalar(self, "Scalar")


def int_(a):
    """``aten::Int`` (Tensor, float, bool, Scalar): truncates toward zero."""
    return int(_scalar(a, "int") if isinstance(a, np.ndarray) else a)


def float_(a):
    """``aten::Float`` (Tensor, int, bool, Scalar)."""
    return float(_scalar(a, "float") if isinstance(a, np.ndarray) else a)


def bool_(a):
    """``aten::Bool`` (Tensor, int, float)."""
    return bool(_scalar(a, "bool") if isinstance(a, np.ndarray) else a)
