"""Kernel declarations of the one-dimensional FFTs (kernels in kernels/spectral.py)."""
from __future__ import annotations

from . import FLOATS, family

_k = family("spectral")
_FFT = FLOATS + ("complex64", "complex128")

KERNELS = [_k(f"aten::{op}", op, _FFT) for op in ("fft_rfft", "fft_irfft", "fft_fft", "fft_ifft")]
