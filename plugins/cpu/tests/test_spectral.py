"""One-dimensional FFTs (fft_rfft / irfft / fft / ifft) and complex einsum vs torch (they ran through
the torch fallback before)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore.errors import KernelError  # noqa: E402
from srcore_cpu.kernels import linalg as L  # noqa: E402
from srcore_cpu.kernels import spectral as S  # noqa: E402

NORMS = st.sampled_from([None, "backward", "forward", "ortho"])
_TORCH = {"fft_rfft": torch.fft.rfft, "fft_irfft": torch.fft.irfft, "fft_fft": torch.fft.fft, "fft_ifft": torch.fft.ifft}


def _signal(data, complex_in, dtype):
    shape = data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=3), label="shape")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16), label="seed"))
    x = rng.standard_normal(shape)
    if complex_in:
        x = x + 1j * rng.standard_normal(shape)
    x = x.astype(dtype)
    if data.draw(st.booleans(), label="specials") and x.size:
        flat = x.reshape(-1)
        flat[rng.integers(0, x.size)] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    if data.draw(st.booleans(), label="non-contiguous") and x.ndim:
        x = np.repeat(x, 2, axis=-1)[..., ::2]
        assert not x.flags.c_contiguous or x.shape[-1] == 1
    return x


def _close(r, e, dtype):
    assert r.dtype == e.dtype and r.shape == e.shape
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    # specials spread through the whole transformed axis: compare where torch's value is finite,
    # and require the same non-finite positions
    np.testing.assert_array_equal(np.isfinite(r), np.isfinite(e))
    fin = np.isfinite(e)
    scale = max(1.0, float(np.abs(e[fin]).max())) if fin.any() else 1.0
    np.testing.assert_allclose(r[fin], e[fin], rtol=tol, atol=tol * scale)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), op=st.sampled_from(sorted(_TORCH)), dtype_pick=st.integers(0, 1), norm=NORMS)
def test_fft_matches_torch(data, op, dtype_pick, norm):
    complex_in = op in ("fft_irfft", "fft_ifft") or (op == "fft_fft" and data.draw(st.booleans()))
    dtype = ((np.complex64, np.complex128) if complex_in else (np.float32, np.float64))[dtype_pick]
    x = _signal(data, complex_in, dtype)
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1), label="dim")
    n = data.draw(st.one_of(st.none(), st.integers(1, 12)), label="n")
    if op == "fft_irfft" and n is None and x.shape[dim] == 1:
        n = 1   # torch's default 2 * (1 - 1) = 0 points: an error (tested below)
    e = _TORCH[op](torch.from_numpy(x.copy()), n=n, dim=dim, norm=norm).numpy()
    kernel = getattr(S, op)
    _close(kernel(x, n, dim, norm), e, dtype)
    buf = np.full(e.shape, 7, e.dtype)
    assert kernel(x, n, dim, norm, out=buf) is buf
    _close(buf, e, dtype)


def test_fft_errors_name_the_problem():
    x = np.ones((2, 4), np.float32)
    with pytest.raises(KernelError, match="invalid number of data points \\(0\\)"):
        S.fft_rfft(x, 0)
    with pytest.raises(KernelError, match="invalid number of data points \\(0\\)"):
        S.fft_irfft(np.ones((2, 1), np.complex64))
    with pytest.raises(KernelError, match="out of range"):
        S.fft_fft(x, None, 2)
    with pytest.raises(KernelError, match="normalization"):
        S.fft_ifft(x, None, -1, "bogus")
    with pytest.raises(KernelError, match="real input"):
        S.fft_rfft(x.astype(np.complex64))
    with pytest.raises(KernelError, match="0-d"):
        S.fft_fft(np.float32(1.0).reshape(()))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_einsum_matches_torch(dtype):
    rng = np.random.default_rng(3)
    xf = (rng.standard_normal((2, 4, 9)) + 1j * rng.standard_normal((2, 4, 9))).astype(dtype)[..., :5]
    w = (rng.standard_normal((4, 3, 5)) + 1j * rng.standard_normal((4, 3, 5))).astype(dtype)
    e = torch.einsum("bim,iom->bom", torch.from_numpy(xf.copy()), torch.from_numpy(w)).numpy()
    r = L.einsum("bim,iom->bom", [xf, w])
    assert r.dtype == e.dtype
    np.testing.assert_allclose(r, e, rtol=1e-5, atol=1e-5)


def test_spectral_layer_runs_without_the_torch_fallback():
    """An FNO-style layer (rfft, modes times complex weights, irfft): every node on a numpy kernel,
    the shape rule's types equal to torch's."""
    class Spectral(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wr = torch.nn.Parameter(torch.randn(4, 4, 5))
            self.wi = torch.nn.Parameter(torch.randn(4, 4, 5))

        def forward(self, x):
            xf = torch.fft.rfft(x, dim=-1)[..., :5]
            yf = torch.einsum("bim,iom->bom", xf, torch.complex(self.wr, self.wi))
            return torch.fft.irfft(yf, n=x.shape[-1], dim=-1), torch.fft.ifft(torch.fft.fft(x[..., :12], n=16), norm="ortho")

    m, x = Spectral().eval(), torch.randn(2, 4, 16)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    sm = srcore.StaticModule(model, backends=("cpu",), options=srcore.Options(allow_fallback=False))
    with torch.no_grad():
        expected = [t.numpy() for t in m(x)]
    for r, e in zip(sm(x.numpy()), expected):
        assert r.dtype == e.dtype and r.shape == e.shape
        np.testing.assert_allclose(r, e, rtol=1e-4, atol=1e-4)
    assert not sm.load_report.fallbacks
