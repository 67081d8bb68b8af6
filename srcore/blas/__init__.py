"""BLAS libraries the backends call directly, shared by them: ``srcore.plugin.mkl`` is
:mod:`srcore.blas.mkl` (Intel MKL's runtime through ctypes, when the optional ``mkl`` package is
installed), ``srcore.plugin.openblas`` is :mod:`srcore.blas.openblas` (numpy's OpenBLAS held at one
thread during the backends' regions, one hold for all of them)."""
from . import mkl, openblas

__all__ = ["mkl", "openblas"]
