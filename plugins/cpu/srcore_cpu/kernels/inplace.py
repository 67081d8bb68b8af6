"""In-place variants (``aten::add_``, ``aten::relu_``, ...): write into ``self`` and return it.

Single-pass kernels run with ``out=self`` (numpy ufuncs allow the output to
alias an input elementwise). Multi-step kernels read ``self`` after writing
``out``, so their in-place forms compute into a temporary and copy back.
"""
from __future__ import annotations

import numpy as np

from . import activation as A
from . import elementwise as E
from . import ternary as T
from . import unary as U


def _direct(fn):
    def kernel(self, *args, **kw):
        fn(self, *args, out=self, **kw)
        return self
    kernel.__name__ = fn.__name__ + "_"
    kernel.__doc__ = f"In-place ``{fn.__name__}``: writes into and returns ``self``."
    return kernel


def _via_temp(fn):
    def kernel(self, *args, **kw):
        np.copyto(self, fn(self, *args, **kw), casting="same_kind")
        return self
    kernel.__name__ = fn.__name__ + "_"
    kernel.__doc__ = f"In-place ``{fn.__name__}`` (through a temporary): writes into and returns ``self``."
    return kernel


add_ = _direct(E.add)
sub_ = _direct(E.sub)
mul_ = _direct(E.mul)
floor_divide_ = _direct(E.floor_divide)
remainder_ = _direct(E.remainder)
pow_ = _direct(E.pow)
bitwise_and_ = _direct(E.bitwise_and)
bitwise_or_ = _direct(E.bitwise_or)
eq_ = _direct(E.eq)
ne_ = _direct(E.ne)
lt_ = _direct(E.lt)
le_ = _direct(E.le)
gt_ = _direct(E.gt)
ge_ = _direct(E.ge)
logical_and_ = _direct(E.logical_and)
logical_or_ = _direct(E.logical_or)
logical_xor_ = _direct(E.logical_xor)


def div_(self, other, *, rounding_mode=None):
    """In-place ``div`` (true, "trunc" or "floor")."""
    if rounding_mode == "trunc":
        return _via_temp(E.div)(self, other, rounding_mode=rounding_mode)
    E.div(self, other, rounding_mode=rounding_mode, out=self)
    return self


neg_ = _direct(U.neg)
abs_ = _direct(U.abs)
sign_ = _direct(U.sign)
floor_ = _direct(U.floor)
ceil_ = _direct(U.ceil)
trunc_ = _direct(U.trunc)
round_ = _direct(U.round)
exp_ = _direct(U.exp)
log_ = _direct(U.log)
log1p_ = _direct(U.log1p)
expm1_ = _direct(U.expm1)
sqrt_ = _direct(U.sqrt)
rsqrt_ = _direct(U.rsqrt)
reciprocal_ = _direct(U.reciprocal)
sin_ = _direct(U.sin)
cos_ = _direct(U.cos)
tanh_ = _direct(U.tanh)
erf_ = _direct(U.erf)
log2_ = _direct(U.log2)
log10_ = _direct(U.log10)
square_ = _direct(U.square)
logical_not_ = _direct(U.logical_not)
bitwise_not_ = _direct(U.bitwise_not)
nan_to_num_ = _direct(U.nan_to_num)

clamp_ = _direct(T.clamp)
clamp_min_ = _direct(T.clamp_min)
clamp_max_ = _direct(T.clamp_max)
masked_fill_ = _direct(T.masked_fill)
lerp_ = _via_temp(T.lerp)
addcmul_ = _via_temp(T.addcmul)

relu_ = _direct(A.relu)
relu6_ = _direct(A.relu6)
hardtanh_ = _direct(A.hardtanh)
sigmoid_ = _direct(A.sigmoid)
threshold_ = _via_temp(A.threshold)
silu_ = _via_temp(A.silu)
gelu_ = _via_temp(A.gelu)
hardsigmoid_ = _direct(A.hardsigmoid)
hardswish_ = _via_temp(A.hardswish)
leaky_relu_ = _via_temp(A.leaky_relu)
elu_ = _via_temp(A.elu)
mish_ = _via_temp(A.mish)


def zero_(self):
    """``aten::zero_``."""
    self.fill(0)
    return self


def fill_(self, value):
    """``aten::fill_.Scalar`` / ``fill_.Tensor`` (a 0-d value)."""
    self[...] = value
    return self
