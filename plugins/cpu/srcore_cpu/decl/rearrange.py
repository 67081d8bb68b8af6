"""Kernel declarations of the rearranging ops: argsort, repeat_interleave, pixel_(un)shuffle, im2col/col2im."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import ALL, ANY, FLOATS, INTS, family

_k = family("rearrange")
_M = "srcore_cpu.kernels.rearrange:"

KERNELS: list[Kernel] = [
    _k("aten::argsort", "argsort", ALL), _k("aten::argsort.stable", "argsort", ALL),
    _k("aten::argsort.stable_out", "argsort", ALL),
    # the repeated sizes come from the data: natives allocate (the out overload writes a given out)
    _k("aten::repeat_interleave.Tensor", "repeat_interleave_tensor", INTS, kind="native"),
    _k("aten::repeat_interleave.Tensor_out", "repeat_interleave_tensor", INTS),
    _k("aten::repeat_interleave.self_Tensor", "repeat_interleave", ANY, kind="native"),
    _k("aten::repeat_interleave.self_int", "repeat_interleave", ANY, kind="native"),
    _k("aten::pixel_shuffle", "pixel_shuffle", ANY), _k("aten::pixel_shuffle.out", "pixel_shuffle", ANY),
    _k("aten::pixel_unshuffle", "pixel_unshuffle", ANY), _k("aten::pixel_unshuffle.out", "pixel_unshuffle", ANY),
    _k("aten::im2col", "im2col", FLOATS), _k("aten::im2col.out", "im2col", FLOATS),
    _k("aten::col2im", "col2im", FLOATS), _k("aten::col2im.out", "col2im", FLOATS),
    # the compiled ones (kernels/jit_fold.py) first; their matchers decline other dtypes
    *(Kernel(op, "cpu", "out", FLOATS, _M + impl, matcher=_M + impl + "_matcher", priority=2)
      for op, impl in (("aten::im2col", "im2col"), ("aten::im2col.out", "im2col"),
                       ("aten::col2im", "col2im"), ("aten::col2im.out", "col2im"))),
]
