"""Kernel declarations of the conv family (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.conv:"
FLOATS = ("float32", "float64")


def _k(op, impl, matcher=None):
    return Kernel(op, "cpu", "out", FLOATS, _M + impl, matcher=matcher and _M + matcher)


KERNELS: list[Kernel] = [
    _k("aten::conv1d", "conv1d", "conv1d_matcher"),
    _k("aten::conv1d.padding", "conv1d", "conv1d_matcher"),
    _k("aten::conv2d", "conv2d", "conv2d_matcher"),
    _k("aten::conv2d.padding", "conv2d", "conv2d_matcher"),
    _k("aten::conv3d", "conv3d", "conv3d_matcher"),
    _k("aten::conv3d.padding", "conv3d", "conv3d_matcher"),
    _k("aten::conv_transpose1d", "conv_transpose1d", "conv_transpose1d_matcher"),
    _k("aten::conv_transpose2d.input", "conv_transpose2d", "conv_transpose2d_matcher"),
    _k("aten::conv_transpose3d.input", "conv_transpose3d", "conv_transpose3d_matcher"),
    _k("aten::convolution", "convolution", "convolution_matcher"),
    _k("aten::_convolution", "_convolution", "convolution_matcher"),
    _k("aten::_convolution.deprecated", "_convolution", "convolution_matcher"),
]
