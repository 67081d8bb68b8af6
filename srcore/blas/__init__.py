"""BLAS libraries the backends call directly, shared by them: ``srcore.plugin.mkl`` is
:mod:`srcore.blas.mkl` (Intel MKL's runtime through ctypes, when the optional ``mkl`` package is
installed)."""
from . import mkl

__all__ = ["mkl"]
