"""One-dimensional FFTs (``aten::fft_rfft``, ``fft_irfft``, ``fft_fft``, ``fft_ifft``) on numpy's
pocketfft, which computes float32 / complex64 in single precision since numpy 2.0 (as torch's CPU
FFT does). Through the torch fallback each call cost ~30 us of argument conversion and
``inference_mode`` around a ~5 us transform (heldout7 spectral_fft); numpy's call is ~6 us.

``norm`` is torch's and numpy's alike: None / "backward" (1/n on the inverse), "forward", "ortho".
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

_NORMS = (None, "backward", "forward", "ortho")
_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128),
            np.dtype(np.complex64): np.dtype(np.complex64), np.dtype(np.complex128): np.dtype(np.complex128)}


def _checked(self, n, dim, norm, what):
    if norm not in _NORMS:
        raise KernelError(f"{what}: invalid normalization mode: {norm!r}")
    if self.ndim == 0:
        raise KernelError(f"{what}: expected a tensor of at least one dimension, got a 0-d tensor")
    if not -self.ndim <= dim < self.ndim:
        raise KernelError(f"{what}: dimension {dim} out of range for a tensor of {self.ndim} dimension(s)")
    if n is not None and n < 1:
        raise KernelError(f"{what}: invalid number of data points ({n}) specified")
    if self.dtype not in _COMPLEX:
        raise KernelError(f"{what}: unsupported dtype {self.dtype} on backend cpu")


def _store(r, dtype, out):
    if out is None:
        return r.astype(dtype, copy=False)
    np.copyto(out, r, casting="unsafe")
    return out


def fft_rfft(self, n=None, dim=-1, norm=None, *, out=None):
    """``aten::fft_rfft``: the half spectrum (``n // 2 + 1`` bins) of a real signal along ``dim``."""
    _checked(self, n, dim, norm, "fft_rfft")
    if self.dtype.kind == "c":
        raise KernelError("fft_rfft expects a real input tensor, but got a complex one")
    if n is None and self.shape[dim] == 0:
        raise KernelError("fft_rfft: invalid number of data points (0) specified")
    return _store(np.fft.rfft(self, n=n, axis=dim, norm=norm), _COMPLEX[self.dtype], out)


def fft_irfft(self, n=None, dim=-1, norm=None, *, out=None):
    """``aten::fft_irfft``: the real signal of ``n`` points (default ``2 * (bins - 1)``) of a half spectrum."""
    _checked(self, n, dim, norm, "fft_irfft")
    c = _COMPLEX[self.dtype]
    m = n if n is not None else 2 * (self.shape[dim] - 1)
    if m < 1:
        raise KernelError(f"fft_irfft: invalid number of data points ({m}) specified")
    real = np.dtype(np.float32) if c == np.complex64 else np.dtype(np.float64)
    return _store(np.fft.irfft(self.astype(c, copy=False), n=m, axis=dim, norm=norm), real, out)


def _complex_transform(fn, what):
    def kernel(self, n=None, dim=-1, norm=None, *, out=None):
        _checked(self, n, dim, norm, what)
        if n is None and self.shape[dim] == 0:
            raise KernelError(f"{what}: invalid number of data points (0) specified")
        c = _COMPLEX[self.dtype]
        return _store(fn(self.astype(c, copy=False), n=n, axis=dim, norm=norm), c, out)
    kernel.__name__ = what
    kernel.__doc__ = f"``aten::{what}``: the full complex transform along ``dim`` (real input made complex)."
    return kernel


fft_fft = _complex_transform(np.fft.fft, "fft_fft")
fft_ifft = _complex_transform(np.fft.ifft, "fft_ifft")
