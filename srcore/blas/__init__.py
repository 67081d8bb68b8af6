"""BLAS libraries the backends call directly, shared by them: ``srcore.plugin.mkl`` is
:mod:`srcore.blas.mkl` (Intel MKL's runtime through ctypes, when the optional ``mkl`` package is
installed), ``srcore.plugin.openblas`` is :mod:`srcore.blas.openblas` (numpy's OpenBLAS held at one
thread during the backends' regions, one hold for all of them)."""
from .._lazy import lazy_getattr

__all__ = ["mkl", "openblas"]

# each imported on first use: a start that only asks OpenBLAS's thread count (the cpu plugin's kernels)
# does not import the MKL loader (~0.3 ms)
__getattr__ = lazy_getattr(__name__, {"mkl": "srcore.blas.mkl", "openblas": "srcore.blas.openblas"}, globals())
