"""BLAS libraries the backends call directly, shared by them: ``srcore.plugin.mkl`` is
:mod:`srcore.blas.mkl` (Intel MKL's runtime through ctypes, when the optional ``mkl`` package is
installed), ``srcore.plugin.openblas`` is :mod:`srcore.blas.openblas` (numpy's OpenBLAS held at one
thread during the backends' regions, one hold for all of them), ``srcore.plugin.native_team`` is
:mod:`srcore.blas.native_team` (products split over threads that call numpy's OpenBLAS without the GIL)."""
from .._lazy import lazy_getattr

__all__ = ["mkl", "native_team", "openblas"]

# each imported on first use: a start that only asks OpenBLAS's thread count (the cpu plugin's kernels)
# does not import the MKL loader (~0.3 ms)
__getattr__ = lazy_getattr(__name__, {"mkl": "srcore.blas.mkl", "native_team": "srcore.blas.native_team",
                                     "openblas": "srcore.blas.openblas"}, globals())
