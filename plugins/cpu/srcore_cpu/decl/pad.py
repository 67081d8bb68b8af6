"""Kernel declarations of the padding family (and selu/celu), no numpy import here."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import FLOATS, NUMERIC, SMALL_INTS, family

_k = family("pad")

KERNELS: list[Kernel] = [
    _k("aten::pad", "pad", NUMERIC),
    _k("aten::constant_pad_nd", "constant_pad_nd", NUMERIC + SMALL_INTS),
    _k("aten::reflection_pad1d", "reflection_pad", NUMERIC),
    _k("aten::reflection_pad2d", "reflection_pad", NUMERIC),
    _k("aten::replication_pad1d", "replication_pad", NUMERIC),
    _k("aten::replication_pad2d", "replication_pad", NUMERIC),
    _k("aten::_pad_circular", "pad_circular", NUMERIC),
    _k("aten::selu", "selu", FLOATS),
    _k("aten::celu", "celu", FLOATS + ("float16",)),
]
