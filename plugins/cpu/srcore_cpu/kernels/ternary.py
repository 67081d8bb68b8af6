"""Elementwise kernels with bounds, masks or weights: clamp, where, masked_fill, lerp, addcmul."""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import TensorType
from srcore.plugin import NodeInfo, Specialized

from .promotion import as_array, result_type


def _shape(*xs):
    return np.broadcast_shapes(*(np.shape(x) for x in xs))


def clamp(self, min=None, max=None, *, out=None):
    """``aten::clamp`` (Scalar and Tensor bounds, either may be None); NaN propagates."""
    if min is None and max is None:
        raise KernelError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if out is None:
        # (Python-number bounds, the common case, keep self's shape: np.broadcast_shapes is ~2 us)
        shape = self.shape if not (isinstance(min, np.ndarray) or isinstance(max, np.ndarray)) \
            else _shape(self, min, max)
        out = np.empty(shape, result_type(self, min, max))
    if min is None:
        np.minimum(self, max, out=out)
    elif max is None:
        np.maximum(self, min, out=out)
    else:
        # maximum then minimum: min > max gives max everywhere, as in torch
        np.maximum(self, min, out=out)
        np.minimum(out, max, out=out)
    return out


def clamp_min(self, min, *, out=None):
    return clamp(self, min, None, out=out)


def clamp_max(self, max, *, out=None):
    return clamp(self, None, max, out=out)


def where(condition, self, other, *, out=None):
    """``aten::where.self`` / ``ScalarOther`` / ``ScalarSelf`` / ``Scalar``: ``self`` where true, else ``other``."""
    if out is None:
        # (number operands, the common case, take the condition's shape: np.broadcast_shapes is ~2 us)
        shape = condition.shape if not (isinstance(self, np.ndarray) or isinstance(other, np.ndarray)) \
            else _shape(condition, self, other)
        out = np.empty(shape, result_type(self, other))
    np.copyto(out, other, casting="unsafe")
    np.copyto(out, self, where=np.asarray(condition, dtype=bool), casting="unsafe")
    return out


def masked_fill(self, mask, value, *, out=None):
    """``aten::masked_fill.Scalar`` / ``.Tensor`` (a 0-d value): ``value`` where ``mask``."""
    if isinstance(value, np.ndarray):
        if value.ndim:
            raise KernelError(f"masked_fill only supports a 0-dimensional value tensor, "
                              f"but got tensor with {value.ndim} dimension(s)")
    if out is None:
        out = np.empty(_shape(self, mask), self.dtype)
    np.copyto(out, self)
    np.copyto(out, value, where=mask, casting="unsafe")
    return out


def lerp(self, end, weight, *, out=None):
    """``aten::lerp.Scalar`` / ``.Tensor``: ``self + weight * (end - self)``, torch's two-sided form."""
    dt = result_type(self, end) if out is None else out.dtype
    diff = np.subtract(end, self, dtype=dt)
    w = np.asarray(weight, dtype=dt)
    if out is None:
        out = np.empty(_shape(self, end, weight), dt)
    # torch uses end - diff * (1 - w) for |w| >= 0.5 to hit ``end`` exactly at w == 1
    lo = np.abs(w) < 0.5
    np.multiply(w, diff, out=out)
    np.add(out, self, out=out)
    if not lo.all():
        hi = np.subtract(end, diff * (1 - w), dtype=dt)
        np.copyto(out, hi, where=~lo)
    return out


def addcmul(self, tensor1, tensor2, *, value=1, out=None):
    """``aten::addcmul``: ``self + value * tensor1 * tensor2``."""
    if out is None:
        out = np.empty(_shape(self, tensor1, tensor2), result_type(self, tensor1, tensor2))
    np.multiply(tensor1, tensor2, out=out)
    if value != 1:
        np.multiply(out, value, out=out)
    np.add(out, self, out=out)
    return out


# --- matcher -----------------------------------------------------------------------------------

def _clip_fn(lo, hi):
    # maximum then minimum (min > max gives max, NaN stays NaN, as torch): two ufunc calls, where
    # np.clip's Python wrapper alone cost ~2 us on a small tensor
    def clip(self, out=None):
        r = np.maximum(self, lo, out=out)
        return np.minimum(r, hi, out=r) if isinstance(r, np.ndarray) else as_array(np.minimum(r, hi))
    return clip


def clamp_matcher(node: NodeInfo):
    """Constant float bounds on a float tensor: ``np.maximum``/``np.minimum``/``np.clip`` bound once;
    otherwise the generic ``clamp``/``clamp_min``/``clamp_max``."""
    generic = {"aten::clamp": clamp, "aten::clamp_min": clamp_min, "aten::clamp_max": clamp_max}
    return _fast_clamp(node) or generic.get(node.op.split(".")[0])


def _fast_clamp(node: NodeInfo):
    src = node.args[0].type
    dst = node.output_types[0] if node.output_types else None
    if not (isinstance(src, TensorType) and isinstance(dst, TensorType)) or src.dtype != dst.dtype:
        return None
    ints = src.dtype in ("int64", "int32")
    if not (src.dtype in ("float32", "float64") or ints) or not dst.shape:
        return None
    names = [a.name for a in node.args[1:]]
    bounds = {}
    for n in names:
        a = node.arg(n)
        if not a.is_constant or isinstance(a.value, (np.ndarray, bool)):
            return None
        if ints and a.value is not None and not (isinstance(a.value, int) and -2**31 <= a.value < 2**31):
            return None   # (an integer tensor clamped by Python ints only: the dtype stays)
        bounds[n] = a.value
    lo, hi = bounds.get("min"), bounds.get("max")
    if lo is None and hi is None:
        return None
    if hi is None:
        fn = _bound(np.maximum, lo)
    elif lo is None:
        fn = _bound(np.minimum, hi)
    else:
        fn = _clip_fn(lo, hi)
    return Specialized(fn, args=(0,))


def clamp_tensor_matcher(node: NodeInfo):
    """``aten::clamp.Tensor`` with both bounds tensors of the input's dtype and an output of the
    input's static shape: maximum then minimum straight into the output (the generic kernel's
    promotion and broadcast-shape checks cost ~5 us on a small tensor); else the generic kernel."""
    src = node.args[0].type
    dst = node.output_types[0] if node.output_types else None
    bounds = [a.type for a in node.args[1:3]]
    if (isinstance(src, TensorType) and isinstance(dst, TensorType) and len(bounds) == 2
            and all(isinstance(b, TensorType) and b.dtype == src.dtype for b in bounds)
            and src.dtype == dst.dtype and src.dtype in ("float32", "float64", "int64", "int32")
            and src.shape is not None and src.shape == dst.shape and all(isinstance(d, int) for d in src.shape)
            and not any(a.is_constant for a in node.args[1:3])):
        return Specialized(_clamp_both, args=(0, 1, 2))
    return clamp


def _clamp_both(self, min, max, out=None):
    if min is None or max is None:   # (an optional bound the types did not rule out)
        return clamp(self, min, max, out=out)
    r = np.maximum(self, min, out=out)
    return np.minimum(r, max, out=r)


def _bound(ufunc, v):
    def fn(self, out=None):
        r = ufunc(self, v, out=out)
        return out if out is not None else as_array(r)
    return fn

