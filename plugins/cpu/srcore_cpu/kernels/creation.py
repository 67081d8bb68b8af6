"""Creation kernels: arange, zeros/ones/full/empty (+ ``_like``), tensor, NumToTensor.

``dtype`` arguments are torch ScalarType codes; ``None`` means torch's
inference (float32 for zeros/ones/empty, the fill value's kind for full,
int64 for an all-integer arange). ``layout``, ``device`` (only "cpu") and
``pin_memory`` are accepted and ignored.
"""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import KernelError

from .promotion import BOOL, DEFAULT_FLOAT, INT64, dtype_of_code, scalar_dtype


def _check_device(device):
    if device is not None and str(device).split(":")[0] != "cpu":
        raise KernelError(f"backend cpu cannot create tensors on device {device!r}")


def _fill(size, value, dtype, out, device):
    _check_device(device)
    if out is None:
        return np.full(tuple(size), value, dtype)
    out.fill(value)
    return out


def zeros(size, *, dtype=None, layout=None, device=None, pin_memory=None, out=None):
    return _fill(size, 0, dtype_of_code(dtype, DEFAULT_FLOAT), out, device)


def ones(size, *, dtype=None, layout=None, device=None, pin_memory=None, out=None):
    return _fill(size, 1, dtype_of_code(dtype, DEFAULT_FLOAT), out, device)


def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, out=None):
    """``aten::empty.memory_format``: uninitialized (an ``out`` is returned as it is)."""
    _check_device(device)
    return out if out is not None else np.empty(tuple(size), dtype_of_code(dtype, DEFAULT_FLOAT))


def full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, out=None):
    """``aten::full``: ``dtype=None`` infers bool/int64/float32 from ``fill_value``."""
    return _fill(size, fill_value, dtype_of_code(dtype, scalar_dtype(fill_value)), out, device)


def zeros_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, out=None):
    return _fill(self.shape, 0, dtype_of_code(dtype, self.dtype), out, device)


def ones_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, out=None):
    return _fill(self.shape, 1, dtype_of_code(dtype, self.dtype), out, device)


def empty_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, out=None):
    _check_device(device)
    return out if out is not None else np.empty(self.shape, dtype_of_code(dtype, self.dtype))


def full_like(self, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None,
              out=None):
    return _fill(self.shape, fill_value, dtype_of_code(dtype, self.dtype), out, device)


def eye(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None, out=None):
    """``aten::eye`` / ``eye.m``: ones on the diagonal of an ``n x m`` (default ``n x n``) matrix."""
    _check_device(device)
    r = np.eye(n, n if m is None else m, dtype=dtype_of_code(dtype, DEFAULT_FLOAT))
    if out is None:
        return r
    np.copyto(out, r)
    return out


def fill(self, value, *, out=None):
    """``aten::fill.Scalar`` / ``fill.Tensor`` (a 0-d value): a tensor like ``self`` holding ``value``
    (the functional ``fill_``, which torch.export's functionalization emits)."""
    if out is None:
        out = np.empty_like(self)
    out[...] = value
    return out


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None, out=None):
    """``aten::scalar_tensor``: a 0-d tensor of ``s``, float32 unless ``dtype`` says otherwise (torch's
    default dtype, unlike ``prim::NumToTensor``)."""
    _check_device(device)
    r = np.array(s, dtype=dtype_of_code(dtype, DEFAULT_FLOAT))
    if out is None:
        return r
    out[()] = r
    return out


def _num(v):
    return v.item() if isinstance(v, np.ndarray) else v


def arange(start, end=None, step=1, *, dtype=None, layout=None, device=None, pin_memory=None, out=None):
    """``aten::arange`` (end), ``arange.start``, ``arange.start_step``.

    Values are ``start + i * step`` computed in float64 and then cast, which
    is how torch's CPU kernel accumulates.
    """
    _check_device(device)
    start, end, step = _num(start), _num(end), _num(step)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise KernelError("arange: step must be nonzero")
    all_int = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, end, step))
    dt = dtype_of_code(dtype, INT64 if all_int else DEFAULT_FLOAT)
    if dt == INT64:  # torch casts the bounds to int64 first: arange(2.5, dtype=int64) == [0, 1]
        start, end, step = int(start), int(end), int(step)
        all_int = True
        if step == 0:
            raise KernelError("arange: step must be nonzero (after the cast to an integer dtype)")
    n = max(0, math.ceil((end - start) / step))
    if dt.kind in "iu" and dt != INT64:
        # other integer types: the length comes from the uncast bounds (arange(3.1, dtype=int32) has 4
        # elements), the values from the truncated start and step
        start, step = int(start), int(step)
        return _into(np.asarray(start + np.arange(n, dtype=np.int64) * step).astype(dt), out)
    if dt.kind in "iu" and all_int:
        r = np.arange(start, start + n * step, step, dtype=dt)[:n]
    else:
        r = (start + np.arange(n, dtype=np.float64) * step).astype(dt)
    return _into(r, out)


def _into(r, out):
    if out is None:
        return r
    np.copyto(out, r)
    return out


def tensor(t, *, dtype=None, device=None, requires_grad=False):
    """``aten::tensor`` (a nested list, or one int/float/bool): inferred dtype as in torch."""
    _check_device(device)
    if dtype is not None:
        return np.array(t, dtype=dtype_of_code(dtype))
    a = np.array(t)
    if a.dtype.kind == "f":
        a = a.astype(DEFAULT_FLOAT)
    elif a.dtype.kind in "iu":
        a = a.astype(INT64)
    elif a.size == 0:
        a = a.astype(DEFAULT_FLOAT)
    return a


def num_to_tensor(a):
    """``prim::NumToTensor``: a 0-d tensor; a Python float becomes float64, an int int64."""
    if isinstance(a, (bool, np.bool_)):
        return np.array(a, dtype=BOOL)
    if isinstance(a, (int, np.integer)):
        return np.array(a, dtype=INT64)
    if isinstance(a, np.ndarray):
        return a.reshape(())
    return np.array(a, dtype=np.float64)


def new_zeros(self, size, *, dtype=None, layout=None, device=None, pin_memory=None, out=None):
    """``aten::new_zeros``: ``zeros`` with ``self``'s dtype by default."""
    return _fill(size, 0, dtype_of_code(dtype, self.dtype), out, device)


def new_ones(self, size, *, dtype=None, layout=None, device=None, pin_memory=None, out=None):
    return _fill(size, 1, dtype_of_code(dtype, self.dtype), out, device)


def new_full(self, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, out=None):
    return _fill(size, fill_value, dtype_of_code(dtype, self.dtype), out, device)


def new_empty(self, size, *, dtype=None, layout=None, device=None, pin_memory=None, out=None):
    _check_device(device)
    return out if out is not None else np.empty(tuple(size), dtype_of_code(dtype, self.dtype))
