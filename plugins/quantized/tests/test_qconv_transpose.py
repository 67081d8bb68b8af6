"""Quantized transposed convolutions (``nn.quantized.ConvTranspose2d``, ``quantized::conv_transpose2d``):
bit for bit with torch's fbgemm, and refused by name when packed for oneDNN."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402


def _scripted(stride, padding, output_padding, groups, dilation, x_zp):
    import torch.ao.nn.quantized as nnq

    g = torch.Generator().manual_seed(11)
    w = torch.randn(4, 6 // groups, 3, 3, generator=g) * 0.3
    q = nnq.ConvTranspose2d(4, 6, 3, stride, padding, output_padding, groups, dilation=dilation)
    q.set_weight_bias(torch.quantize_per_tensor(w, 0.004, 0, torch.qint8), torch.randn(6, generator=g) * 0.1)
    q.scale, q.zero_point = 0.02, 60

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.zp = q, x_zp

        def forward(self, x):
            return torch.dequantize(self.q(torch.quantize_per_tensor(x, 0.03, self.zp, torch.quint8)))

    # activations within 7 bits (0..127), as torch's x86 qconfigs keep them (reduce_range): fbgemm's AVX2
    # kernels (no VNNI) add pairs of products in saturating int16, srcore exactly (test_kernels.py)
    x = torch.randn(2, 4, 5, 6, generator=g).clamp(-x_zp * 0.03, (127 - x_zp) * 0.03)
    return torch.jit.script(M().eval()), x


@pytest.mark.usefixtures("fbgemm")
@pytest.mark.parametrize("stride,padding,output_padding,groups,dilation,x_zp", [
    (2, 1, 1, 1, 1, 100), *[pytest.param(*p, marks=pytest.mark.full) for p in ((2, 0, 0, 2, 1, 0), (1, 2, 0, 1, 2, 7))]])
def test_conv_transpose2d_matches_torch_bit_for_bit(stride, padding, output_padding, groups, dilation, x_zp):
    """Refused before (``transposed convolutions are not supported``): now exact integer sums and
    fbgemm's requantization, with stride, padding, output_padding, groups and dilation."""
    ts, x = _scripted(stride, padding, output_padding, groups, dilation, x_zp)
    got = srcore.StaticModule(srcore.from_torchscript(ts, (x,)))(x.numpy())
    np.testing.assert_array_equal(got, ts(x).numpy())


def test_conv_transpose2d_packed_for_onednn_is_refused_by_name():
    """torch's oneDNN deconvolution differs from the arithmetic of its own unpacked weight (tens of
    quantization steps; fbgemm's is exact), so a weight packed for it is refused, not approximated."""
    if "onednn" not in torch.backends.quantized.supported_engines:
        pytest.skip("torch has no onednn quantized engine")
    old = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = "onednn"
        ts, x = _scripted(2, 1, 0, 1, 1, 128)
        with pytest.raises(srcore.ConversionError, match="transposed convolution packed for oneDNN"):
            srcore.from_torchscript(ts, (x,))
    finally:
        torch.backends.quantized.engine = old
