"""Kernel declarations of srcore-cpu, one module per family, each with a `KERNELS` list.

No module here imports numpy: kernels are "module:attr" strings. This package
holds the helpers the family modules share.
"""
from __future__ import annotations

from srcore.plugin import Kernel

FLOATS = ("float32", "float64")
INTS = ("int64", "int32")
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)
ANY = ("*",)
#: the narrow integer types ONNX models carry (uint8 images, int8/int16 data): numpy computes them as
#: torch does (wrapping arithmetic, the same promotion), so the integer kernels that need nothing
#: wider take them too
SMALL_INTS = ("int16", "int8", "uint8")
#: the wide unsigned types (ONNX has them, torch barely computes on them): numpy's wrapping arithmetic,
#: comparisons, bit operations and sorting on them are ONNX's; only those kernels list them
WIDE_UINTS = ("uint16", "uint32", "uint64")


def family(module: str):
    """A ``kernel(op, impl, dtypes, kind="out", matcher=None)`` factory for one kernel module."""
    prefix = f"srcore_cpu.kernels.{module}:"

    def kernel(op: str, impl: str, dtypes=NUMERIC, kind: str = "out", matcher: str | None = None) -> Kernel:
        return Kernel(op, "cpu", kind, dtypes, prefix + impl, matcher=prefix + matcher if matcher else None)

    return kernel
